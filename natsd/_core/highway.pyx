# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""HighwayHash-64 (Google's keyed hash, as github.com/minio/highwayhash computes it): the
checksum nats-server puts on every message record, `index.db` and `meta.inf` of its file store.

`highway64(key, *parts)` hashes the concatenation of `parts` with a 32-byte key and returns the
8-byte digest as nats-server writes it (the 64-bit result, little-endian).
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

cdef struct State:
    uint64_t v0[4]
    uint64_t v1[4]
    uint64_t mul0[4]
    uint64_t mul1[4]


cdef inline uint64_t read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)            # x86-64 and arm64 Linux: little-endian
    return v


cdef void reset(State* s, const uint8_t* key) noexcept nogil:
    cdef uint64_t k
    cdef int i
    s.mul0[0] = 0xdbe6d5d5fe4cce2fULL
    s.mul0[1] = 0xa4093822299f31d0ULL
    s.mul0[2] = 0x13198a2e03707344ULL
    s.mul0[3] = 0x243f6a8885a308d3ULL
    s.mul1[0] = 0x3bd39e10cb0ef593ULL
    s.mul1[1] = 0xc0acf169b5f18a8cULL
    s.mul1[2] = 0xbe5466cf34e90c6cULL
    s.mul1[3] = 0x452821e638d01377ULL
    for i in range(4):
        k = read64(key + 8 * i)
        s.v0[i] = s.mul0[i] ^ k
        s.v1[i] = s.mul1[i] ^ ((k >> 32) | (k << 32))


cdef inline void zipper_merge_add(uint64_t v1, uint64_t v0, uint64_t* add1, uint64_t* add0) noexcept nogil:
    add0[0] += (((v0 & 0xff000000ULL) | (v1 & 0xff00000000ULL)) >> 24) | \
               (((v0 & 0xff0000000000ULL) | (v1 & 0xff000000000000ULL)) >> 16) | \
               (v0 & 0xff0000ULL) | ((v0 & 0xff00ULL) << 32) | \
               ((v1 & 0xff00000000000000ULL) >> 8) | (v0 << 56)
    add1[0] += (((v1 & 0xff000000ULL) | (v0 & 0xff00000000ULL)) >> 24) | \
               (v1 & 0xff0000ULL) | ((v1 & 0xff0000000000ULL) >> 16) | \
               ((v1 & 0xff00ULL) << 24) | ((v0 & 0xff000000000000ULL) >> 8) | \
               ((v1 & 0xffULL) << 48) | (v0 & 0xff00000000000000ULL)


cdef void update(State* s, const uint64_t* lanes) noexcept nogil:
    cdef int i
    for i in range(4):
        s.v1[i] += s.mul0[i] + lanes[i]
        s.mul0[i] ^= (s.v1[i] & 0xffffffffULL) * (s.v0[i] >> 32)
        s.v0[i] += s.mul1[i]
        s.mul1[i] ^= (s.v0[i] & 0xffffffffULL) * (s.v1[i] >> 32)
    zipper_merge_add(s.v1[1], s.v1[0], &s.v0[1], &s.v0[0])
    zipper_merge_add(s.v1[3], s.v1[2], &s.v0[3], &s.v0[2])
    zipper_merge_add(s.v0[1], s.v0[0], &s.v1[1], &s.v1[0])
    zipper_merge_add(s.v0[3], s.v0[2], &s.v1[3], &s.v1[2])


cdef inline void update_packet(State* s, const uint8_t* p) noexcept nogil:
    cdef uint64_t lanes[4]
    lanes[0] = read64(p)
    lanes[1] = read64(p + 8)
    lanes[2] = read64(p + 16)
    lanes[3] = read64(p + 24)
    update(s, lanes)


cdef void update_remainder(State* s, const uint8_t* data, size_t size_mod32) noexcept nogil:
    cdef size_t size_mod4 = size_mod32 & 3
    cdef const uint8_t* remainder = data + (size_mod32 & ~(<size_t>3))
    cdef uint8_t packet[32]
    cdef int i
    cdef uint32_t half0, half1
    memset(packet, 0, 32)
    for i in range(4):
        s.v0[i] += (<uint64_t>size_mod32 << 32) + size_mod32
    for i in range(4):              # rotate each 32-bit half of v1 left by size_mod32
        half0 = <uint32_t>(s.v1[i] & 0xffffffffULL)
        half1 = <uint32_t>(s.v1[i] >> 32)
        half0 = (half0 << size_mod32) | (half0 >> (32 - size_mod32))
        half1 = (half1 << size_mod32) | (half1 >> (32 - size_mod32))
        s.v1[i] = (<uint64_t>half1 << 32) | half0
    memcpy(packet, data, remainder - data)
    if size_mod32 & 16:
        for i in range(4):
            packet[28 + i] = remainder[i + size_mod4 - 4]
    elif size_mod4:
        packet[16] = remainder[0]
        packet[17] = remainder[size_mod4 >> 1]
        packet[18] = remainder[size_mod4 - 1]
    update_packet(s, packet)


cdef inline uint64_t swap_halves(uint64_t v) noexcept nogil:
    return (v >> 32) | (v << 32)


cdef uint64_t finalize(State* s) noexcept nogil:
    cdef uint64_t permuted[4]
    cdef int i
    for i in range(4):
        permuted[0] = swap_halves(s.v0[2])
        permuted[1] = swap_halves(s.v0[3])
        permuted[2] = swap_halves(s.v0[0])
        permuted[3] = swap_halves(s.v0[1])
        update(s, permuted)
    return s.v0[0] + s.v1[0] + s.mul0[0] + s.mul1[0]


cdef uint64_t highway64_parts(const uint8_t* key, const uint8_t** parts, const size_t* sizes,
                              int count) noexcept nogil:
    """The hash of `count` byte ranges, as one (for callers in Cython)."""
    cdef State s
    cdef uint8_t carry[32]
    cdef size_t have = 0, n, take
    cdef const uint8_t* p
    cdef int k
    reset(&s, key)
    for k in range(count):
        p, n = parts[k], sizes[k]
        if have:
            take = 32 - have if 32 - have < n else n
            memcpy(carry + have, p, take)
            have += take
            p += take
            n -= take
            if have < 32:
                continue
            update_packet(&s, carry)
            have = 0
        while n >= 32:
            update_packet(&s, p)
            p += 32
            n -= 32
        memcpy(carry, p, n)
        have = n
    if have:
        update_remainder(&s, carry, have)
    return finalize(&s)


def highway64(const uint8_t[::1] key, *parts):
    """The 8-byte HighwayHash-64 of the concatenated `parts` (bytes-like) under a 32-byte key."""
    if key.shape[0] != 32:
        raise ValueError("highwayhash: the key must be 32 bytes")
    cdef int count = len(parts)
    cdef const uint8_t* ptrs[16]
    cdef size_t sizes[16]
    cdef const uint8_t[::1] view
    cdef list views = []
    cdef int k
    if count > 16:
        parts = (b"".join(parts),)
        count = 1
    for k in range(count):
        view = parts[k]
        views.append(view)
        sizes[k] = view.shape[0]
        ptrs[k] = &view[0] if sizes[k] else NULL
    cdef uint64_t h = highway64_parts(&key[0], ptrs, sizes, count)
    cdef bytes out = bytes(8)
    memcpy(<char*>out, &h, 8)
    return out
