"""nats-server's stream backups, what `$JS.API.STREAM.SNAPSHOT` sends and `$JS.API.STREAM.RESTORE`
takes (and `nats stream backup|restore` keep in `stream.tar.s2`). Both are one S2 stream:

- version 2 (nats-server 2.15's snapshots, server/archive): "NATSARC1", then entries, each
  uvarint name length, varint timestamp, uvarint sequence, uvarint header size, uvarint payload
  size, the name, then header+payload bytes. First "state.json" (the StreamState JSON, its
  `consumer_count` saying how many consumer entries follow), then "consumers/<name>" entries
  ({"config": ConsumerConfig, "state": {"delivered", "ack_floor", "pending": {"<sseq>":
  {"Sequence", "Timestamp"}}, "redelivered"}}), then one entry per message (name = subject,
  sequence, timestamp, its headers and data), then an all-zero entry that ends the backup.
- version 1 (earlier nats-server): a tar of the stream directory in the file store format
  (meta.inf, meta.sum, msgs/<n>.blk, msgs/index.db, obs/<consumer>/...), read with reader.py.

natsd writes version 2 and reads both.
"""
import io
import json
import os
import shutil
import tarfile
import tempfile
import time

from natsd._core.s2 import decode_stream, encode_stream
from natsd.jetstream.nsfs import codec as C
from natsd.jetstream.nsfs.image import StreamImage
from natsd.jetstream.nsfs.reader import read_stream_dir

S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
MAGIC_V2 = b"NATSARC1"
SPOOL_MAX = 8 * 1024 * 1024


def is_archive(head):
    """Whether bytes start like a nats-server backup (an S2 stream)."""
    return head.startswith(S2_STREAM_ID)


# ---------------------------------------------------------------- version 2: writing

def _entry(out, name, ts, seq, header, payload):
    head = bytearray()
    C.put_uvarint(head, len(name))
    C.put_varint(head, ts)
    C.put_uvarint(head, seq)
    C.put_uvarint(head, len(header))
    C.put_uvarint(head, len(payload))
    out.write(bytes(head) + name)
    out.write(header)
    out.write(payload)


def snapshot_consumer_state(state):
    """natsd's consumer state.json document as the "state" of a version 2 consumer entry."""
    out = {"delivered": state.get("delivered") or {"consumer_seq": 0, "stream_seq": 0},
           "ack_floor": state.get("ack_floor") or {"consumer_seq": 0, "stream_seq": 0}}
    if state.get("pending"):
        out["pending"] = {s: {"Sequence": v[0], "Timestamp": v[1]} for s, v in state["pending"].items()}
    if state.get("redelivered"):
        out["redelivered"] = state["redelivered"]
    return out


def write_archive(image, state):
    """A version 2 backup of a StreamImage whose state JSON (StreamInfo's) is `state`, as a
    rewound temporary file."""
    raw = tempfile.SpooledTemporaryFile(SPOOL_MAX)
    raw.write(MAGIC_V2)
    now = time.time_ns()
    state = dict(state, consumer_count=len(image.consumers))
    _entry(raw, b"state.json", now, 0, b"", json.dumps(state, separators=(",", ":")).encode())
    for doc in image.consumers:
        body = {"config": doc["config"], "state": snapshot_consumer_state(doc.get("state") or {})}
        _entry(raw, b"consumers/" + doc["name"].encode(), now, 0, b"",
               json.dumps(body, separators=(",", ":")).encode())
    for seq, ts, subject, hdr, data in image.records():
        _entry(raw, subject, ts, seq, hdr or b"", data)
    _entry(raw, b"", 0, 0, b"", b"")
    raw.seek(0)
    out = tempfile.SpooledTemporaryFile(SPOOL_MAX)
    out.write(encode_stream(raw.read()))
    raw.close()
    out.seek(0)
    return out


# ---------------------------------------------------------------- reading either version

