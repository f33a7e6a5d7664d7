# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""The log's in-memory index (LogIndex, the base of natsd/_core/log.pyx's Log): which
sequences hold a live message, where, on which subject, and the queries over it.

Per sequence, one 12-byte entry (offset, size|hdr-bit, subject id) in 64K-entry chunks
allocated lazily (a gap costs nothing; compaction frees whole chunks). Per subject: its live
count and first/last bounds, made exact lazily. Filters (a literal subject or a wildcard) are
resolved once to a subject id or a bitmap of subject ids, cached per wildcard and extended as
subjects are added. The scans and counts are C loops over the chunks, without the GIL.

This module knows nothing of blocks and files: Log adds the records on disk that the entries
point into (offset and size are its), and reads them.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.stdlib cimport calloc, realloc, free
from libc.string cimport memcpy, memset
from natsd._core.logfmt cimport acct_size, nlog_match


cdef class LogIndex:
    def __cinit__(self):
        self.chunks = NULL
        self.sstats = NULL
        self.sid_of = {}
        self.subjects = []
        self.wc_cache = {}

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.chunks != NULL:
            for i in range(self.nchunks):
                free(self.chunks[i])
            free(self.chunks)
        free(self.sstats)

    # ---------------------------------------------------------------- index chunks

    cdef nlog_entry* _entry(self, uint64_t seq) nogil:
        cdef int64_t k = <int64_t>(seq >> CHUNK_BITS) - self.chunk_lo
        if k < 0 or k >= self.nchunks or self.chunks[k] == NULL:
            return NULL
        return &self.chunks[k][seq & (CHUNK - 1)]

    cdef nlog_entry* _entry_alloc(self, uint64_t seq) except NULL:
        cdef int64_t c = <int64_t>(seq >> CHUNK_BITS)
        cdef int64_t k, shift, n
        cdef nlog_entry** nc
        if self.nchunks == 0:
            self.chunks = <nlog_entry**>calloc(1, sizeof(nlog_entry*))
            if self.chunks == NULL:
                raise MemoryError()
            self.chunk_lo = c
            self.nchunks = 1
        elif c < self.chunk_lo:
            shift = self.chunk_lo - c
            nc = <nlog_entry**>calloc(self.nchunks + shift, sizeof(nlog_entry*))
            if nc == NULL:
                raise MemoryError()
            memcpy(nc + shift, self.chunks, self.nchunks * sizeof(nlog_entry*))
            free(self.chunks)
            self.chunks = nc
            self.nchunks += shift
            self.chunk_lo = c
        elif c - self.chunk_lo >= self.nchunks:
            n = c - self.chunk_lo + 1
            n = max(n, self.nchunks * 2)
            nc = <nlog_entry**>realloc(self.chunks, n * sizeof(nlog_entry*))
            if nc == NULL:
                raise MemoryError()
            memset(nc + self.nchunks, 0, (n - self.nchunks) * sizeof(nlog_entry*))
            self.chunks = nc
            self.nchunks = n
        k = c - self.chunk_lo
        if self.chunks[k] == NULL:
            self.chunks[k] = <nlog_entry*>calloc(CHUNK, sizeof(nlog_entry))
            if self.chunks[k] == NULL:
                raise MemoryError()
        return &self.chunks[k][seq & (CHUNK - 1)]

    cdef _free_chunks_below(self, uint64_t seq):
        # Drop whole chunks that lie entirely below seq (compaction).
        cdef int64_t c = <int64_t>(seq >> CHUNK_BITS)
        cdef int64_t k, drop
        if self.nchunks == 0 or c <= self.chunk_lo:
            return
        drop = min(c - self.chunk_lo, self.nchunks)
        for k in range(drop):
            free(self.chunks[k])
        memcpy(self.chunks, self.chunks + drop, (self.nchunks - drop) * sizeof(nlog_entry*))
        memset(self.chunks + self.nchunks - drop, 0, drop * sizeof(nlog_entry*))
        self.chunk_lo += drop

    # ---------------------------------------------------------------- subjects

    cdef uint32_t _sid(self, bytes subject) except? 0xffffffff:
        cdef object sid = self.sid_of.get(subject)
        cdef Py_ssize_t n
        cdef nlog_sstat* ns
        if sid is not None:
            return <uint32_t>sid
        n = len(self.subjects)
        if n >= self.scap:
            ns = <nlog_sstat*>realloc(self.sstats, max(64, self.scap * 2) * sizeof(nlog_sstat))
            if ns == NULL:
                raise MemoryError()
            self.sstats = ns
            self.scap = max(64, self.scap * 2)
        memset(&self.sstats[n], 0, sizeof(nlog_sstat))
        self.subjects.append(subject)
        self.sid_of[subject] = n
        return <uint32_t>n

    cdef tuple _filter(self, filt):
        """Resolve a filter to (mode, sid, bitmap)."""
        cdef bytes f
        cdef list ent
        cdef bytearray bm
        cdef Py_ssize_t i, n
        cdef bytes s
        if filt is None:
            return (M_ALL, 0, None)
        f = filt.encode() if isinstance(filt, str) else bytes(filt)
        if f == b"" or f == b">":
            return (M_ALL, 0, None)
        if b"*" not in f and b">" not in f:
            sid = self.sid_of.get(f)
            return (M_NONE, 0, None) if sid is None else (M_SID, sid, None)
        ent = self.wc_cache.get(f)
        if ent is None:
            if len(self.wc_cache) >= 256:
                self.wc_cache.clear()
            ent = [bytearray(), 0]
            self.wc_cache[f] = ent
        n = len(self.subjects)
        if <Py_ssize_t>ent[1] < n:
            # Match only the subjects added since this filter was last used.
            bm = ent[0]
            bm.extend(bytes(n - len(bm)))
            for i in range(<Py_ssize_t>ent[1], n):
                s = self.subjects[i]
                if nlog_match(f, len(f), s, len(s)):
                    bm[i] = 1
            ent[1] = n
        return (M_BITMAP, 0, ent[0])

    cdef int _index_entry(self, uint64_t seq, int64_t ts, uint32_t off, uint32_t size,
                          uint32_t sid) except -1:
        cdef nlog_entry* e = self._entry_alloc(seq)
        cdef nlog_sstat* st
        if e.size:
            self._unindex(seq, e)
        e.off = off
        e.size = size
        e.sid = sid
        if self.msgs == 0 or seq < self.first:
            self.first = seq
        self.msgs += 1
        self.bytes += acct_size(size)
        if seq >= self.last:
            self.last = seq
            self.last_ts = ts
        st = &self.sstats[sid]
        if st.count == 0:
            self.nsubj_live += 1
            st.first = seq
            st.last = seq
        else:
            if seq < st.first:
                st.first = seq
            if seq > st.last:
                st.last = seq
        st.count += 1
        return 0

    cdef int _unindex(self, uint64_t seq, nlog_entry* e) except -1:
        cdef nlog_sstat* st = &self.sstats[e.sid]
        self.msgs -= 1
        self.bytes -= acct_size(e.size)
        st.count -= 1
        if st.count == 0:
            self.nsubj_live -= 1
        e.size = 0
        return 0

    cdef int _advance_first(self) except -1:
        cdef uint64_t s
        if self.msgs == 0:
            self.first = self.last + 1
        else:
            s = self._scan_fwd(self.first, self.last, M_ALL, 0, NULL, 0)
            self.first = s if s else self.last + 1
        return 0

    def subject_of(self, uint64_t seq):
        cdef nlog_entry* e = self._entry(seq)
        if e == NULL or e.size == 0:
            return None
        return self.subjects[e.sid]

    # ---------------------------------------------------------------- scanning (C loops)

    cdef uint64_t _scan_fwd(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                            const uint8_t* bm, Py_ssize_t bmlen) nogil:
        cdef uint64_t s = start
        cdef nlog_entry* ch
        cdef int64_t k
        cdef uint64_t i, stop
        while s <= end and s != 0:
            k = <int64_t>(s >> CHUNK_BITS) - self.chunk_lo
            if k >= self.nchunks:
                return 0
            stop = min(end, ((s >> CHUNK_BITS) << CHUNK_BITS) + CHUNK - 1)
            if k < 0 or self.chunks[k] == NULL:
                s = stop + 1
                continue
            ch = self.chunks[k]
            for i in range(s & (CHUNK - 1), (stop & (CHUNK - 1)) + 1):
                if ch[i].size and (mode == M_ALL or (mode == M_SID and ch[i].sid == sid) or
                                   (mode == M_BITMAP and ch[i].sid < bmlen and bm[ch[i].sid])):
                    return ((s >> CHUNK_BITS) << CHUNK_BITS) + i
            s = stop + 1
        return 0

    cdef uint64_t _scan_back(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                             const uint8_t* bm, Py_ssize_t bmlen) nogil:
        # Highest live matching seq in [end, start] (start >= end), or 0.
        cdef uint64_t s = start, base, lo
        cdef nlog_entry* ch
        cdef int64_t k, i
        while s >= end and s != 0:
            base = (s >> CHUNK_BITS) << CHUNK_BITS
            lo = max(base, end)
            k = <int64_t>(s >> CHUNK_BITS) - self.chunk_lo
            if k < 0:
                return 0
            if k < self.nchunks and self.chunks[k] != NULL:
                ch = self.chunks[k]
                i = <int64_t>(s - base)
                while i >= <int64_t>(lo - base):
                    if ch[i].size and (mode == M_ALL or (mode == M_SID and ch[i].sid == sid) or
                                       (mode == M_BITMAP and ch[i].sid < bmlen and bm[ch[i].sid])):
                        return base + i
                    i -= 1
            if lo == 0:
                return 0
            s = lo - 1
        return 0

    cdef uint64_t _count(self, uint64_t start, uint64_t end, int mode, uint32_t sid,
                         const uint8_t* bm, Py_ssize_t bmlen) nogil:
        cdef uint64_t s = start, n = 0, i, stop
        cdef nlog_entry* ch
        cdef int64_t k
        while s <= end and s != 0:
            k = <int64_t>(s >> CHUNK_BITS) - self.chunk_lo
            if k >= self.nchunks:
                break
            stop = min(end, ((s >> CHUNK_BITS) << CHUNK_BITS) + CHUNK - 1)
            if k >= 0 and self.chunks[k] != NULL:
                ch = self.chunks[k]
                for i in range(s & (CHUNK - 1), (stop & (CHUNK - 1)) + 1):
                    if ch[i].size and (mode == M_ALL or (mode == M_SID and ch[i].sid == sid) or
                                       (mode == M_BITMAP and ch[i].sid < bmlen and bm[ch[i].sid])):
                        n += 1
            s = stop + 1
        return n

    cdef uint64_t _subj_edge(self, uint32_t sid, bint last):
        """The first (or last) live seq on subject `sid`, or 0; its bound is made exact."""
        cdef nlog_sstat* st = &self.sstats[sid]
        cdef uint64_t s
        if st.count == 0:
            return 0
        if last:
            s = st.last = self._scan_back(min(st.last, self.last), self.first, M_SID, sid, NULL, 0)
        else:
            s = st.first = self._scan_fwd(max(st.first, self.first), self.last, M_SID, sid, NULL, 0)
        return s

    def next_seq(self, uint64_t seq, filt=None):
        """First live seq >= seq matching filt, or 0."""
        cdef int mode
        cdef uint32_t sid
        cdef const uint8_t* bp = NULL
        cdef Py_ssize_t bl = 0
        if self.msgs == 0:
            return 0
        mode, sid, bm = self._filter(filt)
        if mode == M_NONE:
            return 0
        if seq < self.first:
            seq = self.first
        if mode == M_SID:
            if self.sstats[sid].count == 0:
                return 0
            if seq <= self.sstats[sid].first:
                return self._subj_edge(sid, False)
            if seq > self.sstats[sid].last:
                return 0
            return self._scan_fwd(seq, min(self.last, self.sstats[sid].last), M_SID, sid, NULL, 0)
        if mode == M_BITMAP:
            bp = <const uint8_t*>PyByteArray_AS_STRING(bm)
            bl = PyByteArray_GET_SIZE(bm)
        return self._scan_fwd(seq, self.last, mode, sid, bp, bl)

    def prev_seq(self, uint64_t seq, filt=None):
        """Last live seq <= seq matching filt, or 0."""
        cdef int mode
        cdef uint32_t sid
        cdef const uint8_t* bp = NULL
        cdef Py_ssize_t bl = 0
        if self.msgs == 0 or seq < self.first:
            return 0
        mode, sid, bm = self._filter(filt)
        if mode == M_NONE:
            return 0
        if seq > self.last:
            seq = self.last
        if mode == M_SID:
            if self.sstats[sid].count == 0:
                return 0
            if seq >= self.sstats[sid].last:
                return self._subj_edge(sid, True)
            return self._scan_back(seq, max(self.first, self.sstats[sid].first), M_SID, sid, NULL, 0)
        if mode == M_BITMAP:
            bp = <const uint8_t*>PyByteArray_AS_STRING(bm)
            bl = PyByteArray_GET_SIZE(bm)
        return self._scan_back(seq, self.first, mode, sid, bp, bl)

    def count(self, uint64_t start, filt=None, bint last_per_subject=False):
        """Live messages with seq >= start matching filt (or matching subjects, per subject)."""
        cdef int mode
        cdef uint32_t sid
        cdef const uint8_t* bp = NULL
        cdef Py_ssize_t bl = 0, i, n = 0
        if self.msgs == 0:
            return 0
        mode, sid, bm = self._filter(filt)
        if mode == M_NONE:
            return 0
        if last_per_subject:
            for i in range(len(self.subjects)):
                if self.sstats[i].count and (mode == M_ALL or (mode == M_SID and i == sid) or
                                             (mode == M_BITMAP and bm[i])):
                    if self.sstats[i].last >= start and self._subj_edge(i, True) >= start:
                        n += 1
            return n
        if start <= self.first:
            if mode == M_ALL:
                return self.msgs
            if mode == M_SID:
                return self.sstats[sid].count
        if mode == M_SID:
            if start <= self.sstats[sid].first:
                return self.sstats[sid].count
            return self._count(start, min(self.last, self.sstats[sid].last), M_SID, sid, NULL, 0)
        if mode == M_BITMAP:
            bp = <const uint8_t*>PyByteArray_AS_STRING(bm)
            bl = PyByteArray_GET_SIZE(bm)
            if start <= self.first:
                n = 0
                for i in range(bl):
                    if bp[i]:
                        n += self.sstats[i].count
                return n
        return self._count(max(start, self.first), self.last, mode, sid, bp, bl)

    def nth_from_end(self, uint64_t k):
        """Seq of the k-th newest live message (k >= 1), 0 if fewer."""
        cdef uint64_t s = self.last, found = 0
        while k > 0:
            s = self._scan_back(s, self.first, M_ALL, 0, NULL, 0)
            if s == 0:
                return 0
            found = s
            k -= 1
            s -= 1
        return found

    def subject_counts(self, filt=None):
        cdef int mode
        cdef uint32_t sid
        cdef Py_ssize_t i
        cdef dict out = {}
        mode, sid, bm = self._filter(filt)
        if mode == M_NONE:
            return out
        if mode == M_SID:
            if self.sstats[sid].count:
                out[self.subjects[sid]] = self.sstats[sid].count
            return out
        for i in range(len(self.subjects)):
            if self.sstats[i].count and (mode == M_ALL or bm[i]):
                out[self.subjects[i]] = self.sstats[i].count
        return out

    def subject_state(self, subject):
        cdef object sid = self.sid_of.get(subject.encode() if isinstance(subject, str) else subject)
        if sid is None or self.sstats[<uint32_t>sid].count == 0:
            return (0, 0, 0)
        return (self.sstats[<uint32_t>sid].count, self._subj_edge(sid, False), self._subj_edge(sid, True))

    def deleted(self):
        """Interior sequences in [first, last] with no live message."""
        cdef list out = []
        cdef uint64_t s
        cdef nlog_entry* e
        if self.msgs == 0:
            return out
        for s in range(self.first, self.last + 1):
            e = self._entry(s)
            if e == NULL or e.size == 0:
                out.append(s)
        return out
