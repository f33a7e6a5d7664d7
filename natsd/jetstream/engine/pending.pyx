# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A consumer's pending messages (delivered, not yet acknowledged) in compact pages.

Holds what nats-server's `map[uint64]*Pending` holds - stream sequence -> (delivery sequence,
timestamp ns) - in about 14 bytes per message instead of a Python dict of lists (~250 bytes).

Layout: stream sequences are cut into pages of PAGE (1024) sequences; a directory lists the
pages that hold pending messages, ascending (found at once when they are contiguous, else by a
binary search), so a gap of any size between two pending messages costs nothing. A page
keeps its messages sorted by stream sequence in three columns - the timestamp (int64), the
delivery sequence as an offset from the page's `dbase` (uint32; the page switches to whole
uint64 values in the rare case one does not fit) and the sequence's offset in the page (uint16)
- so a dense page costs 14 bytes per message and a sparse one (a filtered consumer) only what
it holds. Slots grow 4, 8, ... PAGE, so a full page is exactly PAGE slots.

Deliveries mostly come in stream order (append at the end of the last page); acks mostly
remove the oldest (the page's `head`). A removal marks the slot dead (DEAD bit in its offset):
O(1) after the lookup (a binary search in one page, <= 10 steps, or O(1) at the head or tail);
a page compacts when the dead outnumber the live (amortised O(1)) and is freed when empty. An
insert out of order (a redelivery is an update in place; a new pending message below the
newest one only after a restart or a reset) shifts the rest of its page.
"""
from libc.stdint cimport uint16_t, uint32_t, uint64_t, int64_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memmove, memset
from cpython.bytes cimport PyBytes_FromStringAndSize
from natsd._core.fmt cimport put_int

cdef enum:
    MIN_CAP = 4
    CHUNK = 65536                      # write_json's piece size


cdef inline size_t _blk(uint32_t cap, int wide) noexcept nogil:
    return <size_t>cap * (8 + (8 if wide else 4) + 2)


cdef inline void _layout(ppage* pg, char* b) noexcept nogil:
    cdef size_t cap = pg.cap
    pg.ts = <int64_t*>b
    if pg.wide:
        pg.d64 = <uint64_t*>(b + 8 * cap)
        pg.d32 = NULL
        pg.off = <uint16_t*>(b + 16 * cap)
    else:
        pg.d32 = <uint32_t*>(b + 8 * cap)
        pg.d64 = NULL
        pg.off = <uint16_t*>(b + 12 * cap)


cdef inline uint64_t _getd(ppage* pg, uint32_t i) noexcept nogil:
    if pg.wide:
        return pg.d64[i]
    return pg.dbase + pg.d32[i]


cdef inline void _setd(ppage* pg, uint32_t i, uint64_t d) noexcept nogil:
    # callers made sure d fits (_fit)
    if pg.wide:
        pg.d64[i] = d
    else:
        pg.d32[i] = <uint32_t>(d - pg.dbase)


ctypedef fused sorted_keys:            # the two ascending arrays searched by _search
    uint16_t                           # a page's slot offsets (the DEAD bit aside)
    pdirent                            # the directory's entries, by page number


cdef inline uint64_t _key(sorted_keys* a, Py_ssize_t i) noexcept nogil:
    if sorted_keys is uint16_t:
        return a[i] & PAGE_MASK
    else:
        return a[i].pn


cdef inline Py_ssize_t _search(sorted_keys* a, Py_ssize_t lo, Py_ssize_t hi, uint64_t key) noexcept nogil:
    """Index of key in the ascending a[lo..hi] (lo <= hi), or -(insertion point) - 1. The last
    entry is tried first: most lookups are for the newest."""
    cdef Py_ssize_t mid
    cdef uint64_t k = _key(a, hi)
    if k == key:
        return hi
    if k < key:
        return -(hi + 1) - 1
    while lo <= hi:
        mid = (lo + hi) >> 1
        k = _key(a, mid)
        if k == key:
            return mid
        if k < key:
            lo = mid + 1
        else:
            hi = mid - 1
    return -lo - 1


cdef inline long _find(ppage* pg, uint32_t o) noexcept nogil:
    """Index of the slot for offset o (live or dead), or -(insertion point) - 1."""
    if pg.n == 0:
        return -1
    if pg.head < pg.n and pg.off[pg.head] == o:     # the oldest (live by invariant)
        return pg.head
    return _search(pg.off, 0, <Py_ssize_t>pg.n - 1, o)


cdef inline uint32_t _pow2(uint32_t n) noexcept nogil:
    cdef uint32_t c = MIN_CAP
    while c < n:
        c <<= 1
    return c


cdef struct live_slot:                # a walk over the live slots in sequence order (_next_live)
    Py_ssize_t p                       # the directory entry
    ppage* pg                          # its page
    uint32_t i                         # the slot in the page
    uint64_t seq                       # that slot's stream sequence


cdef inline bint _next_live(Pending q, live_slot* k) noexcept:
    """Move k to the first live slot at or after slot k.i of entry k.p (start: k.p = q.dstart,
    k.i = 0; next: k.i + 1) -> False when there is none."""
    while k.p < q.dend:
        k.pg = q.dir[k.p].pg
        if k.pg != NULL:
            if k.i < k.pg.head:
                k.i = k.pg.head
            while k.i < k.pg.n:
                if not (k.pg.off[k.i] & DEAD):
                    k.seq = (q.dir[k.p].pn << PAGE_BITS) + k.pg.off[k.i]
                    return True
                k.i += 1
        k.p += 1
        k.i = 0
    return False


cdef inline int64_t _ts(object ts) except? -1:
    try:
        return ts
    except OverflowError:
        return 0x7FFFFFFFFFFFFFFF if ts > 0 else -0x7FFFFFFFFFFFFFFF - 1


cdef inline long _key_slot(Pending p, object seq, ppage** out) except? -2:
    cdef uint64_t s
    try:
        s = seq
    except OverflowError:
        return -1
    return p._slot(s, out)


cdef class Pending:
    """stream seq -> (delivery seq, timestamp ns) for a consumer's unacknowledged messages,
    iterated in stream-sequence order. Delivery sequences are >= 1 (0 means "absent")."""

    def __cinit__(self):
        self.dir = NULL
        self.dstart = self.dend = self.dcap = self.dlive = 0
        self.count = 0
        self.nalloc = 0

    def __dealloc__(self):
        self._free_all()

    cdef void _free_all(self) noexcept:
        cdef Py_ssize_t i
        cdef ppage* pg
        for i in range(self.dstart, self.dend):
            pg = self.dir[i].pg
            if pg != NULL:
                free(pg.ts)
                free(pg)
        free(self.dir)
        self.dir = NULL
        self.dstart = self.dend = self.dcap = self.dlive = 0
        self.count = 0
        self.nalloc = 0

    # ---- the page directory ----

    cdef Py_ssize_t _dfind(self, uint64_t pn) noexcept:
        """Index of page pn's entry (its page may be NULL), or -(insertion point) - 1."""
        cdef Py_ssize_t lo = self.dstart, hi = self.dend - 1, g
        cdef uint64_t f
        if lo > hi:
            return -lo - 1
        f = self.dir[lo].pn
        if pn >= f and pn - f <= <uint64_t>(hi - lo):
            g = lo + <Py_ssize_t>(pn - f)       # contiguous pages: found at once
            if self.dir[g].pn == pn:
                return g
        if pn < f:
            return -lo - 1
        return _search(self.dir, lo, hi, pn)

    cdef void _dir_compact(self) noexcept:
        """Drop the emptied entries and move the rest to the start of the array."""
        cdef Py_ssize_t i, j = 0
        for i in range(self.dstart, self.dend):
            if self.dir[i].pg != NULL:
                self.dir[j] = self.dir[i]
                j += 1
        self.dstart = 0
        self.dend = j

    cdef int _dir_room(self) except -1:
        """A free entry at dend."""
        cdef Py_ssize_t nc
        cdef pdirent* nd
        if self.dend < self.dcap:
            return 0
        self._dir_compact()
        if self.dend < self.dcap - self.dcap // 4:
            return 0
        nc = self.dcap * 2 if self.dcap else 4
        nd = <pdirent*>realloc(self.dir, nc * sizeof(pdirent))
        if nd == NULL:
            raise MemoryError()
        self.nalloc += (nc - self.dcap) * sizeof(pdirent)
        self.dir = nd
        self.dcap = nc
        return 0

    cdef ppage* _page_make(self, uint64_t seq) except NULL:
        cdef uint64_t pn = seq >> PAGE_BITS
        cdef Py_ssize_t i = self._dfind(pn), k
        cdef ppage* pg
        if i >= 0 and self.dir[i].pg != NULL:
            return self.dir[i].pg
        pg = <ppage*>calloc(1, sizeof(ppage))
        if pg == NULL:
            raise MemoryError()
        if i < 0:
            k = -i - 1
            if k == self.dstart and self.dstart > 0:
                self.dstart -= 1                # a page before the first: room in front
                i = self.dstart
            else:
                if self.dend == self.dcap:
                    try:
                        self._dir_room()
                    except MemoryError:
                        free(pg)
                        raise
                    k = -self._dfind(pn) - 1
                if k < self.dend:               # between two pages: shift the rest
                    memmove(self.dir + k + 1, self.dir + k, (self.dend - k) * sizeof(pdirent))
                self.dend += 1
                i = k
            self.dir[i].pn = pn
        self.dir[i].pg = pg
        self.dlive += 1
        self.nalloc += sizeof(ppage)
        return pg

    cdef void _drop_page(self, Py_ssize_t i) noexcept:
        """Free the (now empty) page of entry i; trim and compact the directory."""
        cdef ppage* pg = self.dir[i].pg
        cdef pdirent* nd
        self.nalloc -= _blk(pg.cap, pg.wide) + sizeof(ppage)
        free(pg.ts)
        free(pg)
        self.dir[i].pg = NULL
        self.dlive -= 1
        if self.dlive == 0:
            self.nalloc -= self.dcap * sizeof(pdirent)
            free(self.dir)
            self.dir = NULL
            self.dstart = self.dend = self.dcap = 0
            return
        while self.dir[self.dstart].pg == NULL:
            self.dstart += 1
        while self.dir[self.dend - 1].pg == NULL:
            self.dend -= 1
        if self.dend - self.dstart - self.dlive > self.dlive + 8:
            self._dir_compact()
        if self.dcap > 64 and self.dlive < self.dcap // 4:
            self._dir_compact()
            nd = <pdirent*>realloc(self.dir, (self.dcap // 2) * sizeof(pdirent))
            if nd != NULL:
                self.nalloc -= (self.dcap - self.dcap // 2) * sizeof(pdirent)
                self.dir = nd
                self.dcap //= 2

    # ---- pages ----

    cdef int _rebuild(self, ppage* pg, uint32_t cap, int wide) except -1:
        """Reallocate pg with `cap` slots (and wide delivery seqs or not), keeping only the
        live slots (in order): n = live, head = 0."""
        cdef char* b
        cdef ppage np
        cdef uint32_t i, j = 0
        if cap < pg.live:
            cap = _pow2(pg.live)
        b = <char*>malloc(_blk(cap, wide))
        if b == NULL:
            raise MemoryError()
        np = pg[0]
        np.cap = cap
        np.wide = wide
        _layout(&np, b)
        for i in range(pg.head, pg.n):
            if pg.off[i] & DEAD:
                continue
            np.ts[j] = pg.ts[i]
            np.off[j] = pg.off[i]
            if wide:
                np.d64[j] = _getd(pg, i)
            else:
                np.d32[j] = pg.d32[i]       # narrow -> narrow keeps dbase
            j += 1
        np.n = j
        np.head = 0
        self.nalloc += <Py_ssize_t>_blk(cap, wide) - <Py_ssize_t>_blk(pg.cap, pg.wide)
        free(pg.ts)
        pg[0] = np
        return 0

    cdef int _fit(self, ppage* pg, uint64_t dseq) except -1:
        """Make dseq storable in pg: rebase the 32-bit offsets down, or go wide."""
        cdef uint64_t shift, mx = 0
        cdef uint32_t i
        if pg.wide:
            return 0
        if pg.live == 0:
            pg.dbase = dseq
            return 0
        if dseq >= pg.dbase:
            if dseq - pg.dbase <= 0xFFFFFFFFu:
                return 0
            return self._rebuild(pg, pg.cap, 1)
        shift = pg.dbase - dseq
        for i in range(pg.head, pg.n):
            if not (pg.off[i] & DEAD) and pg.d32[i] > mx:
                mx = pg.d32[i]
        if mx + shift > 0xFFFFFFFFu:
            return self._rebuild(pg, pg.cap, 1)
        for i in range(pg.n):
            pg.d32[i] = <uint32_t>(pg.d32[i] + shift)
        pg.dbase = dseq
        return 0

    cdef int _room(self, ppage* pg) except -1:
        """A free slot at pg.n: drop the tombstones if they are many, else double."""
        if pg.n < pg.cap:
            return 0
        if pg.n - pg.live >= pg.cap // 4 and pg.n > pg.live:
            return self._rebuild(pg, pg.cap, pg.wide)
        return self._rebuild(pg, pg.cap * 2 if pg.cap else MIN_CAP, pg.wide)

    # ---- C level ----

    cdef int put(self, uint64_t seq, uint64_t dseq, int64_t ts) except -1:
        """Insert or update seq; 1 when it was not pending before."""
        cdef ppage* pg = self._page_make(seq)
        cdef uint32_t o = <uint32_t>(seq & PAGE_MASK)
        cdef long i
        self._fit(pg, dseq)
        if pg.n == 0 or (pg.off[pg.n - 1] & PAGE_MASK) < o:
            self._room(pg)
            i = pg.n
            pg.n += 1
        else:
            i = _find(pg, o)
            if i >= 0:
                _setd(pg, <uint32_t>i, dseq)
                pg.ts[i] = ts
                if not (pg.off[i] & DEAD):
                    return 0
                pg.off[i] = <uint16_t>o
                pg.live += 1
                self.count += 1
                if <uint32_t>i < pg.head:
                    pg.head = <uint32_t>i
                return 1
            if pg.n == pg.cap:
                self._room(pg)
                i = _find(pg, o)
            i = -i - 1
            memmove(pg.ts + i + 1, pg.ts + i, (pg.n - i) * sizeof(int64_t))
            memmove(pg.off + i + 1, pg.off + i, (pg.n - i) * sizeof(uint16_t))
            if pg.wide:
                memmove(pg.d64 + i + 1, pg.d64 + i, (pg.n - i) * sizeof(uint64_t))
            else:
                memmove(pg.d32 + i + 1, pg.d32 + i, (pg.n - i) * sizeof(uint32_t))
            pg.n += 1
        pg.off[i] = <uint16_t>o
        _setd(pg, <uint32_t>i, dseq)
        pg.ts[i] = ts
        pg.live += 1
        self.count += 1
        if <uint32_t>i < pg.head:
            pg.head = <uint32_t>i
        return 1

    cdef uint64_t take(self, uint64_t seq):
        """Remove seq; its delivery sequence, 0 when it was not pending."""
        cdef Py_ssize_t di = self._dfind(seq >> PAGE_BITS)
        cdef ppage* pg
        cdef long i
        cdef uint64_t d
        if di < 0 or self.dir[di].pg == NULL:
            return 0
        pg = self.dir[di].pg
        i = _find(pg, <uint32_t>(seq & PAGE_MASK))
        if i < 0 or pg.off[i] & DEAD:
            return 0
        d = _getd(pg, <uint32_t>i)
        pg.off[i] |= DEAD
        pg.live -= 1
        self.count -= 1
        if pg.live == 0:
            self._drop_page(di)
            return d
        if <uint32_t>i == pg.head:
            while pg.off[pg.head] & DEAD:
                pg.head += 1
        if pg.n - pg.live > pg.live and pg.n >= 32:
            self._rebuild(pg, _pow2(pg.live * 2) if pg.live * 4 < pg.cap else pg.cap, pg.wide)
        return d

    cdef long _slot(self, uint64_t seq, ppage** out) noexcept:
        cdef Py_ssize_t di = self._dfind(seq >> PAGE_BITS)
        cdef ppage* pg
        cdef long i
        if di < 0 or self.dir[di].pg == NULL:
            return -1
        pg = self.dir[di].pg
        i = _find(pg, <uint32_t>(seq & PAGE_MASK))
        if i < 0 or pg.off[i] & DEAD:
            return -1
        out[0] = pg
        return i

    # ---- Python API ----

    # Sequences come from ack subjects and state files: one outside 0 .. 2**64-1 is simply not
    # pending (as with a dict), and timestamps (NAK delays) are clamped to int64.

    def add(self, uint64_t seq, uint64_t dseq, ts):
        """pending[seq] = (dseq, ts); True when seq was not pending."""
        if dseq == 0:
            raise ValueError("delivery sequence 0")
        return self.put(seq, dseq, _ts(ts)) == 1

    def pop(self, seq):
        """Remove seq -> its delivery sequence, or 0 when it was not pending."""
        cdef uint64_t s
        try:
            s = seq
        except OverflowError:
            return 0
        return self.take(s)

    def get(self, seq):
        """(dseq, ts) or None."""
        cdef ppage* pg = NULL
        cdef long i = _key_slot(self, seq, &pg)
        if i < 0:
            return None
        return (_getd(pg, <uint32_t>i), pg.ts[i])

    def dseq_of(self, seq):
        """The delivery sequence of seq, 0 when it is not pending."""
        cdef ppage* pg = NULL
        cdef long i = _key_slot(self, seq, &pg)
        if i < 0:
            return 0
        return _getd(pg, <uint32_t>i)

    def set_ts(self, seq, ts):
        """Reset seq's timestamp (+WPI, NAK with a delay); False when it is not pending."""
        cdef ppage* pg = NULL
        cdef long i = _key_slot(self, seq, &pg)
        if i < 0:
            return False
        pg.ts[i] = _ts(ts)
        return True

    def __len__(self):
        return self.count

    def __bool__(self):
        return self.count > 0

    def __contains__(self, seq):
        cdef ppage* pg = NULL
        return _key_slot(self, seq, &pg) >= 0

    cdef uint64_t _first(self) noexcept:
        cdef ppage* pg
        if self.count == 0:
            return 0
        pg = self.dir[self.dstart].pg
        return (self.dir[self.dstart].pn << PAGE_BITS) + pg.off[pg.head]

    cdef uint64_t _first_dseq(self) noexcept:
        cdef ppage* pg
        if self.count == 0:
            return 0
        pg = self.dir[self.dstart].pg
        return _getd(pg, pg.head)

    def first(self):
        """The lowest pending stream sequence, 0 when none."""
        return self._first()

    def first_item(self):
        """(lowest pending stream seq, its delivery seq), or None."""
        cdef ppage* pg
        if self.count == 0:
            return None
        pg = self.dir[self.dstart].pg
        return ((self.dir[self.dstart].pn << PAGE_BITS) + pg.off[pg.head], _getd(pg, pg.head))

    def remove_upto(self, seq_):
        """Remove every pending sequence <= seq -> the removed sequences, ascending."""
        cdef list out = []
        cdef uint64_t s, seq
        if seq_ < 0:
            return out
        seq = seq_ if seq_ <= 0xFFFFFFFFFFFFFFFF else 0xFFFFFFFFFFFFFFFF
        while self.count:
            s = self._first()
            if s > seq:
                break
            self.take(s)
            out.append(s)
        return out

    def remove_below(self, seq):
        """Remove every pending sequence < seq -> the removed sequences, ascending."""
        return self.remove_upto(seq - 1)

    def items(self):
        """[(seq, dseq, ts), ...] ascending by seq (a snapshot)."""
        cdef list out = []
        cdef live_slot k
        k.p, k.i = self.dstart, 0
        while _next_live(self, &k):
            out.append((k.seq, _getd(k.pg, k.i), k.pg.ts[k.i]))
            k.i += 1
        return out

    def keys(self):
        """[seq, ...] ascending (a snapshot)."""
        return [it[0] for it in self.items()]

    def __iter__(self):
        return iter(self.keys())

    def expired(self, int64_t cutoff):
        """[seq, ...] ascending whose timestamp is <= cutoff (deliveries older than the ack
        wait when cutoff = now - ack_wait), and the oldest timestamp above it (None when
        none) for the next timer."""
        cdef list out = []
        cdef live_slot k
        cdef int64_t t, nxt = 0
        cdef bint have = False
        k.p, k.i = self.dstart, 0
        while _next_live(self, &k):
            t = k.pg.ts[k.i]
            if t <= cutoff:
                out.append(k.seq)
            elif not have or t < nxt:
                nxt = t
                have = True
            k.i += 1
        return out, (nxt if have else None)

    def write_json(self, f):
        """Write state.json's "pending" object, `{"<seq>":[dseq,ts],...}` ascending by seq, to
        the binary file f straight from the pages, in pieces of about 64 KB: no Python object
        per message, and no buffer of the whole image (3.5 MB for 100,000 messages) for the
        allocator to keep after every save."""
        cdef live_slot k
        cdef int64_t t
        cdef char* buf = <char*>malloc(CHUNK + 80)
        cdef char* w
        cdef bint first = True
        if buf == NULL:
            raise MemoryError()
        try:
            w = buf
            w[0] = c'{'
            w += 1
            k.p, k.i = self.dstart, 0
            while _next_live(self, &k):
                if not first:
                    w[0] = c','
                    w += 1
                first = False
                w[0] = c'"'
                w = put_int(w + 1, k.seq)
                w[0] = c'"'
                w[1] = c':'
                w[2] = c'['
                w = put_int(w + 3, _getd(k.pg, k.i))
                w[0] = c','
                w += 1
                t = k.pg.ts[k.i]
                if t < 0:
                    w[0] = c'-'
                    w = put_int(w + 1, <uint64_t>0 - <uint64_t>t)
                else:
                    w = put_int(w, <uint64_t>t)
                w[0] = c']'
                w += 1
                k.i += 1
                if w - buf >= CHUNK:
                    f.write(PyBytes_FromStringAndSize(buf, w - buf))
                    w = buf
            w[0] = c'}'
            w += 1
            f.write(PyBytes_FromStringAndSize(buf, w - buf))
        finally:
            free(buf)

    def clear(self):
        self._free_all()

    @property
    def nbytes(self):
        """Bytes this structure allocated (pages, their slots, the page directory)."""
        return self.nalloc + sizeof(Pending)

    def check(self):
        """Verify the invariants (tests): sorted pages and offsets, head live, counts,
        allocation."""
        cdef Py_ssize_t p, total = 0, pages = 0, alloc = self.dcap * sizeof(pdirent)
        cdef uint32_t i, live, prev = 0
        cdef ppage* pg
        assert 0 <= self.dstart <= self.dend <= self.dcap
        if self.count:
            assert self.dir[self.dstart].pg != NULL and self.dir[self.dend - 1].pg != NULL
        else:
            assert self.dend == self.dstart and self.nalloc == 0
        for p in range(self.dstart, self.dend):
            if p > self.dstart:
                assert self.dir[p].pn > self.dir[p - 1].pn
            pg = self.dir[p].pg
            if pg == NULL:
                continue
            pages += 1
            assert pg.live > 0 and pg.n <= pg.cap <= PAGE and pg.head < pg.n
            assert not (pg.off[pg.head] & DEAD)
            live = 0
            for i in range(pg.n):
                if i < pg.head:
                    assert pg.off[i] & DEAD
                if i and (pg.off[i] & PAGE_MASK) <= prev:
                    raise AssertionError("page offsets out of order")
                prev = pg.off[i] & PAGE_MASK
                if not (pg.off[i] & DEAD):
                    live += 1
            assert live == pg.live, (live, pg.live)
            total += live
            alloc += _blk(pg.cap, pg.wide) + sizeof(ppage)
        assert pages == self.dlive, (pages, self.dlive)
        assert total == self.count, (total, self.count)
        assert alloc == self.nalloc, (alloc, self.nalloc)
        return True

    def __repr__(self):
        return "<Pending %d, %d bytes>" % (self.count, self.nbytes)
