/* S2 blocks and CRC-32C for natsd/_core/s2.pyx.
 *
 * The block format is Snappy's (a varint of the decoded length, then literal and copy
 * operations) with S2's one extension the decoder must know: a copy1 operation with offset 0
 * repeats the previous offset, with a longer length in the bytes that follow. The encoder
 * writes plain Snappy operations, which every S2 decoder reads. CRC-32C (Castagnoli) uses the
 * SSE 4.2 instruction when the CPU has it, else a table.
 */
#ifndef NATSD_S2BLOCK_H
#define NATSD_S2BLOCK_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* ---- CRC-32C ---- */

static uint32_t s2_crc_table[8][256];
static int s2_crc_ready = 0;
static int s2_crc_hw = 0;

static void s2_crc_init(void) {
    uint32_t i, j, c;
    for (i = 0; i < 256; i++) {
        c = i;
        for (j = 0; j < 8; j++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        s2_crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = s2_crc_table[0][i];
        for (j = 1; j < 8; j++) {
            c = s2_crc_table[0][c & 0xff] ^ (c >> 8);
            s2_crc_table[j][i] = c;
        }
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    s2_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
    s2_crc_ready = 1;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2")))
static uint32_t s2_crc_hw_run(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = __builtin_ia32_crc32qi(crc, *p++);
    return crc;
}
#endif

static uint32_t s2_crc32c(const uint8_t *p, size_t n) {
    uint32_t crc = 0xffffffffu;
    if (!s2_crc_ready)
        s2_crc_init();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (s2_crc_hw)
        return ~s2_crc_hw_run(crc, p, n);
#endif
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = s2_crc_table[7][lo & 0xff] ^ s2_crc_table[6][(lo >> 8) & 0xff] ^
              s2_crc_table[5][(lo >> 16) & 0xff] ^ s2_crc_table[4][lo >> 24] ^
              s2_crc_table[3][hi & 0xff] ^ s2_crc_table[2][(hi >> 8) & 0xff] ^
              s2_crc_table[1][(hi >> 16) & 0xff] ^ s2_crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = s2_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* The framing format's masked checksum. */
static uint32_t s2_masked_crc(const uint8_t *p, size_t n) {
    uint32_t c = s2_crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- blocks ---- */

static size_t s2_max_encoded_len(size_t n) { return 32 + n + n / 6; }

static size_t s2_put_uvarint(uint8_t *dst, uint64_t v) {
    size_t i = 0;
    while (v >= 0x80) {
        dst[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[i++] = (uint8_t)v;
    return i;
}

/* Returns the number of bytes of the varint, 0 if it is cut or too long. */
static size_t s2_get_uvarint(const uint8_t *src, size_t n, uint64_t *v) {
    uint64_t x = 0;
    unsigned shift = 0;
    size_t i;
    for (i = 0; i < n && i < 10; i++) {
        x |= (uint64_t)(src[i] & 0x7f) << shift;
        if (src[i] < 0x80) {
            *v = x;
            return i + 1;
        }
        shift += 7;
    }
    return 0;
}

static size_t s2_emit_literal(uint8_t *dst, const uint8_t *lit, size_t len) {
    size_t i = 0, n = len - 1;
    if (n < 60) {
        dst[i++] = (uint8_t)(n << 2);
    } else if (n < (1u << 8)) {
        dst[i++] = 60 << 2;
        dst[i++] = (uint8_t)n;
    } else if (n < (1u << 16)) {
        dst[i++] = 61 << 2;
        dst[i++] = (uint8_t)n;
        dst[i++] = (uint8_t)(n >> 8);
    } else if (n < (1u << 24)) {
        dst[i++] = 62 << 2;
        dst[i++] = (uint8_t)n;
        dst[i++] = (uint8_t)(n >> 8);
        dst[i++] = (uint8_t)(n >> 16);
    } else {
        dst[i++] = 63 << 2;
        dst[i++] = (uint8_t)n;
        dst[i++] = (uint8_t)(n >> 8);
        dst[i++] = (uint8_t)(n >> 16);
        dst[i++] = (uint8_t)(n >> 24);
    }
    memcpy(dst + i, lit, len);
    return i + len;
}

/* One copy operation of length 1..64 (copy1 when it fits, copy2, or copy4 for far offsets). */
static size_t s2_emit_copy_op(uint8_t *dst, size_t offset, size_t len) {
    if (len >= 4 && len <= 11 && offset < 2048) {
        dst[0] = (uint8_t)(1 | ((len - 4) << 2) | ((offset >> 8) << 5));
        dst[1] = (uint8_t)offset;
        return 2;
    }
    if (offset < 65536) {
        dst[0] = (uint8_t)(2 | ((len - 1) << 2));
        dst[1] = (uint8_t)offset;
        dst[2] = (uint8_t)(offset >> 8);
        return 3;
    }
    dst[0] = (uint8_t)(3 | ((len - 1) << 2));
    dst[1] = (uint8_t)offset;
    dst[2] = (uint8_t)(offset >> 8);
    dst[3] = (uint8_t)(offset >> 16);
    dst[4] = (uint8_t)(offset >> 24);
    return 5;
}

static size_t s2_emit_copy(uint8_t *dst, size_t offset, size_t len) {
    size_t i = 0;
    while (len >= 68) {
        i += s2_emit_copy_op(dst + i, offset, 64);
        len -= 64;
    }
    if (len > 64) {
        i += s2_emit_copy_op(dst + i, offset, 60);
        len -= 60;
    }
    return i + s2_emit_copy_op(dst + i, offset, len);
}

#define S2_TABLE_BITS 14
#define S2_MIN_NONLITERAL 17

static inline uint32_t s2_load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint32_t s2_hash(uint32_t u, unsigned shift) { return (u * 0x1e35a7bdu) >> shift; }

/* Compress src[0:n] into dst (at least s2_max_encoded_len(n) bytes) with `table` of
 * 1<<bits uint32 entries as scratch; `skip_shift` trades speed for ratio (5 fast, 7 more
 * thorough). Returns the encoded length. */
static size_t s2_encode_block(uint8_t *dst, const uint8_t *src, size_t n, uint32_t *table,
                              unsigned bits, unsigned skip_shift) {
    size_t d = s2_put_uvarint(dst, n);
    size_t ip, next_emit = 0, limit;
    unsigned shift = 32 - bits;
    if (n < S2_MIN_NONLITERAL) {
        if (n)
            d += s2_emit_literal(dst + d, src, n);
        return d;
    }
    memset(table, 0, sizeof(uint32_t) << bits);
    limit = n - 15;             /* room to load 4 bytes and extend */
    ip = 1;
    for (;;) {
        size_t skip = 32, nxt = ip, cand = 0;
        uint32_t h = s2_hash(s2_load32(src + ip), shift);
        /* find a 4-byte match */
        for (;;) {
            size_t step;
            ip = nxt;
            h = s2_hash(s2_load32(src + ip), shift);
            step = skip >> skip_shift;
            skip++;
            nxt = ip + step;
            if (nxt > limit)
                goto tail;
            cand = table[h];
            table[h] = (uint32_t)ip;
            if (cand < ip && s2_load32(src + cand) == s2_load32(src + ip))
                break;
        }
        d += ip > next_emit ? s2_emit_literal(dst + d, src + next_emit, ip - next_emit) : 0;
        for (;;) {
            size_t base = ip, m = 4;
            while (ip + m < n && src[cand + m] == src[ip + m])
                m++;
            ip += m;
            d += s2_emit_copy(dst + d, base - cand, m);
            next_emit = ip;
            if (ip >= limit)
                goto tail;
            table[s2_hash(s2_load32(src + ip - 1), shift)] = (uint32_t)(ip - 1);
            h = s2_hash(s2_load32(src + ip), shift);
            cand = table[h];
            table[h] = (uint32_t)ip;
            if (!(cand < ip && s2_load32(src + cand) == s2_load32(src + ip)))
                break;
        }
        ip++;
    }
tail:
    if (next_emit < n)
        d += s2_emit_literal(dst + d, src + next_emit, n - next_emit);
    return d;
}

/* Decode the block body src[0:n] (after its varint) into dst[0:dn] exactly.
 * Returns 0, or -1 for corrupt input. */
static int s2_decode_block(uint8_t *dst, size_t dn, const uint8_t *src, size_t n) {
    size_t s = 0, d = 0, length, offset = 0;
    while (s < n) {
        uint8_t tag = src[s];
        switch (tag & 3) {
        case 0: {                                       /* literal */
            size_t x = tag >> 2;
            if (x < 60) {
                s += 1;
            } else {
                size_t k = x - 59;                      /* 1..4 length bytes */
                if (s + 1 + k > n)
                    return -1;
                x = 0;
                for (size_t j = 0; j < k; j++)
                    x |= (size_t)src[s + 1 + j] << (8 * j);
                s += 1 + k;
            }
            length = x + 1;
            if (length > dn - d || length > n - s)
                return -1;
            memcpy(dst + d, src + s, length);
            d += length;
            s += length;
            continue;
        }
        case 1: {                                       /* copy1, or S2's repeat */
            size_t toff;
            if (s + 2 > n)
                return -1;
            toff = ((size_t)(tag & 0xe0) << 3) | src[s + 1];
            length = (tag >> 2) & 7;
            s += 2;
            if (toff == 0) {
                if (offset == 0)
                    return -1;                          /* a repeat with no offset yet */
                switch (length) {
                case 5:
                    if (s + 1 > n) return -1;
                    length = (size_t)src[s] + 4;
                    s += 1;
                    break;
                case 6:
                    if (s + 2 > n) return -1;
                    length = ((size_t)src[s] | (size_t)src[s + 1] << 8) + (1 << 8);
                    s += 2;
                    break;
                case 7:
                    if (s + 3 > n) return -1;
                    length = ((size_t)src[s] | (size_t)src[s + 1] << 8 | (size_t)src[s + 2] << 16)
                             + (1 << 16);
                    s += 3;
                    break;
                default:
                    break;
                }
            } else {
                offset = toff;
            }
            length += 4;
            break;
        }
        case 2:                                         /* copy2 */
            if (s + 3 > n)
                return -1;
            offset = (size_t)src[s + 1] | (size_t)src[s + 2] << 8;
            length = 1 + (tag >> 2);
            s += 3;
            break;
        default:                                        /* copy4 */
            if (s + 5 > n)
                return -1;
            offset = (size_t)src[s + 1] | (size_t)src[s + 2] << 8 | (size_t)src[s + 3] << 16 |
                     (size_t)src[s + 4] << 24;
            length = 1 + (tag >> 2);
            s += 5;
            break;
        }
        if (offset == 0 || offset > d || length > dn - d)
            return -1;
        if (offset >= length) {
            memcpy(dst + d, dst + d - offset, length);
        } else {
            for (size_t j = 0; j < length; j++)
                dst[d + j] = dst[d - offset + j];
        }
        d += length;
    }
    return d == dn ? 0 : -1;
}

#endif
