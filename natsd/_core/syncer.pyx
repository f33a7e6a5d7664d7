# cython: language_level=3, boundscheck=False, wraparound=False
"""Group-commit fdatasyncs off the loop thread, with no GIL on the way there or back.

A SyncJob is the work of one group commit: fdatasync a duplicate of the active block's fd (and
fsync the directory when blocks came or went), then close the duplicates. Log._start_sync
hands one to its `submit(job, done)`:

- Called as a function, a SyncJob does that work on the calling thread, so any executor can
  run it (the store tests use plain thread pools).
- Loop.submit gives it to this module instead: SYNC_THREADS pthreads, which never take the GIL,
  pop jobs from a queue, sync, queue the result and write the loop's eventfd. Each iteration
  the loop calls drain(), which runs the finished jobs' done(None, exc) on the loop thread.
- Or, when the loop has nothing else to do (no socket ready, no sync in flight) and syncs are
  quick (a moving average under INLINE_MAX_NS), Loop.submit runs it at once on the loop thread
  (run_here): even GIL-free, the two thread wake-ups of a hand-off cost about 60 µs on a 2-core
  machine, which a publisher waiting for its PubAck pays on every message. On a slow disk the
  average rises and every sync goes to the threads, so the loop never stalls for long.

Compared with a ThreadPoolExecutor the threads save the GIL hand-offs, the Python future and
the call_soon_threadsafe between a sync's end and its PubAcks.
"""
import logging

from libc.stdlib cimport realloc
from libc.string cimport memmove, strerror
from libc.errno cimport errno

DEF SYNC_THREADS = 4
DEF INLINE_MAX_NS = 500000      # syncs slower than this on average never run on the loop thread

log = logging.getLogger("natsd")

cdef extern from "unistd.h" nogil:
    int fdatasync(int fd)
    int fsync(int fd)
    int close(int fd)
    ssize_t write(int fd, const void* buf, size_t n)

from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef extern from "<signal.h>" nogil:
    ctypedef struct sigset_t:
        pass
    int sigfillset(sigset_t* s)
    int pthread_sigmask(int how, const sigset_t* s, sigset_t* old)
    int SIG_BLOCK

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_create(pthread_t* t, const void* attr, void* (*fn)(void*) noexcept nogil, void* arg)
    int pthread_detach(pthread_t t)
    int pthread_mutex_init(pthread_mutex_t* m, const void* attr)
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_cond_init(pthread_cond_t* c, const void* attr)
    int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m)
    int pthread_cond_signal(pthread_cond_t* c)

ctypedef struct job_t:
    long long token
    int fd
    int dirfd
    int err             # errno of the first failure, 0 when both syncs succeeded
    long long took      # nanoseconds the syncs took


cdef inline long long _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec


cdef double avg_ns = 0          # moving average of a sync's duration (loop thread only)


cdef inline void _observe(long long took):
    global avg_ns
    avg_ns = took if avg_ns == 0 else avg_ns * 0.875 + took * 0.125


cdef int _sync_pair(int fd, int dirfd) noexcept nogil:
    """fdatasync fd, fsync dirfd (if >= 0), close both: the first errno, or 0."""
    cdef int err = 0
    if fdatasync(fd) != 0:
        err = errno
    if dirfd >= 0:
        if fsync(dirfd) != 0 and err == 0:
            err = errno
        close(dirfd)
    close(fd)
    return err


cdef class SyncJob:
    """One group commit's fdatasync (see the module text); runs at most once."""

    def __cinit__(self, int fd, int dirfd):
        self.fd = fd
        self.dirfd = dirfd

    cdef bint take(self, int* fd, int* dirfd):
        if self.fd < 0:
            return False
        fd[0], dirfd[0] = self.fd, self.dirfd
        self.fd = self.dirfd = -1
        return True

    def __call__(self):
        cdef int fd, dirfd, err
        if not self.take(&fd, &dirfd):
            raise RuntimeError("SyncJob run twice")
        with nogil:
            err = _sync_pair(fd, dirfd)
        if err:
            raise OSError(err, strerror(err).decode())


# The queue of jobs to run and the list of jobs run, both under `mu`. Workers wait on `cv`.
cdef pthread_mutex_t mu
cdef pthread_cond_t cv
cdef job_t* todo = NULL
cdef Py_ssize_t todo_head = 0, todo_len = 0, todo_cap = 0
cdef job_t* finished = NULL
cdef Py_ssize_t finished_len = 0, finished_cap = 0
cdef int wake_fd = -1
cdef bint started = False
cdef long long next_token = 0
cdef dict callbacks = {}        # token -> done(result, exc); touched on the loop thread only

pthread_mutex_init(&mu, NULL)
pthread_cond_init(&cv, NULL)


