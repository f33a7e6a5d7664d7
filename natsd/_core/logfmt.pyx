# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""The on-disk format of natsd's log (natsd/_core/log.pyx): how blocks, records and encrypted
frames are laid out, and the helpers that parse, check, compress and write them. It knows
nothing of the in-memory index; log.pyx does the rest.

On disk, directory `<dir>/`:

  `<n>.blk`   blocks, n = 1, 2, ... . A 16-byte header `NLOG` u8 version(1) u8 flags(1 = lz4,
              2 = encrypted, 4 = S2) u16 key-id (encrypted blocks) u64 image-length (compressed blocks) or
              high-water mark (the others: the highest sequence the log had stored when it last
              synced this block, so a tail lost later is detected), then records, little-endian,
              back to back:
                 u32 length (whole record)  u64 seq  i64 ts(ns)  u8 type|flags  u16 subject-len
                 u32 hdr-len  i64 ttl(s)  subject  hdr  msg  u64 xxhash64(all of the above)
              Record types: MSG; TOMBS (payload = packed u64 seqs deleted: one record per remove,
              one per purge batch); FIRST (seq = new first sequence, everything below is gone:
              compact/purge); SKIP (seq is used without a message: a tail lost while the store
              was down keeps the last sequence ever stored); TRUNC (truncate: everything above
              seq is gone, last = seq, and the first sequence is at most seq + 1, even after a
              FIRST above it: a purge to 11 then a truncate to 9 stores 10 next).
              Only the active (last) block is appended to. When it reaches `block_size` it is
              fdatasync'ed and sealed; with compression "lz4" or "s2" a sealed block's records
              are rewritten as one lz4 block (flags=1) or S2 block (flags=4, natsd/_core/s2.pyx),
              read back by decompressing the whole image into a small LRU.
              Encrypted (a `crypt` key context, natsd/jetstream/engine/jscrypt.py): an uncompressed
              block holds frames `u32 n | 12-byte nonce | AEAD(n bytes of records) | tag`, the
              associated data binding n, the frame's offset and the block number. The records
              appended in one loop iteration (the server's call_soon hook) wait in memory and
              are sealed as one frame, written before any sync, at 16 KiB, at rotation, and at
              once for anything but a message; without the hook every record is its own
              frame. Reads decrypt a whole frame (the last one is cached). An lz4 block is
              `header | nonce | AEAD(lz4 image) | tag` with the header as associated data:
              compressed first, then encrypted. Nonces are a random base per open plus a
              counter, never reused for a key (an erased record's frame is sealed again with a
              new one). Index entries keep the plain record length (byte accounting is
              unchanged) and the record's offset in the block as stored. Blocks in plaintext
              or under an older key are rewritten under the current key when the log opens (a
              key added to a store, key rotation); an encrypted block without its key, or
              whose first frame does not authenticate while more follow, is an error, never
              a rescan that cuts it.
  `index.snap` written on clean close: block list, subject table, index chunks, each with a
              checksum (sealed when encrypted); used on open only if every block still has the
              recorded size and the last block's tail checksum matches, then unlinked (a later
              crash means a full rescan). Its last sequence is a floor for the recovered one
              even when the rest is unusable.

