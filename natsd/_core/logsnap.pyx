# cython: language_level=3, boundscheck=False, wraparound=True
"""The index snapshot of a Log (`index.snap`): written on clean close, used on the next open
when it matches the block files exactly (sizes and the last block's tail), so a big store opens
without rescanning its blocks. Anything unusable is ignored and the blocks are scanned.

Format: `NSNP` + u64 meta length + u64 xxhash64 of the meta, the meta (below), then each index
chunk. The meta is little-endian binary, version 2 (a version-1 snapshot, pickled, is ignored:
the blocks are scanned):

    u32 version, u64 first, u64 last, i64 last_ts, u64 msgs, u64 bytes, u64 live subjects
    u32 n, then n x (u32 len, subject bytes)                      sid -> subject
    u32 n, then n x (i64 expires ns, u64 seq)                     TTL heap
    u32 n, then n x (u64 num, u64 size, u64 first, u64 last, u8 compressed, u64 size on disk)
    u32 n, then n x (u64 chunk index, u64 xxhash64 of the chunk)
    u32 n, then n x (u64 block num, u32 len, frame offsets)      encrypted blocks
    u32 len, per-subject stats (nlog_sstat array)
    u32 len, the last block's last 8 bytes
 Encrypted logs write `NSNE` + u64 sealed-meta length + u64 key id, the meta sealed with the
stream's key (nonce + ciphertext + tag), then each chunk sealed the same way (each part's
associated data names it).

The meta's last sequence is kept as Log.snap_last even when the snapshot does not match the
blocks any more (a block truncated after a clean stop): the log never goes below it.
"""
import logging
import os
import struct
from array import array

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from natsd._core.bytereader import ByteReader
from libc.stdint cimport uint64_t
from libc.string cimport memcpy
from natsd._core.log cimport Log, Block, nlog_entry, nlog_sstat, CHUNK, CHUNK_BITS
from natsd._core.logfmt cimport F_ENC, F_ZIP, nlog_xxh64
from natsd._core.logfmt import block_files

log = logging.getLogger("natsd")

DEF SNAP_VERSION = 2
DEF SEAL_OVH = 28           # nonce + tag of a sealed part



_HEAD = struct.Struct("<IQQqQQQ")
_BLOCK = struct.Struct("<QQQQBQ")
_TTL = struct.Struct("<qQ")
_CHUNK = struct.Struct("<QQ")
_FRAMES = struct.Struct("<QI")
_U32 = struct.Struct("<I")


def encode_meta(meta):
    """The meta dict -> its declared binary form (see the module docstring)."""
    out = [_HEAD.pack(SNAP_VERSION, meta["first"], meta["last"], meta["last_ts"], meta["msgs"],
                      meta["bytes"], meta["nsubj"])]

    def blobs(items):
        out.append(_U32.pack(len(items)))
        for b in items:
            out.append(_U32.pack(len(b)))
            out.append(b)

    def records(rec, items):
        out.append(_U32.pack(len(items)))
        out.extend(rec.pack(*it) for it in items)
    blobs(meta["subjects"])
    records(_TTL, meta["ttl"])
    records(_BLOCK, [(n, sz, f, l, 1 if c else 0, d) for n, sz, f, l, c, d in meta["blocks"]])
    records(_CHUNK, meta["chunks"])
    out.append(_U32.pack(len(meta["frames"])))
    for num, fr in meta["frames"].items():
        out.append(_FRAMES.pack(num, len(fr)))
        out.append(fr)
    for b in (meta["sstats"], meta["tail"]):
        out.append(_U32.pack(len(b)))
        out.append(b)
    return b"".join(out)


