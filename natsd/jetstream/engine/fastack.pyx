# cython: language_level=3, boundscheck=False, wraparound=False
"""Plain acks applied at C level: the bulk of a consumer's ack traffic under the explicit
policy (an empty or `+ACK` body, no reply) on a limits-retention stream. JetStream's own
Cython module beside pending.pyx; the core knows nothing of it.

AckState._on_acks (natsd/jetstream/engine/ackstate.py) hands over the acks the loop read for one
consumer in one iteration. For each plain ack `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>
.<ts>.<pending>` this does what the Python rules do: the stream sequence leaves `pending`,
the ack floors move (AckState._move_ack_floor, the same rule), and any redelivery record of
it is dropped. An ack whose sequences are not decimal digits is ignored, as nats-server
ignores one it cannot parse. Anything else (another body, a reply wanted) stops the run and
goes back to Python in order.
"""
from libc.stdint cimport uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd.jetstream.engine.pending cimport Pending

cdef bytes EMPTY = b""
cdef bytes PLUS_ACK = b"+ACK"


cdef inline bint _digits(const char* s, Py_ssize_t n, uint64_t* out) noexcept:
    """A decimal number of 1 to 19 digits (below 2**63, as nats-server parses them)."""
    cdef uint64_t v = 0
    cdef Py_ssize_t i
    if n < 1 or n > 19:
        return False
    for i in range(n):
        if s[i] < c'0' or s[i] > c'9':
            return False
        v = v * 10 + <uint64_t>(s[i] - c'0')
    out[0] = v
    return True


cdef inline bint _ack_seqs(bytes subject, uint64_t* sseq) noexcept:
    """The stream sequence of an ack subject with at least nine tokens and decimal stream and
    delivery sequences (tokens 5 and 6); False for anything else."""
    cdef const char* s = PyBytes_AS_STRING(subject)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(subject), i, start = 0, tok = 0
    cdef Py_ssize_t s5 = 0, n5 = 0, s6 = 0, n6 = 0
    cdef uint64_t dseq
    for i in range(n + 1):
        if i == n or s[i] == c'.':
            if tok == 5:
                s5, n5 = start, i - start
            elif tok == 6:
                s6, n6 = start, i - start
            tok += 1
            start = i + 1
    if tok < 9:
        return False
    return _digits(s + s5, n5, sseq) and _digits(s + s6, n6, &dseq)


def plain_acks(Pending pending, list msgs, Py_ssize_t i, Py_ssize_t most,
               uint64_t next_sseq, uint64_t next_dseq, long long adflr, long long asflr,
               dict rdc, set rdq_set, Py_ssize_t kick_at):
    """Apply msgs[i:] while they are plain acks, at most `most` of them (AckState's EARLY_RUN
    step). next_sseq / next_dseq are the consumer's next stream and delivery sequences,
    adflr / asflr its ack floors, rdc / rdq_set its redelivery counts and queue, kick_at the
    pending count at which max_ack_pending lets delivery go on (-1: no limit).

    -> (index of the first message not applied, acks counted, adflr, asflr, kick): a message
    left at the index is not a plain ack; kick says pending fell to kick_at on the way."""
    cdef Py_ssize_t total = len(msgs), counted = 0
    cdef tuple item
    cdef object payload
    cdef uint64_t sseq, d, low
    cdef long long nd, ns
    cdef bint kick = False
    while i < total and counted < most:
        item = <tuple>msgs[i]
        payload = item[3]
        if item[1] is not None or not (payload == EMPTY or payload == PLUS_ACK):
            break
        i += 1
        if not _ack_seqs(<bytes>item[0], &sseq):
            continue
        counted += 1
        if sseq >= next_sseq:
            continue
        d = pending.take(sseq)
        if d:
            if pending.count == 0:
                adflr = <long long>next_dseq - 1
                asflr = <long long>next_sseq - 1
            else:
                low = pending._first()
                if low > sseq:
                    nd = <long long>pending._first_dseq() - 1
                    ns = <long long>low - 1
                    if (<long long>d == adflr + 1 or <long long>sseq == asflr + 1
                            or nd >= adflr):
                        adflr = max(adflr, min(nd, <long long>next_dseq - 1))
                        asflr = max(asflr, ns)
            if pending.count == kick_at:
                kick = True
        if rdc:
            rdc.pop(sseq, None)
        if rdq_set:
            rdq_set.discard(sseq)
    return i, counted, adflr, asflr, kick