"""
import os

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport strerror
from libc.errno cimport errno, EINTR

cdef extern from "unistd.h" nogil:
    ssize_t pwrite(int fd, const void* buf, size_t n, long off)


class StoreError(Exception):
    """A disk error while storing; the store is left as it was before the failed operation."""

    def __init__(self, path, text):
        super().__init__(f"{path}: {text}")
        self.path = path
        self.text = text


def xxh64(data, uint64_t seed=0):
    """XXH64 of bytes (exposed for tests: it must equal xxhash.xxh64_intdigest)."""
    cdef const unsigned char[:] v = data
    if v.shape[0] == 0:
        return nlog_xxh64(b"", 0, seed)
    return nlog_xxh64(&v[0], v.shape[0], seed)


def subject_match(bytes pattern, bytes subject):
    return bool(nlog_match(pattern, len(pattern), subject, len(subject)))


cdef object oserr(path, int err):
    return StoreError(path, strerror(err).decode("utf-8", "replace"))


cdef int pwrite_all(int fd, const char* buf, Py_ssize_t n, long off) except -2:
    """Write all n bytes at off (retrying short writes and EINTR); 0 or the errno."""
    cdef ssize_t w
    while n > 0:
        w = pwrite(fd, buf, n, off)
        if w < 0:
            if errno == EINTR:
                continue
            return errno
        buf += w
        n -= w
        off += w
    return 0


cdef bytes frame_aad(uint32_t n, uint64_t off, int num):
    # a frame is bound to its length, its place in the block and the block
    cdef char a[16]
    nlog_wr32(a, n)
    nlog_wr64(a + 4, off)
    nlog_wr32(a + 12, <uint32_t>num)
    return PyBytes_FromStringAndSize(a, 16)


cdef bint rec_ok(bytes data, uint64_t seq):
    """data is exactly one whole record of sequence seq whose checksum matches."""
    cdef const char* p = PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    if n < REC_MIN or nlog_rd32(p) != n or nlog_rd64(p + 4) != seq:
        return False
    return nlog_xxh64(p, n - 8, 0) == nlog_rd64(p + n - 8)


def payload_records(bytes pt, uint64_t base):
    """[(offset, record)] of the records back to back in pt (offsets from base); None when
    one does not parse."""
    cdef const char* p = PyBytes_AS_STRING(pt)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(pt), off = 0
    cdef uint32_t rl
    cdef list out = []
    while off < n:
        if not plain_ok(p + off, n - off):
            return None
        rl = nlog_rd32(p + off)
        out.append((base + off, pt[off:off + rl]))
        off += rl
    return out


def parse_frames(bytes raw, aead, int num):
    """The frames of an encrypted uncompressed block as read from disk: ([(offset, plaintext)],
    end of the last good one, suspect). Stops at the first frame that is short or does not
    authenticate. suspect: the first frame is whole but does not authenticate and more bytes
    follow it - a wrong key rather than a torn tail."""
    cdef const char* p = PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), off = BLK_HDR
    cdef uint32_t ln
    cdef list frames = []
    suspect = False
    while off + FRAME_OVH <= n:
        ln = nlog_rd32(p + off)
        if ln == 0 or off + <Py_ssize_t>ln + FRAME_OVH > n:
            break
        try:
            pt = aead.decrypt(raw[off + 4:off + FRAME_PRE], raw[off + FRAME_PRE:off + ln + FRAME_OVH],
                              frame_aad(ln, off, num))
        except Exception:
            if not frames and off + <Py_ssize_t>ln + FRAME_OVH < n:
                suspect = True
            break
        frames.append((off, pt))
        off += ln + FRAME_OVH
    return frames, off, suspect


def block_records(bytes raw, aead, int num):
    """The records of an uncompressed block as read from disk (framed when aead is given):
    ([(offset, plain record)], end of the last good one, suspect). Stops at the first record
    (or frame) that is short, fails its checksum or does not authenticate."""
    cdef const char* p = PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), off = BLK_HDR
    cdef uint32_t rl
    cdef list recs = []
    if aead is None:
        while off + REC_MIN <= n:
            if not plain_ok(p + off, n - off):
                break
            rl = nlog_rd32(p + off)
            recs.append((off, raw[off:off + rl]))
            off += rl
        return recs, off, False
    frames, end, suspect = parse_frames(raw, aead, num)
    for fo, pt in frames:
        r = payload_records(pt, fo + FRAME_PRE)
        if r is None:
            return recs, fo, suspect
        recs.extend(r)
    return recs, end, suspect


def zip_image(bytes data, int zflag):
    """A sealed block's records, compressed (lz4 or S2 by the flag)."""
    if zflag == F_S2:
        from natsd._core.s2 import compress_block
        return compress_block(data, "better")
    import lz4.block
    return lz4.block.compress(data, store_size=False)


def unzip_image(bytes comp, int zflag, Py_ssize_t n):
    if zflag == F_S2:
        from natsd._core.s2 import decompress_block
        out = decompress_block(comp, n)
        if len(out) != n:
            raise ValueError("s2: corrupt input")
        return out
    import lz4.block
    return lz4.block.decompress(comp, uncompressed_size=n)


def zipped_payload(bytes data, aead):
    """The compressed bytes of a compressed block file (decrypted with aead when encrypted)."""
    if not (data[5] & F_ENC):
        return data[BLK_HDR:]
    if aead is None:
        raise ValueError("encrypted block without its key")
    return aead.decrypt(data[BLK_HDR:BLK_HDR + NONCE_LEN], data[BLK_HDR + NONCE_LEN:], data[:BLK_HDR])


def write_file(path, data):
    """Write a whole block file through `<path>.tmp` + fsync + rename; returns the new fd."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.rename(tmp, path)
    return fd


def block_files(directory):
    """The numbers of the block files in `directory`, ascending (an interrupted compression's
    temporary file is removed)."""
    nums = []
    for name in os.listdir(directory):
        if name.endswith(".tmp"):
            os.unlink(os.path.join(directory, name))     # an interrupted compression
        elif name.endswith(".blk") and name[:-4].isdigit():
            nums.append(int(name[:-4]))
    return sorted(nums)
