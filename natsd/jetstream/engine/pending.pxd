# A consumer's pending (delivered, not yet acknowledged) messages in compact pages: see
# pending.pyx. Declared here so the delivery fast path (fastdeliver.pyx) records deliveries and
# the plain-ack path (fastack.pyx) removes them at C level.
from libc.stdint cimport uint16_t, uint32_t, uint64_t, int64_t


cdef enum:
    PAGE_BITS = 10                     # one page per 1024 stream sequences
    PAGE = 1024
    PAGE_MASK = 1023
    DEAD = 0x8000                      # tombstone bit in a slot's offset


cdef struct ppage:
    uint64_t dbase                     # delivery sequences are stored as dseq - dbase ...
    uint32_t n                         # slots in use, tombstones included (sorted by offset)
    uint32_t cap                       # slots allocated: 4, 8, ... PAGE
    uint32_t live                      # slots that are not tombstones
    uint32_t head                      # every slot below head is a tombstone
    int wide                           # ... in 32 bits, or whole (d64) when they do not fit
    int64_t* ts                        # one block: ts[cap], then d32[cap] or d64[cap], off[cap]
    uint32_t* d32
    uint64_t* d64
    uint16_t* off


cdef struct pdirent:
    uint64_t pn                        # page number (stream seq >> PAGE_BITS)
    ppage* pg                          # NULL: an emptied page not yet compacted away


cdef class Pending:
    cdef pdirent* dir                  # the non-empty pages, ascending by page number, in
    cdef Py_ssize_t dstart             # dir[dstart:dend] (first and last never NULL)
    cdef Py_ssize_t dend
    cdef Py_ssize_t dcap
    cdef Py_ssize_t dlive              # entries with a page
    cdef Py_ssize_t count              # pending messages
    cdef Py_ssize_t nalloc             # bytes held by pages and the directory

    cdef int put(self, uint64_t seq, uint64_t dseq, int64_t ts) except -1
    cdef uint64_t take(self, uint64_t seq)
    cdef void _free_all(self) noexcept
    cdef Py_ssize_t _dfind(self, uint64_t pn) noexcept
    cdef int _dir_room(self) except -1
    cdef void _dir_compact(self) noexcept
    cdef ppage* _page_make(self, uint64_t seq) except NULL
    cdef void _drop_page(self, Py_ssize_t i) noexcept
    cdef int _rebuild(self, ppage* pg, uint32_t cap, int wide) except -1
    cdef int _fit(self, ppage* pg, uint64_t dseq) except -1
    cdef int _room(self, ppage* pg) except -1
    cdef long _slot(self, uint64_t seq, ppage** out) noexcept
    cdef uint64_t _first(self) noexcept
    cdef uint64_t _first_dseq(self) noexcept
