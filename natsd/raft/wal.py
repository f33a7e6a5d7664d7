"""Raft's storage on disk (RaftStorage, natsd/raft/storage.py) on natsd's Cython log.

A group's directory holds:

- `wal/`: the log (natsd/_core/log.pyx) with one record per entry: sequence = index, timestamp =
  when it was appended (what `/raftz` shows, as nats-server's WAL), subject = the entry kind and
  its term ("0.<term>" command, "1.<term>" noop, "2.<term>" members), payload = the data. (Logs
  written before natsd kept times have the bare kind as subject and the term as timestamp.) The
  log's group commit is the WAL's: the entries appended in one loop iteration are written
  together (the loop's call_soon hook; at once without one) and made durable by one fdatasync
  for everything appended before it (`sync_async`, on the loop's sync threads).
- `state`: the term and the vote, replaced atomically (write, fsync, rename, fsync the
  directory) before the node acts on them.
- `snapshot`: the state machine's last snapshot with its index, term and members, replaced the
  same way, with a checksum; entries up to its index are compacted away after it is durable.

What the log holds when it opens counts as durable: it is synced before the node starts. A
tail the log reports lost (a damaged last block) is cut back to the last entry it still has.
"""
import os
import struct
import threading
import time
import zlib
from array import array

from natsd._core.logopen import open_log
from natsd.raft.messages import Entry, decode_members, encode_members
from natsd.raft.storage import SyncBook

_SNAP = struct.Struct("<QQII")          # index, term, len(members), crc32 of the rest
_KIND_PREFIX = [b"0.", b"1.", b"2."]
TAIL = 4096                             # the latest entries also kept in memory (a leader's
                                        # Appends read them back right after appending)


def _write_durably(path, data):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class CorruptState(Exception):
    pass


def _subject(kind, term):
    return _KIND_PREFIX[kind] + b"%d" % term


def _parse(subject, ts):
    """A record's subject and timestamp -> (kind, term, appended at in ns; 0: not known)."""
    kind = subject[0] - 48
    if len(subject) == 1:               # an older natsd's record: the term in the timestamp
        return kind, ts, 0
    return kind, int(subject[2:]), ts


