# cython: language_level=3, boundscheck=False, wraparound=False
"""Consumer delivery fast path: a run of first deliveries framed from the log straight into the
subscriber's connection buffer, for a pull request's batch or a push consumer's deliver
subject. JetStream's own Cython module: it cimports the core (log, conn, sublist, router),
the core knows nothing of it.

Consumer._run (natsd/jetstream/engine/consumer.py) uses this when the target subject resolves to
exactly one plain client subscription, or one route's plain subscription (a client on another
server of the cluster), and the stream is a FileStore; everything else (imports, leaf links,
several matches, queue groups, redeliveries, max_bytes, replay, rate limits, headers_only)
takes the general per-message path. For each message it writes what that path would:
`MSG`/`HMSG <stored subject> <sid> $JS.ACK.<stream>.<consumer>.1.<sseq>.<dseq>.<ts>.<pending>`
for a client, `RMSG`/`HMSG <account> <target> $JS.ACK...@<stored subject>` for a route
(router.frame_remote), with the stored headers and payload, and records
`pending[sseq] = (dseq, ts)` (Pending.put, natsd/jetstream/engine/pending.pyx) unless the consumer
acks nothing.
"""
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd._core.log cimport Log, nlog_rec
from natsd._core.conn cimport Connection, KIND_CLIENT, KIND_ROUTE
from natsd._core.sublist cimport Subscription, SublistResult, Sublist
from natsd._core.router cimport frame_remote, write_msg
from natsd._core.fmt cimport put_int
from natsd.jetstream.engine.pending cimport Pending


def client_target(Sublist sl, bytes subject):
    """The single client or route subscription `subject` resolves to, or None when the
    general path must deliver: no or several matches, queue groups, internal subscriptions
    (imports, services), leaf links, per-delivery permission checks, reply tracking
    (allow_responses) or auto-unsubscribe limits."""
    cdef SublistResult res = sl.match(subject)
    cdef Subscription sub
    cdef Connection c
    if res.total != 1 or len(res.psubs) != 1:
        return None
    sub = <Subscription>res.psubs[0]
    if sub.closed or sub.handler is not None or sub.conn is None or sub.deny_filter \
            or sub.max_msgs > 0:
        return None
    c = <Connection>sub.conn
    if (c.kind != KIND_CLIENT and c.kind != KIND_ROUTE) or c.closed or c.track_replies:
        return None
    if c.kind == KIND_ROUTE and (sub.queue is not None or (c.route_account is None and sl.account is None)):
        return None
    return sub


def deliver_batch(Log lg, Subscription sub, filt, uint64_t seq, Py_ssize_t k, bytes prefix,
                  uint64_t dseq, uint64_t npc, bint literal, int64_t now, Pending pending,
                  Py_ssize_t byte_room=-1, bytes target=None, bytes account=None):
    """Deliver up to k first deliveries (delivery count 1) of messages matching `filt` from
    stream sequence `seq` on, to subscription `sub` (from client_target), which `target` (the
    deliver or reply subject) matched in `account`'s sublist. `prefix` is
    `$JS.ACK.<stream>.<consumer>.1.`; `dseq` the next delivery sequence, `npc` the consumer's
    pending count before this batch, `literal` whether its filters are literal subjects;
    `pending` None for a consumer that acks nothing. With byte_room >= 0 the batch stops after
    the message that takes the delivered size past byte_room: the size flow control counts,
    as nats-server's jsPubMsg.size(), the target's length + reply + headers + payload.

    num_pending in each reply follows Consumer._run exactly: one less per delivery, 0 once the
    stream's last message went out; where _run would recount (<= 2 left, literal filters) the
    batch stops before that message so the per-message path takes it.

    -> (delivered, bytes, next stream seq, npc, at_end): at_end when no further message matches. The
    next stream seq moves past unreadable records only when a later message went out (as the
    per-message path, whose sseq follows delivered messages)."""
    cdef Connection c = <Connection>sub.conn
    cdef nlog_rec r
    cdef Py_ssize_t plen = PyBytes_GET_SIZE(prefix)
    cdef char* buf = <char*>malloc(plen + 4 * 24)
    cdef char* p
    cdef uint64_t s, nn, scan = seq
    cdef Py_ssize_t n = 0, nbytes = 0
    cdef bint at_end = False
    cdef bytes sid = sub.sid
    cdef bint routed = c.kind == KIND_ROUTE
    cdef Py_ssize_t target_len = PyBytes_GET_SIZE(target) if target is not None else 0
    if routed and target is None:
        free(buf)
        raise ValueError("a route's delivery needs its target subject")
    if buf == NULL:
        raise MemoryError()
    memcpy(buf, PyBytes_AS_STRING(prefix), plen)
    lg.batch_begin(filt)
    try:
        while n < k:
            if c.closed or sub.closed:
                break                   # the general path sees the lost interest and drops it
            s = lg.batch_next(scan)
            if s == 0:
                at_end = True
                break
            if not lg.batch_rec(s, &r):
                scan = s + 1            # unreadable record: skipped, as store.load_next does
                continue
            nn = npc - 1 if npc > 0 else 0
            if nn:
                if s >= lg.last:
                    nn = 0
                elif nn <= 2 and literal:
                    break               # _run recounts num_pending here: leave s to it
            p = put_int(buf + plen, s)
            p[0] = c'.'
            p = put_int(p + 1, dseq)
            p[0] = c'.'
            p = put_int(p + 1, <uint64_t>r.ts)
            p[0] = c'.'
            p = put_int(p + 1, nn)
            if routed:
                frame_remote(c, account, None, PyBytes_AS_STRING(target), target_len, r.subj, r.slen,
                             buf, p - buf, r.msg, r.hlen, r.tlen)
            else:
                write_msg(c, None, sid, r.subj, r.slen, buf, p - buf, r.msg, r.hlen, r.tlen)
                sub.delivered += 1
            if pending is not None:
                pending.put(s, dseq, now)
            dseq += 1
            npc = nn
            seq = scan = s + 1
            n += 1
            nbytes += target_len + (p - buf) + r.tlen
            if byte_room >= 0 and nbytes > byte_room:
                break
    finally:
        lg.batch_end()
        free(buf)
    return n, nbytes, seq, npc, at_end
