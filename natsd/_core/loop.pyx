# cython: language_level=3, boundscheck=False, wraparound=False
"""The event loop: one thread, one epoll set for every socket, a timer heap, and a hand-off
to other threads for blocking work whose results come back through an eventfd: group-commit
fdatasyncs to the GIL-free sync threads (natsd/_core/syncer.pyx), the rest (compression,
slow authentication) to a worker pool.

One iteration: wait (polling first for a while when the last iteration had work, see
`_wait`); read every readable socket (client connections are parsed and routed in
C); run the callbacks of finished syncs; run queued internal deliveries; run due timers and ready callbacks; flush every connection
that gained output; close the connections that asked to be closed.
"""
import heapq
import logging
import os
from collections import deque

from libc.stdlib cimport malloc, free
from libc.string cimport memmove
from libc.errno cimport errno, EINTR, EAGAIN
from cpython.exc cimport PyErr_CheckSignals
from cpython.ref cimport PyObject
from natsd._core.conn cimport Connection, now_mono, flush_dirty, take_resumed, next_resume
from natsd._core.conn import use_send_ring
from natsd._core.tls cimport TlsSession
from natsd._core.codec cimport Bytes
from natsd._core.fmt cimport resize
from natsd._core.parser cimport parse
from natsd._core.router cimport run_internal
from natsd._core.syncer cimport (SyncJob, drain as drain_syncs, quick_and_idle,
                                 submit as submit_sync, run_here as sync_here)
from natsd._core.syncer import set_wake_fd, wake_fd_now
from natsd._core import conn as _conn_module
from natsd._core import router as _router_module

cdef extern from "sys/epoll.h" nogil:
    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event* ev)
    int epoll_wait(int epfd, epoll_event* evs, int maxevents, int timeout)
    enum:
        EPOLLIN
        EPOLLOUT
        EPOLLERR
        EPOLLHUP
        EPOLL_CTL_ADD
        EPOLL_CTL_MOD
        EPOLL_CTL_DEL
        EPOLL_CLOEXEC

cdef extern from "poll.h" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long n, int timeout)
    short POLLIN

cdef extern from "sys/eventfd.h" nogil:
    int eventfd(unsigned int initval, int flags)
    enum:
        EFD_NONBLOCK
        EFD_CLOEXEC

cdef extern from "sys/socket.h" nogil:
    ssize_t recv(int fd, void* buf, size_t n, int flags)

cdef extern from "sched.h" nogil:
    int sched_yield()

cdef extern from "unistd.h" nogil:
    ssize_t read(int fd, void* buf, size_t n)
    ssize_t write(int fd, const void* buf, size_t n)
    int close(int fd)

DEF MAX_EVENTS = 512
DEF POLL_START = 10e-6                  # seconds: the first polling window after a short sleep
POLL_MAX_US = 200                       # default of NATSD_POLL_US: the longest window
DEF READ_SIZE = 65536
DEF SHARED_READ = 262144

log = logging.getLogger("natsd")
take_closing = _conn_module.take_closing
has_internal = _router_module.has_internal

READABLE = EPOLLIN
WRITABLE = EPOLLOUT


cdef inline bint parse_rbuf(Loop lp, Connection c) except -1:
    """Parse the commands kept in c's read buffer and drop them from it -> True when a codec
    took over the rest (switched_kept)."""
    cdef Py_ssize_t consumed = parse(c, c.rbuf, c.rlen)
    if c.decode_switch:
        lp.switched_kept(c, consumed)
        return True
    if c.closing or c.closed:
        c.rlen = 0
    elif consumed > 0:
        memmove(c.rbuf, c.rbuf + consumed, c.rlen - consumed)
        c.rlen -= consumed
    return False


class TimerHandle:
    __slots__ = ("callback", "args", "cancelled", "when")

    def __init__(self, when, callback, args):
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self):
        self.cancelled = True
        self.callback = None
        self.args = None


def cancel_timer(timer):
    """Cancel `timer` unless it is None. Returns None: `self.timer = cancel_timer(self.timer)`
    forgets it too."""
    if timer is not None:
        timer.cancel()
    return None


