"""What this server knows of the cluster's other servers, from their `$SYS` events.

Owns, as nats-server's event tracking (events.go initEventTracking) does:
- The servers heard from: `$SYS.SERVER.<id>.STATSZ` notes a server (its sequence, when last
  heard) and is handed on to whoever reads STATSZ events (`on_statsz`: the meta group);
  `$SYS.SERVER.<id>.SHUTDOWN` and `.LAMEDUCK`, or ORPHAN_AFTER seconds of silence, end one.
- Each account's connections elsewhere: every server reports its own on
  `$SYS.SERVER.ACCOUNT.<acc>.CONNS` (and on the newer `$SYS.ACCOUNT.<acc>.SERVER.CONNS`;
  only the older is read, as there), and answers a new account's
  `$SYS.REQ.ACCOUNT.<acc>.CONNS` on this server's `$SYS._INBOX_.<id>`. An account's
  `max_connections` counts them (natsd/client.py refuses the one over); a report that puts an
  account over its limit closes the newest local clients, as nats-server's
  Account.updateRemoteServer. Accounts with local connections report every HEARTBEAT seconds.
- Subscription counts across the cluster: `$SYS.REQ.ACCOUNT.NSUBS` answers another server
  with how many local client subscriptions of an account match a subject (and queue);
  `count_subscribers` sums them over the servers where the account has connections, for
  `$SYS.DEBUG.SUBSCRIBERS`, within NSUBS_WAIT.
- The server's own reply inbox `$SYS._INBOX.<hash>.*` (hash of the server's name): replies to
  the requests it sends go to the handler registered for their subject (`expect`).
- Leaf nodes connecting anywhere in a super-cluster: `$SYS.ACCOUNT.<acc>.LEAFNODE.CONNECT`,
  sent for a local one and read for the others', makes the account known to the gateways.
- `$SYS.LATENCY.M2.<hash>`: the responder's servers' halves of the service latencies this
  server measures, for natsd/accounts/latency.py RemoteLatency.
"""
import base64
import json
import logging
import time

from natsd.gofmt import go_json
from natsd.ids import get_hash, random_token
from natsd.subject import has_wildcard, subject_is_subset

log = logging.getLogger("natsd")

HEARTBEAT = 30.0                        # nats-server eventsHBInterval
ORPHAN_AFTER = 5 * HEARTBEAT            # nats-server orphMax: a server silent this long is gone
ORPHAN_CHECK = 3 * HEARTBEAT            # nats-server chkOrph
NSUBS_WAIT = 0.5                        # how long DEBUG.SUBSCRIBERS waits for the others' counts
NSUBS = "$SYS.REQ.ACCOUNT.NSUBS"
LEAF_CONNECT = "$SYS.ACCOUNT.%s.LEAFNODE.CONNECT"
REMOTE_LATENCY = "$SYS.LATENCY.M2.%s"       # + this server's hash: the responders' halves


def system_error(text, *args):
    """An error of the system account's client, logged as nats-server's internal SYSTEM
    client logs it (with its "SYSTEM - " label)."""
    log.error("SYSTEM - " + text, *args)


