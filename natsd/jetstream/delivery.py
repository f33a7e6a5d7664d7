"""Push delivery of a consumer: fan-out to the deliver subject, flow control, heartbeats.

Owns (as a mixin of Consumer): delivering one message to the subscribers of a deliver or reply
subject with the message's own subject on the wire (plain subscribers, one member per queue
group, only the `deliver_group` when set), status-only messages (heartbeats, pull statuses),
flow control requests (`NATS/1.0 100 FlowControl Request`, reply `$JS.FC.<stream>.<consumer>.
<rand>`, window doubling up to 32 MB as nats-server) and idle heartbeats with
`Nats-Last-Consumer` / `Nats-Last-Stream` (+ `Nats-Consumer-Stalled`).
"""
import random

from natsd._core.router import deliver_to     # frames client and leaf/route subscribers alike

NS = 1_000_000_000


class PushDelivery:
    def _send(self, target, subject, reply, hdr, payload):
        """Deliver to subscribers of `target`. Client connections see the message's own subject
        on the wire; internal subscriptions (imports) and leaf/route links get `target`, the
        subject they route by."""
        res = self.account.sublist.match(target)
        if res.total == 0:
            return 0
        n = 0
        group = self.cfg["deliver_group"] if self.is_push() else ""
        # Push deliveries to non-client subscribers (mirror/source subscriptions, leaf/route
        # links) carry the original subject after '@' in the $JS.ACK reply, as nats-server does
        # (client.go jsAckDeliverIdx): the receiving side restores it.
        xreply = reply + b"@" + subject if (reply and self.is_push()
                                              and reply.startswith(b"$JS.ACK.")) else reply
        if not group:
            for s in res.psubs:
                if _is_client(s):
                    n += deliver_to(s, subject, reply, hdr, payload)
                else:
                    n += deliver_to(s, target, xreply, hdr, payload)
        for members in res.qsubs:
            if not members:
                continue
            if group and members[0].queue != group.encode():
                continue
            start = random.randrange(len(members))
            for i in range(len(members)):
                s = members[(start + i) % len(members)]
                if deliver_to(s, subject, reply, hdr, payload) if _is_client(s) else \
                        deliver_to(s, target, xreply, hdr, payload):
                    n += 1
                    break
        return n

    def send_status(self, target, hdr):
        """Status-only message (no payload) to a reply/deliver subject."""
        if isinstance(target, str):
            target = target.encode()
        res = self.account.sublist.match(target)
        for s in res.psubs:
            deliver_to(s, target, None, hdr, b"")
        for members in res.qsubs:
            if members:
                deliver_to(random.choice(members), target, None, hdr, b"")

    def _send_fc(self):
        a = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        rnd = "".join(random.choice(a) for _ in range(4))
        self.fcid = "$JS.FC.%s.%s.%s" % (self.stream.name, self.name, rnd)
        self.fcsz = self.pbytes
        res = self.account.sublist.match(self.cfg["deliver_subject"].encode())
        target = self.cfg["deliver_subject"].encode()
        hdr = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
        for s in res.psubs:
            deliver_to(s, target, self.fcid.encode(), hdr, b"")
        for members in res.qsubs:
            if members:
                deliver_to(random.choice(members), target, self.fcid.encode(), hdr, b"")

    def _on_fc(self, sub, subject, reply, hdr, payload, origin):
        if self.closed or self.fcid is None or subject.decode() != self.fcid:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(0, self.pbytes - self.fcsz)
        self.fcid, self.fcsz = None, 0
        self.kick()
        if self.cfg["ack_policy"] == "flow_control" and hdr:
            # the FC reply acknowledges everything up to the sequences it carries
            vals = {}
            for line in hdr.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                vals[k.strip().lower()] = v.strip()
            try:
                lsseq = int(vals.get(b"nats-last-stream", b"0"))
                ldseq = max(0, int(vals.get(b"nats-last-consumer", b"0")))
            except ValueError:
                return
            if lsseq > 0:
                self.process_ack(lsseq, ldseq, 1, sample=False)

    def _hb(self):
        self._hbtimer = None
        if self.closed:
            return
        if self.active or self._has_interest():
            h = "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n" % (
                self.dseq - 1, self.sseq - 1)
            if self.fcid:
                h += "Nats-Consumer-Stalled: %s\r\n" % self.fcid
            self.send_status(self.cfg["deliver_subject"], (h + "\r\n").encode())
        self._hbtimer = self.loop.call_later(self.cfg["idle_heartbeat"] / NS, self._hb)


def _is_client(sub):
    c = sub.conn
    return c is not None and c.kind == 0