class LogStorage(SyncBook):
    """RaftStorage in a directory (see the module text)."""

    def __init__(self, directory, call_soon=None):
        """call_soon: the loop's, to write the entries appended in one loop iteration with one
        pwrite (nothing is acknowledged before its sync, which writes them first)."""
        self.dir = os.fspath(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.term, self.vote = self._read_state()
        self.snap_lock = threading.Lock()   # the snapshot file: a compaction writes it on a worker
        self.snap, self.snap_bytes = self._read_snapshot()
        # sync_marks=False: a lost tail is cut back below, so the syncs need not keep its floor;
        # zero_ahead: an append's fdatasync then needs no journal commit (the replicas of a
        # group, and many groups, sync at once)
        self.log = open_log(os.path.join(self.dir, "wal"), block_size=4 * 1024 * 1024,
                            call_soon=call_soon, sync_marks=False, zero_ahead=True)
        if self.log.lost_tail is not None:
            self.log.truncate(self.log.lost_tail[0] - 1)
        if self.log.msgs and self.log.first <= self.snap[0] or self.log.last < self.snap[0]:
            self.log.compact(self.snap[0] + 1)
        self.log.sync()
        self.base = self.snap[0]                # terms[i] is the term of entry base + 1 + i
        self.terms = array("Q")
        for index in range(self.base + 1, self.log.last + 1):
            r = self.log.read(index)
            if r is None:
                raise CorruptState("%s: entry %d is missing from the log" % (self.dir, index))
            self.terms.append(_parse(r[0], r[3])[1])
        self.sync_requested = False
        self.syncing = []
        self._reset_tail()

    def _reset_tail(self):
        self.tail = []                          # entries tail_lo .. last_index()
        self.tail_lo = self.last_index() + 1

    # ---- hard state ----

    def _read_state(self):
        try:
            with open(os.path.join(self.dir, "state"), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return 0, ""
        if len(data) < 12 or zlib.crc32(data[4:]) != int.from_bytes(data[:4], "little"):
            raise CorruptState("%s: the term/vote file is damaged" % self.dir)
        return int.from_bytes(data[4:12], "little"), data[12:].decode()

    def hard_state(self):
        return self.term, self.vote

    def save_hard_state(self, term, vote):
        body = term.to_bytes(8, "little") + vote.encode()
        _write_durably(os.path.join(self.dir, "state"), zlib.crc32(body).to_bytes(4, "little") + body)
        self.term, self.vote = term, vote

    # ---- snapshot ----

    def _read_snapshot(self):
        try:
            with open(os.path.join(self.dir, "snapshot"), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return (0, 0, ()), b""
        if len(data) < _SNAP.size:
            raise CorruptState("%s: the snapshot file is short" % self.dir)
        index, term, mlen, crc = _SNAP.unpack_from(data)
        rest = data[_SNAP.size:]
        if zlib.crc32(rest) != crc or mlen > len(rest):
            raise CorruptState("%s: the snapshot file is damaged" % self.dir)
        return (index, term, decode_members(rest[:mlen])), rest[mlen:]

    def _write_snapshot(self, index, term, members, data):
        with self.snap_lock:
            self._write_snapshot_file(index, term, members, data)
            self.snap, self.snap_bytes = (index, term, tuple(members)), data

    def _write_snapshot_file(self, index, term, members, data):
        m = encode_members(members)
        rest = m + data
        _write_durably(os.path.join(self.dir, "snapshot"),
                       _SNAP.pack(index, term, len(m), zlib.crc32(rest)) + rest)

    def write_snapshot(self, index, term, members, data):
        """The first half of a compaction, for a worker thread: the snapshot file, durably,
        unless a newer snapshot was installed meanwhile -> whether it was written."""
        with self.snap_lock:
            if index <= self.snap[0]:
                return False
            self._write_snapshot_file(index, term, members, data)
            return True

    def compact_written(self, index, term, members, data):
        """The second half, on the loop: the snapshot written by write_snapshot takes the
        place of the entries up to `index`."""
        with self.snap_lock:
            if index <= self.snap[0]:
                return
            self.snap, self.snap_bytes = (index, term, tuple(members)), data
        self._drop_through(index)

    def snapshot_meta(self):
        return self.snap

    def snapshot_data(self):
        return self.snap_bytes

    def compact(self, index, term, members, data):
        if index <= self.snap[0]:
            return
        self._write_snapshot(index, term, members, data)
        self._drop_through(index)

    def _drop_through(self, index):
        del self.terms[:index - self.base]
        self.base = index
        self.log.compact(index + 1)
        self._reset_tail()

    def install_snapshot(self, index, term, members, data):
        self._write_snapshot(index, term, members, data)
        if self.log.msgs:
            self.log.truncate(self.log.first - 1)
        self.log.compact(index + 1)
        self.log.sync()
        self.base = index
        self.terms = array("Q")
        self._reset_tail()

    # ---- entries ----

    def last_index(self):
        return self.base + len(self.terms)

    def term_at(self, index):
        if index == self.base:
            return self.snap[1]
        if index < self.base or index > self.base + len(self.terms):
            return None
        return self.terms[index - self.base - 1]

    def entries(self, lo, hi):
        if lo >= self.tail_lo:
            return self.tail[lo - self.tail_lo:hi - self.tail_lo + 1]
        out = []
        for index in range(lo, hi + 1):
            r = self.log.read(index)
            if r is None:
                raise CorruptState("%s: entry %d cannot be read" % (self.dir, index))
            kind, term, _ = _parse(r[0], r[3])
            out.append(Entry(term, kind, r[2]))
        return out

    def append(self, entries):
        index = self.last_index()
        now = time.time_ns()
        for e in entries:
            index += 1
            self.log.append(index, now, _subject(e.kind, e.term), None, e.data)
            self.terms.append(e.term)
        self.tail.extend(entries)
        if len(self.tail) > 2 * TAIL:
            drop = len(self.tail) - TAIL
            del self.tail[:drop]
            self.tail_lo += drop

    def appended_at(self, index):
        """When the entry at `index` was appended, in ns since the epoch (0: not known)."""
        r = self.log.read(index) if self.base < index <= self.last_index() else None
        return _parse(r[0], r[3])[2] if r is not None else 0

    def truncate_after(self, index):
        if index >= self.last_index():
            return
        self.log.truncate(index)
        del self.terms[index - self.base:]
        if index < self.tail_lo:
            self._reset_tail()
        else:
            del self.tail[index + 1 - self.tail_lo:]
        self._truncated(index)

    # ---- durability ----

    def sync_async(self, hand_off, done, may_inline=True):
        """fdatasync what was appended (one group commit with whatever else is waiting);
        done(index) once it is on disk. hand_off: the server's Loop (the log gives it the sync
        directly, natsd/_core/syncer.pyx runs it), or a callable(job, done)."""
        s = self.begin_sync()
        self.log.sync_async(hand_off, lambda: done(self.end_sync(s)), None, may_inline)

    def complete_sync(self, s):
        """The deterministic tests' form (raftsim): the sync `s` ends now, blocking."""
        self.log.sync()
        return self.end_sync(s)

    def close(self):
        self.log.close()

    def crash(self):
        """kill -9 (tests): the files are left as they are (what was written, the kernel has)
        and the directory is opened again, as a restarted server would. -> the new storage."""
        self.log.abandon()
        return LogStorage(self.dir)


def seed(directory, index, term, members, data, entries=(), current_term=0):
    """A group's storage that starts from a snapshot (a stream it takes over, or one converted
    from nats-server's files): entry `index` of `term`, those members, that state; then
    `entries` (Entry), not known to be committed, and the hard state's term (at least the
    last entry's)."""
    storage = LogStorage(directory)
    try:
        storage.save_hard_state(max([term, current_term] + [e.term for e in entries]), "")
        storage.install_snapshot(index, term, members, data)
        if entries:
            storage.append(list(entries))
            storage.log.sync()
    finally:
        storage.close()
