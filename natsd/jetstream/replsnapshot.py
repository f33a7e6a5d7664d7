"""A replicated stream's snapshot: what its Raft group keeps in place of the log it compacts
away (natsd/jetstream/replicated.py), and how a replica brings its copy in line with one.

A replica takes a snapshot right after applying entry `index`, with its file store synced, so
its copy on disk is exactly what the entries up to `index` made. The snapshot names that state
rather than holding the messages: the first and last sequence, the interior sequences that
are deleted (as runs), the stream's configuration and the table of its replicated consumers
(natsd/jetstream/replconsumers.py). It is JSON with a version number.

`align(store, snap)` brings a copy in line with a snapshot:

- a copy that went further (a restarted server whose copy holds entries applied after the
  snapshot, which its log replays) is cut back to the snapshot's last sequence;
- a copy that lacks messages (a follower sent its leader's snapshot, a server back with an
  empty disk) gets the range it must copy from another replica (natsd/jetstream/catchup.py),
  and `finish` once it has them;
- then what the snapshot's stream had removed (below its first sequence, interior deletes)
  is removed from the copy, and a copy whose last messages were deleted skips to its last
  sequence.
"""
import json

VERSION = 1


def take(stream, consumer_rows):
    """The snapshot of a replica's state after its last applied entry -> bytes."""
    store = stream.store
    return json.dumps({
        "v": VERSION,
        "first": store.first_seq,
        "last": store.last_seq,
        "deleted": runs(store.deleted()),
        "config": stream.config,
        "consumers": consumer_rows,
    }, separators=(",", ":")).encode()


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
