# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""The segmented append-only log under file streams' stores and the Raft WAL.

It owns the block files, reading and writing records, removal and group commit; its
in-memory index (which sequences are live, where, on which subject, and the scans and counts
over them) is its base class LogIndex, natsd/_core/logindex.pyx. store.py turns it into the
stream-store interface (StoredMsg, purge semantics, state()).

On disk: blocks `<n>.blk` of records, and `index.snap` on clean close; natsd/_core/logfmt.pyx
describes the layout (and owns the helpers that parse and write it), logsnap.pyx the
snapshot, logrecover.pyx the scan of the blocks that rebuilds the index without one, and
logopen.pyx how a Log is opened (open_log) and what its close writes; this module imports
none of them.

Sequence numbers are never reused: the recovered last sequence is at least the index
snapshot's and every block header's high-water mark; when records are missing below it (a
truncated or damaged block) a warning says which sequences are lost and a SKIP record keeps
the last sequence, so the next message gets a sequence above every one ever acknowledged.

Deletes are tombstone records in the active block rather than rewrites, so appends stay
sequential. A tombstone may name a message in any earlier block, so blocks are only ever
deleted from the front (when all their messages are below `first`): a tombstone is never
lost while the message it deletes is still on disk. Erase overwrites the message in place (zero hdr
and msg, ERASED flag, new checksum) after its tombstone is written.

In memory (logindex.pyx), per sequence, one 12-byte entry (offset, size|hdr-bit, subject id)
in 64K-entry chunks; per subject, a count and first/last bounds: 10M messages cost ~120 MB and
no Python object per message. Which block holds a seq is found here by bisecting the blocks'
first seqs.

Recovery (logrecover.pyx): blocks are scanned in order; the first record that is short or
fails its checksum ends that block (the file is cut there) and a warning names the file. A record whose checksum
fails on read is never returned.

Group commit: without a call_soon hook every append is a `pwrite` at once (the kernel has
it). With the loop's hook (given to plaintext logs when nothing is acknowledged before a sync,
and to encrypted ones) the messages of one loop iteration wait in memory (`pend`, read from
there), in plaintext with the tombstones of `remove` that follow them, and go out with one
pwrite when the iteration ends, before anything else touches the block (a sync, another
record, a rotation, a truncation) and at 64 KiB; a crash inside the
iteration loses only what nobody was told about. `sync_async` hands one `fdatasync` of the
active block (+ the directory when a block was created), a SyncJob, straight to the loop
(Loop.hand_off_sync, at C level: natsd/_core/syncer.pyx runs it on a thread without the GIL,
or at once when the loop is idle); appends that arrive while it runs wait for the next round, which covers all of
them with one fdatasync. Sealing a block fdatasyncs it, so only the active block is dirty.
The pending records are written first; when that write fails, every waiter that needs them
gets the error and they stay pending (written again by the next sync); the header's
high-water mark then only covers what was written.

Zero ahead (`zero_ahead=True`: the Raft WAL, and a stream's store when every PubAck waits for
its sync, natsd/jetstream/engine/store.py): the active block's file is kept ZERO_STEP bytes
of zeros longer than its records, written whenever the records reach the end of the zeros. An
append then rewrites bytes the file already has, so its fdatasync flushes data alone, with no
journal commit for a new size; with several logs syncing at once on one disk (the replicas of a
group on one machine, many groups) that makes each sync about a third quicker. Recovery reads
zeros after the last record as the end of the block, not as damage, and cuts them off; a clean
close and a rotation cut them too, so a sealed block and the index snapshot see the records'
exact end.

