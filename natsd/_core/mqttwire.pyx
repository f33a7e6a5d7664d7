# cython: language_level=3, boundscheck=False, wraparound=False
"""MQTT's most frequent packets in C: a run of QoS 0 or QoS 1 PUBLISH packets (no DUP, no
RETAIN) whose topics convert to subjects by '/' -> '.' alone, each published to the account's
subscribers with the Nmqtt-Pub header, as natsd/mqtt/connection.py would; a QoS 1 one is also
published to its store subject with a reply subject, after the caller has noted it.

A run ends at the first packet that needs more: another packet type or flags, a topic with a
character natsd/mqtt/topics.py converts specially (space, control, '.', '+', '#', an empty
level, a leading or trailing '/'), one that is not printable ASCII (UTF-8 is checked there), a
Sparkplug topic, a message over max_payload, a packet identifier of 0, or a packet not all
arrived. The connection handler takes that packet on its Python path, errors included. The
core knows nothing of sessions, JetStream or accounts: the caller passes the sublist and the
subjects, and says when a run is allowed (no subject mappings, no publish permissions)."""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcmp

from natsd._core.router import publish

cdef enum:
    PUBLISH_QOS0 = 0x30                 # PUBLISH, DUP 0, QoS 0, RETAIN 0
    PUBLISH_QOS1 = 0x32                 # PUBLISH, DUP 0, QoS 1, RETAIN 0
    NMQTT_HEADER = 25                   # len(b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n")


cdef struct Plain:
    Py_ssize_t topic                    # offset of the topic in the buffer
    Py_ssize_t tlen
    Py_ssize_t pi                       # the packet identifier (QoS 1), else 0
    Py_ssize_t payload                  # offset of the payload
    Py_ssize_t plen
    Py_ssize_t end                      # offset after the packet


cdef inline bint plain_topic(const unsigned char* t, Py_ssize_t n):
    """A topic whose subject is itself with '/' -> '.' (topics.py's _PLAIN finds nothing, all
    printable ASCII) and not Sparkplug's."""
    cdef Py_ssize_t i
    cdef unsigned char ch, prev = b'/'
    if t[n - 1] == b'/':
        return False
    if n >= 8 and memcmp(t, b"spBv1.0/", 8) == 0:
        return False
    if n >= 11 and memcmp(t, b"$sparkplug/", 11) == 0:
        return False
    for i in range(n):
        ch = t[i]
        if ch < 0x21 or ch > 0x7e or ch == b'.' or ch == b'+' or ch == b'#':
            return False
        if ch == b'/' and prev == b'/':     # an empty level, or a leading '/'
            return False
        prev = ch
    return True


cdef bint next_plain(const unsigned char* p, Py_ssize_t n, Py_ssize_t pos, unsigned char first,
                     Py_ssize_t max_payload, Plain* out):
    """Whether buf[pos:] starts with a whole plain PUBLISH whose first byte is `first`."""
    cdef Py_ssize_t i = pos + 1, rl = 0, start, end, tlen, body
    cdef int shift = 0
    cdef unsigned char b
    cdef bint whole = False
    if pos >= n or p[pos] != first:
        return False
    while i < n and shift < 28:
        b = p[i]
        i += 1
        rl |= (b & 0x7F) << shift
        shift += 7
        if not (b & 0x80):
            whole = True
            break
    if not whole:
        return False
    start = i
    end = start + rl
    if rl < 2 or end > n:
        return False
    tlen = (p[start] << 8) | p[start + 1]
    body = start + 2 + tlen             # after the topic: the packet identifier, or the payload
    out.pi = 0
    if first == PUBLISH_QOS1:
        if body + 2 > end:
            return False
        out.pi = (p[body] << 8) | p[body + 1]
        if out.pi == 0:
            return False
        body += 2
    if tlen == 0 or body > end:
        return False
    out.topic, out.tlen, out.payload, out.plen, out.end = start + 2, tlen, body, end - body, end
    if NMQTT_HEADER + out.plen > max_payload or not plain_topic(p + out.topic, tlen):
        return False
    return True


cdef bytes subject_of(const unsigned char* t, Py_ssize_t n):
    cdef bytes subject = PyBytes_FromStringAndSize(NULL, n)
    cdef char* s = PyBytes_AS_STRING(subject)
    cdef Py_ssize_t k
    for k in range(n):
        s[k] = b'.' if t[k] == b'/' else <char> t[k]
    return subject


def publish_run(bytearray buf, Py_ssize_t pos, sl, int qos, bytes header, Py_ssize_t max_payload,
                bytes store_prefix=None, bytes reply_prefix=None, long long token=0, noted=None):
    """Publish the plain PUBLISH packets of `qos` (0 or 1) from buf[pos:] to the subscribers.
    A QoS 1 one also goes to `store_prefix` + subject with the reply `reply_prefix` + a token
    counting up from `token`, once noted(packet identifier, reply) returned -> (the position
    after the last one, how many, their payload bytes, the next token)."""
    cdef Py_ssize_t count = 0, nbytes = 0
    cdef unsigned char first = PUBLISH_QOS1 if qos == 1 else PUBLISH_QOS0
    cdef const unsigned char* p
    cdef Plain pk
    cdef bytes subject, payload, reply
    while True:
        p = <const unsigned char*> PyByteArray_AS_STRING(buf)  # again: a subscriber ran meanwhile
        if not next_plain(p, PyByteArray_GET_SIZE(buf), pos, first, max_payload, &pk):
            break
        subject = subject_of(p + pk.topic, pk.tlen)
        payload = PyBytes_FromStringAndSize(<const char*> (p + pk.payload), pk.plen)
        pos = pk.end
        count += 1
        nbytes += pk.plen
        if first == PUBLISH_QOS0:
            publish(sl, subject, None, header, payload)
            continue
        token += 1
        reply = reply_prefix + (b"%d" % token)
        noted(pk.pi, reply)
        publish(sl, subject, None, header, payload)
        publish(sl, store_prefix + subject, reply, header, payload)
    return pos, count, nbytes, token
