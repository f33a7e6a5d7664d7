# Group-commit fdatasyncs on pthreads that never take the GIL (natsd/_core/syncer.pyx).
cdef class SyncJob:
    cdef readonly int fd
    cdef readonly int dirfd
    cdef bint take(self, int* fd, int* dirfd)

cpdef int submit(SyncJob job, object done) except -1
cpdef int run_here(SyncJob job, object done) except -1
cpdef int drain() except -1
cpdef bint quick_and_idle()
