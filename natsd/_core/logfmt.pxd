# The on-disk format of natsd's log (natsd/_core/logfmt.pyx says what it is): the layout
# constants and the C helpers that read and write records, shared by log.pyx without a call
# through Python.
from libc.stdint cimport uint16_t, uint32_t, uint64_t

cdef extern from "nlog.h":       # declared once, here: the log modules cimport them
    const uint32_t HDR_BIT
    uint64_t nlog_xxh64(const void* data, size_t len, uint64_t seed) nogil
    uint64_t nlog_rd64(const char* p) nogil
    uint32_t nlog_rd32(const char* p) nogil
    uint16_t nlog_rd16(const char* p) nogil
    void nlog_wr64(char* p, uint64_t v) nogil
    void nlog_wr32(char* p, uint32_t v) nogil
    void nlog_wr16(char* p, uint16_t v) nogil
    int nlog_match(const char* p, Py_ssize_t pl, const char* s, Py_ssize_t sl) nogil


cdef enum:
    BLK_HDR = 16               # block header: NLOG, version, flags, key id, image length or hwm
    VERSION = 1
    F_LZ4 = 1                  # block flags
    F_ENC = 2
    F_S2 = 4
    F_ZIP = 5                  # either compression
    NONCE_LEN = 12
    FRAME_PRE = 16             # encrypted frame: u32 payload length, nonce(12), ...
    FRAME_OVH = 32             # ... AEAD(payload), tag(16)
    REC_HDR = 35               # u32 len, u64 seq, i64 ts, u8 type, u16 slen, u32 hlen, i64 ttl
    REC_MIN = 43               # REC_HDR + checksum
    SIZE_MASK = 0x7fffffff
    MAX_BLOCK = 0x7fff0000
    T_MSG = 0                  # record types (low bits of the type byte)
    T_TOMBS = 1
    T_FIRST = 2
    T_SKIP = 3
    T_TRUNC = 4
    F_HDR = 0x10               # type byte flags: hdr was given (None vs b"" round-trips)
    F_ERASED = 0x20            # the record was erased in place


cdef inline uint64_t acct_size(uint32_t size) nogil:
    # nats-server filestore accounting: 22+subj+msg+8, or 22+subj+4+hdr+msg+8 when hdr is
    # non-empty. Our record is 43+subj+hdr+msg, so accounting = reclen-13 (+4 with hdr).
    cdef uint64_t rl = size & SIZE_MASK
    if size & HDR_BIT:
        return rl - 9
    return rl - 13


cdef inline bint plain_ok(const char* p, Py_ssize_t avail) nogil:
    """A whole plain record at p whose checksum matches."""
    cdef uint32_t rl
    if avail < REC_MIN:
        return False
    rl = nlog_rd32(p)
    if rl < REC_MIN or rl > avail:
        return False
    if REC_MIN + <uint64_t>nlog_rd16(p + 21) + nlog_rd32(p + 23) > rl:
        return False
    return nlog_xxh64(p, rl - 8, 0) == nlog_rd64(p + rl - 8)


cdef object oserr(path, int err)
cdef int pwrite_all(int fd, const char* buf, Py_ssize_t n, long off) except -2
cdef bytes frame_aad(uint32_t n, uint64_t off, int num)
cdef bint rec_ok(bytes data, uint64_t seq)
