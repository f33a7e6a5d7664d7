# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""Recovery of a Log (natsd/_core/log.pyx) from its block files, when its index snapshot
(logsnap.pyx) cannot be used; logopen.pyx calls these as it opens a log.

- `convert_blocks(lg)` runs first: every block not under the stream's current key (plaintext
  blocks of a store that just got a key, blocks under the previous key while re-keying) is
  rewritten through a temporary file.
- `rebuild(lg)` scans every block in order and builds the index, the per-subject table and
  the TTL heap; the first record that is short or fails its checksum ends its block (the file
  is cut there, and a warning names it). In a plaintext block, zeros from there to the end of
  the file are the block's end (a zero_ahead log wrote them, natsd/_core/log.pyx), cut without
  a warning; records lost from a synced tail are still found by the high-water mark. An
  encrypted block is sealed atomically, so one that does not authenticate stops the open
  instead.
- `scan_image` indexes the records of one block's image (or one encrypted frame's plaintext):
  messages, tombstones, FIRST and SKIP records.

`lg` is always the Log being opened; this module reaches its C-level state through log.pxd.
"""
import heapq
import logging
import os
from array import array

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcmp
from natsd._core.log cimport Log, Block, nlog_entry
from natsd._core.logfmt cimport (BLK_HDR, VERSION, F_ENC, F_ZIP, FRAME_PRE, FRAME_OVH, REC_HDR, REC_MIN,
                                 T_MSG, T_TOMBS, T_FIRST, T_SKIP, T_TRUNC, F_ERASED,
                                 HDR_BIT, nlog_xxh64, nlog_rd64, nlog_rd32, nlog_rd16)
from natsd._core.logfmt import (StoreError, payload_records, block_records, parse_frames,
                                zipped_payload, write_file, block_files)

cdef extern from "unistd.h" nogil:
    int close(int fd)

log = logging.getLogger("natsd")


def convert_blocks(Log lg):
    """Before the index is built: rewrite every block that is not under the current key
    (plaintext blocks of a store that just got a key, blocks under the previous key while
    re-keying) through a temporary file. An encrypted block with no key for it stops the
    open with a StoreError and is left as it is. Returns how many blocks were rewritten."""
    cdef int converted = 0
    for num in block_files(lg.dir):
        path = os.path.join(lg.dir, f"{num}.blk")
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            hdr = os.pread(fd, BLK_HDR, 0)
            if len(hdr) < BLK_HDR or hdr[:4] != b"NLOG" or hdr[4] != VERSION:
                continue                        # the scan deals with these
            flags = hdr[5]
            kid = int.from_bytes(hdr[6:8], "little")
            old = None
            if flags & F_ENC:
                if lg.enc is None:
                    raise StoreError(path, "the block is encrypted and no JetStream "
                                           "encryption key is configured")
                if kid == lg.enc_kid:
                    continue
                old = lg.crypt.aead_for(kid)
                if old is None:
                    raise StoreError(path, "the block is encrypted with an unknown key (id %d)" % kid)
            elif lg.enc is None:
                continue
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
            if flags & F_ZIP:
                try:
                    comp = zipped_payload(raw, old)
                except Exception:
                    raise StoreError(path, "cannot decrypt the block with its key")
                h = lg._blk_header((flags & F_ZIP) | F_ENC, int.from_bytes(hdr[8:16], "little"))
                data = h + lg._seal_blob(comp, h)
            else:
                recs, end, suspect = block_records(raw, old, num)
                if suspect:
                    raise StoreError(path, "cannot decrypt the block with its key")
                if end < len(raw) and (old is not None or raw.count(b"\0", end) != len(raw) - end):
                    log.warning("%s: truncated or corrupt record at offset %d, %d bytes dropped",
                                path, end, len(raw) - end)
                data = lg._build_framed(num, recs, int.from_bytes(hdr[8:16], "little"))[0]
            os.close(write_file(path, data))
            converted += 1
        finally:
            os.close(fd)
    if converted:
        dfd = os.open(lg.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return converted


cdef uint64_t scan_image(Log lg, Block b, bytes img, uint64_t start, uint64_t delta) except? 0:
    # Index the records of img from `start`; a record at img offset o is stored at o + delta
    # (an encrypted frame's plaintext is scanned with delta = where it sits in the block).
    cdef const char* p = PyBytes_AS_STRING(img)
    cdef uint64_t n = PyBytes_GET_SIZE(img), off = start, seq, s, i
    cdef uint32_t rl, slen, hlen, sid = 0, size
    cdef const char* lsubj = NULL
    cdef uint32_t lslen = 0
    cdef int64_t ts, ttl
    cdef int t
    cdef nlog_entry* e
    while off + REC_MIN <= n:
        rl = nlog_rd32(p + off)
        if rl < REC_MIN or off + rl > n:
            break
        if nlog_xxh64(p + off, rl - 8, 0) != nlog_rd64(p + off + rl - 8):
            break
        seq = nlog_rd64(p + off + 4)
        ts = <int64_t>nlog_rd64(p + off + 12)
        t = <uint8_t>p[off + 20]
        slen = nlog_rd16(p + off + 21)
        hlen = nlog_rd32(p + off + 23)
        ttl = <int64_t>nlog_rd64(p + off + 27)
        if REC_MIN + <uint64_t>slen + hlen > rl:
            break
        if (t & 0x0f) == T_MSG:
            if seq > lg.last and (t & F_ERASED):
                lg.last = seq
            elif not (t & F_ERASED) and seq >= lg.floor:
                if lsubj == NULL or lslen != slen or memcmp(lsubj, p + off + REC_HDR, slen) != 0:
                    # Most consecutive records share a subject: skip the dict lookup then.
                    sid = lg._sid(PyBytes_FromStringAndSize(p + off + REC_HDR, slen))
                    lsubj = p + off + REC_HDR
                    lslen = slen
                size = rl | (HDR_BIT if hlen else 0)
                lg._index_msg(seq, ts, <uint32_t>(off + delta), size, sid, b)
                if ttl > 0:
                    heapq.heappush(lg.ttl_heap, (ts + ttl * 1000000000, seq))
        elif (t & 0x0f) == T_TOMBS:
            for i in range(slen + hlen, rl - REC_MIN - 7, 8):
                s = nlog_rd64(p + off + REC_HDR + i)
                e = lg._entry(s)
                if e != NULL and e.size:
                    lg._unindex(s, e)
        elif (t & 0x0f) == T_FIRST:
            if lg.msgs and seq > 1:
                lg._unindex_range(1 if lg.first == 0 else lg.first, seq - 1)
            if seq > lg.floor:
                lg.floor = seq
            if seq > lg.last + 1:
                lg.last = seq - 1
            if lg.msgs == 0 or lg.first < seq:
                lg.first = seq
        elif (t & 0x0f) == T_SKIP:
            if seq > lg.last:
                lg.last = seq
                if ts:
                    lg.last_ts = ts
        elif (t & 0x0f) == T_TRUNC:
            # as Log.truncate left it: nothing above seq, and the next message is seq + 1 at
            # the latest, whatever FIRST record came before
            if lg.msgs and lg.last > seq:
                lg._unindex_range(max(seq + 1, lg.first), lg.last)
            lg.last = seq
            if lg.floor > seq + 1:
                lg.floor = seq + 1
            if lg.msgs == 0 or lg.first > seq:
                lg.first = seq + 1
        off += rl
    return off


def rebuild(Log lg):
    """Rebuild the index by scanning every block; cut a bad tail at the last good record."""
    cdef Block b
    cdef uint64_t good
    nums = block_files(lg.dir)
    for num in nums:
        path = os.path.join(lg.dir, f"{num}.blk")
        b = Block(num, path)
        b.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        hdr = os.pread(b.fd, BLK_HDR, 0)
        if len(hdr) < BLK_HDR and num == nums[-1]:
            # Crashed while creating the block: it holds nothing yet.
            log.warning("%s: incomplete block header, reinitialized", path)
            os.ftruncate(b.fd, 0)
            os.pwrite(b.fd, lg._blk_header(F_ENC if lg.enc is not None else 0, 0), 0)
            hdr = os.pread(b.fd, BLK_HDR, 0)
        if hdr[:4] != b"NLOG" or hdr[4] != VERSION:
            log.warning("%s: not a version %d natsd log block, ignored", path, VERSION)
            close(b.fd)
            continue
        b.zflag = hdr[5] & F_ZIP
        b.compressed = b.zflag != 0
        b.encrypted = bool(hdr[5] & F_ENC)
        if b.encrypted != (lg.enc is not None) or (b.encrypted and
                                                     int.from_bytes(hdr[6:8], "little") != lg.enc_kid):
            close(b.fd)                 # _convert_blocks made them all current: a race?
            raise StoreError(path, "block not under the stream's current key")
        b.aead = lg.enc if b.encrypted else None
        if not b.compressed:
            b.hwm = int.from_bytes(hdr[8:16], "little")
        frames = None
        try:
            if b.compressed:
                img = lg._image(b)
                disk = len(img)
            else:
                img = os.pread(b.fd, os.fstat(b.fd).st_size, 0)
                disk = len(img)
                if b.encrypted:
                    frames, _, suspect = parse_frames(img, b.aead, b.num)
                    if suspect:
                        close(b.fd)
                        raise StoreError(path, "the block does not decrypt with the stream's key")
        except StoreError:
            raise
        except Exception as e:
            if b.encrypted:             # sealed atomically: not a torn write, keep it
                close(b.fd)
                raise StoreError(path, "the block does not decrypt with the stream's key")
            log.warning("%s: cannot decompress block (%s), its messages are lost", path, e)
            img = bytes(BLK_HDR)
            disk = len(img)
        lg.blocks.append(b)
        if frames is not None:
            # each authenticated frame is scanned at its place in the block
            b.frames = array("Q")
            good = BLK_HDR
            for fo, pt in frames:
                if payload_records(pt, 0) is None:
                    break
                scan_image(lg, b, pt, 0, fo + FRAME_PRE)
                b.frames.append(fo)
                good = fo + FRAME_OVH + len(pt)
        else:
            good = scan_image(lg, b, img, BLK_HDR, 0)
        if good < <uint64_t>disk and not b.compressed and not b.encrypted \
                and img.count(b"\0", good) == disk - good:
            os.ftruncate(b.fd, good)    # zeros written ahead of the records: the block's end
            b.size = good
        elif good < <uint64_t>disk:
            log.warning("%s: truncated or corrupt record at offset %d, %d bytes dropped",
                        path, good, disk - good)
            if b.compressed:
                lg._unseal(b, good)
            else:
                os.ftruncate(b.fd, good)
                b.size = good
        else:
            b.size = good
    if lg.blocks and not (<Block>lg.blocks[-1]).compressed:
        lg.active = lg.blocks[-1]
    elif lg.blocks:
        lg._new_block((<Block>lg.blocks[-1]).num + 1)
    lg._advance_first()
    lg._free_chunks_below(lg.first)
    lg._drop_front_blocks()
