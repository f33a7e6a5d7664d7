"""The byte formats of nats-server's file store (server/filestore.go, store.go, avl/seqset.go):

Message record (in `msgs/<index>.blk`), little-endian:
    u32 length (whole record; bit 31 set when it has headers)
    u64 sequence (bit 63 ERASED: a removed message's leftover or a last-sequence marker;
                  bit 62 TOMBSTONE: "sequence N was removed", written to the last block)
    i64 timestamp (ns)   u16 subject length   subject   [u32 header length, headers]   data
    8-byte HighwayHash-64 of seq+ts, subject, headers, data, keyed by sha256("<stream>-<index>")
(blockscan.pyx parses them.) A compressed block starts "cmp" + algorithm byte + uvarint original size, then an S2 stream of
the records without the last 8 bytes, which follow uncompressed.

`meta.inf` is the stream's config JSON with "Created" (a consumer's adds "Name"); `meta.sum` the
hex HighwayHash-64 of it keyed by sha256(stream) (a consumer's: sha256("<stream>/<consumer>")).
`o.dat` is a consumer's state: magic 22, version, uvarints (see `encode_consumer_state`).
"""
import hashlib
import struct

from natsd._core.highway import highway64
from natsd._core.s2 import decode_stream
from natsd.gofmt import uvarint as go_uvarint

HEADERS_BIT = 1 << 31
ERASED_BIT = 1 << 63
TOMBSTONE_BIT = 1 << 62
SEQ_MASK = TOMBSTONE_BIT - 1
RECORD_HEAD = struct.Struct("<IQqH")            # 22 bytes
CHECKSUM = 8
MAX_RECORD = 32 * 1024 * 1024                  # nats-server's rlBadThresh
MAGIC = 22
S2_ALGORITHM = 1


class FormatError(ValueError):
    """A file that is not what nats-server writes there; the message names what is wrong."""


def block_key(stream, index):
    return hashlib.sha256(b"%s-%d" % (stream.encode(), index)).digest()


def meta_key(stream, consumer=None):
    name = stream if consumer is None else stream + "/" + consumer
    return hashlib.sha256(name.encode()).digest()


def meta_sum(key, raw):
    return highway64(key, raw).hex().encode()


# ---------------------------------------------------------------- varints

def uvarint(buf, i):
    """(value, next index) of the uvarint at buf[i]; FormatError when it runs off the end."""
    return go_uvarint(buf, i, FormatError)


def varint(buf, i):
    u, i = uvarint(buf, i)
    return (u >> 1) ^ -(u & 1), i


def put_uvarint(out, v):
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)


def put_varint(out, v):
    put_uvarint(out, (v << 1) ^ (v >> 63) if v < 0 else v << 1)


# ---------------------------------------------------------------- message blocks

def decompress_block(buf):
    """A block's bytes as written, without its compression ("cmp" header), if any."""
    if len(buf) < 5 or buf[:3] != b"cmp":
        return buf
    algorithm = buf[3]
    _, start = uvarint(buf, 4)
    if algorithm == 0:
        return buf[start:]
    if algorithm != S2_ALGORITHM:
        raise FormatError("unknown block compression %d" % algorithm)
    body, checksum = bytes(buf[start:-CHECKSUM]), bytes(buf[-CHECKSUM:])
    try:
        return decode_stream(body) + checksum
    except ValueError as e:
        raise FormatError("corrupt S2 block: %s" % e)


def record(key, seq, ts, subject, hdr, data):
    """One record's bytes (seq may carry ERASED_BIT or TOMBSTONE_BIT)."""
    hdr = hdr or b""
    rl = RECORD_HEAD.size + len(subject) + (4 + len(hdr) if hdr else 0) + len(data) + CHECKSUM
    head = RECORD_HEAD.pack(rl | (HEADERS_BIT if hdr else 0), seq, ts, len(subject))
    parts = [head, subject]
    if hdr:
        parts += [struct.pack("<I", len(hdr)), hdr]
    parts.append(data)
    parts.append(highway64(key, head[4:20], subject, hdr, data))
    return b"".join(parts)


