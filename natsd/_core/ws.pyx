# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: libraries = z
"""WebSocket as a connection codec (RFC 6455, with RFC 7692 permessage-deflate without
context takeover), in C: frames in, protocol bytes out; protocol bytes in, frames out.

Before the frames, the HTTP upgrade: as a server the codec gathers the client's request head
and returns 1 from decode() so the connection's handler (Python, once per connection) can
answer it (natsd/net/websocket.py); as a client (a leaf remote over ws://) it gathers the server's
response head the same way. Pings are answered with pongs and a close with a close, through
`control`; everything the peer breaks is a protocol error (decode returns -1, `error` says
what, in nats-server's words).
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memcmp
from libc.stdlib cimport malloc, free, rand
from natsd._core.codec cimport Bytes, StreamCodec

cdef extern from "zlib.h" nogil:
    ctypedef struct z_stream:
        const unsigned char* next_in
        unsigned int avail_in
        unsigned char* next_out
        unsigned int avail_out
        void* zalloc
        void* zfree
        void* opaque
        char* msg
    int inflateInit2(z_stream* strm, int windowBits)
    int inflate(z_stream* strm, int flush)
    int inflateReset(z_stream* strm)
    int inflateEnd(z_stream* strm)
    int deflateInit2(z_stream* strm, int level, int method, int windowBits, int memLevel, int strategy)
    int deflate(z_stream* strm, int flush)
    int deflateReset(z_stream* strm)
    int deflateEnd(z_stream* strm)
    int Z_OK
    int Z_STREAM_END
    int Z_BUF_ERROR
    int Z_NO_FLUSH
    int Z_SYNC_FLUSH
    int Z_DEFLATED
    int Z_DEFAULT_STRATEGY
    int Z_BEST_SPEED

DEF HEAD_MAX = 8192             # an HTTP upgrade head larger than this is refused
DEF OP_CONT = 0
DEF OP_TEXT = 1
DEF OP_BINARY = 2
DEF OP_CLOSE = 8
DEF OP_PING = 9
DEF OP_PONG = 10
DEF COMPRESS_MIN = 64           # nats-server wsCompressThreshold

cdef bytes TAIL = b"\x00\x00\xff\xff"

# states
DEF S_HEAD = 0                  # gathering the HTTP head
DEF S_FRAMES = 1
DEF S_CLOSED = 2


cdef class WsCodec(StreamCodec):
    cdef int state
    cdef readonly bint server          # we are the server side (peers mask their frames)
    cdef public bint mask_read         # frames we read must be masked
    cdef public bint mask_write        # frames we write are masked (client side)
    cdef public bint compress          # permessage-deflate negotiated
    cdef public Py_ssize_t max_frame   # split outgoing messages into frames of this size (0: no)
    cdef public Py_ssize_t max_message # the largest (decompressed) message accepted
    cdef Bytes head                    # the HTTP head being gathered
    # frame being read
    cdef uint8_t hdr[14]
    cdef int hlen
    cdef int hneed
    cdef int opcode
    cdef bint fin
    cdef bint frame_compressed
    cdef uint64_t remaining
    cdef uint8_t mkey[4]
    cdef int mpos
    cdef bint masked                   # the current frame carries a mask key
    cdef bint in_message               # a data message started and its final frame is due
    cdef bint msg_compressed
    cdef Bytes cbuf                    # compressed message bytes, or a control payload
    cdef Bytes ctl
    cdef z_stream inf
    cdef z_stream dfl
    cdef bint inf_ready
    cdef bint dfl_ready
    cdef public bint close_sent

    def __cinit__(self, bint server=True):
        self.server = server
        self.mask_read = server
        self.mask_write = not server
        self.state = S_HEAD
        self.head = Bytes()
        self.cbuf = Bytes()
        self.ctl = Bytes()
        self.max_message = 64 * 1024 * 1024
        self.hneed = 2

    def __dealloc__(self):
        if self.inf_ready:
            inflateEnd(&self.inf)
        if self.dfl_ready:
            deflateEnd(&self.dfl)

    # ---- the HTTP head ----

    def take_head(self):
        """The HTTP head gathered (request as a server, response as a client)."""
        v = self.head.getvalue()
        self.head.clear()
        return v

    def start_frames(self):
        """The upgrade is done: frames from now on."""
        self.state = S_FRAMES
        self.hlen = 0
        self.hneed = 2

    cdef int _gather_head(self, const char* p, Py_ssize_t n, Py_ssize_t* used) except -2:
        """Append to the head until the blank line; 1 when it is complete."""
        cdef Py_ssize_t i
        cdef Py_ssize_t start = self.head.len
        self.head.append(p, n)
        for i in range(start - 3 if start >= 3 else 0, self.head.len - 3):
            if memcmp(self.head.data + i, b"\r\n\r\n", 4) == 0:
                used[0] = i + 4 - start
                self.head.len = i + 4
                return 1
        used[0] = n
        if self.head.len > HEAD_MAX:
            self.error = "request header too large"
            return -1
        return 0

    # ---- decoding ----

    cdef int decode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        cdef Py_ssize_t used = 0, k
        cdef int r
        if self.state == S_HEAD:
            r = self._gather_head(p, n, &used)
            if r != 1:
                return r
            if used < n:
                if self.server:
                    self.error = "client sent data before handshake is complete"
                    return -1
                # a server may send frames right after its response head: keep them
                self.cbuf.append(p + used, n - used)
            return 1
        if self.state == S_CLOSED:
            return 0
        return self._frames(p, n, out)

    cdef int decode_pending(self, Bytes out) except -2:
        """Frames that arrived together with the response head (client side)."""
        cdef Bytes pending = self.cbuf
        if pending.len == 0:
            return 0
        self.cbuf = Bytes()
        return self._frames(pending.data, pending.len, out)

    cdef int _frames(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        cdef Py_ssize_t i = 0, take
        cdef uint64_t ln
        cdef uint8_t b0, b1
        while i < n:
            if self.hneed:
                # gather the frame header (2 bytes, then the length and the mask key)
                take = self.hneed - self.hlen
                if take > n - i:
                    take = n - i
                memcpy(self.hdr + self.hlen, p + i, take)
                self.hlen += take
                i += take
                if self.hlen < self.hneed:
                    return 0
                if self.hneed == 2:
                    b0 = self.hdr[0]
                    b1 = self.hdr[1]
                    if b0 & 0x30:
                        return self._err("RSV2 and RSV3 must be clear")
                    if b0 & 0x40 and not self.compress:
                        return self._err("compressed frame received without negotiated permessage-deflate")
                    if self.mask_read and not (b1 & 0x80):
                        return self._err("mask bit missing")
                    self.hneed = 2 + (2 if (b1 & 0x7F) == 126 else 8 if (b1 & 0x7F) == 127 else 0) \
                        + (4 if b1 & 0x80 else 0)
                    if self.hneed > 2:
                        continue
                if self._frame_header() < 0:
                    return -1
                self.hneed = 0
                self.hlen = 0
                if self.remaining == 0 and self._frame_done(out) < 0:
                    return -1
                continue
            take = n - i
            if <uint64_t>take > self.remaining:
                take = <Py_ssize_t>self.remaining
            if self._payload(p + i, take, out) < 0:
                return -1
            i += take
            self.remaining -= take
            if self.remaining == 0 and self._frame_done(out) < 0:
                return -1
            if self.state == S_CLOSED:
                return 0
        return 0

    cdef int _err(self, str text) except -2:
        """A protocol error: the connection is dropped as after a read error, no close frame
        (nats-server queues one but closes without sending it)."""
        self.error = text
        self.close_sent = True
        return -1

    cdef int _frame_header(self) except -2:
        cdef uint8_t b0 = self.hdr[0], b1 = self.hdr[1]
        cdef int op = b0 & 0x0F
        cdef uint64_t ln = b1 & 0x7F
        cdef int at = 2, k
        cdef bint compressed = (b0 & 0x40) != 0
        if ln == 126:
            ln = (<uint64_t>self.hdr[2] << 8) | self.hdr[3]
            at = 4
        elif ln == 127:
            ln = 0
            for k in range(8):
                ln = (ln << 8) | self.hdr[2 + k]
            if ln & (<uint64_t>1 << 63):
                return self._err("invalid 64-bit payload length")
            at = 10
        self.masked = (b1 & 0x80) != 0
        if self.masked:
            memcpy(self.mkey, self.hdr + at, 4)
        self.mpos = 0
        self.fin = (b0 & 0x80) != 0
        self.remaining = ln
        if op == OP_CLOSE or op == OP_PING or op == OP_PONG:
            if ln > 125:
                return self._err("control frame length bigger than maximum allowed of 125 bytes")
            if not self.fin:
                return self._err("control frame does not have final bit set")
            if compressed:
                return self._err("control frame must not be compressed")
            self.ctl.clear()
        elif op == OP_TEXT or op == OP_BINARY:
            if self.in_message:
                return self._err("new message started before final frame for previous message was received")
            self.in_message = not self.fin
            self.msg_compressed = compressed
            self.cbuf.clear()
        elif op == OP_CONT:
            if not self.in_message or compressed:
                return self._err("invalid continuation frame")
            self.in_message = not self.fin
        else:
            return self._err("unknown opcode %d" % op)
        self.opcode = op
        return 0

    cdef int _payload(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        """n payload bytes of the current frame: unmasked into the message, the compressed
        message or the control payload."""
        cdef Bytes dst
        cdef char* q
        cdef Py_ssize_t k
        if self.opcode >= OP_CLOSE:
            dst = self.ctl
        elif self.msg_compressed:
            dst = self.cbuf
            if <uint64_t>(dst.len + n) > <uint64_t>self.max_message:
                return self._err("maximum message size exceeded")
        else:
            dst = out
        q = dst.reserve(n)
        if self.masked:
            for k in range(n):
                q[k] = p[k] ^ self.mkey[(self.mpos + k) & 3]
            self.mpos = (self.mpos + n) & 3
        else:
            memcpy(q, p, n)
        dst.len += n
        return 0

    cdef int _frame_done(self, Bytes out) except -2:
        self.hneed = 2
        self.hlen = 0
        if self.opcode == OP_PING:
            self._control_frame(OP_PONG, self.ctl.data, self.ctl.len)
        elif self.opcode == OP_CLOSE:
            return self._close_received()
        elif self.opcode != OP_PONG and self.fin and self.msg_compressed:
            return self._inflate(out)
        return 0

    cdef int _close_received(self) except -2:
        cdef int status
        cdef Py_ssize_t n = self.ctl.len
        if n == 1:
            return self._err("close frame payload cannot be 1 byte")
        self.state = S_CLOSED
        self.closed = True
        self.close_sent = False             # the close we answer with always goes out
        if n >= 2:
            status = (<uint8_t>self.ctl.data[0] << 8) | <uint8_t>self.ctl.data[1]
            if not _valid_close_status(status):
                return self._err("invalid close status code %d" % status)
            body = self.ctl.data[2:n]
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                self.close_frame(1007, b"invalid utf8 body in close frame")
                return 0
            self.close_frame(status, body)
        else:
            self.close_sent = True
            self._control_frame(OP_CLOSE, NULL, 0)      # 1005: no status back
        return 0

    cdef int _inflate(self, Bytes out) except -2:
        cdef int r
        cdef Py_ssize_t before = out.len
        if not self.inf_ready:
            if inflateInit2(&self.inf, -15) != Z_OK:
                raise MemoryError()
            self.inf_ready = True
        else:
            inflateReset(&self.inf)
        self.cbuf.append(TAIL, 4)
        self.inf.next_in = <unsigned char*>self.cbuf.data
        self.inf.avail_in = <unsigned int>self.cbuf.len
        while True:
            self.inf.next_out = <unsigned char*>out.reserve(65536)
            self.inf.avail_out = 65536
            r = inflate(&self.inf, Z_SYNC_FLUSH)
            out.len += 65536 - self.inf.avail_out
            if out.len - before > self.max_message:
                return self._err("maximum message size exceeded")
            if r == Z_STREAM_END or (r == Z_OK and self.inf.avail_in == 0 and self.inf.avail_out != 0):
                break
            if r == Z_BUF_ERROR and self.inf.avail_in == 0:
                break
            if r != Z_OK:
                return self._err("invalid compressed data")
        self.cbuf.clear()
        return 0

    # ---- encoding ----

    cdef int _put_header(self, Bytes dst, int op, bint fin, bint compressed, Py_ssize_t n,
                         uint8_t* key) except -1:
        cdef uint8_t h[14]
        cdef int at = 2, k
        h[0] = (0x80 if fin else 0) | (0x40 if compressed else 0) | op
        if n < 126:
            h[1] = <uint8_t>n
        elif n < 65536:
            h[1] = 126
            h[2] = <uint8_t>(n >> 8)
            h[3] = <uint8_t>n
            at = 4
        else:
            h[1] = 127
            for k in range(8):
                h[2 + k] = <uint8_t>((<uint64_t>n) >> (56 - 8 * k))
            at = 10
        if self.mask_write:
            h[1] |= 0x80
            for k in range(4):
                key[k] = <uint8_t>rand()
            memcpy(h + at, key, 4)
            at += 4
        return dst.append(<char*>h, at)

    cdef int _frame(self, Bytes dst, int op, bint fin, bint compressed, const char* p,
                    Py_ssize_t n) except -1:
        cdef uint8_t key[4]
        cdef char* q
        cdef Py_ssize_t k
        self._put_header(dst, op, fin, compressed, n, key)
        if n == 0:
            return 0
        q = dst.reserve(n)
        if self.mask_write:
            for k in range(n):
                q[k] = p[k] ^ key[k & 3]
        else:
            memcpy(q, p, n)
        dst.len += n
        return 0

    cdef int _control_frame(self, int op, const char* p, Py_ssize_t n) except -1:
        return self._frame(self.control, op, True, False, p, n)

    def close_frame(self, int status, bytes body=b""):
        """Queue a close frame (status + body, shortened with "..." to fit) in `control`; only
        the first close frame goes out."""
        if self.close_sent:
            return
        self.close_sent = True
        if len(body) > 123:
            body = body[:120] + b"..."
        cdef bytes payload = bytes([status >> 8, status & 0xFF]) + body
        self._control_frame(OP_CLOSE, payload, len(payload))

    def control_raw(self, bytes data):
        """Bytes sent as they are, ahead of frames (the HTTP upgrade answer)."""
        self.control.append(data, len(data))

    def goodbye(self, reason):
        """The connection is closing for `reason` (nats-server's close reasons): a close frame
        with the matching status, as nats-server's wsEnqueueCloseMessage sends it."""
        if self.state != S_FRAMES and not self.closed:
            return
        self.close_frame(_CLOSE_STATUS.get(reason, 1011), (reason or "").encode())

    cdef int encode(self, const char* p, Py_ssize_t n, Bytes out) except -2:
        """Protocol bytes into one binary message (frames of max_frame bytes at most),
        compressed when negotiated and worth it."""
        cdef Bytes z                        # holds the compressed bytes p points to
        cdef Py_ssize_t off = 0, k
        cdef bint compressed = False
        if n <= 0:
            return 0
        if self.compress and n > COMPRESS_MIN:
            z = self._deflate(p, n)
            p = z.data
            n = z.len
            compressed = True
        if self.max_frame <= 0 or n <= self.max_frame:
            return self._frame(out, OP_BINARY, True, compressed, p, n)
        # split into frames of max_frame bytes; of a compressed message the first carries RSV1
        while off < n:
            k = min(self.max_frame, n - off)
            self._frame(out, OP_BINARY if off == 0 else OP_CONT, off + k == n,
                        compressed and off == 0, p + off, k)
            off += k
        return 0

    cdef Bytes _deflate(self, const char* p, Py_ssize_t n):
        cdef Bytes z = Bytes()
        cdef int r
        if not self.dfl_ready:
            if deflateInit2(&self.dfl, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK:
                raise MemoryError()
            self.dfl_ready = True
        else:
            deflateReset(&self.dfl)                 # no context takeover
        self.dfl.next_in = <const unsigned char*>p
        self.dfl.avail_in = <unsigned int>n
        while True:
            self.dfl.next_out = <unsigned char*>z.reserve(n // 2 + 1024)
            self.dfl.avail_out = <unsigned int>(n // 2 + 1024)
            r = deflate(&self.dfl, Z_SYNC_FLUSH)
            z.len += (n // 2 + 1024) - self.dfl.avail_out
            if self.dfl.avail_out != 0:
                break
        if z.len >= 4 and memcmp(z.data + z.len - 4, b"\x00\x00\xff\xff", 4) == 0:
            z.len -= 4
        return z


_POLICY = ("Authentication Timeout", "Authentication Failure", "Slow Consumer (Pending Bytes)",
           "Slow Consumer (Write Deadline)", "Maximum Account Connections Exceeded",
           "Max Account Connections Exceeded", "Maximum Connections Exceeded",
           "Maximum Control Line Exceeded", "Maximum Subscriptions Exceeded", "Missing Account",
           "Authentication Expired", "Revocation")
_CLOSE_STATUS = dict({r: 1008 for r in _POLICY}, **{
    "Client Closed": 1000, "TLS Handshake Failure": 1015, "Parse Error": 1002,
    "Protocol Violation": 1002, "Bad Client Protocol Version": 1002,
    "Maximum Payload Exceeded": 1009, "Write Error": 1001, "Read Error": 1001,
    "Stale Connection": 1001, "Server Shutdown": 1001})


cdef bint _valid_close_status(int code):
    if code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014):
        return True
    return 3000 <= code <= 4999
