# Stream codecs between the socket (or TLS) and the parser: WebSocket frames, S2 streams.

cdef class Bytes:
    """A growable byte buffer (codec output)."""
    cdef char* data
    cdef Py_ssize_t len
    cdef Py_ssize_t cap
    cdef char* reserve(self, Py_ssize_t n) except NULL
    cdef int append(self, const char* p, Py_ssize_t n) except -1
    cdef void clear(self)


cdef class StreamCodec:
    """Turns wire bytes into protocol bytes (decode) and protocol bytes into wire bytes
    (encode). Bytes the codec must send on its own (a WebSocket pong or close) go to
    `control`; they are sent ahead of the next encoded data. decode/encode return -1 with
    `error` set when the peer broke the format; `closed` once the peer ended the stream."""
    cdef readonly Bytes control
    cdef public object error
    cdef public bint closed
    cdef int decode(self, const char* p, Py_ssize_t n, Bytes out) except -2
    cdef int encode(self, const char* p, Py_ssize_t n, Bytes out) except -2
    cdef int decode_pending(self, Bytes out) except -2
