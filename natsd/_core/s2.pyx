# cython: language_level=3, boundscheck=False, wraparound=False
"""S2 streams (github.com/klauspost/compress/s2's framing format), the compression nats-server
uses on routes and leaf node links, as a codec of the connection (codec.pyx).

A stream starts with a stream identifier chunk ("S2sTwO"); then each chunk is a compressed
block (type 0x00) or a stored one (0x01), with the masked CRC-32C of its decoded bytes;
0x80-0xfe are skipped, 0x02-0x7f refused. What one flush of the connection has queued goes out
as one or more chunks, so the peer can act on it at once. Blocks are in s2block.h.

Levels as nats-server names them: `uncompressed` (stored chunks only), `fast`, `better`,
`best` (the same encoder, searching harder).

`snappy_stream` writes the same framing as s2's snappy-compatible writer (the "sNaPpY"
identifier, chunks of at most 64 KiB): the body of a `$SYS` reply asked for with
`Accept-Encoding: snappy`.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memcmp
from natsd._core.codec cimport Bytes, StreamCodec

cdef extern from "s2block.h":
    size_t s2_max_encoded_len(size_t n)
    size_t s2_encode_block(uint8_t* dst, const uint8_t* src, size_t n, uint32_t* table,
                           unsigned bits, unsigned skip_shift) nogil
    int s2_decode_block(uint8_t* dst, size_t dn, const uint8_t* src, size_t n) nogil
    size_t s2_get_uvarint(const uint8_t* src, size_t n, uint64_t* v)
    uint32_t s2_masked_crc(const uint8_t* p, size_t n) nogil

DEF MAX_BLOCK = 1 << 20             # what we put in one chunk
DEF SNAPPY_BLOCK = 1 << 16          # ... in a Snappy framed stream
DEF MAX_DECODED = 4 << 20           # what a peer may put in one (s2's maximum block size)
DEF MAX_CHUNK = MAX_DECODED + 1024

cdef bytes STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
cdef bytes SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"
LEVELS = ("uncompressed", "fast", "better", "best")


cdef inline void put_header(uint8_t* p, uint8_t kind, Py_ssize_t length, uint32_t crc):
    p[0] = kind
    p[1] = length & 0xff
    p[2] = (length >> 8) & 0xff
    p[3] = (length >> 16) & 0xff
    p[4] = crc & 0xff
    p[5] = (crc >> 8) & 0xff
    p[6] = (crc >> 16) & 0xff
    p[7] = (crc >> 24) & 0xff


cdef class S2Codec(StreamCodec):
    cdef bint compress
    cdef unsigned bits
    cdef unsigned skip_shift
    cdef uint32_t* table
    cdef bint sent_id
    cdef bytes stream_id                # the first chunk we send
    cdef Py_ssize_t block               # the most we put in one chunk
    cdef bint got_id
    cdef Bytes pending                  # an incomplete chunk from the peer
    cdef readonly str level

    def __cinit__(self, str level="fast"):
        if level not in LEVELS:
            raise ValueError("unknown S2 level %r" % level)
        self.level = level
        self.compress = level != "uncompressed"
        self.bits = 14 if level == "fast" else 16
        self.skip_shift = 5 if level == "fast" else 6 if level == "better" else 8
        self.table = <uint32_t*>malloc(sizeof(uint32_t) << self.bits)
        if self.table == NULL:
            raise MemoryError()
        self.pending = Bytes()
        self.stream_id = STREAM_ID
        self.block = MAX_BLOCK

    def __dealloc__(self):
        free(self.table)

    # ---- ours -> the peer ----

    cdef int encode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        cdef Py_ssize_t k, enc
        cdef uint8_t* q
        cdef uint32_t crc
        if not self.sent_id:
            out.append(self.stream_id, 10)
            self.sent_id = True
        while n > 0:
            k = n if n < self.block else self.block
            crc = s2_masked_crc(<const uint8_t*>p, k)
            q = <uint8_t*>out.reserve(8 + s2_max_encoded_len(k))
            enc = 0
            if self.compress:
                with nogil:
                    enc = s2_encode_block(q + 8, <const uint8_t*>p, k, self.table, self.bits,
                                          self.skip_shift)
            if self.compress and enc < k - k // 16:
                put_header(q, 0x00, enc + 4, crc)
                out.len += 8 + enc
            else:
                put_header(q, 0x01, k + 4, crc)
                memcpy(q + 8, p, k)
                out.len += 8 + k
            p += k
            n -= k
        return 0

    # ---- the peer -> ours ----

    cdef int decode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        cdef Bytes buf = self.pending
        cdef const uint8_t* s
        cdef Py_ssize_t avail, used = 0, length
        if buf.len:
            buf.append(p, n)
            s = <const uint8_t*>buf.data
            avail = buf.len
        else:
            s = <const uint8_t*>p
            avail = n
        while avail - used >= 4:
            length = s[used + 1] | (s[used + 2] << 8) | (s[used + 3] << 16)
            if length > MAX_CHUNK:
                return self._fail("s2: corrupt input")
            if avail - used < 4 + length:
                break
            if self._chunk(s[used], s + used + 4, length, out) < 0:
                return -1
            used += 4 + length
        if buf.len:
            if used == buf.len:
                buf.clear()
            elif used:
                rest = buf.data[used:buf.len]
                buf.clear()
                buf.append(rest, len(rest))
        elif used < n:
            buf.append(p + used, n - used)
        return 0

    cdef int _chunk(self, uint8_t kind, const uint8_t* body, Py_ssize_t length, Bytes out) except -2:
        cdef uint64_t dn
        cdef size_t v
        cdef uint8_t* dst
        cdef uint32_t want
        if kind == 0xff:
            if length != 6 or (memcmp(body, b"S2sTwO", 6) != 0 and memcmp(body, b"sNaPpY", 6) != 0):
                return self._fail("s2: corrupt input")
            self.got_id = True
            return 0
        if kind >= 0x80:
            return 0                                    # skippable, padding
        if kind > 0x01:
            return self._fail("s2: unsupported input")
        if not self.got_id or length < 4:
            return self._fail("s2: corrupt input")
        want = body[0] | (body[1] << 8) | (body[2] << 16) | (<uint32_t>body[3] << 24)
        body += 4
        length -= 4
        if kind == 0x01:
            if length > MAX_DECODED:
                return self._fail("s2: corrupt input")
            if s2_masked_crc(body, length) != want:
                return self._fail("s2: corrupt input, crc mismatch")
            out.append(<const char*>body, length)
            return 0
        v = s2_get_uvarint(body, length, &dn)
        if v == 0 or dn > MAX_DECODED:
            return self._fail("s2: corrupt input")
        dst = <uint8_t*>out.reserve(dn)
        if s2_decode_block(dst, dn, body + v, length - v) < 0:
            return self._fail("s2: corrupt input")
        if s2_masked_crc(dst, dn) != want:
            return self._fail("s2: corrupt input, crc mismatch")
        out.len += dn
        return 0

    cdef int _fail(self, str why) except -2:
        self.error = why
        return -1


def compress_block(bytes data, str level="fast"):
    """One S2 block (tests and tools): varint length + operations."""
    cdef S2Codec c = S2Codec(level)
    cdef Py_ssize_t n = len(data)
    cdef bytes out = bytes(s2_max_encoded_len(n))
    cdef size_t k = s2_encode_block(<uint8_t*><char*>out, <const uint8_t*><char*>data, n,
                                    c.table, c.bits, c.skip_shift)
    return out[:k]


def decompress_block(bytes data, Py_ssize_t limit=MAX_DECODED):
    """The bytes of one S2 (or Snappy) block; `limit` bounds what it may claim to hold."""
    cdef uint64_t dn
    cdef size_t v = s2_get_uvarint(<const uint8_t*><char*>data, len(data), &dn)
    if v == 0 or dn > <uint64_t>limit:
        raise ValueError("s2: corrupt input")
    cdef bytes out = bytes(dn)
    if s2_decode_block(<uint8_t*><char*>out, dn, <const uint8_t*><char*>data + v, len(data) - v) < 0:
        raise ValueError("s2: corrupt input")
    return out


def snappy_stream(bytes data):
    """`data` as one Snappy framed stream, its blocks compressed with the fast level."""
    cdef S2Codec c = S2Codec("fast")
    cdef Bytes out = Bytes()
    c.stream_id = SNAPPY_ID
    c.block = SNAPPY_BLOCK
    c.encode(<const char*>data, len(data), out)
    return out.data[:out.len]


def encode_stream(bytes data, str level="fast"):
    """`data` as one whole S2 stream (nats-server's compressed blocks and backup archives)."""
    cdef S2Codec c = S2Codec(level)
    cdef Bytes out = Bytes()
    c.encode(<const char*>data, len(data), out)
    return out.data[:out.len]


def decode_stream(bytes data):
    """The bytes of one whole S2 (or Snappy framed) stream; ValueError if it is corrupt or cut
    short."""
    cdef S2Codec c = S2Codec("fast")
    cdef Bytes out = Bytes()
    if c.decode(<const char*>data, len(data), out) < 0:
        raise ValueError(c.error)
    if c.pending is not None and c.pending.len:
        raise ValueError("s2: stream cut short")
    return out.data[:out.len]