cdef class Loop:
    def __cinit__(self, double poll_us=POLL_MAX_US, bint send_ring=True):
        """poll_us: the longest polling window before a sleep (see _wait); 0 turns it off.
        send_ring: flush many connections with one system call (natsd/_core/sendring.h)."""
        if poll_us < 0:
            raise ValueError("poll_us must be >= 0, got %r" % poll_us)
        self.epfd = epoll_create1(EPOLL_CLOEXEC)
        if self.epfd < 0:
            raise OSError(errno, "epoll_create1 failed")
        self.wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        self.handlers = {}
        self.graveyard = []
        self.timers = []
        self.ready = deque()
        self.rbuf_size = SHARED_READ
        self.rbuf = <char*>malloc(SHARED_READ)
        self.tls_plain = <char*>malloc(SHARED_READ)
        self.decoded = Bytes()
        self.events = <epoll_event*>malloc(sizeof(epoll_event) * MAX_EVENTS)
        if self.rbuf == NULL or self.events == NULL or self.tls_plain == NULL:
            raise MemoryError()
        self.poll_max = poll_us / 1e6
        self.add_handler(self.wakefd, _WakeReader(self.wakefd))
        set_wake_fd(self.wakefd)
        why = use_send_ring(send_ring)
        if why is not None:
            log.debug("sending to each connection with its own system call: no io_uring (%s)", why)

    def __dealloc__(self):
        free(self.rbuf)
        free(self.tls_plain)
        free(self.events)
        if self.epfd >= 0:
            close(self.epfd)
        if self.wakefd >= 0:
            if wake_fd_now() == self.wakefd:
                set_wake_fd(-1)             # the syncer must not write to a closed (reused) fd
            close(self.wakefd)

    # ---- registration ----

    def add_handler(self, int fd, obj, bint writable=False):
        """Watch fd. obj is a Connection (parsed in C) or has on_event(events)."""
        cdef epoll_event ev
        ev.events = EPOLLIN | (EPOLLOUT if writable else 0)
        ev.data.ptr = <void*>obj
        if epoll_ctl(self.epfd, EPOLL_CTL_ADD, fd, &ev) < 0:
            raise OSError(errno, os.strerror(errno))
        self.handlers[fd] = obj

    def set_writable(self, int fd, bint writable):
        cdef epoll_event ev
        obj = self.handlers.get(fd)
        if obj is None:
            return
        ev.events = EPOLLIN | (EPOLLOUT if writable else 0)
        if type(obj) is Connection and (<Connection>obj).stalled:
            ev.events &= ~EPOLLIN
        ev.data.ptr = <void*>obj
        epoll_ctl(self.epfd, EPOLL_CTL_MOD, fd, &ev)

    cdef void _set_reading(self, Connection c, bint reading):
        """Pause or resume reading a connection (back-pressure); keeps EPOLLOUT as it was."""
        cdef epoll_event ev
        if c.closed or self.handlers.get(c.fd) is not c:
            return
        ev.events = (EPOLLIN if reading else 0) | (EPOLLOUT if c.want_write else 0)
        ev.data.ptr = <void*>c
        epoll_ctl(self.epfd, EPOLL_CTL_MOD, c.fd, &ev)

    def remove_handler(self, int fd):
        cdef epoll_event ev
        obj = self.handlers.pop(fd, None)
        if obj is not None:
            epoll_ctl(self.epfd, EPOLL_CTL_DEL, fd, &ev)
            self.graveyard.append(obj)

    def handler_count(self):
        return len(self.handlers)

    # ---- timers and callbacks ----

    def time(self):
        return now_mono()

    def call_later(self, double delay, callback, *args):
        return self.call_at(now_mono() + delay, callback, *args)

    def call_at(self, double when, callback, *args):
        h = TimerHandle(when, callback, args)
        self.timer_seq += 1
        heapq.heappush(self.timers, (when, self.timer_seq, h))
        return h

    def call_soon(self, callback, *args):
        self.ready.append((callback, args))

    def call_soon_threadsafe(self, callback, *args):
        """From any thread: run callback on the loop thread soon."""
        cdef unsigned long long one = 1
        self.ready.append((callback, args))
        write(self.wakefd, &one, 8)

    def submit(self, fn, done, bint may_inline=True):
        """Run fn() off the loop thread; done(result, exc) runs on the loop afterwards. A
        SyncJob goes to hand_off_sync; anything else goes to the worker pool."""
        if type(fn) is SyncJob:
            self.hand_off_sync(<SyncJob>fn, done, may_inline)
        else:
            self.run_in_worker(fn, done)

    cdef int hand_off_sync(self, SyncJob job, object done, bint may_inline) except -1:
        """A group commit's fdatasync, handed to the GIL-free sync threads
        (natsd/_core/syncer.pyx), or, with `may_inline` (the caller has nothing else to do
        either), run here and now when no socket is ready and syncs are quick. The log calls
        this directly (natsd/_core/log.pyx), no Python in between."""
        if may_inline and quick_and_idle() and not self._events_ready():
            sync_here(job, done)
        else:
            submit_sync(job, done)
        return 0

    cdef bint _events_ready(self):
        """Whether a socket or the wake-up eventfd is ready, without taking its event."""
        cdef pollfd p
        p.fd = self.epfd
        p.events = POLLIN
        p.revents = 0
        return poll(&p, 1, 0) > 0

    def run_in_worker(self, fn, done, *args):
        """Run fn(*args) on a worker thread; done(result, exc) runs on the loop afterwards."""
        if self.executor is None:
            from concurrent.futures import ThreadPoolExecutor
            self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="natsd-worker")

        def finished(fut, loop=self):
            exc = fut.exception()
            loop.call_soon_threadsafe(done, None if exc else fut.result(), exc)
        self.executor.submit(fn, *args).add_done_callback(finished)

    # ---- running ----

    def run(self):
        self.running = True
        while self.running:
            self.run_once()
        self.run_once_nowait()

    def run_one(self):
        """One iteration, waiting as run() does (tests step the loop with it)."""
        self.run_once()

    def run_once_nowait(self):
        """Finish queued work without waiting (shutdown)."""
        run_internal()
        self._run_ready()
        flush_dirty()
        self._close_pending()

    def stop(self):
        self.running = False
        self.call_soon_threadsafe(lambda: None)

    cdef int run_once(self) except -1:
        cdef int n, i, timeout, err = 0
        cdef unsigned int evs
        cdef object obj
        cdef double delay, due
        if self.ready or has_internal():
            timeout = 0
        elif self.timers:
            delay = self.timers[0][0] - now_mono()
            timeout = 0 if delay <= 0 else <int>(delay * 1000.0) + 1
        else:
            timeout = -1
        if timeout != 0:
            due = next_resume()             # a paused publisher to read again
            if due != 0:
                delay = due - now_mono()
                if delay <= 0:
                    timeout = 0
                elif timeout < 0 or <int>(delay * 1000.0) + 1 < timeout:
                    timeout = <int>(delay * 1000.0) + 1

        n = self._wait(timeout, &err)
        PyErr_CheckSignals()
        if n < 0:
            if err == EINTR:
                return 0
            raise OSError(err, "epoll_wait failed")
        self.iterations += 1
        for i in range(n):
            obj = <object><PyObject*>self.events[i].data.ptr
            evs = self.events[i].events
            if type(obj) is Connection:
                self._conn_event(<Connection>obj, evs)
            else:
                try:
                    obj.on_event(evs)
                except Exception:
                    log.exception("event handler failed")
        drain_syncs()
        run_internal()
        self._run_timers()
        self._run_ready()
        flush_dirty()
        self._close_pending()
        self._resume_readers()
        if self.graveyard:
            self.graveyard = []
        return 0

    cdef int _wait(self, int timeout, int* err):
        """epoll_wait, polling first for a while when the last iteration had work.

        A peer that waits for each answer (a request, a KV get, a sync publish) sends its next
        message tens of microseconds after the last one went out; sleeping in between adds a
        wake-up to every round trip. So after an iteration with events the loop polls without
        sleeping for up to `poll_window` seconds, yielding the CPU to anything runnable. The
        window adapts like KVM's halt polling: it doubles (up to `poll_max`) when the sleep
        that followed ended within `poll_max`, and halves when it lasted longer, so an idle or
        sparse server stops polling."""
        cdef int n = 0
        cdef double start = 0, until
        cdef bint polling = timeout != 0 and self.poll_max > 0 and self.had_events
        if polling and self.poll_window > 0:
            until = now_mono() + self.poll_window
            with nogil:
                while True:
                    n = epoll_wait(self.epfd, self.events, MAX_EVENTS, 0)
                    if n != 0 or now_mono() >= until:
                        break
                    sched_yield()
                if n < 0:
                    err[0] = errno
        if n == 0:
            if polling:
                start = now_mono()
            with nogil:
                n = epoll_wait(self.epfd, self.events, MAX_EVENTS, timeout)
                if n < 0:
                    err[0] = errno
            if polling and n > 0:
                if now_mono() - start + self.poll_window < self.poll_max:
                    self.poll_window = min(max(self.poll_window * 2, POLL_START), self.poll_max)
                else:
                    self.poll_window = self.poll_window / 2 if self.poll_window > POLL_START else 0
        self.had_events = n > 0
        return n

    cdef void _conn_event(self, Connection c, unsigned int evs):
        if c.closed:
            return
        try:
            if evs & (EPOLLIN | EPOLLERR | EPOLLHUP) and not c.stalled:
                self.read_conn(c)
                if c.stalled:
                    self._set_reading(c, False)
            if evs & EPOLLOUT and not c.closed:
                c.flush()
        except Exception:
            log.exception("connection cid:%s failed", c.cid)
            c.schedule_close("Internal Error")

    cdef int read_conn(self, Connection c) except -1:
        cdef ssize_t n
        cdef Py_ssize_t consumed, want
        if c.tls is not None or c.codec is not None:
            return self.read_layered(c)
        if c.rlen == 0:
            with nogil:
                n = recv(c.fd, self.rbuf, self.rbuf_size, 0)
            if n > 0:
                c.last_activity = now_mono()
                if c.raw_reader:
                    c.handler.raw_data(c, self.rbuf[:n])
                    return 0
                consumed = parse(c, self.rbuf, n)
                if c.decode_switch:
                    return self.switched(c, self.rbuf + consumed, n - consumed)
                if consumed < n and not c.closing:
                    c.keep_unparsed(self.rbuf + consumed, n - consumed)
                return 0
        else:
            want = c.rneed - c.rlen
            if want < READ_SIZE:
                want = READ_SIZE
            if c.rcap - c.rlen < want:
                if not resize(&c.rbuf, &c.rcap, c.rlen + want):
                    raise MemoryError()
            with nogil:
                n = recv(c.fd, c.rbuf + c.rlen, c.rcap - c.rlen, 0)
            if n > 0:
                c.last_activity = now_mono()
                c.rlen += n
                if c.rlen < c.rneed or parse_rbuf(self, c):
                    return 0
                if c.rlen == 0 and c.rcap > READ_SIZE:
                    free(c.rbuf)
                    c.rbuf = NULL
                    c.rcap = 0
                return 0
        if n == 0:
            c.schedule_close("Client Closed")
        elif errno != EAGAIN and errno != EINTR:
            c.schedule_close("Read Error")
        return 0

    cdef int read_layered(self, Connection c) except -1:
        """A TLS and/or codec connection is readable: decrypt (advancing the handshake),
        decode (WebSocket frames, S2), and parse all the protocol bytes that yields."""
        cdef ssize_t n
        cdef Py_ssize_t m
        cdef TlsSession tls = c.tls
        with nogil:
            n = recv(c.fd, self.rbuf, self.rbuf_size, 0)
        if n == 0:
            c.schedule_close("Client Closed")
            return 0
        if n < 0:
            if errno != EAGAIN and errno != EINTR:
                c.schedule_close("Read Error")
            return 0
        c.last_activity = now_mono()
        if tls is None:
            return self.from_wire(c, self.rbuf, n)
        if c.tls_sniff:
            c.tls_sniff = False
            if <unsigned char>self.rbuf[0] != 0x16 and not c.tls_active:
                # not a TLS handshake record: the handler decides (plaintext allowed or not)
                if c.handler.tls_not_offered(c):
                    c.tls = None
                    self.from_wire(c, self.rbuf, n)
                return 0
            c.tls_active = True
        tls.feed(self.rbuf, n)
        if not tls.established:
            m = tls.handshake()
            c.flush()                           # handshake messages out
            if m < 0:
                c.handler.tls_failed(c, tls.error)
                return 0
            if m == 0:
                return 0
            c.handler.tls_established(c)
            if c.closing or c.closed:
                return 0
        while True:
            m = tls.read_plain(self.tls_plain, SHARED_READ)
            if m == 0:
                break
            if m < 0:
                c.schedule_close("Client Closed" if tls.error == "connection closed by peer"
                                 else "TLS Handshake Failure")
                break
            self.from_wire(c, self.tls_plain, m)
            if c.closing or c.closed:
                return 0
        c.flush()                               # TLS may owe the peer a record (key update)
        return 0

    cdef int from_wire(self, Connection c, char* p, Py_ssize_t n) except -1:
        """Bytes off the wire (after TLS): through the codec, if any, to the parser."""
        cdef Bytes out
        cdef int r
        if c.codec is None:
            return self.feed_plain(c, p, n)
        out = self.decoded
        out.clear()
        r = c.codec.decode(p, n, out)
        if r < 0:
            c.handler.codec_error(c, c.codec.error)
            return 0
        if r == 1:
            c.handler.codec_head(c)             # an HTTP upgrade head: answered in Python
            if c.closing or c.closed:
                return 0
            r = c.codec.decode_pending(out)
            if r < 0:
                c.handler.codec_error(c, c.codec.error)
                return 0
        if out.len:
            self.feed_plain(c, out.data, out.len)
        if c.codec.control.len:
            c.flush()
        if c.codec.closed:
            c.schedule_close("Client Closed")
        return 0

    cdef int feed_plain(self, Connection c, char* p, Py_ssize_t n) except -1:
        """Protocol bytes for the parser (kept when the connection is paused or holds the
        start of a command)."""
        cdef Py_ssize_t consumed
        if c.raw_reader:
            c.handler.raw_data(c, p[:n])
            return 0
        if c.stalled or c.rlen > 0:
            c.keep_more(p, n)
            if not c.stalled and c.rlen >= c.rneed:
                self.parse_kept(c)
            return 0
        consumed = parse(c, p, n)
        if c.decode_switch:
            return self.switched(c, p + consumed, n - consumed)
        if consumed < n and not c.closing and not c.closed:
            c.keep_unparsed(p + consumed, n - consumed)
        return 0

    cdef int switched(self, Connection c, char* p, Py_ssize_t n) except -1:
        """A codec started after the command just parsed: the rest of the read is its."""
        c.decode_switch = False
        if n > 0 and not c.closing and not c.closed:
            self.from_wire(c, p, n)
        return 0

    cdef int switched_kept(self, Connection c, Py_ssize_t consumed) except -1:
        """switched() for bytes that were kept in the connection's read buffer."""
        cdef bytes rest = c.rbuf[consumed:c.rlen] if consumed < c.rlen else b""
        c.rlen = 0
        c.decode_switch = False
        if rest and not c.closing and not c.closed:
            self.from_wire(c, rest, len(rest))
        return 0

    def _resume_readers(self):
        cdef Connection c
        for c in take_resumed():
            if not c.stalled:
                self._set_reading(c, True)
                if c.rlen > 0 and not c.closing and not c.closed:
                    self.parse_kept(c)

    cdef int parse_kept(self, Connection c) except -1:
        """Commands that arrived while the connection was paused (kept, not yet parsed)."""
        if parse_rbuf(self, c):
            return 0
        if c.stalled:
            self._set_reading(c, False)
        return 0

    def _run_timers(self):
        cdef double now = now_mono()
        timers = self.timers
        while timers and timers[0][0] <= now:
            h = heapq.heappop(timers)[2]
            if h.cancelled:
                continue
            cb, args = h.callback, h.args
            h.cancel()
            try:
                cb(*args)
            except Exception:
                log.exception("timer callback failed")

    def _run_ready(self):
        ready = self.ready
        for _ in range(len(ready)):
            cb, args = ready.popleft()
            try:
                cb(*args)
            except Exception:
                log.exception("callback failed")

    def _close_pending(self):
        while True:
            batch = take_closing()
            if not batch:
                return
            for c in batch:
                try:
                    if (<Connection>c).codec is not None:
                        (<Connection>c).codec.goodbye((<Connection>c).close_reason)
                    (<Connection>c).flush()
                    (<Connection>c).handler.close(c)
                except Exception:
                    log.exception("closing cid:%s failed", (<Connection>c).cid)

    def close(self):
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None


class _WakeReader:
    """Drains the eventfd that other threads (and call_soon_threadsafe) write to."""

    def __init__(self, fd):
        self.fd = fd

    def on_event(self, events):
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass
