# The segmented append-only log behind FileStore and the Raft WAL: declarations so other
# Cython modules (logsnap, logrecover, the delivery fast paths) reach Log's C-level state.
# Its in-memory index (entries per sequence, subjects, the scans) is LogIndex, logindex.pxd.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from natsd._core.logindex cimport LogIndex, nlog_entry, nlog_sstat, CHUNK_BITS, CHUNK

cdef extern from *:
    """
    typedef struct { const char* subj; Py_ssize_t slen; const char* msg; Py_ssize_t hlen;
                     Py_ssize_t tlen; int64_t ts; } nlog_rec;
    """
    ctypedef struct nlog_rec:
        const char* subj  # a message as batch_rec() returns it: pointers into Log's read window
        Py_ssize_t slen
        const char* msg   # hdr followed by payload (contiguous, as MSG/HMSG framing wants)
        Py_ssize_t hlen   # 0 without headers
        Py_ssize_t tlen   # hdr + payload
        int64_t ts


cdef class Block:
    cdef public int num
    cdef public int fd
    cdef public object path
    cdef public uint64_t size          # bytes of the (uncompressed) image, header included
    cdef public uint64_t first_seq     # first / last MSG seq stored here (0 = none yet)
    cdef public uint64_t last_seq
    cdef public bint compressed
    cdef public int zflag              # compressed blocks: F_LZ4 or F_S2, how
    cdef public object raw             # decompressed image while cached (compressed blocks)
    cdef public bint encrypted         # records (or the sealed image) are AEAD-sealed
    cdef public object aead            # the AEAD of its key (encrypted blocks)
    cdef public uint64_t hwm           # header high-water mark: highest seq ever stored (uncompressed)
    cdef public object frames          # encrypted uncompressed: array('Q') of frame offsets
    cdef public uint64_t zeroed_to     # zero_ahead logs: the file holds zeros up to here


cdef class Log(LogIndex):
    cdef readonly object dir
    cdef readonly uint64_t block_size
    cdef readonly object compression
    cdef list blocks                   # every block file, oldest first
    cdef list mblocks                  # blocks holding at least one MSG, oldest first
    cdef list mfirst                   # their first MSG seq (for bisect)
    cdef Block active
    cdef list raw_lru                  # compressed blocks whose image is cached

    cdef int64_t first_ts_cache
    cdef uint64_t first_ts_seq
    cdef uint64_t floor                # recovery: highest FIRST record seen


    cdef char* wbuf                    # scratch buffer for building records
    cdef Py_ssize_t wcap

    cdef readonly uint64_t appended    # records written (the group-commit clock)
    cdef readonly uint64_t synced      # records known durable
    cdef int inflight                  # fdatasyncs running in workers
    cdef uint64_t inflight_target
    cdef list waiters                  # [(target, callback, on_error)]
    cdef bint dir_dirty
    cdef readonly list ttl_heap        # [(expires_ns, seq)] for messages stored with a TTL
    cdef bint closed

    # encryption at rest (natsd/jetstream/engine/jscrypt.py): None = plaintext
    cdef readonly object crypt         # the stream's key context
    cdef object enc                    # the current key's AEAD (None: no encryption)
    cdef int enc_kid
    cdef char nbase[12]                # nonce = nbase + counter (random base per open)
    cdef uint64_t nctr
    cdef public uint64_t snap_last     # last seq an index snapshot recorded (even an unusable one)
    cdef public object snapshot_writer # close() writes the index snapshot with it (logopen.pyx)
    cdef object pend                   # records appended to the active block, not yet written
    cdef uint64_t pend_off             #   (at pend_off by _flush_frame: as they are, or sealed)
    cdef uint64_t flushed              # `appended` when pend was last empty
    cdef uint64_t flushed_last         # `last` then (the high-water mark a sync may write)
    cdef object call_soon              # the loop's call_soon: write pend once per loop
    cdef bint flush_scheduled          #   iteration; None: each record at once
    cdef object flush_err              # the last frame write error logged (logged once)
    cdef Block fc_blk                  # the frame last decrypted for a read: block, offset, plain
    cdef uint64_t fc_off
    cdef object fc_pt
    cdef readonly uint64_t writeback_to  # see "Early writeback" in log.pyx
    cdef readonly object lost_tail     # (first, last) seqs found lost at the tail on open, or None
    cdef readonly bint sync_marks      # each sync raises the active block's high-water mark
    cdef readonly bint zero_ahead      # the active block's file is kept zero-filled past its records

    # batched reads (batch_begin / batch_next / batch_rec): the resolved filter and a read-ahead
    # window over one block, valid until the next batch_begin (no writes happen in between)
    cdef int bmode
    cdef uint32_t bsid
    cdef object bbm                    # bytearray bitmap for wildcard filters
    cdef char* rbuf
    cdef Py_ssize_t rcap
    cdef Block rblk                    # block the window holds (None: empty window)
    cdef uint64_t roff                 # block offset of rbuf[0]
    cdef Py_ssize_t rlen               # valid bytes in rbuf
    cdef object rimg                   # compressed block: its image (bytes) instead of rbuf
    cdef object rdec                   # encrypted block: the record batch_rec last decrypted

    cdef int _write_record(self, int rtype, uint64_t seq, int64_t ts, int64_t ttl,
                           const char* subj, Py_ssize_t slen, const char* hdr, Py_ssize_t hlen,
                           bint has_hdr, const char* msg, Py_ssize_t mlen, bint defer=*) except -1
    cdef int _index_msg(self, uint64_t seq, int64_t ts, uint32_t off, uint32_t size,
                        uint32_t sid, Block blk) except -1
    cdef uint64_t _unindex_range(self, uint64_t lo, uint64_t hi)
    cdef uint64_t _first_record_above(self, Block b, uint64_t seq)
    cdef _new_block(self, int num)
    cdef _rotate(self)
    cdef _compress(self, Block b)
    cdef bytes _image(self, Block b)
    cdef Block _block_of(self, uint64_t seq)
    cdef _drop_front_blocks(self)
    cdef bytes _read_raw(self, uint64_t seq, nlog_entry* e)
    cdef _tombstone(self, bytes packed, bint defer=*)
    cdef _erase(self, uint64_t seq, nlog_entry* e)
    cdef _unseal(self, Block b, uint64_t cut)
    cdef _reseal(self, Block b, img)
    cdef _remap(self, Block b, dict offmap)
    cdef bytes _nonce(self)
    cdef bytes _seal_frame(self, payload, uint64_t off, int num)
    cdef _flush_frame(self)
    cdef object _frame_of(self, Block b, uint64_t off)
    cdef bytes _enc_slice(self, Block b, uint64_t off, uint32_t rl)
    cdef tuple _build_framed(self, int num, list recs, uint64_t hwm)
    cdef tuple _records_of(self, Block b)
    cdef bytes _seal_blob(self, data, bytes aad)
    cdef bytes _blk_header(self, int flags, uint64_t v)
    cdef _write_hwm(self, Block b, uint64_t v)
    cdef void _start_writeback(self, Block b) noexcept
    cdef _zero_ahead(self, Block b)
    cdef _cut_zeros(self, Block b)
    cdef _synced_to(self, uint64_t target)
    cdef _start_sync(self, hand_off, bint may_inline)
    cdef _reset(self)
    cdef int batch_begin(self, filt) except -1
    cdef uint64_t batch_next(self, uint64_t seq)
    cdef int batch_rec(self, uint64_t seq, nlog_rec* out) except -1
    cdef void batch_end(self)
