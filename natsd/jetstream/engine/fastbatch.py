"""Fast batch publish (`allow_batched`, nats-server 2.14+): a publisher streams messages whose
reply subject carries the batch, `<prefix>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI`
(op 0 start, 1 append, 2 commit, 3 commit with an end-of-batch marker that is not stored,
4 ping). Each message is stored as it arrives (no staging, unlike atomic batches); the stream
answers with flow-control messages on the reply subjects:

    {"type":"ack","seq":N,"msgs":M}      messages up to N are stored; ack again after M more
    {"type":"gap","last_seq":E,"seq":S}  messages E..S-1 never arrived
    {"type":"err","seq":S,"error":{..}}  message S was refused

and the commit with a PubAck carrying `"batch"` and `"count"`. With gap mode `fail`, a gap or a
refused message ends the batch (committing what was stored); with `ok` the batch goes on.
Every answer goes out in order after the stream's group-commit sync, so an ack means the
messages are on disk.

Owns: the reply-subject parsing, the per-batch flow state (the ack interval starts at the
client's flow value, at most 500, or 1 while other batches are open, and moves towards
500 / open batches), nats-server's in-flight limits and inactivity timeout, and its errors.
"""
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine.apilevel import required_level_too_high
from natsd.headers import remove_header
from natsd.jetstream.engine.headers import parse_headers

SUFFIX = b".$FI"
OP_START, OP_APPEND, OP_COMMIT, OP_COMMIT_EOB, OP_PING = range(5)
_MAX_U64 = (1 << 64) - 1

_inflight_total = 0                 # fast batches open on this server


class Request:
    """What one message's reply subject says about its batch."""
    __slots__ = ("id", "seq", "flow", "gap_ok", "ping", "commit", "eob")


def parse_reply(reply):
    """-> (Request, False) for a fast batch reply, (None, True) for a `.$FI` reply that does
    not parse (nats-server answers it "pattern is invalid"), (None, False) otherwise."""
    if not reply or not reply.endswith(SUFFIX) or len(reply) <= 4:
        return None, False
    parts = reply[:-4].split(b".")
    if len(parts) < 6:
        return None, True
    op = _go_int(parts[-1])
    if op is None or not OP_START <= op <= OP_PING:
        return None, True
    seq = int(parts[-2]) if parts[-2].isdigit() else 0
    if seq == 0 or seq >= _MAX_U64:
        return None, True
    if (seq == 1 and op == OP_COMMIT_EOB) or (op == OP_START and seq != 1) \
            or (op == OP_APPEND and seq <= 1):
        return None, True
    if parts[-3] not in (b"fail", b"ok"):
        return None, True
    flow = _go_int(parts[-4])
    flow = 10 if flow is None or flow <= 0 else min(flow, 0xFFFF)
    r = Request()
    r.id = parts[-5].decode("utf-8", "surrogateescape")
    r.seq = seq
    r.flow = flow
    r.gap_ok = parts[-3] == b"ok"
    r.ping = op == OP_PING
    r.eob = op == OP_COMMIT_EOB
    r.commit = r.eob or op == OP_COMMIT
    return r, False


def _go_int(b):
    """nats-server's parseInt64 of a token: digits only, else None (-1 there)."""
    return int(b) if b and b.isdigit() and len(b) < 19 else None


class Batch:
    __slots__ = ("id", "timer", "lseq", "sseq", "fseq", "ack_msgs", "max_ack_msgs", "gap_ok")

    def __init__(self, batch_id, gap_ok, max_ack_msgs):
        self.id = batch_id
        self.timer = None
        self.lseq = 0               # the highest batch sequence taken (stored or skipped)
        self.sseq = 0               # the stream sequence of the last stored message
        self.fseq = 0               # the batch sequence of the last flow-control ack
        self.ack_msgs = 1
        self.max_ack_msgs = max_ack_msgs
        self.gap_ok = gap_ok


