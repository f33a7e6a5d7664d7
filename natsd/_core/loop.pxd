# The epoll loop: sockets, timers, thread hand-off. One per process.
from natsd._core.conn cimport Connection
from natsd._core.tls cimport TlsSession
from natsd._core.codec cimport Bytes
from natsd._core.syncer cimport SyncJob

cdef extern from "sys/epoll.h" nogil:
    ctypedef union epoll_data_t:
        void* ptr
        int fd
        unsigned int u32
        unsigned long long u64
    struct epoll_event:
        unsigned int events
        epoll_data_t data

cdef class Loop:
    cdef int epfd
    cdef int wakefd
    cdef dict handlers          # fd -> object registered (keeps it alive)
    cdef list graveyard         # objects removed this iteration (their events may still be queued)
    cdef list timers            # heap of (when, seq, TimerHandle)
    cdef unsigned long long timer_seq
    cdef object ready           # deque of (callback, args) from call_soon / other threads
    cdef object executor
    cdef char* rbuf             # shared read buffer
    cdef Py_ssize_t rbuf_size
    cdef epoll_event* events
    cdef public bint running
    cdef public long long iterations
    cdef public double poll_max     # seconds: the longest polling window (Loop(poll_us))
    cdef public double poll_window  # seconds: the polling window now (see _wait)
    cdef bint had_events            # the last wait returned events

    cdef int read_conn(self, Connection c) except -1
    cdef int parse_kept(self, Connection c) except -1
    cdef int read_layered(self, Connection c) except -1
    cdef int from_wire(self, Connection c, char* p, Py_ssize_t n) except -1
    cdef int feed_plain(self, Connection c, char* p, Py_ssize_t n) except -1
    cdef int switched(self, Connection c, char* p, Py_ssize_t n) except -1
    cdef int switched_kept(self, Connection c, Py_ssize_t consumed) except -1
    cdef char* tls_plain        # decrypted bytes of one TLS read
    cdef Bytes decoded          # what a codec decoded from one read
    cdef int run_once(self) except -1
    cdef int _wait(self, int timeout, int* err)
    cdef void _conn_event(self, Connection c, unsigned int evs)
    cdef void _set_reading(self, Connection c, bint reading)
    cdef bint _events_ready(self)
    cdef int hand_off_sync(self, SyncJob job, object done, bint may_inline) except -1
