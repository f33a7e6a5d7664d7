"""Atomic batch publish (`allow_atomic`, nats-server 2.12+): messages carrying `Nats-Batch-Id`
and `Nats-Batch-Sequence` (1, 2, ...) are staged until the one with `Nats-Batch-Commit: 1`
(stored too) or `Nats-Batch-Commit: eob` (an end marker, not stored); then all of them are
stored together or none is. Staged messages get an empty reply; the commit gets the PubAck of
the last message with `"batch"` and `"count"`.

Owns: the staging (in memory: a batch that is not committed is never stored, so a crash before
the commit loses it whole), nats-server's limits (1,000 messages per batch, 50 batches in
flight per stream, 1,000 per server, 10 s without a message abandons a batch; each can be set
in `jetstream { limits { batch { max_msgs, max_inflight_per_stream, max_inflight_total,
timeout } } }`) and its errors,
and the `stream_batch_abandoned` advisory. The commit runs in one step of the event loop; if a
message of it is refused (an expected-sequence header, a limit), the messages stored before it
are truncated away and the error answers the commit. Each message is its own write, so a crash
inside a commit can leave the first part of a batch on disk: `discard_partial` removes it at
restart (it was never acknowledged: the PubAck waits for the sync after the last message).
"""
import logging

from natsd.jetstream.engine import advisories
from natsd.jetstream.engine import errors as E
from natsd.headers import set_header, slice_header

log = logging.getLogger("natsd")

MAX_BATCH_SIZE = 1000
MAX_INFLIGHT_PER_STREAM = 50
MAX_INFLIGHT_TOTAL = 1000
BATCH_TIMEOUT = 10.0
FAST_INFLIGHT_PER_STREAM = 1000     # fast batches (fastbatch.py)
FAST_INFLIGHT_TOTAL = 50_000
ABANDONED = "$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED."

_inflight_total = 0                 # batches in flight on this server


class Batch:
    __slots__ = ("id", "msgs", "timer")

    def __init__(self, batch_id):
        self.id = batch_id
        self.msgs = []
        self.timer = None


class Limits:
    """The batch limits in force: nats-server's defaults, or the config's positive values
    (the in-flight limits apply to atomic and to fast batches, with their own defaults)."""
    __slots__ = ("max_msgs", "per_stream", "total", "fast_per_stream", "fast_total", "timeout")

    def __init__(self, conf=None):
        conf = conf or {}

        def pick(key, default):
            v = conf.get(key, 0)
            return v if v > 0 else default
        self.max_msgs = pick("max_msgs", MAX_BATCH_SIZE)
        self.per_stream = pick("max_inflight_per_stream", MAX_INFLIGHT_PER_STREAM)
        self.total = pick("max_inflight_total", MAX_INFLIGHT_TOTAL)
        self.fast_per_stream = pick("max_inflight_per_stream", FAST_INFLIGHT_PER_STREAM)
        self.fast_total = pick("max_inflight_total", FAST_INFLIGHT_TOTAL)
        self.timeout = pick("timeout", BATCH_TIMEOUT)


class AtomicBatches:
    """The batches in flight on one stream."""

    def __init__(self, stream, limits=None):
        self.stream = stream
        self.open = {}
        self.limits = limits or Limits()

    def handle(self, batch_id, subject, reply, hdr, payload, headers):
        """One batch message: stage it, or commit the batch. -> the commit's (puback, sync)
        or None; raises the ApiError to answer."""
        st = self.stream
        cfg = st.config
        if cfg.get("sealed"):
            raise E.error("JSStreamSealedErr")
        mms = cfg.get("max_msg_size", -1)
        if 0 <= mms < len(payload) + len(hdr):
            raise E.error("JSStreamMessageExceedsMaximumErr")
        if not cfg.get("allow_atomic"):
            raise E.error("JSAtomicPublishDisabledErr")
        if len(batch_id) > 64:
            raise E.error("JSAtomicPublishInvalidBatchIDErr")
        seq = _uint(headers.get("Nats-Batch-Sequence"))
        if seq is None:
            raise E.error("JSAtomicPublishMissingSeqErr")
        commit = headers.get("Nats-Batch-Commit")
        eob = commit == "eob"
        size = seq - 1 if eob else seq
        lim = self.limits
        b = self.open.get(batch_id)
        if b is None:
            if seq != 1:
                if size > lim.max_msgs:
                    raise E.error("JSAtomicPublishTooLargeBatchErrF", size=lim.max_msgs)
                raise E.error("JSAtomicPublishIncompleteBatchErr")
            global _inflight_total
            if len(self.open) + 1 > lim.per_stream or _inflight_total + 1 > lim.total:
                raise E.error("JSAtomicPublishTooManyInflight")
            _inflight_total += 1
            b = self.open[batch_id] = Batch(batch_id)
        if commit is not None and commit not in ("1", "eob"):
            self._drop(b)
            raise E.error("JSAtomicPublishInvalidBatchCommitErr")
        if len(b.msgs) + 1 != seq or (seq == 1 and eob):
            self._abandon(b, "incomplete")
            raise E.error("JSAtomicPublishIncompleteBatchErr")
        if size > lim.max_msgs:
            self._abandon(b, "large")
            raise E.error("JSAtomicPublishTooLargeBatchErrF", size=lim.max_msgs)
        if commit is None:
            b.msgs.append((bytes(subject), bytes(hdr), bytes(payload), headers))
            self._arm(b)
            if reply and not cfg.get("no_ack"):
                st._reply(reply, b"")           # staged: an empty reply, as nats-server
            return None
        if not eob:
            b.msgs.append((bytes(subject), bytes(hdr), bytes(payload), headers))
        self._drop(b)
        return self._commit(b, eob)

    def _commit(self, b, eob):
        st = self.stream
        ids = set()
        written = set()                 # subjects the batch writes before the message at hand
        last_before = st.store.last_seq
        for i, (subject, _hdr, _payload, h) in enumerate(b.msgs):
            if h.get("Nats-Expected-Last-Msg-Id"):
                raise E.error("JSAtomicPublishUnsupportedHeaderBatchErr",
                              header="Nats-Expected-Last-Msg-Id")
            mid = h.get("Nats-Msg-Id")
            if mid:
                if mid in ids or st.is_duplicate(mid):
                    raise E.error("JSAtomicPublishContainsDuplicateMessageErr")
                ids.add(mid)
            # expected sequences are about the stream before the batch: only the first message
            # may expect a last sequence, and none a subject the batch already wrote
            els = _uint(h.get("Nats-Expected-Last-Sequence"))
            if els is not None:
                if els != last_before + i:
                    raise E.error("JSStreamWrongLastSequenceErrF", seq=last_before + i)
                if i > 0:
                    raise E.error("JSStreamWrongLastSequenceConstantErr")
            if _uint(h.get("Nats-Expected-Last-Subject-Sequence")) is not None:
                subj = h.get("Nats-Expected-Last-Subject-Sequence-Subject") or subject.decode()
                if subj in written:
                    raise E.error("JSStreamWrongLastSequenceConstantErr")
            written.add(subject.decode())
        ack = None
        n = len(b.msgs)
        for i, (subject, hdr, payload, _h) in enumerate(b.msgs):
            last = i == n - 1
            if eob and last:
                hdr = set_header(hdr, "Nats-Batch-Commit", "1")  # the last stored reads as a commit
            try:
                ack = st.process(subject, None, hdr, payload, batch=(b.id, n, last))
            except E.ApiError:
                st.rollback_to(last_before, ids)
                raise
        return ack

    def _arm(self, b):
        if b.timer is not None:
            b.timer.cancel()
        b.timer = self.stream.loop.call_later(self.limits.timeout, self._timed_out, b)

    def _timed_out(self, b):
        b.timer = None
        if self.open.get(b.id) is b:
            self._abandon(b, "timeout")

    def _drop(self, b):
        global _inflight_total
        if self.open.pop(b.id, None) is b:
            _inflight_total -= 1
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def _abandon(self, b, reason):
        self._drop(b)
        st = self.stream
        advisories.send(st.jsa.sublist, ABANDONED + st.name,
                        "io.nats.jetstream.advisory.v1.stream_batch_abandoned",
                        advisories._domain(st.jsa), stream=st.name, batch=b.id, reason=reason)

    def close(self):
        for b in list(self.open.values()):
            self._drop(b)


def discard_partial(stream):
    """At restart: if the stream ends inside a batch (its last message has a Nats-Batch-Id and
    no Nats-Batch-Commit), remove that batch's messages. Their sequences are not reused.
    -> the (first, last) sequences removed, or None."""
    if not stream.config.get("allow_atomic"):
        return None
    store = stream.store
    last = seq = store.last_seq
    sm = store.load(seq) if seq else None
    if sm is None or slice_header(sm.hdr, b"Nats-Batch-Commit") is not None:
        return None
    batch_id = slice_header(sm.hdr, b"Nats-Batch-Id")
    if not batch_id:
        return None
    while (sm is not None and slice_header(sm.hdr, b"Nats-Batch-Id") == batch_id
           and slice_header(sm.hdr, b"Nats-Batch-Commit") is None):
        store.remove(seq)
        seq -= 1
        sm = store.load(seq) if seq else None
    log.warning("  Removed a partial batch write for stream '%s > %s' (seq %d to %d): the "
                "server stopped inside its commit, before acknowledging it",
                stream.jsa.name, stream.name, seq + 1, last)
    return seq + 1, last


def _uint(v):
    if not v or not v.isdigit():
        return None
    n = int(v)
    return n if n < (1 << 64) else None
