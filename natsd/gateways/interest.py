"""The interest other clusters are told of: RS+/RS- on inbound gateway connections.

Every account's sublist reports its changes here (`on_change`, chained with the routes' and
leaf nodes' listeners). What counts is what this server would deliver a gateway's message
to: its clients, internal services, leaf nodes and the routes of its cluster (a message from
a gateway goes on over one route); not other clusters' interest (one hop), nor what only
this server serves (`local_only`). Per account a map `(subject, queue) -> count` decides
what goes out, as nats-server's gateway code keeps it: a plain subject on its first
subscriber and after its last, a queue group (weight 1) on its first and after its last
member. Every account is in interest-only mode on every inbound connection from its
registration on (nats-server 2.9+): INFO with the all-subscriptions start command, RS+ for
each subject, INFO with the complete command.
"""
import base64

from natsd.cluster.interest import announced
from natsd.gateways.link import CMD_ALL_SUBS_COMPLETE, CMD_ALL_SUBS_START
from natsd.protocol import KIND_ROUTE, info_line


def counts(sub):
    """Does this subscription make this cluster interested for the other clusters?"""
    if announced(sub):
        return True
    c = sub.conn
    return c is not None and c.kind == KIND_ROUTE


class GatewayInterest:
    def __init__(self, gateways):
        self.gateways = gateways
        self.maps = {}                  # account name -> {(subject, queue): count}
        self.hooked = set()
        self.sublists = {}              # account name (bytes) -> Sublist, read by the parser

    def hook(self, acc):
        if acc.name in self.hooked:
            return
        self.hooked.add(acc.name)
        self.sublists[acc.name.encode()] = acc.sublist
        interest = self.maps.setdefault(acc.name, {})
        for sub in acc.sublist.all_subscriptions():
            if not sub.closed and counts(sub):
                key = (sub.subject, sub.queue)
                interest[key] = interest.get(key, 0) + 1
        prev = acc.sublist.on_change

        def on_change(sub, added, acc=acc, prev=prev):
            if prev is not None:
                prev(sub, added)
            if counts(sub):
                self.update(acc, sub, added)
        acc.sublist.on_change = on_change
        for c in list(self.gateways.inbound.values()):
            self._switch(c, acc.name)

    def update(self, acc, sub, added):
        interest = self.maps.setdefault(acc.name, {})
        key = (sub.subject, sub.queue)
        n = interest.get(key, 0)
        if not added and n == 0:
            return
        new = n + 1 if added else n - 1
        if new > 0:
            interest[key] = new
        else:
            interest.pop(key, None)
        if added and self.gateways.replies is not None:
            self.gateways.replies.recent_subscription(acc.name, sub.subject)
        if (n > 0) == (new > 0):
            return
        line = self.line(acc.name, key, new > 0)
        for c in list(self.gateways.inbound.values()):
            c.send_bytes(line)

    @staticmethod
    def line(account, key, plus):
        subject, queue = key
        parts = [b"RS+" if plus else b"RS-", account.encode(), subject]
        if queue is not None:
            parts.append(queue)
            if plus:
                parts.append(b"1")
        return b" ".join(parts) + b"\r\n"

    def send_all(self, c):
        """An inbound connection registered: the queue groups of every account, then each
        account switched to interest-only mode."""
        out = [self.line(name, key, True) for name, keys in self.maps.items()
               for key in keys if key[1] is not None]
        if out:
            c.send_bytes(b"".join(out))
        for name in list(self.maps):
            self._switch(c, name)

    def _switch(self, c, account):
        """INFO start, RS+ for each plain subject of `account`, INFO complete."""
        out = [self._command(CMD_ALL_SUBS_START, account)]
        out.extend(self.line(account, key, True) for key in self.maps.get(account, {})
                   if key[1] is None)
        out.append(self._command(CMD_ALL_SUBS_COMPLETE, account))
        c.send_bytes(b"".join(out))

    def _command(self, cmd, account):
        info = {"server_id": "", "server_name": "", "version": "", "proto": 0, "go": "",
                "host": "", "port": 0, "headers": False, "max_payload": 0,
                "gateway": self.gateways.name, "gateway_cmd": cmd,
                "gateway_cmd_payload": base64.b64encode(account.encode()).decode()}
        return info_line(info)