def decode_meta(data):
    """The binary meta -> the dict write_snapshot built; ValueError when it is not version 2
    or does not parse exactly."""
    r = ByteReader(data, ValueError, "index snapshot meta is truncated")
    v, first, last, last_ts, msgs, nbytes, nsubj = r.unpack(_HEAD)
    if v != SNAP_VERSION:
        raise ValueError("index snapshot version %d" % v)
    meta = dict(v=v, first=first, last=last, last_ts=last_ts, msgs=msgs, bytes=nbytes,
                nsubj=nsubj)
    meta["subjects"] = [r.blob(_U32) for _ in range(r.number(_U32))]
    meta["ttl"] = [r.unpack(_TTL) for _ in range(r.number(_U32))]
    meta["blocks"] = [(n, sz, f, l, bool(c), d)
                      for n, sz, f, l, c, d in (r.unpack(_BLOCK) for _ in range(r.number(_U32)))]
    meta["chunks"] = [r.unpack(_CHUNK) for _ in range(r.number(_U32))]
    frames = {}
    for _ in range(r.number(_U32)):
        num, n = r.unpack(_FRAMES)
        frames[num] = bytes(r.take(n))
    meta["frames"] = frames
    meta["sstats"] = r.blob(_U32)
    meta["tail"] = r.blob(_U32)
    if r.pos != len(data):
        raise ValueError("index snapshot meta has %d trailing bytes" % (len(data) - r.pos))
    return meta


def write_snapshot(Log self):
    """Write index.snap on clean close: the in-memory index, so the next open skips the scan."""
    cdef Block b, lastb = self.blocks[-1]
    cdef Py_ssize_t k
    blocks = [(b.num, b.size, b.first_seq, b.last_seq, b.compressed, os.fstat(b.fd).st_size)
              for b in self.blocks]
    disk = blocks[-1][5]
    chunks = []
    for k in range(self.nchunks):
        if self.chunks[k] != NULL:
            chunks.append((k + self.chunk_lo,
                           nlog_xxh64(self.chunks[k], CHUNK * sizeof(nlog_entry), 0)))
    meta = dict(v=SNAP_VERSION, first=self.first, last=self.last, last_ts=self.last_ts,
                msgs=self.msgs, bytes=self.bytes, nsubj=self.nsubj_live,
                subjects=self.subjects, ttl=self.ttl_heap, blocks=blocks, chunks=chunks,
                frames={b.num: b.frames.tobytes() for b in self.blocks if b.frames is not None},
                sstats=PyBytes_FromStringAndSize(<char*>self.sstats,
                                                 len(self.subjects) * sizeof(nlog_sstat)),
                tail=os.pread(lastb.fd, 8, disk - 8) if disk >= 8 else b"")
    m = encode_meta(meta)
    crypt = self.crypt
    tmp = os.path.join(self.dir, "index.snap.tmp")
    with open(tmp, "wb") as f:
        if crypt is None:
            f.write(b"NSNP" + len(m).to_bytes(8, "little") + nlog_xxh64(<char*>m, len(m), 0).to_bytes(8, "little"))
            f.write(m)
        else:
            sm = crypt.seal(m, b"NSNE meta")
            f.write(b"NSNE" + len(sm).to_bytes(8, "little") + int(crypt.kid).to_bytes(8, "little"))
            f.write(sm)
        for c, _ in chunks:
            k = c - self.chunk_lo
            data = PyBytes_FromStringAndSize(<char*>self.chunks[k], CHUNK * sizeof(nlog_entry))
            f.write(data if crypt is None else crypt.seal(data, b"NSNE chunk %d" % c))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(self.dir, "index.snap"))


def load_snapshot(Log self, bint usable=True):
    """Use index.snap if it matches the blocks exactly; it is removed either way. usable=False
    (the blocks were just rewritten): only its last sequence is kept (Log.snap_last)."""
    path = os.path.join(self.dir, "index.snap")
    if not os.path.exists(path):
        return False
    try:
        ok = _apply_snapshot(self, path, usable)
    except Exception as e:
        ok = False
        log.warning("%s: unusable index snapshot (%s), rescanning blocks", path, e)
    if not ok:
        self._reset()
    os.unlink(path)
    return ok


