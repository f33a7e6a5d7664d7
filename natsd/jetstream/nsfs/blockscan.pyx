# cython: language_level=3, boundscheck=False, wraparound=False
"""The records of one nats-server message block, parsed and checked in C: the hot loop of
reading a nats-server store (a start-up conversion reads every message once). The record
layout is described in codec.py; `records` here is the function codec.py exports."""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memcmp
from natsd._core.highway cimport highway64_parts

DEF HEAD = 22
DEF CHECKSUM = 8
DEF HEADERS_BIT = 0x80000000
DEF MAX_RECORD = 32 * 1024 * 1024


cdef inline uint32_t u32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t u64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


def records(buf, bytes key, bint skip_bad_checksums=False):
    """Yield (sequence with its flag bits, ts, subject, headers or None, data) per record of a
    block's plain bytes; a record that fails its checks yields ("bad", offset, why) and ends the
    block, or (with `skip_bad_checksums`, for a checksum alone) is skipped."""
    cdef const uint8_t[::1] view = buf
    cdef const uint8_t* b = &view[0] if view.shape[0] else NULL
    cdef const uint8_t* k = <const uint8_t*><char*>key
    cdef Py_ssize_t i = 0, n = view.shape[0], p, end
    cdef uint32_t rl, hlen
    cdef uint16_t slen
    cdef Py_ssize_t body, need
    cdef bint has_headers
    cdef const uint8_t* parts[3]
    cdef size_t sizes[3]
    cdef uint64_t h
    while i < n:
        if i + HEAD > n:
            yield "bad", i, "message overrun"
            return
        rl = u32(b + i)
        has_headers = (rl & HEADERS_BIT) != 0
        rl &= ~HEADERS_BIT
        memcpy(&slen, b + i + 20, 2)
        body = <Py_ssize_t>rl - HEAD - CHECKSUM
        need = slen + (4 if has_headers else 0)
        if body < 0 or need > body or i + rl > n or rl > MAX_RECORD:
            yield "bad", i, "sanity check failed"
            return
        p = i + HEAD + slen
        hlen = 0
        if has_headers:
            hlen = u32(b + p)
            if hlen > body - need:
                yield "bad", i, "sanity check failed"
                return
            p += 4
        end = i + rl - CHECKSUM
        parts[0], sizes[0] = b + i + 4, 16
        parts[1], sizes[1] = b + i + HEAD, slen
        parts[2], sizes[2] = b + p, end - p
        h = highway64_parts(k, parts, sizes, 3)
        if memcmp(&h, b + end, 8) != 0:
            yield "bad", i, "invalid checksum"
            if not skip_bad_checksums:
                return
        else:
            yield (u64(b + i + 4), <long long>u64(b + i + 12), bytes(view[i + HEAD:i + HEAD + slen]),
                   bytes(view[p:p + hlen]) if has_headers else None, bytes(view[p + hlen:end]))
        i += rl