Early writeback (every log without zero_ahead: a replicated stream's copy, whose durability is
its group's log, a stream with a `sync_interval`, and an encrypted one, whose own syncs make it
redundant but cheap there): each time WRITEBACK_STEP more bytes of the active block are
written, `sync_file_range(SYNC_FILE_RANGE_WRITE)` starts their writeback without waiting for
it. The fdatasync that seals a full block, on the loop thread, then finds little left to
write: for an R3 stream's copy under async publishing it held the loop 6.5-11.4 ms per 8 MiB
block, and holds it 1.0-1.4 ms. Durability is unchanged: only when the bytes go to the disk
moves.
"""
DEF PLAIN_PEND_MAX = 65536  # plaintext records waiting for one pwrite, at most (bytes)
DEF MAX_INFLIGHT = 3      # concurrent fdatasyncs per log (the kernel joins them in one journal commit)
DEF FRAME_MAX = 16384     # payload bytes a pending encrypted frame may hold before it is written
DEF ZERO_STEP = 262144    # zero_ahead: zeros written past the records at a time (bytes)
DEF WRITEBACK_STEP = 1048576  # other logs: bytes written between two starts of their writeback

import bisect
import heapq
import logging
import os
from array import array

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy
from libc.errno cimport errno, EINTR
from natsd._core.syncer cimport SyncJob
from natsd._core.loop cimport Loop
from natsd._core.logindex cimport M_NONE, M_ALL, M_SID, M_BITMAP
from natsd._core.logfmt cimport (
    BLK_HDR, VERSION, F_LZ4, F_ENC, F_S2, F_ZIP, NONCE_LEN, FRAME_PRE, FRAME_OVH, REC_HDR, REC_MIN,
    SIZE_MASK, MAX_BLOCK, T_MSG, T_TOMBS, T_FIRST, T_SKIP, T_TRUNC, F_HDR, F_ERASED,
    acct_size, plain_ok, oserr, pwrite_all, frame_aad, rec_ok,
    HDR_BIT, nlog_xxh64, nlog_rd64, nlog_rd32, nlog_rd16, nlog_wr64, nlog_wr32, nlog_wr16)
from natsd._core.fmt cimport resize
from natsd._core.logfmt import (StoreError, xxh64, subject_match, payload_records, block_records,
                                parse_frames, zip_image, unzip_image, zipped_payload, write_file)

cdef extern from "fcntl.h" nogil:
    int sync_file_range(int fd, long off, long n, unsigned int flags)
    unsigned int SYNC_FILE_RANGE_WRITE

cdef extern from "unistd.h" nogil:
    ssize_t pread(int fd, void* buf, size_t n, long off)
    ssize_t pwrite(int fd, const void* buf, size_t n, long off)
    int ftruncate(int fd, long length)
    int fdatasync(int fd)
    int fsync(int fd)
    int close(int fd)

log = logging.getLogger("natsd")
cdef char* ZEROS = <char*>calloc(ZERO_STEP, 1)     # zero_ahead's source

DEF RAW_CACHE = 2           # decompressed images of compressed blocks kept in memory



cdef class Block:
    def __init__(self, int num, path):
        self.num = num
        self.path = path
        self.fd = -1
        self.size = BLK_HDR
        self.aead = None

    def __repr__(self):
        return f"<Block {self.num} size={self.size} seqs={self.first_seq}..{self.last_seq}>"


cdef inline Py_ssize_t pend_record(Log lg, Block b, const char* p, Py_ssize_t reclen) except -1:
    """Add a built record to those waiting in lg.pend (the first of them fixes where they go
    in block b) -> how many bytes were waiting before it."""
    cdef Py_ssize_t plen = PyByteArray_GET_SIZE(lg.pend)
    if plen == 0:
        lg.pend_off = b.size
    PyByteArray_Resize(lg.pend, plen + reclen)
    memcpy(PyByteArray_AS_STRING(lg.pend) + plen, p, reclen)
    lg.appended += 1
    return plen


cdef class Log:
    def __cinit__(self):
        self.wbuf = NULL
        self.rbuf = NULL

    def __init__(self, path, block_size=8 * 1024 * 1024, compression="none", crypt=None,
                 call_soon=None, sync_marks=True, zero_ahead=False):
        """The state of a log, empty: natsd/_core/logopen.pyx's open_log builds one and reads
        its directory back into it. crypt: the stream's key context (natsd/jetstream/jscrypt.StreamCrypt: `kid`, `aead`,
        `aead_for(kid)`, `seal`, `open`), or None for a plaintext log. call_soon: the loop's,
        for a plaintext log whose messages of one loop iteration may be written together (its
        owner syncs before it acknowledges them; see "Group commit" above). sync_marks=False:
        a sync leaves the block header's high-water mark as it is, for an owner that cuts a
        lost tail back rather than keep its sequences (the Raft WAL); the mark then only
        moves when a block is created or a truncation lowers it, and each sync flushes one
        page less. zero_ahead=True (a plaintext log only): see "Zero ahead" above."""
        self.dir = os.fspath(path)
        self.block_size = min(max(int(block_size), 1024), MAX_BLOCK)
        compression = (compression or "none").lower()
        if compression not in ("none", "lz4", "s2"):
            raise ValueError(f"unknown compression {compression!r}")
        # sealed blocks are compressed with lz4 or S2 (blocks say which in their flags)
        self.compression = compression
        self.blocks = []
        self.mblocks = []
        self.mfirst = []
        self.raw_lru = []
        self.waiters = []
        self.ttl_heap = []
        self.wcap = 4096
        self.wbuf = <char*>malloc(self.wcap)
        if self.wbuf == NULL:
            raise MemoryError()
        self.crypt = crypt
        self.pend = bytearray()
        self.call_soon = call_soon
        self.sync_marks = sync_marks
        self.zero_ahead = zero_ahead and crypt is None and ZEROS != NULL
        if crypt is not None:
            self.enc = crypt.aead
            self.enc_kid = crypt.kid
            self.call_soon = getattr(crypt, "call_soon", None)
            memcpy(self.nbase, PyBytes_AS_STRING(os.urandom(NONCE_LEN)), NONCE_LEN)
        os.makedirs(self.dir, exist_ok=True)

    def recovered(self, uint64_t first_seq=0):
        """What the directory holds has been read back (natsd/_core/logopen.pyx: blocks
        converted, the index from the snapshot or a scan): take up where the blocks end."""
        cdef Block b
        cdef uint64_t floor
        if self.active is None:
            self._new_block(self.blocks[-1].num + 1 if self.blocks else 1)
        # Never hand out a sequence again: the last one stored before (index snapshot, block
        # high-water marks) is a floor even when the records at the tail are gone.
        floor = self.snap_last
        for b in self.blocks:
            if b.hwm > floor:
                floor = b.hwm
        if floor > self.last:
            self.lost_tail = (self.last + 1, floor)
            log.warning("%s: the log ends at sequence %d but sequence %d was stored before: "
                        "sequences %d..%d are lost (a truncated or damaged block); the last "
                        "sequence stays %d and new messages get higher ones",
                        self.dir, self.last, floor, self.last + 1, floor, floor)
            self._write_record(T_SKIP, floor, 0, 0, NULL, 0, NULL, 0, False, NULL, 0)
            self.last = floor
            if self.msgs == 0:
                self.first = floor + 1
            self.sync()
        if first_seq and self.last == 0 and self.msgs == 0 and first_seq > 1:
            # A configured first sequence on a new store: persist it as a FIRST record.
            self._write_record(T_FIRST, first_seq, 0, 0, NULL, 0, NULL, 0, False, NULL, 0)
            self.first = first_seq
            self.last = first_seq - 1
        self.synced = self.appended

    def __dealloc__(self):
        free(self.wbuf)
        free(self.rbuf)
        if not self.closed and self.blocks is not None:
            # Dropped without close() (a crash, as far as the disk is concerned): no snapshot.
            for b in self.blocks:
                if (<Block>b).fd >= 0:
                    close((<Block>b).fd)

    # ---------------------------------------------------------------- encryption

    cdef bytes _nonce(self):
        # A random base per open plus a counter: unique for every seal under the current key.
        cdef char n[NONCE_LEN]
        memcpy(n, self.nbase, NONCE_LEN)
        nlog_wr64(n + 4, nlog_rd64(n + 4) + self.nctr)
        self.nctr += 1
        return PyBytes_FromStringAndSize(n, NONCE_LEN)

    cdef bytes _seal_frame(self, payload, uint64_t off, int num):
        """The stored form of a frame at `off` of block `num`: length | nonce | AEAD | tag."""
        cdef uint32_t n = len(payload)
        cdef bytes nonce = self._nonce()
        cdef bytes ct = self.enc.encrypt(nonce, payload, frame_aad(n, off, num))
        cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 + NONCE_LEN + PyBytes_GET_SIZE(ct))
        cdef char* o = PyBytes_AS_STRING(out)
        nlog_wr32(o, n)
        memcpy(o + 4, PyBytes_AS_STRING(nonce), NONCE_LEN)
        memcpy(o + FRAME_PRE, PyBytes_AS_STRING(ct), PyBytes_GET_SIZE(ct))
        return out

    cdef _flush_frame(self):
        # Write the pending records of the active block: encrypted, sealed as one frame;
        # plaintext, as they are, with one pwrite. On a write error the block is cut back and
        # the records stay pending (a later flush retries).
        cdef Block b = self.active
        cdef bytes data
        cdef int err
        if self.pend is None or PyByteArray_GET_SIZE(self.pend) == 0:
            self.flushed = self.appended
            self.flushed_last = self.last
            return
        if self.enc is None:
            err = pwrite_all(b.fd, PyByteArray_AS_STRING(self.pend), PyByteArray_GET_SIZE(self.pend),
                              self.pend_off)
            if err:
                ftruncate(b.fd, self.pend_off)
                b.zeroed_to = self.pend_off
                raise oserr(b.path, err)
            if self.zero_ahead:
                self._zero_ahead(b)
            else:
                self._start_writeback(b)
            del self.pend[:]
            self.flushed = self.appended
            self.flushed_last = self.last
            return
        data = self._seal_frame(self.pend, self.pend_off, b.num)
        err = pwrite_all(b.fd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), self.pend_off)
        if err:
            ftruncate(b.fd, self.pend_off)
            raise oserr(b.path, err)
        b.frames.append(self.pend_off)
        del self.pend[:]
        b.size = self.pend_off + PyBytes_GET_SIZE(data)
        self._start_writeback(b)
        self.flushed = self.appended
        self.flushed_last = self.last

    def _flush_cb(self):
        """call_soon callback: the records of this loop iteration go to disk together."""
        self.flush_scheduled = False
        if self.closed:
            return
        try:
            self._flush_frame()
            self.flush_err = None
        except StoreError as e:
            if str(e) != self.flush_err:
                self.flush_err = str(e)
                log.error("%s (the pending records are written again with the next sync)", e)

    cdef object _frame_of(self, Block b, uint64_t off):
        """The plaintext of the frame of an encrypted block holding offset `off` (fc_off is its
        offset), or None when it cannot be read or does not authenticate."""
        cdef Py_ssize_t i
        cdef uint64_t fo
        cdef uint32_t n
        if b.frames is None:
            return None
        if (self.fc_blk is b and self.fc_off <= off
                and off < self.fc_off + FRAME_PRE + PyBytes_GET_SIZE(self.fc_pt)):
            return self.fc_pt                   # sequential reads: the same frame again
        i = bisect.bisect_right(b.frames, off) - 1
        if i < 0:
            return None
        fo = b.frames[i]
        if self.fc_blk is b and self.fc_off == fo:
            return self.fc_pt
        raw = os.pread(b.fd, 4096, fo)          # most frames: one read
        if len(raw) < FRAME_OVH:
            return None
        n = nlog_rd32(PyBytes_AS_STRING(raw))
        if <Py_ssize_t>n + FRAME_OVH > len(raw):
            raw = os.pread(b.fd, n + FRAME_OVH, fo)
            if len(raw) != n + FRAME_OVH:
                return None
        mv = memoryview(raw)
        try:
            pt = b.aead.decrypt(mv[4:FRAME_PRE], mv[FRAME_PRE:n + FRAME_OVH], frame_aad(n, fo, b.num))
        except Exception:
            return None
        self.fc_blk = b
        self.fc_off = fo
        self.fc_pt = pt
        return pt

    cdef bytes _enc_slice(self, Block b, uint64_t off, uint32_t rl):
        """rl plain bytes of the record stored at `off` in an encrypted uncompressed block."""
        cdef Py_ssize_t k
        if b is self.active and PyByteArray_GET_SIZE(self.pend) and off >= self.pend_off:
            k = off - self.pend_off - FRAME_PRE
            if k < 0 or k + rl > PyByteArray_GET_SIZE(self.pend):
                return None
            return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self.pend) + k, rl)
        pt = self._frame_of(b, off)
        if pt is None:
            return None
        k = off - self.fc_off - FRAME_PRE
        if k < 0 or k + rl > PyBytes_GET_SIZE(pt):
            return None
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(pt) + k, rl)

    cdef tuple _build_framed(self, int num, list recs, uint64_t hwm):
        """An encrypted block file holding recs [(old offset, record)] in frames of up to
        FRAME_MAX: (data, {old offset: new offset}, array of frame offsets)."""
        cdef uint64_t off = BLK_HDR, start = BLK_HDR
        cdef Py_ssize_t cur = 0
        cdef dict offmap = {}
        cdef list parts = [self._blk_header(F_ENC, hwm)], batch = []
        frames = array("Q")
        for old, rec in recs:
            if batch and cur + len(rec) > FRAME_MAX:
                parts.append(self._seal_frame(b"".join(batch), start, num))
                frames.append(start)
                off = start + cur + FRAME_OVH
                batch = []
                cur = 0
            if not batch:
                start = off
            offmap[old] = start + FRAME_PRE + cur
            batch.append(rec)
            cur += len(rec)
        if batch:
            parts.append(self._seal_frame(b"".join(batch), start, num))
            frames.append(start)
        return b"".join(parts), offmap, frames

    cdef tuple _records_of(self, Block b):
        # (records [(offset, plain record)], end, suspect) of an uncompressed block on disk
        if b is self.active:
            self._flush_frame()
        return block_records(os.pread(b.fd, b.size, 0), b.aead if b.encrypted else None, b.num)

    cdef bytes _seal_blob(self, data, bytes aad):
        cdef bytes nonce = self._nonce()
        return nonce + self.enc.encrypt(nonce, data, aad)

    cdef bytes _blk_header(self, int flags, uint64_t v):
        cdef int kid = self.enc_kid if flags & F_ENC else 0
        return (b"NLOG" + bytes([VERSION, flags]) + kid.to_bytes(2, "little")
                + v.to_bytes(8, "little"))

    cdef _write_hwm(self, Block b, uint64_t v):
        # The high-water mark in an uncompressed block's header (made durable by the next
        # fdatasync of that block, which is what acknowledges the messages it covers).
        cdef char buf[8]
        cdef int err
        if b.compressed or b.fd < 0:
            return
        nlog_wr64(buf, v)
        err = pwrite_all(b.fd, buf, 8, 8)
        if err:
            raise oserr(b.path, err)
        b.hwm = v

    cdef void _start_writeback(self, Block b) noexcept:
        # see "Early writeback" above; a failure shows in the fdatasync that seals the block
        cdef uint64_t start = self.writeback_to
        if b.size < start:          # cut back by a truncation
            start = self.writeback_to = b.size
        if b.size - start >= WRITEBACK_STEP:
            with nogil:
                sync_file_range(b.fd, start, b.size - start, SYNC_FILE_RANGE_WRITE)
            self.writeback_to = b.size

    cdef _zero_ahead(self, Block b):
        # Called after a write of b's records: once they have reached the zeros' end, the
        # ZERO_STEP bytes after b.size (the end of every record appended, nothing is ever
        # beyond it) get zeros, made durable by the next fdatasync with the new size. A failed
        # write only costs speed: the records' own writes report a full disk.
        if b.size < b.zeroed_to:
            return
        if pwrite_all(b.fd, ZEROS, ZERO_STEP, b.size) == 0:
            b.zeroed_to = b.size + ZERO_STEP

    cdef _cut_zeros(self, Block b):
        # the file ends where b's records end again (a zero_ahead block that is sealed or closed)
        if self.zero_ahead and b.zeroed_to > b.size and b.fd >= 0 and not b.compressed:
            os.ftruncate(b.fd, b.size)
            b.zeroed_to = b.size

    # ---------------------------------------------------------------- blocks

    cdef _new_block(self, int num):
        path = os.path.join(self.dir, f"{num}.blk")
        cdef Block b = Block(num, path)
        cdef bint enc = self.enc is not None
        cdef bytes hdr = self._blk_header(F_ENC if enc else 0, self.last)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StoreError(path, e.strerror)
        err = pwrite_all(fd, hdr, BLK_HDR, 0)
        if err:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise oserr(path, err)
        b.fd = fd
        b.zeroed_to = BLK_HDR
        b.hwm = self.last
        b.encrypted = enc
        b.aead = self.enc
        b.frames = array("Q") if enc else None
        self.blocks.append(b)
        self.active = b
        self.writeback_to = 0
        self.dir_dirty = True
        return b

    cdef _rotate(self):
        cdef Block old = self.active
        cdef int rc
        self._flush_frame()
        self._cut_zeros(old)
        with nogil:
            rc = fdatasync(old.fd)
        if rc != 0:
            raise oserr(old.path, errno)
        self._new_block(old.num + 1)
        if self.compression != "none":
            try:
                self._compress(old)
            except Exception as e:     # stays uncompressed: still correct, only larger
                log.warning("%s: block compression failed: %s", old.path, e)

    cdef _compress(self, Block b):
        # Plain: the records as they are. Encrypted: the decrypted records back to back (the
        # index entries of this block move to their offsets in that image), compressed, then
        # sealed.
        cdef dict offmap = None
        cdef int zflag = F_S2 if self.compression == "s2" else F_LZ4
        cdef uint64_t off
        if b.encrypted:
            recs, end, _ = self._records_of(b)
            if end != b.size:
                raise StoreError(b.path, "a record does not read back, block left as it is")
            offmap = {}
            off = BLK_HDR
            parts = []
            for roff, rec in recs:
                offmap[roff] = off
                off += len(rec)
                parts.append(rec)
            data = b"".join(parts)
            n = BLK_HDR + len(data)
        else:
            data = os.pread(b.fd, b.size - BLK_HDR, BLK_HDR)
            n = b.size
        comp = zip_image(data, zflag)
        if len(comp) + BLK_HDR >= n:
            return
        hdr = self._blk_header(zflag | (F_ENC if b.encrypted else 0), n)
        fd = write_file(b.path, hdr + (self._seal_blob(comp, hdr) if b.encrypted else comp))
        os.close(b.fd)
        b.fd = fd
        b.compressed = True
        b.zflag = zflag
        b.hwm = 0
        b.frames = None
        if self.fc_blk is b:
            self.fc_blk = None
        if offmap is not None:
            self._remap(b, offmap)
            b.size = n
        self.dir_dirty = True

    cdef bytes _image(self, Block b):
        """The uncompressed (and decrypted) image of a compressed block (LRU-cached)."""
        if b.raw is not None:
            return b.raw
        data = os.pread(b.fd, os.fstat(b.fd).st_size, 0)
        n = int.from_bytes(data[8:16], "little")
        comp = zipped_payload(data, b.aead)
        b.raw = bytes(BLK_HDR) + unzip_image(comp, b.zflag, n - BLK_HDR)
        self.raw_lru.append(b)
        while len(self.raw_lru) > RAW_CACHE:
            (<Block>self.raw_lru.pop(0)).raw = None
        return b.raw

    cdef _remap(self, Block b, dict offmap):
        # The block's records moved (sealed into / unsealed from an image): move the entries.
        cdef uint64_t s
        cdef nlog_entry* e
        if b.first_seq == 0:
            return
        for s in range(b.first_seq, b.last_seq + 1):
            e = self._entry(s)
            if e != NULL and e.size:
                no = offmap.get(e.off)
                if no is None:
                    log.warning("%s: seq %d at offset %d not found while rewriting the block",
                                b.path, s, e.off)
                else:
                    e.off = <uint32_t>no

    cdef _unseal(self, Block b, uint64_t cut):
        """Rewrite a compressed block as an appendable one holding its image up to `cut`
        (in frames again when it was encrypted)."""
        cdef bytes img = self._image(b)[:cut]
        cdef dict offmap = None
        if b.encrypted:
            recs = payload_records(img[BLK_HDR:], BLK_HDR) or []
            data, offmap, frames = self._build_framed(b.num, recs, 0)
        else:
            data = self._blk_header(0, 0) + img[BLK_HDR:]
            frames = None
        fd = write_file(b.path, data)
        close(b.fd)
        b.fd = fd
        b.compressed = False
        b.raw = None
        b.hwm = 0
        b.size = len(data)
        b.frames = frames
        if self.fc_blk is b:
            self.fc_blk = None
        if b in self.raw_lru:
            self.raw_lru.remove(b)
        if offmap is not None:
            self._remap(b, offmap)
        self.dir_dirty = True

    cdef _reseal(self, Block b, img):
        """Write a compressed block again from a changed image (same length, same offsets)."""
        comp = zip_image(bytes(img[BLK_HDR:]), b.zflag)
        hdr = self._blk_header(b.zflag | (F_ENC if b.encrypted else 0), len(img))
        fd = write_file(b.path, hdr + (self._seal_blob(comp, hdr) if b.encrypted else comp))
        close(b.fd)
        b.fd = fd
        b.raw = None
        if b in self.raw_lru:
            self.raw_lru.remove(b)

    cdef Block _block_of(self, uint64_t seq):
        cdef Py_ssize_t i = bisect.bisect_right(self.mfirst, seq) - 1
        return self.mblocks[i] if i >= 0 else None

    cdef _drop_front_blocks(self):
        # Blocks go only from the front, once every message in them is below `first`, so no
        # tombstone can disappear while the message it deletes is still on disk.
        cdef Block b
        while len(self.blocks) > 1:
            b = self.blocks[0]
            if b is self.active or (b.last_seq and b.last_seq >= self.first):
                break
            self.blocks.pop(0)
            if self.mblocks and self.mblocks[0] is b:
                self.mblocks.pop(0)
                self.mfirst.pop(0)
            if b in self.raw_lru:
                self.raw_lru.remove(b)
            close(b.fd)
            b.fd = -1
            try:
                os.unlink(b.path)
            except OSError as e:
                log.warning("%s: cannot remove block: %s", b.path, e.strerror)
            self.dir_dirty = True

    # ---------------------------------------------------------------- appending

    cdef int _write_record(self, int rtype, uint64_t seq, int64_t ts, int64_t ttl,
                           const char* subj, Py_ssize_t slen, const char* hdr, Py_ssize_t hlen,
                           bint has_hdr, const char* msg, Py_ssize_t mlen, bint defer=False) except -1:
        """Append one record to the active block; returns its offset (rotates first if full).
        Encrypted: the record joins the pending frame, written once per loop iteration (the
        call_soon hook), before any sync, at FRAME_MAX, and at once for anything but a message
        (so a tombstone's write error reaches its caller as in plaintext). Plaintext with the
        hook: a message joins the pending records the same way (written as they are, in one
        pwrite), and so does a tombstone the caller lets wait (`defer`) when records are
        already pending; anything else is written at once, after them. Without it, one pwrite
        each."""
        cdef Py_ssize_t reclen = REC_MIN + slen + hlen + mlen
        cdef Py_ssize_t dlen, plen
        cdef bint enc = self.enc is not None
        cdef bint joins = False             # plaintext: this record joins the pending ones
        cdef char* p
        cdef Block b
        cdef int err
        if slen > 0xffff:
            raise ValueError("subject too long")
        if reclen + FRAME_OVH > MAX_BLOCK - BLK_HDR:
            raise ValueError("record too large")
        dlen = reclen
        if enc:
            plen = PyByteArray_GET_SIZE(self.pend)
            if plen and (rtype != T_MSG or plen + reclen > FRAME_MAX):
                self._flush_frame()
            if PyByteArray_GET_SIZE(self.pend) == 0:
                dlen += FRAME_OVH
        else:
            # a tombstone joins records already waiting (their flush is scheduled), not alone
            joins = (rtype == T_MSG or (defer and PyByteArray_GET_SIZE(self.pend) > 0)) \
                and self.call_soon is not None
            if PyByteArray_GET_SIZE(self.pend) and (not joins or PyByteArray_GET_SIZE(self.pend)
                                                    + reclen > PLAIN_PEND_MAX):
                self._flush_frame()         # plaintext: records reach the file in order
        if rtype == T_MSG and self.active.size > BLK_HDR and self.active.size + dlen > self.block_size:
            self._rotate()
        b = self.active
        if reclen > self.wcap:
            if not resize(&self.wbuf, &self.wcap, reclen):
                raise MemoryError()
        p = self.wbuf
        nlog_wr32(p, <uint32_t>reclen)
        nlog_wr64(p + 4, seq)
        nlog_wr64(p + 12, <uint64_t>ts)
        p[20] = <char>(rtype | (F_HDR if has_hdr else 0))
        nlog_wr16(p + 21, <uint16_t>slen)
        nlog_wr32(p + 23, <uint32_t>hlen)
        nlog_wr64(p + 27, <uint64_t>ttl)
        if slen:
            memcpy(p + REC_HDR, subj, slen)
        if hlen:
            memcpy(p + REC_HDR + slen, hdr, hlen)
        if mlen:
            memcpy(p + REC_HDR + slen + hlen, msg, mlen)
        nlog_wr64(p + reclen - 8, nlog_xxh64(p, reclen - 8, 0))
        if enc:
            plen = pend_record(self, b, p, reclen)
            b.size = self.pend_off + FRAME_OVH + plen + reclen
            if rtype != T_MSG or self.call_soon is None:
                try:
                    self._flush_frame()
                except BaseException:
                    # plen == 0 here: nothing else was pending; the block stays as it was
                    PyByteArray_Resize(self.pend, 0)
                    b.size = self.pend_off
                    self.appended -= 1
                    raise
            elif not self.flush_scheduled:
                self.flush_scheduled = True
                self.call_soon(self._flush_cb)
            return <int>(self.pend_off + FRAME_PRE + plen)
        if joins:
            # plaintext with the loop's hook: the messages (and deferred tombstones) of this
            # iteration are written together by _flush_cb (or before anything else touches
            # the block)
            pend_record(self, b, p, reclen)
            b.size += reclen
            if not self.flush_scheduled:
                self.flush_scheduled = True
                self.call_soon(self._flush_cb)
            return <int>(b.size - reclen)
        err = pwrite_all(b.fd, p, reclen, b.size)
        if err:
            # Leave the block exactly as it was so the tail stays well-formed.
            ftruncate(b.fd, b.size)
            b.zeroed_to = b.size
            raise oserr(b.path, err)
        self.appended += 1
        b.size += reclen
        if self.zero_ahead:
            self._zero_ahead(b)
        else:
            self._start_writeback(b)
        return <int>(b.size - reclen)

    cdef int _index_msg(self, uint64_t seq, int64_t ts, uint32_t off, uint32_t size,
                        uint32_t sid, Block blk) except -1:
        self._index_entry(seq, ts, off, size, sid)
        if blk.first_seq == 0:
            blk.first_seq = seq
            self.mblocks.append(blk)
            self.mfirst.append(seq)
        blk.last_seq = seq
        return 0

    def append(self, uint64_t seq, int64_t ts, bytes subject, hdr, bytes msg, int64_t ttl=0):
        """Store a message at seq (> last). Returns its accounting size."""
        cdef bytes h = b"" if hdr is None else bytes(hdr)
        cdef uint32_t sid, size
        cdef int off
        if seq <= self.last and not (self.last == 0 and self.msgs == 0 and seq > 0):
            raise ValueError(f"sequence {seq} <= last {self.last}")
        if seq == 0:
            raise ValueError("sequence 0")
        off = self._write_record(T_MSG, seq, ts, ttl, subject, len(subject), h, len(h),
                                 hdr is not None, msg, len(msg))
        sid = self._sid(subject)
        size = <uint32_t>(REC_MIN + len(subject) + len(h) + len(msg)) | (HDR_BIT if len(h) else 0)
        self._index_msg(seq, ts, <uint32_t>off, size, sid, self.active)
        if ttl > 0:
            heapq.heappush(self.ttl_heap, (ts + ttl * 1000000000, seq))
        return acct_size(size)

    def skip(self, uint64_t seq, int64_t ts=0):
        """Mark seq used without a message (last_seq moves, nothing is stored). A skip with a
        time `ts` (a message nobody wanted) is the stream's last time from then on, as the
        message would have been; recovery reads it back."""
        self._write_record(T_SKIP, seq, ts, 0, NULL, 0, NULL, 0, False, NULL, 0)
        if seq > self.last:
            self.last = seq
            if ts:
                self.last_ts = ts
            if self.msgs == 0:
                self.first = seq + 1

    # ---------------------------------------------------------------- reading

    cdef bytes _read_raw(self, uint64_t seq, nlog_entry* e):
        cdef Block b = self._block_of(seq)
        cdef uint32_t rl = e.size & SIZE_MASK
        cdef bytes data
        cdef ssize_t n
        cdef Py_ssize_t k
        if b is None:
            return None
        if b.compressed:
            data = self._image(b)[e.off:e.off + rl]
        elif b.encrypted:
            data = self._enc_slice(b, e.off, rl)
            if data is None:
                log.warning("%s: seq %d at offset %d does not decrypt, not served", b.path, seq, e.off)
                return None
        elif b is self.active and PyByteArray_GET_SIZE(self.pend) and e.off >= self.pend_off:
            k = e.off - self.pend_off                   # not written yet
            data = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self.pend) + k, rl) \
                if k + rl <= PyByteArray_GET_SIZE(self.pend) else b""
        else:
            data = PyBytes_FromStringAndSize(NULL, rl)
            n = pread(b.fd, PyBytes_AS_STRING(data), rl, e.off)
            if n != rl:
                log.warning("%s: short read of seq %d at %d", b.path, seq, e.off)
                return None
        if len(data) != rl or not rec_ok(data, seq):
            log.warning("%s: bad checksum for seq %d at offset %d, not served", b.path, seq, e.off)
            return None
        return data

    def read(self, uint64_t seq):
        """(subject, hdr, msg, ts) of a live message, else None."""
        cdef nlog_entry* e = self._entry(seq)
        cdef bytes data
        cdef const char* p
        cdef uint32_t slen, hlen
        if e == NULL or e.size == 0:
            return None
        data = self._read_raw(seq, e)
        if data is None:
            return None
        p = PyBytes_AS_STRING(data)
        slen = nlog_rd16(p + 21)
        hlen = nlog_rd32(p + 23)
        hdr = data[REC_HDR + slen:REC_HDR + slen + hlen] if p[20] & F_HDR else None
        return (data[REC_HDR:REC_HDR + slen], hdr,
                data[REC_HDR + slen + hlen:len(data) - 8], <int64_t>nlog_rd64(p + 12))

    # ---------------------------------------------------------------- batched reads
    # A pull consumer's Fetch delivers up to `batch` consecutive matching messages in one C
    # loop (natsd/jetstream/engine/fastdeliver.pyx): no StoredMsg, no bytes per message, and one pread of a
    # read-ahead window serves the many small records that sit back to back in a block.

    cdef int batch_begin(self, filt) except -1:
        mode, sid, bm = self._filter(filt)
        self.bmode = mode
        self.bsid = sid
        self.bbm = bm
        self.rblk = None
        self.rimg = None
        return 0

    cdef void batch_end(self):
        self.bbm = None
        self.rblk = None
        self.rimg = None                # do not pin a decompressed image past the batch
        self.rdec = None

    cdef uint64_t batch_next(self, uint64_t seq):
        """next_seq(seq, filter given to batch_begin), without resolving the filter again."""
        cdef const uint8_t* bp = NULL
        cdef Py_ssize_t bl = 0
        cdef nlog_sstat* st
        if self.msgs == 0 or self.bmode == M_NONE:
            return 0
        if seq < self.first:
            seq = self.first
        if self.bmode == M_SID:
            st = &self.sstats[self.bsid]
            if st.count == 0:
                return 0
            if seq <= st.first:
                return self._subj_edge(self.bsid, False)
            if seq > st.last:
                return 0
            return self._scan_fwd(seq, min(self.last, st.last), M_SID, self.bsid, NULL, 0)
        if self.bmode == M_BITMAP:
            bp = <const uint8_t*>PyByteArray_AS_STRING(self.bbm)
            bl = PyByteArray_GET_SIZE(self.bbm)
        return self._scan_fwd(seq, self.last, self.bmode, self.bsid, bp, bl)

    cdef int batch_rec(self, uint64_t seq, nlog_rec* out) except -1:
        """Live message `seq` as pointers into the read window (valid until the next call):
        1, or 0 when it cannot be served (gone, short read, bad checksum - as read())."""
        cdef nlog_entry* e = self._entry(seq)
        cdef Block b
        cdef uint32_t rl, slen, hlen
        cdef const char* p
        cdef const char* base
        cdef Py_ssize_t want, n, k
        cdef bint pending = False
        if e == NULL or e.size == 0:
            return 0
        rl = e.size & SIZE_MASK
        b = self.rblk
        if b is None or not (b.first_seq <= seq <= b.last_seq):
            b = self._block_of(seq)
            if b is None:
                return 0
        if b.encrypted and not b.compressed:
            if b is self.active and PyByteArray_GET_SIZE(self.pend) and e.off >= self.pend_off:
                k = e.off - self.pend_off - FRAME_PRE
                if k < 0 or k + rl > PyByteArray_GET_SIZE(self.pend):
                    return 0
                p = PyByteArray_AS_STRING(self.pend) + k
            else:
                pt = self._frame_of(b, e.off)
                k = e.off - self.fc_off - FRAME_PRE
                if pt is None or k < 0 or k + rl > PyBytes_GET_SIZE(pt):
                    log.warning("%s: seq %d at offset %d does not decrypt, not served", b.path, seq, e.off)
                    return 0
                self.rdec = pt
                p = PyBytes_AS_STRING(pt) + k
        elif b is self.active and PyByteArray_GET_SIZE(self.pend) and e.off >= self.pend_off:
            k = e.off - self.pend_off                   # plaintext, not written yet
            if k + rl > PyByteArray_GET_SIZE(self.pend):
                return 0
            p = PyByteArray_AS_STRING(self.pend) + k
            pending = True
        elif b.compressed:
            if b is not self.rblk or self.rimg is None:
                self.rimg = self._image(b)
                self.rblk = b
                self.roff = 0
                self.rlen = PyBytes_GET_SIZE(self.rimg)
            base = PyBytes_AS_STRING(self.rimg)
        else:
            if (b is not self.rblk or self.rimg is not None or e.off < self.roff
                    or e.off + rl > self.roff + self.rlen):
                want = rl if rl > 65536 else 65536
                if want > self.rcap:
                    if not resize(&self.rbuf, &self.rcap, want):
                        raise MemoryError()
                self.rblk = None
                self.rimg = None
                n = pread(b.fd, self.rbuf, want, e.off)
                if n < <Py_ssize_t>rl:
                    log.warning("%s: short read of seq %d at %d", b.path, seq, e.off)
                    return 0
                self.rblk = b
                self.roff = e.off
                self.rlen = n
            base = self.rbuf
        if (not b.encrypted or b.compressed) and not pending:
            if e.off < self.roff or e.off + rl > self.roff + self.rlen:
                log.warning("%s: short read of seq %d at %d", b.path, seq, e.off)
                return 0
            p = base + (e.off - self.roff)
        if (rl < REC_MIN or nlog_rd32(p) != rl or nlog_rd64(p + 4) != seq
                or nlog_xxh64(p, rl - 8, 0) != nlog_rd64(p + rl - 8)):
            log.warning("%s: bad checksum for seq %d at offset %d, not served", b.path, seq, e.off)
            return 0
        slen = nlog_rd16(p + 21)
        hlen = nlog_rd32(p + 23)
        out.subj = p + REC_HDR
        out.slen = slen
        out.ts = <int64_t>nlog_rd64(p + 12)
        if p[20] & F_HDR:
            out.msg = p + REC_HDR + slen
            out.hlen = hlen
            out.tlen = rl - 8 - REC_HDR - slen
        else:
            out.msg = p + REC_HDR + slen + hlen
            out.hlen = 0
            out.tlen = rl - 8 - REC_HDR - slen - hlen
        return 1

    @property
    def first_ts(self):
        cdef nlog_entry* e
        if self.msgs == 0:
            return 0
        if self.first_ts_seq != self.first:
            e = self._entry(self.first)
            r = self.read(self.first) if e != NULL and e.size else None
            self.first_ts_cache = r[3] if r is not None else 0
            self.first_ts_seq = self.first
        return self.first_ts_cache

    # ---------------------------------------------------------------- removing

    cdef _tombstone(self, bytes packed, bint defer=False):
        self._write_record(T_TOMBS, 0, 0, 0, NULL, 0, NULL, 0, False,
                           PyBytes_AS_STRING(packed), len(packed), defer)

    def remove(self, uint64_t seq, bint erase=False):
        """Remove one message. With the loop's hook its tombstone joins the iteration's
        pending records when there are any (a KV put or a limit removing a message as another
        is stored: one write for both); alone, or for an erase (whose tombstone reaches the
        file before the record is overwritten in place), it is written at once."""
        cdef nlog_entry* e = self._entry(seq)
        if e == NULL or e.size == 0:
            return False
        self._tombstone(seq.to_bytes(8, "little"), not erase)
        if erase:
            self._erase(seq, e)
        self._unindex(seq, e)
        if seq == self.first:
            self._advance_first()
            self._drop_front_blocks()
        return True

    cdef _erase(self, uint64_t seq, nlog_entry* e):
        # Overwrite hdr+msg with zeros in place, flag the record ERASED and re-checksum it, so
        # the bytes are gone from disk and recovery still parses the block.
        cdef Block b = self._block_of(seq)
        cdef bytes data = self._read_raw(seq, e)
        cdef bytearray rec
        cdef bytes enc
        cdef uint32_t slen, hlen, rl
        cdef int err
        cdef Py_ssize_t k
        if data is None or b is None:
            return
        rec = bytearray(data)
        rl = len(rec)
        slen = nlog_rd16(PyBytes_AS_STRING(data) + 21)
        rec[REC_HDR + slen:rl - 8] = bytes(rl - 8 - REC_HDR - slen)
        rec[20] = rec[20] | F_ERASED
        rec[rl - 8:] = nlog_xxh64(PyByteArray_AS_STRING(rec), rl - 8, 0).to_bytes(8, "little")
        if b.compressed:
            img = bytearray(self._image(b))
            img[e.off:e.off + rl] = rec
            self._reseal(b, img)
        elif b.encrypted:
            if b is self.active and PyByteArray_GET_SIZE(self.pend) and e.off >= self.pend_off:
                k = e.off - self.pend_off - FRAME_PRE         # not written yet
                memcpy(PyByteArray_AS_STRING(self.pend) + k, PyByteArray_AS_STRING(rec), rl)
                return
            # its frame is sealed again with a new nonce, never with the old keystream
            pt = self._frame_of(b, e.off)
            if pt is None:
                return
            fo = self.fc_off
            k = e.off - fo - FRAME_PRE
            frame = bytearray(pt)
            frame[k:k + rl] = rec
            enc = self._seal_frame(frame, fo, b.num)
            self.fc_blk = None
            err = pwrite_all(b.fd, PyBytes_AS_STRING(enc), PyBytes_GET_SIZE(enc), fo)
            if err:
                raise oserr(b.path, err)
        elif b is self.active and PyByteArray_GET_SIZE(self.pend) and e.off >= self.pend_off:
            k = e.off - self.pend_off                   # plaintext, not written yet
            memcpy(PyByteArray_AS_STRING(self.pend) + k, PyByteArray_AS_STRING(rec), rl)
        else:
            err = pwrite_all(b.fd, PyByteArray_AS_STRING(rec), rl, e.off)
            if err:
                raise oserr(b.path, err)

    def remove_matching(self, filt, uint64_t below=0, uint64_t maxp=0):
        """Remove live messages matching filt with seq < below (0 = any), at most maxp (0 = all),
        oldest first, with one tombstone record. Returns how many."""
        cdef int mode
        cdef uint32_t sid
        cdef const uint8_t* bp = NULL
        cdef Py_ssize_t bl = 0
        cdef uint64_t s, end, n = 0
        cdef bytearray packed = bytearray()
        cdef list seqs = []
        if self.msgs == 0:
            return 0
        mode, sid, bm = self._filter(filt)
        if mode == M_NONE:
            return 0
        if mode == M_BITMAP:
            bp = <const uint8_t*>PyByteArray_AS_STRING(bm)
            bl = PyByteArray_GET_SIZE(bm)
        end = self.last if below == 0 else min(self.last, below - 1)
        s = self._scan_fwd(self.first, end, mode, sid, bp, bl)
        while s:
            seqs.append(s)
            n += 1
            if maxp and n >= maxp:
                break
            if s >= end:
                break
            s = self._scan_fwd(s + 1, end, mode, sid, bp, bl)
        if not seqs:
            return 0
        for s in seqs:
            packed += s.to_bytes(8, "little")
        self._tombstone(bytes(packed))
        for s in seqs:
            self._unindex(s, self._entry(s))
        self._advance_first()
        self._drop_front_blocks()
        return len(seqs)

    cdef uint64_t _unindex_range(self, uint64_t lo, uint64_t hi):
        cdef uint64_t s, n = 0
        cdef nlog_entry* e
        s = self._scan_fwd(lo, hi, M_ALL, 0, NULL, 0)
        while s:
            e = self._entry(s)
            self._unindex(s, e)
            n += 1
            if s >= hi:
                break
            s = self._scan_fwd(s + 1, hi, M_ALL, 0, NULL, 0)
        return n

    def compact(self, uint64_t seq):
        """Remove everything below seq; first becomes seq, or last + 1 when nothing is left (as
        the memory store and nats-server's memory store). Returns how many were removed."""
        cdef uint64_t n
        if seq <= self.first and not (self.msgs == 0 and seq > self.last + 1):
            return 0
        self._write_record(T_FIRST, seq, 0, 0, NULL, 0, NULL, 0, False, NULL, 0)
        n = self._unindex_range(self.first if self.first else 1, seq - 1) if self.msgs else 0
        if seq > self.last + 1:
            self.last = seq - 1
        self.first = seq
        self._advance_first()
        self._free_chunks_below(self.first)
        self._drop_front_blocks()
        return n

    def truncate(self, uint64_t seq):
        """Remove everything above seq; last becomes seq."""
        cdef Block b, cut = None
        cdef uint64_t cut_off = 0
        cdef Py_ssize_t i
        if seq >= self.last:
            return
        self._flush_frame()
        self._unindex_range(max(seq + 1, self.first), self.last)
        # Find the first MSG record with a seq above `seq` and cut the log there.
        for b in self.blocks:
            if b.last_seq > seq:
                cut = b
                break
        if cut is not None:
            i = self.blocks.index(cut)
            for b in self.blocks[i + 1:]:
                close(b.fd)
                os.unlink(b.path)
                if b in self.raw_lru:
                    self.raw_lru.remove(b)
            del self.blocks[i + 1:]
            self.fc_blk = None
            if cut.compressed:
                self._unseal(cut, cut.size)
            if cut.encrypted:
                # frames cannot be cut in the middle: the records below go to a new file
                recs, end, _ = self._records_of(cut)
                keep = []
                for off, rec in recs:
                    if (rec[20] & 0x0f) == T_MSG and int.from_bytes(rec[4:12], "little") > seq:
                        break
                    keep.append((off, rec))
                data, offmap, frames = self._build_framed(cut.num, keep, cut.hwm)
                fd = write_file(cut.path, data)
                close(cut.fd)
                cut.fd = fd
                cut.frames = frames
                cut.size = len(data)
                self._remap(cut, offmap)
            else:
                cut_off = self._first_record_above(cut, seq)
                os.ftruncate(cut.fd, cut_off)
                cut.size = cut.zeroed_to = cut_off
            self.active = cut
            self.mblocks = [b for b in self.mblocks if b in self.blocks and b.first_seq <= seq]
            self.mfirst = [b.first_seq for b in self.mblocks]
            cut.last_seq = seq if cut.first_seq and cut.first_seq <= seq else 0
            if cut.last_seq == 0:
                cut.first_seq = 0
            self.dir_dirty = True
        self.last = seq
        # Tombstones and the FIRST marker may have been in the part cut off: write them again.
        if self.first > 1:
            self._write_record(T_FIRST, self.first, 0, 0, NULL, 0, NULL, 0, False, NULL, 0)
        dels = [s for s in self.deleted() if s <= seq]
        if dels:
            self._tombstone(b"".join(s.to_bytes(8, "little") for s in dels))
        # TRUNC, not SKIP: recovery must lower the first sequence too when it was above seq + 1
        # (the FIRST just written says otherwise), or the messages stored next are not found
        self._write_record(T_TRUNC, seq, 0, 0, NULL, 0, NULL, 0, False, NULL, 0)
        for b in self.blocks:           # an explicit truncate lowers the high-water marks
            if b.hwm > seq:
                self._write_hwm(b, seq)
        if self.msgs == 0:
            self.first = seq + 1
        elif self.first > seq:
            self.first = seq + 1
        r = self.read(self.prev_seq(seq)) if self.msgs else None
        self.last_ts = r[3] if r is not None else 0

    cdef uint64_t _first_record_above(self, Block b, uint64_t seq):
        # b is uncompressed and plain: offset of its first MSG record above seq, else its end
        recs, end, _ = self._records_of(b)
        for off, rec in recs:
            if (rec[20] & 0x0f) == T_MSG and int.from_bytes(rec[4:12], "little") > seq:
                return off
        return end

    def expired_ttls(self, int64_t now):
        """Pop the seqs whose per-message TTL has passed (and are still live)."""
        out = []
        while self.ttl_heap and self.ttl_heap[0][0] <= now:
            _, s = heapq.heappop(self.ttl_heap)
            e = self._entry(s)
            if e != NULL and e.size:
                out.append(s)
        return out

    # ---------------------------------------------------------------- durability

    def sync(self):
        """fdatasync the active block (and the directory if blocks came or went) now."""
        cdef int rc, fd = self.active.fd
        cdef uint64_t target = self.appended
        self._flush_frame()
        if self.sync_marks and self.last > self.active.hwm:     # (flushed: every record is written)
            self._write_hwm(self.active, self.last)
        with nogil:
            rc = fdatasync(fd)
        if rc != 0:
            raise oserr(self.active.path, errno)
        if self.dir_dirty:
            self.dir_dirty = False
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._synced_to(target)

    cdef _synced_to(self, uint64_t target):
        if target > self.synced:
            self.synced = target
        ready = [w for w in self.waiters if w[0] <= self.synced]
        if ready:
            self.waiters = [w for w in self.waiters if w[0] > self.synced]
            for w in ready:
                w[1]()

    @property
    def sync_waiting(self):
        """Whether a sync_async caller still waits for its sync."""
        return len(self.waiters) > 0

    def sync_async(self, hand_off, callback, on_error=None, bint may_inline=True):
        """Call callback() once everything appended so far is durable. Up to MAX_INFLIGHT
        fdatasyncs run at once: a batch written while one is in flight starts its own at once
        instead of waiting a whole sync for its turn, so a publisher with a bounded ack window
        loses one sync latency, not two. Requests beyond that are batched into the next one
        that starts. `hand_off` is the server's Loop, which gets each sync at C level
        (Loop.hand_off_sync: the sync threads, or at once when `may_inline` and the loop is
        idle), or any callable(job, done) that runs job() and then done(result, exc) (the
        store tests' thread pools)."""
        if self.appended <= self.synced:
            callback()
            return
        self.waiters.append((self.appended, callback, on_error))
        if self.inflight < MAX_INFLIGHT and self.appended > self.inflight_target:
            self._start_sync(hand_off, may_inline)

    cdef _start_sync(self, hand_off, bint may_inline):
        cdef uint64_t target = self.appended, hw
        try:
            self._flush_frame()
        except StoreError as exc:
            # the pending records could not be written: whoever waits for them fails
            failed = [w for w in self.waiters if w[0] > self.flushed]
            self.waiters = [w for w in self.waiters if w[0] <= self.flushed]
            for w in failed:
                if w[2] is not None:
                    w[2](exc)
            target = self.flushed       # what was written still gets its sync
            if not self.waiters or target <= self.inflight_target:
                return
        hw = self.flushed_last
        if self.sync_marks and hw > self.active.hwm:
            self._write_hwm(self.active, hw)
        fd = os.dup(self.active.fd)
        dirfd = -1
        if self.dir_dirty:
            self.dir_dirty = False
            dirfd = os.open(self.dir, os.O_RDONLY)
        self.inflight += 1
        self.inflight_target = target
        log_ref = self

        def done(result, exc):
            log_ref._sync_done(target, exc, hand_off, may_inline)
        if isinstance(hand_off, Loop):
            (<Loop>hand_off).hand_off_sync(SyncJob(fd, dirfd), done, may_inline)
        else:
            hand_off(SyncJob(fd, dirfd), done)

    def _sync_done(self, uint64_t target, exc, hand_off, bint may_inline):
        self.inflight -= 1
        if exc is not None:
            failed = [w for w in self.waiters if w[0] <= target]
            self.waiters = [w for w in self.waiters if w[0] > target]
            log.error("%s: fdatasync failed: %s", self.dir, exc)
            for w in failed:
                if w[2] is not None:
                    w[2](exc)
        else:
            self._synced_to(target)
        if (self.waiters and not self.closed and self.inflight < MAX_INFLIGHT
                and self.appended > self.inflight_target):
            self._start_sync(hand_off, may_inline)

    # ---------------------------------------------------------------- open / close

    def close(self):
        """Write what is pending, sync, write the index snapshot (through the writer the
        opener gave, natsd/_core/logopen.pyx) and close the files."""
        if self.closed:
            return
        self._flush_frame()
        self._cut_zeros(self.active)
        self.sync()
        if self.snapshot_writer is not None:
            try:
                self.snapshot_writer(self)
            except OSError as e:
                log.warning("%s: cannot write index snapshot: %s", self.dir, e)
        self.closed = True
        for b in self.blocks:
            if (<Block>b).fd >= 0:
                close((<Block>b).fd)
                (<Block>b).fd = -1

    def abandon(self):
        """Close the files without syncing or writing a snapshot (tests: a crash)."""
        self.closed = True
        if self.pend is not None:
            del self.pend[:]            # never written: lost as in a crash
        for b in self.blocks:
            if (<Block>b).fd >= 0:
                close((<Block>b).fd)
                (<Block>b).fd = -1

    # ---------------------------------------------------------------- recovery

    cdef _reset(self):
        cdef Py_ssize_t i
        for b in self.blocks:
            if (<Block>b).fd >= 0:
                close((<Block>b).fd)
        if self.chunks != NULL:
            for i in range(self.nchunks):
                free(self.chunks[i])
            free(self.chunks)
        self.chunks = NULL
        self.nchunks = 0
        self.chunk_lo = 0
        self.blocks, self.mblocks, self.mfirst, self.raw_lru = [], [], [], []
        self.subjects, self.sid_of, self.wc_cache, self.ttl_heap = [], {}, {}, []
        self.active = None
        self.first = self.last = self.msgs = self.bytes = 0
        self.last_ts = 0
        self.nsubj_live = 0