class FastBatches:
    """The fast batches open on one stream. Messages are stored synchronously, so the stored
    batch sequence is always the last one taken."""

    def __init__(self, stream, limits):
        self.stream = stream
        self.limits = limits
        self.open = {}

    # ---- answers (in order, after the stream's sync) ----

    def _send(self, reply, data):
        if reply:
            self.stream.respond_after_sync(reply, data)

    def _send_flow(self, b, reply):
        self._send(reply, b'{"type":"ack","seq":%d,"msgs":%d}' % (b.fseq, b.ack_msgs))

    def _send_error(self, reply, err):
        self._send(reply, E.dumps({"error": err.to_dict(), "stream": self.stream.name, "seq": 0}))

    def _pub_ack(self, seq, b, count, duplicate=False):
        return self.stream._puback(seq, duplicate, batch=(b.id, count))

    # ---- one message ----

    def handle(self, req, subject, reply, hdr, payload):
        """One message whose reply ends in `.$FI` (`req` None when it did not parse)."""
        st = self.stream
        cfg = st.config
        can_respond = bool(reply) and not cfg.get("no_ack")

        def refuse(err):
            if can_respond:
                self._send_error(reply, err)
        if cfg.get("sealed"):
            return refuse(E.error("JSStreamSealedErr"))
        mms = cfg.get("max_msg_size", -1)
        if mms >= 0 and (len(hdr or b"") > mms or len(payload) > mms - len(hdr or b"")):
            return refuse(E.error("JSStreamMessageExceedsMaximumErr"))
        if not cfg.get("allow_batched"):
            return refuse(E.error("JSBatchPublishDisabledErr"))
        if req is None:
            return refuse(E.error("JSBatchPublishInvalidPatternErr"))
        if len(req.id) > 64:
            return refuse(E.error("JSBatchPublishInvalidBatchIDErr"))
        b = self.open.get(req.id)
        if b is None:
            if req.seq != 1:
                return refuse(E.error("JSBatchPublishUnknownBatchIDErr"))
            global _inflight_total
            lim = self.limits
            if len(self.open) + 1 > lim.fast_per_stream or _inflight_total + 1 > lim.fast_total:
                return refuse(E.error("JSBatchPublishTooManyInflight"))
            _inflight_total += 1
            b = self.open[req.id] = Batch(req.id, req.gap_ok, req.flow)
            b.ack_msgs = 1 if len(self.open) > 1 else min(500, req.flow)
        if hdr and b"Nats-Required-Api-Level" in hdr:
            if required_level_too_high(hdr):
                self._close(b)
                return refuse(E.error("JSRequiredApiLevelErr"))
            hdr = remove_header(hdr, "Nats-Required-Api-Level")
        self._arm(b)
        if req.ping:
            return self._ping(b, req, reply)
        b.lseq += 1
        if b.lseq != req.seq:           # nats-server 2.15.1 reports backward gaps too
            self._send(reply, b'{"type":"gap","last_seq":%d,"seq":%d}' % (b.lseq, req.seq))
            if b.gap_ok and req.seq > b.lseq:
                b.lseq = req.seq
            else:
                b.lseq -= 1
                return self._commit(b, reply)
        if req.commit and req.eob:
            b.lseq -= 1
            return self._commit(b, reply)
        if req.seq == 1 and can_respond and not req.commit:
            self._send(reply, b'{"type":"ack","seq":0,"msgs":%d}' % b.ack_msgs)
        return self._store(b, req, subject, reply, hdr, payload)

    def _ping(self, b, req, reply):
        """A ping asks for the flow state again (and reports a gap past what was taken)."""
        if req.seq > b.lseq:
            self._send(reply, b'{"type":"gap","last_seq":%d,"seq":%d}' % (b.lseq + 1, req.seq + 1))
            if b.gap_ok:
                b.lseq = req.seq
                if self._check_flow(b, reply):
                    return
            else:
                return self._commit(b, reply)
        self._send_flow(b, reply)

    def _store(self, b, req, subject, reply, hdr, payload):
        st = self.stream
        duplicate_of = 0
        if hdr and b"Nats-Msg-Id" in hdr:
            mid = parse_headers(hdr).get("Nats-Msg-Id")
            duplicate_of = (st._dedup_lookup(mid) or 0) if mid else 0
        err = None
        if not duplicate_of:
            try:
                st.process(subject, None, hdr, payload)
            except E.ApiError as e:
                err = e
        if duplicate_of or err is not None:
            if duplicate_of:
                self._check_flow(b, reply)
                if not req.commit:
                    return
            if not b.gap_ok and b.lseq == 1:
                self._close(b)
                if duplicate_of:
                    self._send(reply, self._pub_ack(duplicate_of, b, req.seq, duplicate=True))
                else:
                    self._send_error(reply, err)
                return
            if err is not None:
                self._send(reply, E.dumps({"type": "err", "seq": req.seq, "error": err.to_dict()}))
            if b.gap_ok and not req.commit:
                return
            if err is not None:
                b.lseq -= 1
            return self._commit(b, reply)
        b.sseq = st.last_seq()
        if req.commit:
            return self._commit(b, reply)
        self._check_flow(b, reply)

    def _check_flow(self, b, reply):
        """Ack every `ack_msgs` stored messages, steering the interval towards its share of
        500 (halving or doubling); -> whether an ack was sent."""
        am = b.ack_msgs
        if b.lseq < b.fseq + am:
            return False
        b.fseq += (b.lseq - b.fseq) // am * am
        share = min(max(1, 500 // len(self.open)), b.max_ack_msgs)
        if b.ack_msgs < share:
            b.ack_msgs = min(b.ack_msgs * 2, share)
        elif b.ack_msgs > share:
            b.ack_msgs = max(b.ack_msgs // 2, share)
        self._send_flow(b, reply)
        return True

    def _commit(self, b, reply):
        """End the batch with what was stored: the PubAck counts the batch sequences taken."""
        self._close(b)
        self._send(reply, self._pub_ack(b.sseq, b, b.lseq))

    # ---- lifetime ----

    def _arm(self, b):
        if b.timer is not None:
            b.timer.cancel()
        b.timer = self.stream.loop.call_later(self.limits.timeout, self._close, b)

    def _close(self, b):
        global _inflight_total
        if self.open.get(b.id) is b:
            del self.open[b.id]
            _inflight_total -= 1
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def close(self):
        for b in list(self.open.values()):
            self._close(b)