class RemoteServers:
    def __init__(self, system):
        self.system = system                # natsd.system.services.SystemServices
        self.server = system.server
        self.servers = {}                   # server id -> [last seq, when last heard (monotonic)]
        self.replies = {}                   # reply subject in our inbox -> handler
        self.on_statsz = []                 # handler(sub, subject, reply, hdr, payload, origin)
        self.inbox_prefix = "$SYS._INBOX.%s." % get_hash(self.server.name)
        self.conns_inbox = "$SYS._INBOX_.%s" % self.server.id
        self.timers = []
        self.statsz_sub = None             # its own listening to STATSZ (not a listener)

    def subscribe(self):
        """The tracking subscriptions, first of the system client's, in nats-server's order."""
        sub = self.system.subscribe
        sub(self.inbox_prefix + "*", self._inbox_reply)
        sub("$SYS.SERVER.ACCOUNT.*.CONNS", self._conns_update)
        sub(self.conns_inbox, self._conns_update)
        sub(NSUBS, self._nsubs_request)
        self.statsz_sub = sub("$SYS.SERVER.*.STATSZ", self._statsz)
        sub("$SYS.SERVER.*.SHUTDOWN", self._server_gone)
        sub("$SYS.SERVER.*.LAMEDUCK", self._server_gone)
        sub(LEAF_CONNECT % "*", self._leaf_connected)
        sub(REMOTE_LATENCY % get_hash(self.server.name), self._latency_measured)
        loop = self.server.loop
        self.timers = [loop.call_later(ORPHAN_CHECK, self._sweep_orphans),
                       loop.call_later(HEARTBEAT, self._heartbeat)]

    def stop(self):
        for t in self.timers:
            t.cancel()
        self.timers = []

    # ---- our own inbox ----

    def new_inbox(self):
        return self.inbox_prefix + random_token(8)

    def expect(self, reply, handler):
        """Replies to `reply` (a subject of new_inbox) go to handler(sub, subject, reply, hdr,
        payload, origin) until forget(reply)."""
        self.replies[reply] = handler

    def forget(self, reply):
        self.replies.pop(reply, None)

    def _inbox_reply(self, sub, subject, reply, hdr, payload, origin):
        handler = self.replies.get(bytes(subject).decode("utf-8", "replace"))
        if handler is not None:
            handler(sub, subject, reply, hdr, payload, origin)

    # ---- servers ----

    def _statsz(self, sub, subject, reply, hdr, payload, origin):
        try:
            info = json.loads(bytes(payload))["server"]
            sid = info["id"]
        except (ValueError, KeyError, TypeError):
            log.debug("Received bad server info for remote server update")
            return
        if sid != self.server.id:
            self._heard(info)
        for handler in self.on_statsz:
            handler(sub, subject, reply, hdr, payload, origin)

    def _heard(self, info):
        sid, seq = info.get("id"), info.get("seq", 0)
        known = self.servers.get(sid)
        if known is None:
            self.servers[sid] = [seq, time.monotonic()]
        elif isinstance(seq, int) and seq <= known[0]:
            log.error('Received out of order remote server update from: "%s"', sid)
        else:
            known[0], known[1] = seq, time.monotonic()

    def _server_gone(self, sub, subject, reply, hdr, payload, origin):
        if not payload:
            log.error('Remote server sent invalid (empty) shutdown message to "%s"',
                      bytes(subject).decode("utf-8", "replace"))
            return
        sid = bytes(subject).decode("utf-8", "replace").split(".")[2]
        if sid in self.servers:
            self._forget_server(sid)

    def _forget_server(self, sid):
        self.servers.pop(sid, None)
        for acc in list(self.server.accounts):
            acc.remote_conns.pop(sid, None)

    def _sweep_orphans(self):
        now = time.monotonic()
        for sid, (_, heard) in list(self.servers.items()):
            if now - heard > ORPHAN_AFTER:
                log.debug('Detected orphan remote server: "%s"', sid)
                self._forget_server(sid)
        self.timers[0] = self.server.loop.call_later(ORPHAN_CHECK, self._sweep_orphans)

    # ---- accounts' connections ----

    def _conns_update(self, sub, subject, reply, hdr, payload, origin):
        if not payload:
            system_error("No message body provided")
            return
        try:
            m = json.loads(bytes(payload))
            name, info = m["acc"], m["server"]
            sid, conns, leafs = info["id"], int(m.get("conns") or 0), int(m.get("leafnodes") or 0)
        except (ValueError, KeyError, TypeError) as e:
            system_error("Error unmarshalling account connection event message: %s", e)
            return
        acc = self.server.accounts.accounts.get(name)   # not looked up: only accounts in use here
        if acc is None:
            return
        if sid == self.server.id:
            if origin is not None:      # (our own reports reach our subscription too)
                system_error("Processing our own account connection event message: ignored")
            return
        acc.remote_conns[sid] = (conns, leafs)
        self._heard(info)
        over = len(acc.clients) + acc.remote_clients() - acc.max_connections
        if acc.max_connections >= 0 and over > 0:
            newest = sorted(acc.clients, key=lambda c: (c.state.start, c.cid), reverse=True)
            for c in newest[:over]:
                if not c.closing and not c.closed:
                    self.server.client_disconnect(c, "maximum account active connections exceeded",
                                                  "Maximum Account Connections Exceeded")

    def account_added(self, acc):
        """A new account here asks the others how many connections it has there."""
        if acc is self.system.account or acc is self.server.accounts.global_account:
            return
        body = {"server": self.system.server_info(), "acc": acc.name}
        self.system.send(self.system.account.sublist, ("$SYS.REQ.ACCOUNT.%s.CONNS" % acc.name).encode(),
                self.conns_inbox.encode(), None, go_json(body))

    # ---- leaf nodes elsewhere ----

    def leaf_connected(self, acc):
        """A leaf node of `acc` connected here: with gateways, the cluster's other servers are
        told (nats-server's sendLeafNodeConnect), and this server's own gateways know the
        account (its interest goes to the other clusters, interest-only as for every account)."""
        gateway = self.server.gateway
        if gateway is None:
            return
        body = {"server": self.system.server_info(), "acc": acc.name}
        self.system.send(self.system.account.sublist, (LEAF_CONNECT % acc.name).encode(), None, None,
                         go_json(body))
        gateway.add_account(acc)

    def _leaf_connected(self, sub, subject, reply, hdr, payload, origin):
        """Another server's leaf node connected for an account. nats-server switches its
        inbound gateways to interest-only mode for that account (leafNodeConnected); natsd's
        are interest-only for every account they know from the start, so what is left to do is
        to know the account: it is looked up (fetched in operator mode) and handed to the
        gateways, which then tell the other clusters of its interest."""
        try:
            name = json.loads(bytes(payload)).get("acc") or ""
        except (ValueError, AttributeError) as e:
            system_error("Error unmarshalling account connections request message: %s", e)
            return
        gateway = self.server.gateway
        if not name or gateway is None:
            return
        acc = self.server.account_named(name)
        if acc is not None:
            gateway.add_account(acc)

    def _latency_measured(self, sub, subject, reply, hdr, payload, origin):
        """Another server's half of a service latency measured here (remoteLatencyUpdate)."""
        if self.server.remote_latency is not None:
            self.server.remote_latency.measurement_arrived(bytes(payload))

    def _heartbeat(self):
        for acc in list(self.server.accounts):
            if acc.clients:
                self.system.conns_changed(acc)
        self.timers[1] = self.server.loop.call_later(HEARTBEAT, self._heartbeat)

    # ---- subscription counts ----

    def _nsubs_request(self, sub, subject, reply, hdr, payload, origin):
        if origin is None:
            return                      # our own request: count_subscribers counts us itself
        if not payload:
            system_error("request requires a body")
            return
        try:
            m = json.loads(bytes(payload))
            queue = base64.b64decode(m["queue"]) if m.get("queue") else None
            name, tsubj = m["acc"], m["subject"]
        except (ValueError, KeyError, TypeError) as e:
            system_error("Error unmarshalling account nsubs request message: %s", e)
            return
        acc = self.server.accounts.accounts.get(name)
        if acc is None or not acc.clients or not reply:
            return
        self.system.send(self.system.account.sublist, reply, None, None,
                go_json(local_subscribers(acc, tsubj, queue)))

    def count_subscribers(self, acc, tsubj, queue, done):
        """done(n): the client subscriptions of `acc` matching `tsubj` (and `queue`) here and
        on the servers where the account has connections, as far as they answer in time."""
        total = [local_subscribers(acc, tsubj, queue)]
        expected = sum(1 for conns, leafs in acc.remote_conns.values() if conns > 0 or leafs > 0)
        if not expected:
            done(total[0])
            return
        reply = self.new_inbox()
        answered = [0]
        loop = self.server.loop

        def finish():
            if reply in self.replies:
                self.forget(reply)
                timer.cancel()
                done(total[0])

        def on_count(sub, subject, rep, hdr, payload, origin):
            try:
                total[0] += int(bytes(payload))
            except ValueError:
                pass
            answered[0] += 1
            if answered[0] >= expected:
                finish()
        self.expect(reply, on_count)
        timer = loop.call_later(NSUBS_WAIT, finish)
        body = {"acc": acc.name, "subject": tsubj}
        if queue is not None:
            body["queue"] = base64.b64encode(queue).decode()
        self.system.send(self.system.account.sublist, NSUBS.encode(), reply.encode(), None, go_json(body))


def local_subscribers(acc, tsubj, queue):
    """How many client (and hub-side leaf node) subscriptions of `acc` here match `tsubj`
    ("a literal subject: those that would receive it; a wildcard: those it contains) and, when
    given, belong to queue group `queue` (nats-server's totalSubs)."""
    from natsd.monitor.connz import kind_of

    def counts(s):
        if queue is not None and s.queue != queue:
            return False
        c = s.conn
        if c is None:
            return False
        kind = kind_of(c)
        return kind == "Client" or (kind == "Leafnode" and not getattr(c.state, "is_spoke", False))
    if has_wildcard(tsubj):
        return sum(1 for s in acc.sublist.all_subscriptions()
                   if counts(s) and subject_is_subset(s.subject.decode("utf-8", "replace"), tsubj))
    r = acc.sublist.match(tsubj.encode())
    subs = [] if queue is not None else list(r.psubs)
    for group in r.qsubs:
        subs.extend(group)
    return sum(1 for s in subs if counts(s))
