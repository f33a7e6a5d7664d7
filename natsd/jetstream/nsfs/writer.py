"""A stream written in nats-server's file store format: `stream_files` yields the files of one
StreamImage's directory (relative path, bytes), plaintext or sealed as nats-server seals them,
and `write_stream_dir` puts them on disk (each file synced, the directory renamed into place
last).

What nats-server rebuilds by itself is not written: `index.db` (it recovers the blocks without
one, exactly as after a crash), per-subject and TTL state. Messages go into plain (uncompressed)
blocks of the size nats-server would pick for the stream; deleted sequences are gaps, and
deleted sequences at the end are held by an erased last-sequence record, as nats-server's own
purge leaves them.
"""
import json
import os
import shutil
import time

from natsd.gofmt import go_time
from natsd.jetstream.nsfs import codec as C

MIN_BLOCK = 32 * 1000
MEDIUM_BLOCK = 4 * 1024 * 1024
MAX_BLOCK = 8 * 1024 * 1024


def _meta(created, extra, config):
    doc = {"Created": go_time(created or time.time_ns())}
    doc.update(extra)
    doc.update(config)
    return json.dumps(doc, separators=(",", ":")).encode()


def stream_files(image, keys=None):
    """(relative path, bytes) of every file of the stream's nats-server directory; with `keys`
    (crypt.StoreKeys for the account) sealed as nats-server seals an encrypted stream."""
    name = image.name
    sealer = _Sealer(keys)
    yield from sealer.files("", name, _meta(image.created, {}, image.config), C.meta_key(name))
    for index, data in _blocks(image):
        key = sealer.key_file("msgs/%d.key" % index, "%s:%d" % (name, index))
        if key is not None:
            yield key
            data = sealer.last.xor(data)
        yield "msgs/%d.blk" % index, data
    for doc in image.consumers:
        cname = doc["name"]
        meta = _meta(doc.get("created_ns"), {"Name": cname}, doc.get("config") or {})
        yield from sealer.files("obs/%s/" % cname, "%s.%s" % (name, cname), meta, C.meta_key(name, cname))
        state = consumer_state_bytes(doc.get("state") or {})
        yield "obs/%s/o.dat" % cname, sealer.last.seal(state) if keys else state


class _Sealer:
    """Key files and sealed metadata of one stream directory, or plaintext without keys;
    `last` is the asset key made last."""

    def __init__(self, keys):
        self.keys, self.last = keys, None

    def key_file(self, rel, context):
        if self.keys is None:
            return None
        self.last, sealed = self.keys.new_key(context)
        return rel, sealed

    def files(self, prefix, context, meta, sum_key):
        """meta.key (sealed), meta.inf and its meta.sum (over the bytes as written)."""
        key = self.key_file(prefix + "meta.key", context)
        if key is not None:
            yield key
            meta = self.last.seal(meta)
        yield prefix + "meta.inf", meta
        yield prefix + "meta.sum", C.meta_sum(sum_key, meta)


def block_size(config):
    """The block size nats-server picks for a stream of this config (its dynBlkSize, without
    encryption)."""
    max_bytes = int(config.get("max_bytes") or -1)
    if max_bytes > 0:
        size = max_bytes // 4 + 1
        size += -size % 100
        if size <= MIN_BLOCK:
            return MIN_BLOCK
        return MAX_BLOCK if size >= MAX_BLOCK else MEDIUM_BLOCK
    return MAX_BLOCK if config.get("retention", "limits") == "limits" else MEDIUM_BLOCK


def _blocks(image):
    limit = block_size(image.config)
    index, parts, size = 1, [], 0
    key = C.block_key(image.name, index)
    last = 0
    for seq, ts, subject, hdr, data in image.records():
        rec = C.record(key, seq, ts, subject, hdr, data)
        if size and size + len(rec) > limit:
            yield index, b"".join(parts)
            index, parts, size = index + 1, [], 0
            key = C.block_key(image.name, index)
            rec = C.record(key, seq, ts, subject, hdr, data)    # each block has its own key
        parts.append(rec)
        size += len(rec)
        last = seq
    if image.last_seq > last:
        parts.append(C.record(key, image.last_seq | C.ERASED_BIT, image.last_ts or 0, b"", None, b""))
    if parts:
        yield index, b"".join(parts)


def consumer_state_bytes(state):
    """natsd's consumer state.json document as nats-server's o.dat."""
    delivered = state.get("delivered") or {}
    floor = state.get("ack_floor") or {}
    pending = {int(s): (int(v[0]), int(v[1])) for s, v in (state.get("pending") or {}).items()}
    redelivered = {int(s): int(n) for s, n in (state.get("redelivered") or {}).items()}
    return C.encode_consumer_state(
        (delivered.get("consumer_seq", 0), delivered.get("stream_seq", 0)),
        (floor.get("consumer_seq", 0), floor.get("stream_seq", 0)),
        pending, redelivered, round(time.time()))


def write_stream_dir(directory, image, keys=None):
    """Write the stream into `directory` (which must not exist): everything goes to a sibling
    `.<name>.tmp` first, synced, then renamed, so an interrupted write leaves nothing that looks
    like a stream."""
    parent, base = os.path.split(os.path.abspath(directory))
    tmp = os.path.join(parent, "." + base + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, data in stream_files(image, keys):
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    os.makedirs(os.path.join(tmp, "msgs"), exist_ok=True)
    os.makedirs(os.path.join(tmp, "obs"), exist_ok=True)
    _sync_dirs(tmp)
    os.rename(tmp, directory)
    fsync_dir(parent)


def _sync_dirs(top):
    for root, _dirs, _files in os.walk(top):
        fsync_dir(root)


def fsync_dir(path):
    """Make a directory's entries (renames, new files) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
