"""Raft's messages and entries: what one node of a group sends another (natsd/raft/node.py).

These are natsd's own (a mixed nats-server/natsd JetStream cluster is not a goal): plain
immutable records, and a compact binary form for the wire and the WAL (`encode`/`decode`),
little-endian, one kind byte first. A decoder meeting a short, unknown or inconsistent message
raises MalformedMessage; the node's driver logs and drops it.
"""
import struct
from typing import NamedTuple, Tuple

from natsd._core.bytereader import ByteReader

# entry kinds
NORMAL = 0          # a command for the state machine
NOOP = 1            # a new leader's first entry (commits what earlier terms left)
CONFIG = 2          # the group's members from here on (data: member ids, "\n"-separated)


class Entry(NamedTuple):
    term: int
    kind: int
    data: bytes


class VoteRequest(NamedTuple):
    term: int               # a pre-vote asks for term+1 without taking it
    src: str
    last_index: int
    last_term: int
    pre_vote: bool = False
    transfer: bool = False  # sent on a leader's TimeoutNow: voters need not wait for its lease


class VoteResponse(NamedTuple):
    term: int
    src: str
    granted: bool
    pre_vote: bool = False


class Append(NamedTuple):
    term: int
    src: str
    prev_index: int
    prev_term: int
    entries: Tuple[Entry, ...]
    commit: int


class AppendResponse(NamedTuple):
    term: int
    src: str
    success: bool
    match_index: int        # success: the last index known durable and matching
    hint: int = 0           # failure: where the leader should try next


class Snapshot(NamedTuple):
    term: int
    src: str
    last_index: int
    last_term: int
    members: Tuple[str, ...]
    data: bytes


class SnapshotResponse(NamedTuple):
    term: int
    src: str
    last_index: int


class TimeoutNow(NamedTuple):
    term: int
    src: str


class MalformedMessage(ValueError):
    pass


def encode_members(members):
    return "\n".join(sorted(members)).encode()


def decode_members(data):
    return tuple(m for m in data.decode().split("\n") if m) if data else ()


# ---- binary form ----

_KINDS = [VoteRequest, VoteResponse, Append, AppendResponse, Snapshot, SnapshotResponse, TimeoutNow]
_HEAD = struct.Struct("<BQH")          # kind, term, len(src)
_Q = struct.Struct("<Q")
_ENTRY = struct.Struct("<QBI")         # term, kind, len(data)


def _s(b):
    return _Q.pack(len(b)) + b


def _entries_blob(entries):
    out = []
    pack = _ENTRY.pack
    for e in entries:
        out.append(pack(e.term, e.kind, len(e.data)))
        out.append(e.data)
    return b"".join(out)


def encode(msg, blobs=None):
    """The message's bytes. blobs: a dict the caller keeps while it encodes several messages,
    so the same run of entries sent to several followers is encoded once."""
    kind = _KINDS.index(type(msg))
    src = msg.src.encode()
    out = [_HEAD.pack(kind, msg.term, len(src)), src]
    if type(msg) is VoteRequest:
        out.append(struct.pack("<QQBB", msg.last_index, msg.last_term, msg.pre_vote, msg.transfer))
    elif type(msg) is VoteResponse:
        out.append(struct.pack("<BB", msg.granted, msg.pre_vote))
    elif type(msg) is Append:
        out.append(struct.pack("<QQQI", msg.prev_index, msg.prev_term, msg.commit, len(msg.entries)))
        entries = msg.entries
        if entries:
            if blobs is None:
                out.append(_entries_blob(entries))
            else:
                # the entries are the storage's own objects: their identities name the run
                key = (msg.prev_index, len(entries), id(entries[0]), id(entries[-1]))
                blob = blobs.get(key)
                if blob is None:
                    blob = blobs[key] = _entries_blob(entries)
                out.append(blob)
    elif type(msg) is AppendResponse:
        out.append(struct.pack("<BQQ", msg.success, msg.match_index, msg.hint))
    elif type(msg) is Snapshot:
        out.append(struct.pack("<QQ", msg.last_index, msg.last_term))
        out.append(_s(encode_members(msg.members)))
        out.append(_s(msg.data))
    elif type(msg) is SnapshotResponse:
        out.append(_Q.pack(msg.last_index))
    return b"".join(out)


def decode(data):
    r = ByteReader(data, MalformedMessage, "short message")
    kind, term, slen = r.unpack(_HEAD)
    if kind >= len(_KINDS):
        raise MalformedMessage("unknown message kind %d" % kind)
    try:
        src = bytes(r.take(slen)).decode()
    except UnicodeDecodeError:
        raise MalformedMessage("bad sender name") from None
    cls = _KINDS[kind]
    if cls is VoteRequest:
        li, lt, pv, tr = r.unpack(struct.Struct("<QQBB"))
        msg = VoteRequest(term, src, li, lt, bool(pv), bool(tr))
    elif cls is VoteResponse:
        g, pv = r.unpack(struct.Struct("<BB"))
        msg = VoteResponse(term, src, bool(g), bool(pv))
    elif cls is Append:
        pi, pt, commit, n = r.unpack(struct.Struct("<QQQI"))
        entries = []
        d, i, end = r.data, r.pos, len(r.data)
        unpack, size = _ENTRY.unpack_from, _ENTRY.size
        for _ in range(n):
            if i + size > end:
                raise MalformedMessage("short message")
            et, ek, dl = unpack(d, i)
            i += size
            if ek > CONFIG:
                raise MalformedMessage("unknown entry kind %d" % ek)
            if i + dl > end:
                raise MalformedMessage("short message")
            entries.append(Entry(et, ek, bytes(d[i:i + dl])))
            i += dl
        r.pos = i
        msg = Append(term, src, pi, pt, tuple(entries), commit)
    elif cls is AppendResponse:
        ok, mi, hint = r.unpack(struct.Struct("<BQQ"))
        msg = AppendResponse(term, src, bool(ok), mi, hint)
    elif cls is Snapshot:
        li, lt = r.unpack(struct.Struct("<QQ"))
        try:
            members = decode_members(r.blob(_Q))
        except UnicodeDecodeError:
            raise MalformedMessage("bad member names") from None
        msg = Snapshot(term, src, li, lt, members, r.blob(_Q))
    elif cls is SnapshotResponse:
        msg = SnapshotResponse(term, src, r.unpack(_Q)[0])
    else:
        msg = TimeoutNow(term, src)
    if r.pos != len(r.data):
        raise MalformedMessage("trailing bytes")
    return msg
