"""What a Raft node keeps on disk, as one contract (RaftStorage) and its in-memory form.

The node (natsd/raft/node.py) never waits for a disk: it appends, asks for a sync, and is
told later (Node.durable) how far the log is on disk. Only then does a follower acknowledge an
append or a leader count its own copy towards a quorum. The hard state (term and vote) and an
installed snapshot are durable when their calls return: they are small and rare.

MemoryStorage keeps everything in lists and models a disk for the deterministic tests:
`sync_requested` tells the driver a sync is wanted; `begin_sync()` starts one, covering what was
appended so far (less anything truncated before it ends); `complete_sync(s)` makes that durable;
`crash()` drops what was never made durable, as a kill -9 would.
"""
from typing import List, Optional, Protocol, Tuple

from natsd.raft.messages import Entry


class RaftStorage(Protocol):
    def hard_state(self) -> Tuple[int, str]:
        """(term, voted_for) as last saved; (0, "") for a new node."""

    def save_hard_state(self, term: int, vote: str) -> None:
        """Durable on return."""

    def snapshot_meta(self) -> Tuple[int, int, Tuple[str, ...]]:
        """(last_index, last_term, members) of the snapshot the log starts after; (0, 0, ())."""

    def snapshot_data(self) -> bytes:
        ...

    def last_index(self) -> int:
        ...

    def term_at(self, index: int) -> Optional[int]:
        """The term of entry `index`, the snapshot's term at its last index, 0 at index 0, None
        for an index compacted away or beyond the end."""

    def entries(self, lo: int, hi: int) -> List[Entry]:
        """Entries lo..hi inclusive (all present: lo > snapshot index, hi <= last)."""

    def append(self, entries: List[Entry]) -> None:
        """Entries following last_index; durable after a later sync."""

    def truncate_after(self, index: int) -> None:
        """Drop every entry above `index` (an uncommitted suffix that conflicts)."""

    def request_sync(self) -> None:
        """Make what was appended durable; the driver calls Node.durable(index) when it is."""

    def compact(self, index: int, term: int, members: Tuple[str, ...], data: bytes) -> None:
        """The state machine's snapshot at `index` (applied, durable): entries up to it go."""

    def install_snapshot(self, index: int, term: int, members: Tuple[str, ...], data: bytes) -> None:
        """A leader's snapshot replaces the whole log (durable on return)."""


class SyncBook:
    """The syncs a storage has in flight, each covering what was appended before it started
    (less what a truncation took back since): shared by both storages."""

    def request_sync(self):
        self.sync_requested = True

    def syncs_in_flight(self):
        return self.syncing

    def begin_sync(self):
        """A sync starts now -> its ticket for end_sync."""
        self.sync_requested = False
        s = [self.last_index()]
        self.syncing.append(s)
        return s

    def end_sync(self, s):
        """That sync ended -> the last index it made durable."""
        self.syncing.remove(s)
        return min(s[0], self.last_index())

    def _truncated(self, index):
        for s in self.syncing:
            s[0] = min(s[0], index)


class MemoryStorage(SyncBook):
    """RaftStorage in lists, with a modelled disk (see the module text)."""

    def __init__(self):
        self.term, self.vote = 0, ""
        self.snap = (0, 0, ())
        self.snap_bytes = b""
        self.log: List[Entry] = []          # entries snap_index+1 ..
        self.durable_upto = 0
        self.sync_requested = False
        self.syncing = []                   # [target] of each sync in flight

    def hard_state(self):
        return self.term, self.vote

    def save_hard_state(self, term, vote):
        self.term, self.vote = term, vote

    def snapshot_meta(self):
        return self.snap

    def snapshot_data(self):
        return self.snap_bytes

    def last_index(self):
        return self.snap[0] + len(self.log)

    def term_at(self, index):
        base = self.snap[0]
        if index == base:
            return self.snap[1]
        if index < base or index > base + len(self.log):
            return None
        return self.log[index - base - 1].term

    def entries(self, lo, hi):
        base = self.snap[0]
        return self.log[lo - base - 1:hi - base]

    def append(self, entries):
        self.log.extend(entries)

    def truncate_after(self, index):
        del self.log[index - self.snap[0]:]
        self.durable_upto = min(self.durable_upto, index)
        self._truncated(index)

    def complete_sync(self, s):
        """The disk finished the sync `s` (from begin_sync) -> the durable index now."""
        self.durable_upto = max(self.durable_upto, self.end_sync(s))
        return self.durable_upto

    def compact(self, index, term, members, data):
        base = self.snap[0]
        if index <= base:
            return
        del self.log[:index - base]
        self.snap = (index, term, tuple(members))
        self.snap_bytes = data

    def install_snapshot(self, index, term, members, data):
        self.log = []
        self.snap = (index, term, tuple(members))
        self.snap_bytes = data
        self.durable_upto = index

    def crash(self):
        """kill -9: what was not durable is gone (the hard state and snapshots always are).
        -> the storage a restarted server finds (this one)."""
        del self.log[max(0, self.durable_upto - self.snap[0]):]
        self.sync_requested = False
        self.syncing = []
        return self
