"""Push delivery of a consumer: fan-out to the deliver subject, flow control, heartbeats.

Owns (as a mixin of Consumer): delivering one message to the subscribers of a deliver or reply
subject with the message's own subject on the wire (plain subscribers, one member per queue
group, only the `deliver_group` when set), status-only messages (heartbeats, pull statuses),
flow control requests (`NATS/1.0 100 FlowControl Request`, reply `$JS.FC.<stream>.<consumer>.
<rand>`, window doubling up to 32 MB as nats-server) and idle heartbeats with
`Nats-Last-Consumer` / `Nats-Last-Stream` (+ `Nats-Consumer-Stalled`).
"""
from natsd._core.router import publish, publish_delivery
from natsd.ids import random_token

NS = 1_000_000_000


class PushDelivery:
    def _send(self, target, subject, reply, hdr, payload):
        """Deliver to subscribers of `target` (the deliver or reply subject); they see the
        message's own `subject`, as nats-server delivers it. Only the `deliver_group` takes
        part when one is set."""
        group = self.cfg["deliver_group"] if self.is_push() else ""
        return publish_delivery(self.account.sublist, target, subject, reply, hdr, payload,
                                group.encode() if group else None)

    def send_status(self, target, hdr):
        """Status-only message (no payload) to a reply/deliver subject."""
        if isinstance(target, str):
            target = target.encode()
        publish(self.account.sublist, target, None, hdr, b"")

    def _send_fc(self):
        self.fcid = "$JS.FC.%s.%s.%s" % (self.stream.name, self.name, random_token(4))
        self.fcsz = self.pbytes
        publish(self.account.sublist, self.cfg["deliver_subject"].encode(), self.fcid.encode(),
                b"NATS/1.0 100 FlowControl Request\r\n\r\n", b"")

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
