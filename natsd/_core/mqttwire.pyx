# cython: language_level=3, boundscheck=False, wraparound=False
"""MQTT's most frequent packet in C: a run of QoS 0 PUBLISH packets (no DUP, no RETAIN) whose
topics convert to subjects by '/' -> '.' alone, each published to the account's subscribers
with the Nmqtt-Pub header, as natsd/mqtt/connection.py would.

The run ends at the first packet that needs more: another packet type or flags, a topic with
a character natsd/mqtt/topics.py converts specially (space, control, '.', '+', '#', an empty
level, a leading or trailing '/'), one that is not printable ASCII (UTF-8 is checked there), a
Sparkplug topic, a message over max_payload, or a packet not all arrived. The connection
handler takes that packet on its Python path, errors included. The core knows nothing of
sessions, JetStream or accounts: the caller passes the sublist and says when a run is allowed
(no subject mappings, no publish permissions)."""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcmp

from natsd._core.router import publish

cdef enum:
    PUBLISH_QOS0 = 0x30                 # PUBLISH, DUP 0, QoS 0, RETAIN 0
    NMQTT_HEADER = 25                   # len(b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n")


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


def publish_qos0_run(bytearray buf, Py_ssize_t pos, sl, bytes header, Py_ssize_t max_payload):
    """Publish the plain QoS 0 PUBLISH packets from buf[pos:] -> (the position after the last
    one published, how many, their payload bytes)."""
    cdef Py_ssize_t n, i, rl, start, end, tlen, plen, k
    cdef Py_ssize_t count = 0, nbytes = 0
    cdef int shift
    cdef unsigned char b
    cdef bint whole
    cdef const unsigned char* p
    cdef const unsigned char* t
    cdef bytes subject, payload
    cdef char* s
    while True:
        n = PyByteArray_GET_SIZE(buf)   # read again: a subscriber's callback ran meanwhile
        p = <const unsigned char*> PyByteArray_AS_STRING(buf)
        if pos >= n or p[pos] != PUBLISH_QOS0:
            break
        i, rl, shift, whole = pos + 1, 0, 0, False
        while i < n and shift < 28:
            b = p[i]
            i += 1
            rl |= (b & 0x7F) << shift
            shift += 7
            if not (b & 0x80):
                whole = True
                break
        if not whole:
            break
        start = i
        end = start + rl
        if rl < 2 or end > n:
            break
        tlen = (p[start] << 8) | p[start + 1]
        if tlen == 0 or start + 2 + tlen > end:
            break
        t = p + start + 2
        plen = end - (start + 2 + tlen)
        if NMQTT_HEADER + plen > max_payload or not plain_topic(t, tlen):
            break
        subject = PyBytes_FromStringAndSize(NULL, tlen)
        s = PyBytes_AS_STRING(subject)
        for k in range(tlen):
            s[k] = b'.' if t[k] == b'/' else <char> t[k]
        payload = PyBytes_FromStringAndSize(<const char*> (t + tlen), plen)
        pos = end
        count += 1
        nbytes += plen
        publish(sl, subject, None, header, payload)
    return pos, count, nbytes