cdef void* _worker(void* arg) noexcept nogil:
    cdef job_t j
    cdef job_t* grown
    cdef unsigned long long one = 1
    cdef sigset_t all_signals
    sigfillset(&all_signals)            # signals are the loop thread's to take (its epoll_wait)
    pthread_sigmask(SIG_BLOCK, &all_signals, NULL)
    while True:
        pthread_mutex_lock(&mu)
        while todo_head == todo_len:
            pthread_cond_wait(&cv, &mu)
        j = todo[todo_head]
        _pop_todo()
        pthread_mutex_unlock(&mu)
        j.took = _mono_ns()
        j.err = _sync_pair(j.fd, j.dirfd)
        j.took = _mono_ns() - j.took
        pthread_mutex_lock(&mu)
        if finished_len == finished_cap:
            grown = <job_t*>realloc(finished, sizeof(job_t) * (finished_cap * 2 + 16))
            while grown == NULL:            # out of memory: wait for the loop to drain
                pthread_mutex_unlock(&mu)
                write(wake_fd, &one, 8)
                pthread_mutex_lock(&mu)
                if finished_len < finished_cap:
                    break
                grown = <job_t*>realloc(finished, sizeof(job_t) * (finished_cap * 2 + 16))
            if grown != NULL:
                _set_finished(grown, finished_cap * 2 + 16)
        _push_finished(j)
        pthread_mutex_unlock(&mu)
        write(wake_fd, &one, 8)
    return NULL


cdef inline void _pop_todo() noexcept nogil:
    global todo_head, todo_len
    todo_head += 1
    if todo_head == todo_len:
        todo_head = todo_len = 0


cdef inline void _set_finished(job_t* p, Py_ssize_t cap) noexcept nogil:
    global finished, finished_cap
    finished = p
    finished_cap = cap


cdef inline void _push_finished(job_t j) noexcept nogil:
    global finished_len
    finished[finished_len] = j
    finished_len += 1


cdef int _start_threads() except -1:
    global started
    cdef pthread_t t
    cdef int i
    for i in range(SYNC_THREADS):
        if pthread_create(&t, NULL, _worker, NULL) != 0:
            if i == 0:
                raise OSError(errno, "cannot start the sync threads: %s" % strerror(errno).decode())
            break
        pthread_detach(t)
    started = True
    return 0


def set_wake_fd(int fd):
    """The eventfd the loop watches; written after each finished job."""
    global wake_fd
    wake_fd = fd


def wake_fd_now():
    return wake_fd


cpdef int submit(SyncJob job, object done) except -1:
    """Run `job` on a sync thread; done(None, exc) runs on the loop thread, from drain()."""
    global todo, todo_head, todo_len, todo_cap, next_token
    cdef job_t j
    cdef job_t* grown
    if wake_fd < 0:
        raise RuntimeError("syncer: no loop to wake (set_wake_fd first)")
    if not job.take(&j.fd, &j.dirfd):
        raise RuntimeError("SyncJob run twice")
    if not started:
        _start_threads()
    next_token += 1
    j.token = next_token
    j.err = 0
    with nogil:
        pthread_mutex_lock(&mu)
        if todo_len == todo_cap and todo_head > 0:
            memmove(todo, todo + todo_head, sizeof(job_t) * (todo_len - todo_head))
            todo_len -= todo_head
            todo_head = 0
        grown = todo
        if todo_len == todo_cap:
            grown = <job_t*>realloc(todo, sizeof(job_t) * (todo_cap * 2 + 16))
            if grown != NULL:
                todo = grown
                todo_cap = todo_cap * 2 + 16
        if grown != NULL:
            todo[todo_len] = j
            todo_len += 1
            pthread_cond_signal(&cv)
        pthread_mutex_unlock(&mu)
    if grown == NULL:
        close(j.fd)
        if j.dirfd >= 0:
            close(j.dirfd)
        raise MemoryError()
    callbacks[j.token] = done
    return 0


cpdef int drain() except -1:
    """Run the callbacks of the jobs finished since the last call (loop thread)."""
    global finished_len
    cdef list done = []
    cdef Py_ssize_t i
    if finished_len == 0:       # unlocked peek: a job finishing now wakes the loop again
        return 0
    pthread_mutex_lock(&mu)
    for i in range(finished_len):
        done.append((finished[i].token, finished[i].err))
        _observe(finished[i].took)
    finished_len = 0
    pthread_mutex_unlock(&mu)
    for token, err in done:
        cb = callbacks.pop(token)
        try:
            cb(None, OSError(err, strerror(err).decode()) if err else None)
        except Exception:
            log.exception("a sync's callback failed")
    return 0


cpdef bint quick_and_idle():
    """Whether a sync may run on the loop thread now, as far as syncs go: none in flight (a
    later one must not overtake it) and recent ones quick."""
    return not callbacks and avg_ns < INLINE_MAX_NS


cpdef int run_here(SyncJob job, object done) except -1:
    """Run `job` on this (the loop) thread without the GIL, then done(None, exc)."""
    cdef int fd, dirfd, err
    cdef long long t0
    if not job.take(&fd, &dirfd):
        raise RuntimeError("SyncJob run twice")
    with nogil:
        t0 = _mono_ns()
        err = _sync_pair(fd, dirfd)
        t0 = _mono_ns() - t0
    _observe(t0)
    done(None, OSError(err, strerror(err).decode()) if err else None)
    return 0


def average_ns():
    """The moving average of a sync's duration (0 before the first)."""
    return avg_ns


def in_flight():
    """Jobs submitted whose callbacks have not run yet."""
    return len(callbacks)