class OpenedArchive:
    """A backup opened as a StreamImage (`with OpenedArchive(f) as image:`); a version 1
    backup is unpacked into a temporary directory, removed on leaving."""

    def __init__(self, fileobj):
        self.dir = None
        try:
            plain = decode_stream(fileobj.read())
        except ValueError as e:
            raise C.FormatError("not a nats-server stream backup (%s)" % e)
        if plain.startswith(MAGIC_V2):
            self.image = _read_v2(plain)
            return
        self.dir = tempfile.mkdtemp(prefix="natsd-restore-")
        try:
            _unpack_v1(plain, self.dir)
            self.image = read_stream_dir(self.dir)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.image

    def __exit__(self, *exc):
        self.close()


def _entries(buf):
    """(name, ts, seq, header, payload) of each version 2 entry, the end entry included."""
    i, n = len(MAGIC_V2), len(buf)
    while i < n:
        name_len, i = C.uvarint(buf, i)
        ts, i = C.varint(buf, i)
        seq, i = C.uvarint(buf, i)
        hlen, i = C.uvarint(buf, i)
        plen, i = C.uvarint(buf, i)
        end = i + name_len + hlen + plen
        if end > n:
            raise C.FormatError("backup was truncated")
        name = bytes(buf[i:i + name_len])
        i += name_len
        yield name, ts, seq, bytes(buf[i:i + hlen]), bytes(buf[i + hlen:end])
        i = end


def _read_v2(buf):
    entries = _entries(buf)
    try:
        name, _, _, _, body = next(entries)
    except StopIteration:
        raise C.FormatError("backup is empty")
    if name != b"state.json":
        raise C.FormatError("expected state.json first")
    try:
        state = json.loads(body)
    except ValueError as e:
        raise C.FormatError("error in state.json: %s" % e)
    consumers = []
    for _ in range(int(state.get("consumer_count") or 0)):
        name, ts, _, _, body = next(entries, (b"", 0, 0, b"", b""))
        if not name.startswith(b"consumers/"):
            raise C.FormatError("expected consumer, found %r" % name.decode(errors="replace"))
        doc = json.loads(body)
        if not isinstance(doc.get("config"), dict) or not isinstance(doc.get("state"), dict):
            raise C.FormatError("consumer %r is missing config or state" % name[10:].decode())
        cstate = doc["state"]
        pending = {s: [p.get("Sequence", 0), p.get("Timestamp", 0)]
                   for s, p in (cstate.get("pending") or {}).items()}
        consumers.append({"name": name[10:].decode(), "created_ns": None, "config": doc["config"],
                          "state": {"delivered": cstate.get("delivered") or {},
                                    "ack_floor": cstate.get("ack_floor") or {},
                                    "pending": pending, "redelivered": cstate.get("redelivered") or {}}})
    messages = [e for e in entries]
    if not messages or messages[-1][0] or messages[-1][2] or messages[-1][4]:
        raise C.FormatError("backup was truncated")
    messages.pop()
    for name, _, seq, _, _ in messages:
        if not seq:
            raise C.FormatError("expected message sequence")

    def records():
        for subject, ts, seq, hdr, data in messages:
            yield seq, ts, subject, hdr or None, data

    # as nats-server restores these: created now, and a last sequence past the last message
    # keeps that message's time
    return StreamImage({}, 0, int(state.get("first_seq") or 0), int(state.get("last_seq") or 0), None,
                       records, consumers)


def _unpack_v1(plain, directory):
    try:
        tar = tarfile.open(fileobj=io.BytesIO(plain), mode="r:")
        members = tar.getmembers()
    except tarfile.TarError as e:
        raise C.FormatError("not a nats-server stream backup (%s)" % e)
    for m in members:
        name = os.path.normpath(m.name)
        if m.isdir():
            continue
        if not m.isfile() or name.startswith(("..", "/")) or os.path.isabs(name):
            raise C.FormatError("stream backup member %r is not a file of a stream directory" % m.name)
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            shutil.copyfileobj(tar.extractfile(m), f)