cdef bint _apply_snapshot(Log self, path, bint usable) except -1:
    cdef Block b
    cdef nlog_entry* ce
    cdef bytes data, ss
    cdef Py_ssize_t n
    crypt = self.crypt
    with open(path, "rb") as f:
        h = f.read(20)
        if len(h) != 20 or h[:4] not in (b"NSNP", b"NSNE"):
            return False
        m = f.read(int.from_bytes(h[4:12], "little"))
        kid = int.from_bytes(h[12:20], "little")
        if h[:4] == b"NSNE":
            if crypt is None:
                return False
            m = crypt.open(m, b"NSNE meta", kid)
        elif nlog_xxh64(<char*>m, len(m), 0) != int.from_bytes(h[12:20], "little"):
            return False
        meta = decode_meta(m)
        if meta.get("v") != SNAP_VERSION or not meta["blocks"]:
            return False
        self.snap_last = meta["last"]
        if not usable or (h[:4] == b"NSNE") != (crypt is not None):
            return False
        if crypt is not None and kid != crypt.kid:
            return False
        if [bl[0] for bl in meta["blocks"]] != block_files(self.dir):
            return False
        for num, size, fseq, lseq, comp, disk in meta["blocks"]:
            bpath = os.path.join(self.dir, f"{num}.blk")
            if os.path.getsize(bpath) != disk:
                return False
        with open(bpath, "rb") as lf:
            lf.seek(max(0, disk - 8))
            if lf.read(8) != meta["tail"]:
                return False
        for num, size, fseq, lseq, comp, disk in meta["blocks"]:
            b = Block(num, os.path.join(self.dir, f"{num}.blk"))
            b.fd = os.open(b.path, os.O_RDWR | os.O_CLOEXEC)
            self.blocks.append(b)
            b.size, b.first_seq, b.last_seq, b.compressed = size, fseq, lseq, comp
            bh = os.pread(b.fd, 16, 0)
            # either compression (lz4 or S2); the block says which, as the scan reads it
            if len(bh) != 16 or bool(bh[5] & F_ZIP) != bool(comp):
                return False
            b.zflag = bh[5] & F_ZIP
            b.encrypted = bool(bh[5] & F_ENC)
            if b.encrypted != (crypt is not None) or (
                    b.encrypted and int.from_bytes(bh[6:8], "little") != crypt.kid):
                return False
            b.aead = crypt.aead if b.encrypted else None
            if not comp:
                b.hwm = int.from_bytes(bh[8:16], "little")
            if b.encrypted and not comp:
                fr = meta.get("frames", {}).get(num)
                if fr is None:
                    return False
                b.frames = array("Q")
                b.frames.frombytes(fr)
            if fseq:
                self.mblocks.append(b)
                self.mfirst.append(fseq)
        for s in meta["subjects"]:
            self._sid(s)
        ss = meta["sstats"]
        if len(ss) != len(self.subjects) * sizeof(nlog_sstat):
            return False
        if len(ss):
            memcpy(self.sstats, PyBytes_AS_STRING(ss), len(ss))
        for c, hsum in meta["chunks"]:
            if crypt is None:
                data = f.read(CHUNK * sizeof(nlog_entry))
            else:
                data = crypt.open(f.read(CHUNK * sizeof(nlog_entry) + SEAL_OVH), b"NSNE chunk %d" % c, kid)
            if len(data) != CHUNK * sizeof(nlog_entry) or nlog_xxh64(<char*>data, len(data), 0) != hsum:
                return False
            ce = self._entry_alloc(<uint64_t>c << CHUNK_BITS)
            memcpy(ce, PyBytes_AS_STRING(data), len(data))
    self.first, self.last, self.last_ts = meta["first"], meta["last"], meta["last_ts"]
    self.msgs, self.bytes, self.nsubj_live = meta["msgs"], meta["bytes"], meta["nsubj"]
    self.ttl_heap = meta["ttl"]
    b = self.blocks[-1]
    if not b.compressed:
        self.active = b
    return True
