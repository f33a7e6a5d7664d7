# Byte-writing helpers shared by the modules that frame protocol lines into buffers, and the
# growth of the malloc'd buffers they write into.
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy


cdef inline bint resize(char** buf, Py_ssize_t* cap, Py_ssize_t size) noexcept nogil:
    """*buf reallocated to `size` bytes, *cap set to size -> False (both left as they were)
    when there is no memory."""
    cdef char* p = <char*>realloc(buf[0], size)
    if p == NULL:
        return False
    buf[0] = p
    cap[0] = size
    return True


cdef inline bint grow(char** buf, Py_ssize_t* cap, Py_ssize_t need, Py_ssize_t first) noexcept nogil:
    """resize() *buf to hold `need` bytes: its capacity (`first` when it has none) doubled until
    it does."""
    cdef Py_ssize_t size = cap[0] if cap[0] else first
    while size < need:
        size *= 2
    return resize(buf, cap, size)


cdef inline void release_above(char** buf, Py_ssize_t* cap, Py_ssize_t keep) noexcept nogil:
    """Free an emptied buffer of more than `keep` bytes (grow() allocates it again)."""
    if cap[0] > keep:
        free(buf[0])
        buf[0] = NULL
        cap[0] = 0


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
