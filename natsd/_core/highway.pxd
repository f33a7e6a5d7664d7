from libc.stdint cimport uint8_t, uint64_t

cdef uint64_t highway64_parts(const uint8_t* key, const uint8_t** parts, const size_t* sizes,
                              int count) noexcept nogil
