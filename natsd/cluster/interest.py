"""The interest this server announces to its routes: RS+/RS- (and LS+/LS- for a leaf's
interest, with the leaf's cluster as origin), per account, as nats-server keeps it.

Every account's sublist reports its changes here (`on_change`). Interest that counts is a
client's, an internal service's, or a leaf's where we are the hub; not what routes told us
(each server announces its own), not what only this server serves (`local_only`: import
forwarders, JetStream's generic API), not what our hub sent us. Per account a map
`(subject, queue, origin) -> count` decides what goes out: a plain subject on its first
subscriber and after its last, a queue group on every change of its weight. Route
permissions' `import` decides which of it goes out at all.
"""
import logging

from natsd.protocol import KIND_CLIENT, KIND_LEAF, KIND_ROUTE
from natsd.output.logger import TRACE

log = logging.getLogger("natsd")


def routes_listen(sublist, subject):
    """Has a route told this server of a subscriber for `subject` (bytes)?"""
    for sub in sublist.match(subject).psubs:
        if sub.conn is not None and sub.conn.kind == KIND_ROUTE:
            return True
    return False


def announced(sub):
    """Does this subscription count towards what routes are told?"""
    if sub.local_only:
        return False
    c = sub.conn
    if c is None or c.kind == KIND_CLIENT:
        return True
    return c.kind == KIND_LEAF and not c.spoke


def weight_of(sub):
    """What one subscription adds: a leaf's queue member counts for its weight."""
    if sub.queue is not None and sub.conn is not None and sub.conn.kind == KIND_LEAF:
        return max(sub.weight, 1)
    return 1


def key_of(sub):
    origin = sub.conn.origin if sub.conn is not None and sub.conn.kind == KIND_LEAF else None
    return (sub.subject, sub.queue, origin)


class RouteInterest:
    def __init__(self, routes):
        self.routes = routes
        self.maps = {}                  # account name -> {(subject, queue, origin): count}
        self.hooked = set()

    def hook(self, acc):
        """Follow an account's subscriptions (chained with the other listeners)."""
        if acc.name in self.hooked:
            return
        self.hooked.add(acc.name)
        interest = self.maps.setdefault(acc.name, {})
        for sub in acc.sublist.all_subscriptions():
            if not sub.closed and announced(sub):
                key = key_of(sub)
                interest[key] = interest.get(key, 0) + weight_of(sub)
        prev = acc.sublist.on_change

        def on_change(sub, added, acc=acc, prev=prev):
            if prev is not None:
                prev(sub, added)
            if announced(sub):
                self.update(acc, sub, weight_of(sub) if added else -weight_of(sub))
        acc.sublist.on_change = on_change

    def update(self, acc, sub, delta):
        """`delta` more (or fewer) subscribers behind `sub`'s key: tell the routes if that
        changes what they know."""
        interest = self.maps.setdefault(acc.name, {})
        key = key_of(sub)
        n = interest.get(key, 0)
        if delta < 0 and n == 0:
            return
        new = n + delta
        if new > 0:
            interest[key] = new
        else:
            interest.pop(key, None)
        if sub.queue is None and (n > 0) == (new > 0):
            return
        if not self.routes.can_import(key[0]):
            return
        name = acc.name
        for c in self.routes.routes_for_account(name):
            self.send(c, name, key, new)

    def send_all(self, c, accounts):
        """A route just registered: all our interest in the accounts it carries."""
        out = []
        for name in accounts:
            for key, n in self.maps.get(name, {}).items():
                if self.routes.can_import(key[0]):
                    out.append(self.line(c, name, key, n))
        if out:
            c.send_bytes(b"".join(out))
            self._trace(c, out)
            log.debug("%sSent local subscriptions to route", self.routes.prefix(c))

    def send(self, c, account, key, n):
        line = self.line(c, account, key, n)
        c.send_bytes(line)
        self._trace(c, (line,))

    @staticmethod
    def line(c, account, key, n):
        """`RS+ [acc ]subject[ queue weight]`, `RS- [acc ]subject[ queue]`, or the LS+/LS-
        forms with the leaf's origin for a peer that knows leaf origins."""
        subject, queue, origin = key
        leaf = origin is not None and c.lnoc
        parts = []
        if n > 0:
            parts.append(b"LS+" if leaf else b"RS+")
            if leaf:
                parts.append(origin)
        else:
            parts.append(b"LS-" if leaf else b"RS-")
            if leaf and c.state.lnocu:
                parts.append(origin)
        if c.route_account is None:
            parts.append(account.encode())
        parts.append(subject)
        if queue is not None:
            parts.append(queue)
            if n > 0:
                parts.append(b"%d" % n)
        return b" ".join(parts) + b"\r\n"

    def _trace(self, c, lines):
        if c.trace:
            prefix = self.routes.prefix(c)
            for line in lines:
                log.log(TRACE, "%s->> [%s]", prefix, line.rstrip(b"\r\n").decode("utf-8", "replace"))
