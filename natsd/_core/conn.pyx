# cython: language_level=3, boundscheck=False, wraparound=False
"""Connection: the per-socket buffers and counters every message touches.

The outbound buffer is a growable C array. Writers append; the loop flushes every connection
that gained output once per iteration (`flush_dirty`): from RING_MIN connections on, with one
io_uring submission for all their sends when the kernel allows (`flush_together`, sendring.h
says why), else one send() each. Whatever the kernel refuses stays queued
and EPOLLOUT is requested; a connection whose queue passes `max_pending`, or whose writes stay
blocked past the write deadline, is a slow consumer and is closed (only that one).
"""
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memcmp, strerror
from libc.errno cimport errno, EAGAIN, EINTR
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd._core.fmt cimport grow, release_above

cdef extern from "sendring.h" nogil:
    ctypedef struct nsr_ring:
        int fd
    ctypedef struct nsr_send:
        int fd
        const char* p
        size_t n
        long res
    long NSR_NOT_SENT
    int nsr_open(nsr_ring* r, unsigned entries)
    void nsr_close(nsr_ring* r)
    int nsr_send_all(nsr_ring* r, nsr_send* s, size_t n)

cdef extern from "sys/socket.h" nogil:
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    int MSG_NOSIGNAL
    int MSG_DONTWAIT

cdef list dirty_conns = []
cdef list closing_conns = []
cdef list resumed_conns = []        # paused publishers whose targets drained: read them again
cdef list paused_conns = []         # publishers paused until their stall_until at the latest

# Back-pressure on fast producers (nats-server's stalledWait, made to tell slow from stuck): a
# publisher feeding a subscriber whose queue passed its stall limit is not read until that
# queue drains to half, for STALL_MAX at most. A subscriber whose socket has taken nothing
# for STUCK_AFTER is stuck: it no longer slows anybody, grows to max_pending and is cut as a
# slow consumer. So a slow reader paces its publishers (nothing is lost), a stuck one costs
# them a few tens of milliseconds, and no publisher is ever stopped.
DEF STALL_MAX = 0.05
DEF STUCK_AFTER = 0.05


cdef class Totals:
    pass


totals = Totals()
cdef Totals stats = totals

DEF SMALL_OBUF = 1024
DEF KEEP_OBUF = 65536
# Many connections' sends in one system call (sendring.h says why): from RING_MIN connections
# with output in one flush, when the kernel gives natsd a ring.
DEF RING_MIN = 4
DEF RING_ENTRIES = 64


cdef double now_mono() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def monotonic():
    return now_mono()


