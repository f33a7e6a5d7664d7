# Byte-writing helpers shared by the modules that frame protocol lines into buffers.
from libc.string cimport memcpy


cdef inline char* put(char* p, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(p, s, n)
    return p + n


cdef inline char* put_int(char* p, unsigned long long v) noexcept nogil:
    """A non-negative integer in decimal."""
    cdef char tmp[24]
    cdef int i = 0
    if v == 0:
        p[0] = c'0'
        return p + 1
    while v > 0:
        tmp[i] = <char>(c'0' + v % 10)
        v //= 10
        i += 1
    while i > 0:
        i -= 1
        p[0] = tmp[i]
        p += 1
    return p