# ---------------------------------------------------------------- index.db's sequence sets

_SEQSET_BUCKETS = {1: 64, 2: 32}


def decode_seqset(buf, i):
    """(set of sequences, next index) of an avl.SequenceSet encoding at buf[i]."""
    if len(buf) < i + 10 or buf[i] != MAGIC or buf[i + 1] not in _SEQSET_BUCKETS:
        raise FormatError("bad sequence set encoding")
    buckets = _SEQSET_BUCKETS[buf[i + 1]]
    nodes, _size = struct.unpack_from("<II", buf, i + 2)
    i += 10
    per_node = (buckets + 1) * 8 + 2
    if nodes * per_node > len(buf) - i:
        raise FormatError("bad sequence set encoding")
    seqs = set()
    for _ in range(nodes):
        base = struct.unpack_from("<Q", buf, i)[0]
        bits = struct.unpack_from("<%dQ" % buckets, buf, i + 8)
        for b, word in enumerate(bits):
            while word:
                low = word & -word
                seqs.add(base + b * 64 + low.bit_length() - 1)
                word ^= low
        i += per_node
    return seqs, i


# ---------------------------------------------------------------- consumer state (o.dat)

def decode_consumer_state(buf):
    """o.dat -> {"delivered": (dseq, sseq), "ack_floor": (dseq, sseq),
    "pending": {sseq: (dseq, ts_ns)}, "redelivered": {sseq: count}}."""
    if len(buf) < 2 or buf[0] != MAGIC or buf[1] not in (1, 2):
        raise FormatError("bad consumer state header")
    version = buf[1]
    i = 2
    vals = []
    for _ in range(4):
        v, i = uvarint(buf, i)
        vals.append(v)
    afc, afs, dc, ds = vals
    if version == 1:                    # version 1 stored the next to deliver
        dc += afc - 1 if afc > 1 else 0
        ds += afs - 1 if afs > 1 else 0
    pending, redelivered = {}, {}
    count, i = uvarint(buf, i) if i < len(buf) else (0, i)
    if count:
        mints, i = varint(buf, i)
        for _ in range(count):
            s, i = uvarint(buf, i)
            d = 0
            if version == 2:
                d, i = uvarint(buf, i)
            t, i = varint(buf, i)
            ts = (t + mints if version == 1 else mints - t) * 1_000_000_000
            pending[s + afs] = (d + afc if version == 2 else d, ts)
    count, i = uvarint(buf, i) if i < len(buf) else (0, i)
    for _ in range(count):
        s, i = uvarint(buf, i)
        dcount, i = uvarint(buf, i)
        redelivered[s + afs] = dcount
    return {"delivered": (dc, ds), "ack_floor": (afc, afs), "pending": pending,
            "redelivered": redelivered}


def encode_consumer_state(delivered, ack_floor, pending, redelivered, now_s):
    """o.dat (version 2) from the same shape `decode_consumer_state` returns; pending
    timestamps are kept to the second, relative to `now_s`, as nats-server does."""
    afc, afs = ack_floor
    out = bytearray([MAGIC, 2])
    for v in (afc, afs, delivered[0], delivered[1], len(pending)):
        put_uvarint(out, v)
    if pending:
        put_varint(out, now_s)
        for sseq, (dseq, ts) in sorted(pending.items()):
            put_uvarint(out, sseq - afs)
            put_uvarint(out, max(dseq - afc, 0))
            put_varint(out, now_s - ts // 1_000_000_000)
    put_uvarint(out, len(redelivered))
    for sseq, count in sorted(redelivered.items()):
        put_uvarint(out, sseq - afs)
        put_uvarint(out, count)
    return bytes(out)