cdef class Connection:
    def __cinit__(self, int fd, int kind=KIND_CLIENT):
        self.fd = fd
        self.kind = kind
        self.subs = {}
        self.echo = True
        self.verbose = True           # nats-server's default before CONNECT says otherwise
        self.max_payload = 1048576
        self.max_control_line = 4096
        self.max_pending = 64 * 1024 * 1024
        self.stall_limit = 8 * 1024 * 1024
        self.rbuf = NULL
        self.obuf = NULL
        self.last_activity = now_mono()

    def __dealloc__(self):
        if self.rbuf != NULL:
            free(self.rbuf)
        if self.obuf != NULL:
            free(self.obuf)
        if self.xbuf != NULL:
            free(self.xbuf)

    # ---- outbound ----

    cdef int reserve(self, Py_ssize_t n) except -1:
        """Make room for n more bytes at the end of the outbound buffer."""
        cdef Py_ssize_t need = self.olen + n
        if need <= self.ocap:
            return 0
        if self.ostart > 0 and self.olen - self.ostart + n <= self.ocap:
            memmove(self.obuf, self.obuf + self.ostart, self.olen - self.ostart)
            self.olen -= self.ostart
            self.ostart = 0
            return 0
        if not grow(&self.obuf, &self.ocap, need, SMALL_OBUF):
            raise MemoryError()
        return 0

    cdef int write(self, const char* p, Py_ssize_t n) except -1:
        if self.closed:
            return 0
        self.reserve(n)
        memcpy(self.obuf + self.olen, p, n)
        self.olen += n
        self.mark_dirty()
        return 0

    cdef inline void mark_dirty(self):
        if not self.dirty:
            self.dirty = True
            dirty_conns.append(self)

    def send_bytes(self, bytes data):
        """Queue bytes for this connection (control path: INFO, PONG, -ERR, internal delivery)."""
        self.write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))

    def send_ping(self):
        """A keepalive PING; the PONG that answers it measures the round trip (`rtt`)."""
        self.pings_out += 1
        self.rtt_start = now_mono()
        self.write("PING\r\n", 6)

    def pending_bytes(self):
        return queued_bytes(self)

    cdef inline bint plaintext(self):
        """Whether queued bytes go to the socket as they are: no codec, no active TLS."""
        return self.codec is None and (self.tls is None or not self.tls_active)

    cdef int flush(self) except -1:
        """Send what is queued; keep what the kernel refused. Returns 1 if all was sent."""
        cdef ssize_t n
        cdef int err = 0
        self.dirty = False
        if not self.plaintext():
            return self.flush_layered()
        if self.closed or self.olen == self.ostart:
            return 1
        while True:
            with nogil:
                n = send(self.fd, self.obuf + self.ostart, self.olen - self.ostart, MSG_NOSIGNAL | MSG_DONTWAIT)
            if n >= 0:
                if self.took(n):
                    break
            elif errno != EINTR:
                err = errno
                break
        return self.after_send(err)

    cdef bint took(self, Py_ssize_t n):
        """The socket took n more of the queued bytes: whether all are sent."""
        if n > 0:
            self.ostart += n
            self.last_sent = now_mono()
        return self.ostart == self.olen

    cdef int after_send(self, int err) except -1:
        """The end of a plaintext flush that stopped on `err` (0: all sent; EAGAIN: the socket
        is full): keep the rest, or close on a real error."""
        cdef Py_ssize_t left
        if err != 0 and err != EAGAIN:
            self.schedule_close("Write Error")
            self.ostart = self.olen = 0
            return 1
        left = self.olen - self.ostart
        if left == 0:
            self.ostart = self.olen = 0
            release_above(&self.obuf, &self.ocap, KEEP_OBUF)
        return self._sent(left)

    cdef int flush_layered(self) except -1:
        """TLS and/or a codec: what is queued goes through the codec (frames, compression)
        and TLS (once its handshake is done) into xbuf, the bytes for the socket; then send.
        Handshake messages and a codec's control frames go out the same way."""
        cdef Py_ssize_t left = self.olen - self.ostart
        cdef Py_ssize_t k
        cdef ssize_t n
        cdef bint ready = self.tls is None or not self.tls_active or self.tls.established
        if self.closed:
            return 1
        if ready:
            if self.codec is not None:
                if self.codec.control.len:
                    self.to_wire(self.codec.control.data, self.codec.control.len)
                    self.codec.control.clear()
                if left > 0:
                    if self.encoded is None:
                        self.encoded = Bytes()
                    self.encoded.clear()
                    if self.codec.encode(self.obuf + self.ostart, left, self.encoded) < 0:
                        self.schedule_close("Protocol Violation")
                        self.ostart = self.olen = 0
                        return 1
                    self.to_wire(self.encoded.data, self.encoded.len)
            elif left > 0:
                self.to_wire(self.obuf + self.ostart, left)
            if left > 0:
                self.ostart = self.olen = 0
                release_above(&self.obuf, &self.ocap, KEEP_OBUF)
        if self.tls is not None and self.tls_active:
            k = self.tls.pending_out()
            if k > 0:
                self.xlen += self.tls.take_out(self.xreserve(k), k)
        left = self.xlen - self.xstart
        while left > 0:
            with nogil:
                n = send(self.fd, self.xbuf + self.xstart, left, MSG_NOSIGNAL | MSG_DONTWAIT)
            if n < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    break
                self.schedule_close("Write Error")
                self.xstart = self.xlen = 0
                return 1
            self.xstart += n
            left -= n
            self.last_sent = now_mono()
        if left == 0:
            self.xstart = self.xlen = 0
            release_above(&self.xbuf, &self.xcap, KEEP_OBUF)
        return self._sent(queued_bytes(self))

    cdef int to_wire(self, const char* p, Py_ssize_t n) except -1:
        """Bytes as the socket will carry them: encrypted when TLS is on, else into xbuf."""
        if self.tls is not None and self.tls_active:
            if self.tls.write_plain(p, n) < 0:
                self.schedule_close("TLS Handshake Failure")
            return 0
        memcpy(self.xreserve(n), p, n)
        self.xlen += n
        return 0

    cdef char* xreserve(self, Py_ssize_t k) except NULL:
        """Room for k more bytes at the end of xbuf."""
        if self.xstart > 0 and self.xstart == self.xlen:
            self.xstart = self.xlen = 0
        if self.xlen + k > self.xcap:
            if self.xstart > 0:
                memmove(self.xbuf, self.xbuf + self.xstart, self.xlen - self.xstart)
                self.xlen -= self.xstart
                self.xstart = 0
            if self.xlen + k > self.xcap:
                if not grow(&self.xbuf, &self.xcap, self.xlen + k, SMALL_OBUF):
                    raise MemoryError()
        return self.xbuf + self.xlen

    cdef int _sent(self, Py_ssize_t left) except -1:
        """After a flush left `left` bytes queued: back-pressure, write readiness, slow
        consumers."""
        if self.waiters is not None and left <= self.stall_limit // 2:
            self.release_waiters()
        if left == 0:
            self.blocked_since = 0
            if self.want_write:
                self.want_write = False
                self.handler.want_write(self, False)
            return 1
        if self.blocked_since == 0:
            self.blocked_since = now_mono()
        if not self.want_write:
            self.want_write = True
            self.handler.want_write(self, True)
        if left > self.max_pending and self.kind == KIND_CLIENT:
            self.slow_consumer()
        return 0

    def flush_now(self):
        return self.flush()

    def start_codec(self, StreamCodec codec, bytes plain_first=None, bint inbound=True):
        """From now on what we send goes through `codec` (and, with `inbound`, what we read
        after the command being parsed). What was queued before, and `plain_first`, go out as
        they are."""
        cdef Py_ssize_t left = self.olen - self.ostart
        if left > 0:
            self.to_wire(self.obuf + self.ostart, left)
            self.ostart = self.olen = 0
        if plain_first is not None:
            self.to_wire(PyBytes_AS_STRING(plain_first), PyBytes_GET_SIZE(plain_first))
        self.codec = codec
        if inbound:
            self.decode_switch = True
        self.mark_dirty()

    def slow_consumer(self):
        if self.closing:
            return
        stats.slow_consumers += 1
        self.handler.slow_consumer(self)

    def schedule_close(self, reason):
        """Close at the end of this loop iteration, after a last flush."""
        if self.closing or self.closed:
            return
        self.closing = True
        self.close_reason = reason
        closing_conns.append(self)

    cdef void stall_publisher(self, Connection pub):
        """Pause reading `pub` until our queue drains to half the stall limit (STALL_MAX at
        most), unless we are stuck."""
        cdef double now = now_mono()
        cdef double progress = self.last_sent if self.last_sent > self.blocked_since else self.blocked_since
        if self.blocked_since != 0 and now - progress > STUCK_AFTER:
            return
        pub.stalled = True
        stats.stalls += 1
        pub.stall_until = now + STALL_MAX
        paused_conns.append(pub)
        if self.waiters is None:
            self.waiters = [pub]
        else:
            self.waiters.append(pub)

    def replay(self, bytes data):
        """Bytes read before the parser took over (what followed a PROXY protocol header):
        parsed on the loop's next pass, ahead of anything read after them."""
        if PyBytes_GET_SIZE(data) == 0:
            return
        self.keep_more(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        self.stalled = True
        self.resume_reading()

    def resume_reading(self):
        """Read this connection again (it was paused, e.g. while its credentials were checked)."""
        if self.stalled:
            self.stalled = False
            resumed_conns.append(self)

    cdef void release_waiters(self):
        cdef Connection w
        waiters = self.waiters
        self.waiters = None
        for w in waiters:
            if w.stalled:
                w.stalled = False
                resumed_conns.append(w)

    def mark_closed(self):
        """The socket is gone: drop buffers; later writes are ignored."""
        self.closed = True
        if self.waiters is not None:
            self.release_waiters()
        self.ostart = self.olen = 0
        if self.obuf != NULL:
            free(self.obuf)
            self.obuf = NULL
            self.ocap = 0
        if self.rbuf != NULL:
            free(self.rbuf)
            self.rbuf = NULL
            self.rcap = self.rlen = 0
        if self.xbuf != NULL:
            free(self.xbuf)
            self.xbuf = NULL
            self.xcap = self.xstart = self.xlen = 0

    def release_idle_buffers(self):
        """Give back buffers of a connection that has nothing queued (idle sweep)."""
        if self.olen == self.ostart and self.obuf != NULL:
            free(self.obuf)
            self.obuf = NULL
            self.ocap = 0
            self.ostart = self.olen = 0

    # ---- inbound remainder ----

    cdef int keep_unparsed(self, const char* p, Py_ssize_t n) except -1:
        """Keep the n bytes of an incomplete command for the next read."""
        cdef char* q
        cdef Py_ssize_t cap
        if n > self.rcap:
            cap = 4096
            while cap < n:
                cap *= 2
            q = <char*>malloc(cap)
            if q == NULL:
                raise MemoryError()
            if self.rbuf != NULL:
                free(self.rbuf)
            self.rbuf = q
            self.rcap = cap
        memmove(self.rbuf, p, n)
        self.rlen = n
        return 0

    cdef int keep_more(self, const char* p, Py_ssize_t n) except -1:
        """Append n bytes to what is kept for the parser."""
        if self.rlen + n > self.rcap:
            if not grow(&self.rbuf, &self.rcap, self.rlen + n, 4096):
                raise MemoryError()
        memcpy(self.rbuf + self.rlen, p, n)
        self.rlen += n
        return 0

    # ---- publisher-side cache ----

    cdef SublistResult lookup(self, const char* subj, Py_ssize_t slen):
        """Match a subject, reusing the result of the previous publish when it is the same."""
        cdef Sublist sl = self.sublist
        cdef bytes key
        if (self.last_res is not None and self.last_sl is sl and self.last_gen == sl.genid
                and PyBytes_GET_SIZE(self.last_subj) == slen
                and memcmp(PyBytes_AS_STRING(self.last_subj), subj, slen) == 0):
            return self.last_res
        key = PyBytes_FromStringAndSize(subj, slen)
        self.last_res = sl.match_cached(key)
        self.last_subj = key
        self.last_gen = sl.genid
        self.last_sl = sl
        return self.last_res

    def forget_lookup(self):
        self.last_res = None
        self.last_sl = None


cdef int flush_dirty() except -1:
    """Flush every connection that gained output in this iteration."""
    global dirty_conns
    cdef list batch
    cdef Connection c
    while dirty_conns:
        batch = dirty_conns
        dirty_conns = []
        if len(batch) >= RING_MIN and ring.fd >= 0:
            flush_together(batch)
        else:
            for c in batch:
                c.flush()
    return 0


# The ring and the array of sends handed to it: the loop thread's alone, like dirty_conns.
cdef nsr_ring ring
cdef nsr_send* together = NULL
cdef Py_ssize_t together_cap = 0
ring.fd = -1


def use_send_ring(bint on):
    """Flush many connections with one submission to a ring from now on (on), or one send
    each (off). The loop sets this up when it starts. -> None, or why there is no ring (the
    kernel's refusal: sends stay one by one)."""
    cdef int rc
    if not on:
        if ring.fd >= 0:
            nsr_close(&ring)
        return None
    if ring.fd >= 0:
        return None
    rc = nsr_open(&ring, RING_ENTRIES)
    return None if rc == 0 else strerror(-rc).decode()


def send_ring_active():
    """Whether flushes of RING_MIN connections or more go through the ring."""
    return ring.fd >= 0


cdef int flush_together(list batch) except -1:
    """Flush `batch`: its plaintext connections' sends in one submission to the ring, their
    buffers untouched until it returns, then each one's bookkeeping; the rest one by one."""
    global together, together_cap
    cdef list plain = []
    cdef Connection c
    cdef Py_ssize_t i, n
    cdef nsr_send* grown
    cdef long res
    for c in batch:
        if c.plaintext() and not c.closed and c.olen > c.ostart:
            c.dirty = False
            plain.append(c)
        else:
            c.flush()
    n = len(plain)
    if n > together_cap:
        grown = <nsr_send*>realloc(together, sizeof(nsr_send) * n)
        if grown == NULL:
            raise MemoryError()
        together, together_cap = grown, n
    for i in range(n):
        c = plain[i]
        together[i].fd = c.fd
        together[i].p = c.obuf + c.ostart
        together[i].n = c.olen - c.ostart
    with nogil:
        nsr_send_all(&ring, together, n)
    for i in range(n):
        c = plain[i]
        res = together[i].res
        if res == NSR_NOT_SENT:
            c.flush()
        elif res < 0:
            c.after_send(-res)
        elif c.took(res):
            c.after_send(0)
        else:
            c.flush()               # the socket took part: the rest the plain way
    return 0


def flush_all():
    flush_dirty()


cdef list take_resumed():
    """Publishers to read again: their targets drained or went away, or their pause is over."""
    global resumed_conns, paused_conns
    cdef Connection c
    cdef double now
    cdef list still
    out = resumed_conns
    resumed_conns = []
    if paused_conns:
        now = now_mono()
        still = []
        for c in paused_conns:
            if not c.stalled:
                continue                # resumed already (listed in out)
            if c.stall_until <= now:
                c.stalled = False
                out.append(c)
            else:
                still.append(c)
        paused_conns = still
    return out


cdef double next_resume():
    """When the next paused publisher is due to be read again (0: none is paused)."""
    cdef Connection c
    cdef double t = 0
    for c in paused_conns:
        if c.stalled and (t == 0 or c.stall_until < t):
            t = c.stall_until
    return t


def take_closing():
    """Connections scheduled to close in this iteration."""
    global closing_conns
    out = closing_conns
    closing_conns = []
    return out
