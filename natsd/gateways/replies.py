"""Replies routed back across gateways: `_GR_.<cluster hash>.<server hash>.<reply>`.

A request that leaves for another cluster while its reply subscription is recent (made in
the last two seconds: the other cluster may not have heard of it yet) carries its reply with
this server's prefix. Receivers there see the plain reply; the server that delivered it
remembers, for two seconds, which routed subject the plain one stands for, and an answer
published on it goes straight back to the cluster named by the hash, which passes it to the
server named by the other hash. Hashes are nats-server's (six base-62 digits of SHA-256).
"""
import hashlib
import logging

from natsd._core.router import route_remote
from natsd._core.sublist import Sublist, Subscription

log = logging.getLogger("natsd")

PREFIX = b"_GR_."
HASH_LEN = 6
SUBJECT_OFFSET = len(PREFIX) + 2 * (HASH_LEN + 1)      # where the plain reply starts
RECENT = 2.0                                             # nats-server's recSubExp
_DIGITS = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def gw_hash(name):
    """nats-server's getHashSize(name, 6): SHA-256, each of the first bytes a base-62 digit."""
    d = hashlib.sha256(name.encode()).digest()
    return bytes(_DIGITS[b % 62] for b in d[:HASH_LEN])


def is_routed(subject):
    return len(subject) > SUBJECT_OFFSET and subject.startswith(PREFIX)


class RoutedReplies:
    def __init__(self, gateways):
        self.gateways = gateways
        self.server = gateways.server
        self.loop = gateways.loop
        self.cluster_hash = gw_hash(gateways.name)
        self.server_hash = gw_hash(self.server.id)
        self.prefix = PREFIX + self.cluster_hash + b"." + self.server_hash + b"."
        self.recent = {}                    # account name (bytes) -> Sublist of recent subjects
        self.tracked = {}                   # client connection -> {plain reply: until}
        # what internal receivers were handed: account (bytes) -> {plain reply: routed}, and
        # when each entry expires (the router reads the first dict)
        self.account_replies = {}
        self.account_expiry = {}
        self.sweeping = False

    # ---- which replies leave mapped ----

    def recent_subscription(self, account, subject):
        """A subscription was just made in `account` (str): for two seconds a request whose
        reply it matches leaves with a routed reply."""
        key = account.encode()
        sl = self.recent.get(key)
        if sl is None:
            sl = self.recent[key] = Sublist()
        sub = Subscription(None, subject, b"", None)
        sl.insert(sub)
        self.loop.call_later(RECENT, self._forget, key, sl, sub)

    def _forget(self, key, sl, sub):
        sl.remove(sub)
        if sl.count == 0 and self.recent.get(key) is sl:
            del self.recent[key]

    def reply_for(self, account, reply):
        """The reply a message of `account` (bytes) leaves with for another cluster."""
        sl = self.recent.get(account)
        if sl is None or is_routed(reply) or not sl.has_interest(reply):
            return None
        return self.prefix + reply

    # ---- the receiving side ----

    def track(self, c, account, routed):
        """`routed` was delivered to client `c` (None: to an internal receiver of `account`)
        with its plain reply: an answer on that reply goes back to `routed` for two seconds."""
        if c is None:
            plain = routed[SUBJECT_OFFSET:]
            self.account_replies.setdefault(account, {})[plain] = routed
            self.account_expiry[(account, plain)] = self.loop.time() + RECENT
            self._start_sweep()
            return
        if c.gw_replies is None:
            c.gw_replies = {}
        plain = routed[SUBJECT_OFFSET:]
        c.gw_replies[plain] = routed
        self.tracked.setdefault(c, {})[plain] = self.loop.time() + RECENT
        self._start_sweep()

    def _start_sweep(self):
        if not self.sweeping:
            self.sweeping = True
            self.loop.call_later(RECENT, self._sweep)

    def _sweep(self):
        now = self.loop.time()
        for c, expiry in list(self.tracked.items()):
            for plain, until in list(expiry.items()):
                if until <= now or c.closed:
                    del expiry[plain]
                    if c.gw_replies is not None:
                        c.gw_replies.pop(plain, None)
            if not expiry:
                c.gw_replies = None
                del self.tracked[c]
        for key, until in list(self.account_expiry.items()):
            if until <= now:
                del self.account_expiry[key]
                replies = self.account_replies.get(key[0])
                if replies is not None:
                    replies.pop(key[1], None)
                    if not replies:
                        del self.account_replies[key[0]]
        self.sweeping = bool(self.tracked or self.account_expiry)
        if self.sweeping:
            self.loop.call_later(RECENT / 2, self._sweep)

    def send_back(self, account, routed, reply, hdr, payload):
        """An answer on a mapped reply: straight to the cluster `routed` names."""
        cluster = routed[len(PREFIX):len(PREFIX) + HASH_LEN]
        gw = self.gateways.outbound_by_hash(cluster)
        if gw is not None:
            self.gateways.send_message(gw, account, routed, reply, hdr, payload)

    def arrived(self, c, account, subject, reply, hdr, payload):
        """A message for a `_GR_.` subject came over a gateway or a route: for this cluster
        only; passed to the server it names, or delivered here under the plain subject."""
        start = len(PREFIX)
        if subject[start:start + HASH_LEN] != self.cluster_hash:
            return                          # not ours: dropped, as nats-server does
        server = subject[start + HASH_LEN + 1:start + 2 * HASH_LEN + 1]
        if server != self.server_hash and self.gateways.is_gateway(c):
            route = self.gateways.route_by_hash(server, account)
            if route is not None:
                self.gateways.send_message(route, account, subject, reply, hdr, payload)
                return
        acc = self.server.account_named(account.decode("utf-8", "replace"))
        if acc is None:
            return
        route_remote(c, acc.sublist, subject[SUBJECT_OFFSET:], reply, hdr, payload, [])
