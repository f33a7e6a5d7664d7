# cython: language_level=3, boundscheck=False, wraparound=False
"""The codec slot of a connection: what sits between the bytes on the wire (after TLS) and the
protocol parser, both ways. WebSocket framing (ws.pyx) and S2 streams (s2.pyx) are codecs; a
plain connection has none and pays nothing."""
from libc.stdlib cimport free
from libc.string cimport memcpy
from natsd._core.fmt cimport grow, release_above


cdef class Bytes:
    def __dealloc__(self):
        free(self.data)

    cdef char* reserve(self, Py_ssize_t n) except NULL:
        """Room for n more bytes at the end; returns where they go (len is not moved)."""
        if self.len + n > self.cap:
            if not grow(&self.data, &self.cap, self.len + n, 4096):
                raise MemoryError()
        return self.data + self.len

    cdef int append(self, const char* p, Py_ssize_t n) except -1:
        memcpy(self.reserve(n), p, n)
        self.len += n
        return 0

    cdef void clear(self):
        self.len = 0
        release_above(&self.data, &self.cap, 1 << 20)

    def getvalue(self):
        return self.data[:self.len]


cdef class StreamCodec:
    def __cinit__(self):
        self.control = Bytes()

    cdef int decode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        return out.append(p, n)

    cdef int encode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        return out.append(p, n)

    cdef int decode_pending(self, Bytes out) except -2:
        """Bytes that came in with an HTTP head decode() returned 1 for (none here)."""
        return 0

    # Python access (tests, and code off the message path)

    def decode_bytes(self, bytes data):
        out = Bytes()
        if self.decode(data, len(data), out) < 0:
            raise ValueError(self.error)
        return out.getvalue()

    def encode_bytes(self, bytes data):
        out = Bytes()
        if self.encode(data, len(data), out) < 0:
            raise ValueError(self.error)
        return out.getvalue()

    def goodbye(self, reason):
        """The connection is closing: anything the format says at the end goes to control."""

    def take_control(self):
        v = self.control.getvalue()
        self.control.clear()
        return v
