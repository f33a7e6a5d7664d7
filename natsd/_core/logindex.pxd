# The log's in-memory index (natsd/_core/logindex.pyx): the entry and subject-stat layouts,
# and LogIndex, the base class of Log (log.pxd) holding them.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t

cdef extern from *:
    """
    typedef struct { uint32_t off; uint32_t size; uint32_t sid; } nlog_entry;
    typedef struct { uint64_t count; uint64_t first; uint64_t last; } nlog_sstat;
    """
    ctypedef struct nlog_entry:
        uint32_t off      # offset of the record in its block's (uncompressed) image
        uint32_t size     # record length | HDR_BIT; 0 = not live (deleted or never written)
        uint32_t sid      # subject id into Log.subjects
    ctypedef struct nlog_sstat:
        uint64_t count    # live messages on this subject
        uint64_t first    # lower bound of the first live seq (made exact lazily)
        uint64_t last     # upper bound of the last live seq (made exact lazily)


cdef enum:
    CHUNK_BITS = 16                    # the index is kept in chunks of 2**16 sequences
    CHUNK = 65536


cdef enum:
    M_NONE = -1                        # a resolved filter's mode: a literal subject never seen
    M_ALL = 0                          #   (nothing matches), everything, one subject id,
    M_SID = 1                          #   a bitmap of subject ids (a wildcard)
    M_BITMAP = 2


cdef class LogIndex:
    cdef nlog_entry** chunks           # index: chunk k covers seqs [(chunk_lo+k) << 16, ...)
    cdef int64_t chunk_lo
    cdef Py_ssize_t nchunks

    cdef readonly uint64_t first
    cdef readonly uint64_t last
    cdef readonly uint64_t msgs
    cdef readonly uint64_t bytes
    cdef readonly int64_t last_ts
    cdef dict sid_of                   # subject bytes -> sid
    cdef list subjects                 # sid -> subject bytes
    cdef nlog_sstat* sstats
    cdef Py_ssize_t scap
    cdef readonly Py_ssize_t nsubj_live
    cdef dict wc_cache                 # wildcard filter -> [bytearray bitmap, sids checked]

    cdef int _index_entry(self, uint64_t seq, int64_t ts, uint32_t off, uint32_t size,
                          uint32_t sid) except -1
    cdef nlog_entry* _entry(self, uint64_t seq) nogil
    cdef nlog_entry* _entry_alloc(self, uint64_t seq) except NULL
    cdef int _unindex(self, uint64_t seq, nlog_entry* e) except -1
    cdef uint32_t _sid(self, bytes subject) except? 0xffffffff
    cdef uint64_t _scan_fwd(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                            const uint8_t* bm, Py_ssize_t bmlen) nogil
    cdef uint64_t _scan_back(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                             const uint8_t* bm, Py_ssize_t bmlen) nogil
    cdef int _advance_first(self) except -1
    cdef uint64_t _count(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                         const uint8_t* bm, Py_ssize_t bmlen) nogil
    cdef uint64_t _subj_edge(self, uint32_t sid, bint last)
    cdef _free_chunks_below(self, uint64_t seq)
    cdef tuple _filter(self, filt)
