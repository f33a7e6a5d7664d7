"""A replicated stream's snapshot: what its Raft group keeps in place of the log it compacts
away (natsd/jetstream/replicated/streams.py), and how a replica brings its copy in line with one.

A replica takes a snapshot right after applying entry `index`, with its file store synced, so
its copy on disk is exactly what the entries up to `index` made. The snapshot names that state
rather than holding the messages: the first and last sequence, the interior sequences that
are deleted (as runs), the stream's configuration, the table of its replicated consumers
(natsd/jetstream/replicated/consumers.py) and their waiting pull requests as the log named them
("pulls", absent in snapshots of older natsd). It is JSON with a version number.

`align(store, snap)` brings a copy in line with a snapshot:

- a copy that went further (a restarted server whose copy holds entries applied after the
  snapshot, which its log replays) is cut back to the snapshot's last sequence;
- a copy that lacks messages (a follower sent its leader's snapshot, a server back with an
  empty disk) gets the range it must copy from another replica (natsd/jetstream/replicated/catchup.py),
  and `finish` once it has them;
- then what the snapshot's stream had removed (below its first sequence, interior deletes)
  is removed from the copy, and a copy whose last messages were deleted skips to its last
  sequence.

A memory stream's copy does not outlive its server, so a replica that took a snapshot also
writes the messages it names to `messages-<index>` in the group's directory (synced, before
the log gives up its entries; `write_messages`). A restarted replica reads them back
(`read_messages`) and needs nobody else's copy: a whole cluster restarted at once keeps the
stream, and nobody waits for a replica that has the messages. The file is a header (magic,
index, record count, crc32 of the records) and the records in the catch-up answers' layout
(natsd/jetstream/replicated/catchup.py). Only the file of the group's current snapshot is kept.
"""
import json
import logging
import os
import struct
import zlib

from natsd.jetstream.replicated import catchup
from natsd.jetstream.engine.jscrypt import write_atomic

log = logging.getLogger("natsd")

VERSION = 1
MESSAGES_MAGIC = b"NDMSGS01"
_MESSAGES_HEAD = struct.Struct("<8sQQI")    # magic, snapshot index, records, crc32 of the records


def take(stream, consumer_rows, pulls=None):
    """The snapshot of a replica's state after its last applied entry -> bytes.
    pulls: consumer name -> the reply subjects of its waiting pull requests."""
    store = stream.store
    return json.dumps({
        "v": VERSION,
        "first": store.first_seq,
        "last": store.last_seq,
        "deleted": runs(store.deleted()),
        "config": stream.config,
        "consumers": consumer_rows,
        "pulls": {name: sorted(replies) for name, replies in (pulls or {}).items() if replies},
    }, separators=(",", ":")).encode()


def pulls_of(snap):
    """-> consumer name -> set of the waiting pull requests' reply subjects the snapshot names."""
    return {name: set(replies) for name, replies in (snap.get("pulls") or {}).items()}


def decode(data):
    """-> the snapshot's dict; ValueError for one this server cannot read."""
    snap = json.loads(bytes(data))
    if not isinstance(snap, dict) or snap.get("v") != VERSION:
        raise ValueError("unknown replicated stream snapshot version %r" % (snap.get("v") if isinstance(snap, dict) else snap))
    for key in ("first", "last", "deleted", "config", "consumers"):
        if key not in snap:
            raise ValueError("the snapshot has no %r" % key)
    return snap


def runs(seqs):
    """Ascending sequences -> [[first, last], ...] of consecutive ones."""
    out = []
    for s in seqs:
        if out and out[-1][1] == s - 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def align(store, snap):
    """Bring `store` in line with `snap` as far as it can alone -> None when done, else the
    (first, last) range of sequences to copy from another replica, then `finish`."""
    first, last = snap["first"], snap["last"]
    if store.last_seq > last:
        store.truncate(last)
    if first and store.first_seq < first and store.num_msgs:
        store.compact(first)
    if store.last_seq < last:
        lo = max(store.last_seq + 1, first or 1)
        return lo, last
    finish(store, snap)
    return None


def finish(store, snap):
    """The copy has every message the snapshot's stream had up to its last sequence (and maybe
    some it deleted since): remove those, and use the sequences up to its last."""
    first, last = snap["first"], snap["last"]
    if first and store.first_seq < first:
        store.compact(first)
    for lo, hi in snap["deleted"]:
        for seq in range(max(lo, store.first_seq), min(hi, store.last_seq) + 1):
            store.remove(seq)
    store.skip_to(last)


def copy_all(src, dst):
    """Every message of `src` into the empty `dst`, with its sequences and deletes (a memory
    stream's messages when it changes between one replica and several: its store is not on
    disk to be handed over)."""
    snap = {"first": src.first_seq, "last": src.last_seq, "deleted": runs(src.deleted())}
    missing = align(dst, snap)
    if missing is None:
        return
    seq = missing[0]
    while True:
        m = src.load_next(seq)
        if m is None or m.seq > missing[1]:
            break
        dst.store_raw(m.seq, m.ts, m.subject, m.hdr, m.msg)
        seq = m.seq + 1
    finish(dst, snap)


# ---- a memory stream's messages beside its snapshot ----

def messages_path(directory, index):
    return os.path.join(directory, "messages-%d" % index)


def write_messages(directory, index, msgs):
    """`msgs` (StoredMsg, in sequence order) as the file of the snapshot at `index`, synced
    (run on a worker thread: the list is the store's copy, not the store)."""
    parts = []
    for sm in msgs:
        catchup.add_record(parts, sm)
    body = b"".join(parts)
    path = messages_path(directory, index)
    write_atomic(path, _MESSAGES_HEAD.pack(MESSAGES_MAGIC, index, len(msgs), zlib.crc32(body)) + body)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)                    # the rename too
    finally:
        os.close(fd)


def read_messages(directory, index):
    """-> the records [(seq, ts, subject, headers or None, payload)] of the file of the
    snapshot at `index`, or None when there is none or it cannot be read (logged)."""
    path = messages_path(directory, index)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.error("JetStream: cannot read %s: %s", path, e)
        return None
    try:
        magic, at, count, crc = _MESSAGES_HEAD.unpack_from(data)
        body = memoryview(data)[_MESSAGES_HEAD.size:]
        if magic != MESSAGES_MAGIC or at != index or zlib.crc32(body) != crc:
            raise ValueError("not the messages of the snapshot at entry %d, or damaged" % index)
        recs = catchup.parse_records(body)
        if len(recs) != count:
            raise ValueError("%d records where the header says %d" % (len(recs), count))
    except (ValueError, struct.error) as e:
        log.error("JetStream: %s cannot be used: %s", path, e)
        return None
    return recs


def drop_messages(directory, keep=None, unfinished=False):
    """Remove the messages files of `directory` but the snapshot's at `keep`; `unfinished`:
    the ones a crash left half-written too (at a start, when no write is under way)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    want = None if keep is None else os.path.basename(messages_path(directory, keep))
    for name in names:
        if name.startswith("messages-") and name != want and (unfinished or not name.endswith(".tmp")):
            try:
                os.remove(os.path.join(directory, name))
            except OSError as e:
                log.warning("JetStream: cannot remove %s: %s", os.path.join(directory, name), e)
