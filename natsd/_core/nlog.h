/* Inline C helpers of natsd/_core/log.pyx: the XXH64 record checksum, NATS subject matching
   over raw bytes, and unaligned little-endian reads/writes of the record fields. */
#ifndef NATSD_NLOG_H
#define NATSD_NLOG_H
#include <stdint.h>
#include <string.h>
#include <Python.h>

/* XXH64 (public domain algorithm by Yann Collet), little-endian only; tests check it
   against the xxhash package. Inline so checksums need neither the GIL nor a library. */
#define XP1 0x9E3779B185EBCA87ULL
#define XP2 14029467366897019727ULL
#define XP3 1609587929392839161ULL
#define XP4 9650029242287828579ULL
#define XP5 2870177450012600261ULL
static inline uint64_t xrotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t xrd64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t xrd32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t xround(uint64_t a, uint64_t in) { a += in * XP2; a = xrotl(a, 31); return a * XP1; }
static inline uint64_t xmerge(uint64_t a, uint64_t v) { a ^= xround(0, v); return a * XP1 + XP4; }
static uint64_t nlog_xxh64(const void* data, size_t len, uint64_t seed) {
    const uint8_t* p = (const uint8_t*)data; const uint8_t* end = p + len; uint64_t h;
    if (len >= 32) {
        const uint8_t* limit = end - 32;
        uint64_t v1 = seed + XP1 + XP2, v2 = seed + XP2, v3 = seed, v4 = seed - XP1;
        do {
            v1 = xround(v1, xrd64(p)); p += 8; v2 = xround(v2, xrd64(p)); p += 8;
            v3 = xround(v3, xrd64(p)); p += 8; v4 = xround(v4, xrd64(p)); p += 8;
        } while (p <= limit);
        h = xrotl(v1, 1) + xrotl(v2, 7) + xrotl(v3, 12) + xrotl(v4, 18);
        h = xmerge(h, v1); h = xmerge(h, v2); h = xmerge(h, v3); h = xmerge(h, v4);
    } else h = seed + XP5;
    h += (uint64_t)len;
    while (p + 8 <= end) { h ^= xround(0, xrd64(p)); h = xrotl(h, 27) * XP1 + XP4; p += 8; }
    if (p + 4 <= end) { h ^= (uint64_t)xrd32(p) * XP1; h = xrotl(h, 23) * XP2 + XP3; p += 4; }
    while (p < end) { h ^= (*p) * XP5; h = xrotl(h, 11) * XP1; p++; }
    h ^= h >> 33; h *= XP2; h ^= h >> 29; h *= XP3; h ^= h >> 32;
    return h;
}
/* NATS subject match: '*' one token, '>' one or more trailing tokens. */
static int nlog_match(const char* p, Py_ssize_t pl, const char* s, Py_ssize_t sl) {
    Py_ssize_t i = 0, j = 0, pe, se;
    if (sl == 0) return 0;
    for (;;) {
        pe = i; while (pe < pl && p[pe] != '.') pe++;
        se = j; while (se < sl && s[se] != '.') se++;
        if (pe - i == 1 && p[i] == '>') return 1;
        if (!(pe - i == 1 && p[i] == '*'))
            if (pe - i != se - j || memcmp(p + i, s + j, pe - i) != 0) return 0;
        if (pe >= pl || se >= sl) return pe >= pl && se >= sl;
        i = pe + 1; j = se + 1;
    }
}
static inline uint64_t nlog_rd64(const char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t nlog_rd32(const char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t nlog_rd16(const char* p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline void nlog_wr64(char* p, uint64_t v) { memcpy(p, &v, 8); }
static inline void nlog_wr32(char* p, uint32_t v) { memcpy(p, &v, 4); }
static inline void nlog_wr16(char* p, uint16_t v) { memcpy(p, &v, 2); }
#define HDR_BIT 0x80000000u

#endif
