"""A stream's message storage: the `StreamStore` contract, and its two implementations,
MemoryStore and FileStore (over natsd._core.log). Everything in JetStream that reads or writes
messages goes through this interface; nothing else reaches into a store's insides.

Used by the stream layer from the event-loop thread. Sequences start at `first_seq` (default:
the first message gets 1; an empty never-used store reports first_seq 0 like nats-server);
timestamps are int ns since the epoch; subjects are bytes when returned and bytes or str when
given; filters may use `*` and `>` (None, "" and ">" mean everything). TTLs are seconds
(nats-server's Nats-TTL); the store only reports expiries, the stream removes.
"""
import abc
import bisect
import heapq
import os
import shutil
import time

from natsd._core.log import StoreError, subject_match
from natsd._core.logopen import open_log

__all__ = ["StoredMsg", "StreamStore", "MemoryStore", "FileStore", "StoreError", "open_store"]


class StoredMsg:
    __slots__ = ("subject", "hdr", "msg", "seq", "ts")

    def __init__(self, subject, hdr, msg, seq, ts):
        self.subject = subject
        self.hdr = hdr
        self.msg = msg
        self.seq = seq
        self.ts = ts

    def __repr__(self):
        return f"StoredMsg(seq={self.seq}, subject={self.subject!r}, ts={self.ts})"

    def __eq__(self, other):
        return isinstance(other, StoredMsg) and all(
            getattr(self, a) == getattr(other, a) for a in self.__slots__)


def _filter(f):
    """bytes filter, or None for 'everything'."""
    if f is None:
        return None
    if isinstance(f, str):
        f = f.encode()
    return None if f in (b"", b">") else bytes(f)


def _bytes(x):
    return x.encode() if isinstance(x, str) else bytes(x)


def open_store(storage, directory, cfg, sync_always=False, crypt=None, call_soon=None, zero_ahead=False):
    """The store a stream config asks for: MemoryStore for `storage: memory`, else a FileStore
    in `directory` (sealed with `crypt`, the stream's keys, when JetStream encrypts at rest;
    writing the messages of one loop iteration together through `call_soon` when nothing is
    acknowledged before a sync; with `zero_ahead` when it is synced for every PubAck)."""
    first_seq = cfg.get("first_seq", 0) or 0
    if storage == "memory":
        return MemoryStore(first_seq)
    return FileStore(directory, compression=cfg.get("compression", "none"), first_seq=first_seq,
                     sync_always=sync_always, crypt=crypt, call_soon=call_soon, zero_ahead=zero_ahead)


class StreamStore(abc.ABC):
    """The contract between a stream and its storage. Implementations provide the abstract
    methods; purge, state, load_last, subject_count and the sync defaults are shared."""

    # ---- writing ----
    @abc.abstractmethod
    def store_msg(self, subject, hdr, msg, ts=None, ttl=0):
        """Append at last_seq + 1 -> (seq, ts)."""

    @abc.abstractmethod
    def store_raw(self, seq, ts, subject, hdr, msg, ttl=0):
        """Append at `seq` (> last_seq; skipped sequences read as deleted), e.g. a mirror's."""

    # ---- reading ----
    @abc.abstractmethod
    def load(self, seq):
        """-> StoredMsg, or None when deleted or never stored."""

    @abc.abstractmethod
    def load_next(self, seq, filter=None):
        """The first message at or after `seq` matching `filter` -> StoredMsg or None."""

    @abc.abstractmethod
    def load_prev(self, seq, filter=None):
        """The last message at or before `seq` matching `filter` -> StoredMsg or None."""

    def load_last(self, subject_filter=None):
        return self.load_prev(self._last(), subject_filter)

    def messages_from(self, seq):
        """Every stored message from `seq` on, ascending, read one at a time: the caller may
        remove the one it was given before it asks for the next."""
        while True:
            sm = self.load_next(seq, None)
            if sm is None:
                return
            yield sm
            seq = sm.seq + 1

    # ---- removing ----
    @abc.abstractmethod
    def remove(self, seq, erase=False):
        """Delete one message -> whether it was there."""

    @abc.abstractmethod
    def compact(self, seq):
        """Delete everything below `seq` (first_seq becomes at least `seq`) -> count."""

    @abc.abstractmethod
    def truncate(self, seq):
        """Delete everything above `seq`; last_seq becomes `seq`."""

    @abc.abstractmethod
    def skip_to(self, seq):
        """Use sequences up to `seq` without storing anything (last_seq becomes `seq` when
        below it; an empty store's first_seq then follows)."""

    @abc.abstractmethod
    def skip_msg(self, ts, n=1):
        """Use the next `n` sequences without storing anything, for messages nobody wanted,
        whose time `ts` becomes the store's last time (nats-server's SkipMsgNoInterest) ->
        the last of them."""

    # ---- queries ----
    @property
    def first_seq(self):
        return self._first()

    @property
    def last_seq(self):
        return self._last()

    @property
    def num_msgs(self):
        """Live messages (state()["messages"] without building the dict)."""
        return self._msgs_count()

    @property
    def num_bytes(self):
        """Stored bytes as msg_size counts them (state()["bytes"])."""
        return self._bytes()

    @abc.abstractmethod
    def deleted(self):
        """The deleted sequences between first and last -> list."""

    @abc.abstractmethod
    def subjects(self, filter=None):
        """-> {subject bytes: live count} for the subjects matching `filter`."""

    @abc.abstractmethod
    def subject_state(self, subject):
        """-> (count, first seq, last seq) of one literal subject, (0, 0, 0) if none."""

    def subject_count(self, subject):
        return self.subject_state(subject)[0]

    @abc.abstractmethod
    def num_pending(self, start_seq, filter=None, last_per_subject=False):
        """Live messages at or after `start_seq` matching `filter` (with last_per_subject,
        the subjects whose last message is there)."""

    @staticmethod
    @abc.abstractmethod
    def msg_size(subject, hdr, msg):
        """nats-server's byte accounting of one message for this storage (user-visible)."""

    @abc.abstractmethod
    def expired_ttls(self, now):
        """Live messages whose per-message TTL passed by `now` (ns) -> [seq]."""

    @property
    def lost_tail(self):
        """(first, last) sequences found missing at the tail when the store opened, or None."""
        return None

    def fast_log(self):
        """The Cython log behind a file store, for the pull-delivery fast path; else None."""
        return None

    # ---- durability and lifetime ----
    def sync(self, callback=None):
        """Everything stored so far is durable when this returns; then callback()."""
        if callback is not None:
            callback()

    def sync_async(self, hand_off, callback, on_error=None, may_inline=True):
        """callback() once everything stored so far is durable (on_error(exc) if not).
        hand_off: the server's Loop, or a callable(job, done) (natsd/_core/log.pyx sync_async);
        may_inline: the sync may run on the loop thread when the loop is idle."""
        callback()

    sync_waiting = False        # whether a sync_async caller still waits for its sync

    @abc.abstractmethod
    def close(self):
        """Flush and release; the data stays."""

    @abc.abstractmethod
    def delete(self):
        """Remove every message and the store's files."""

    # ---- shared behaviour ----
    def purge(self, subject=None, seq=0, keep=0):
        """nats-server PurgeEx: subject filter, seq = remove below seq, keep = keep newest N."""
        filt = _filter(subject)
        st_msgs = self._msgs_count()
        if filt is None:
            if keep == 0 and seq == 0:
                return self.compact(self._last() + 1)      # full purge: first = last + 1
            if seq > 1:
                return self.compact(seq)
            if keep > 0:
                if keep >= st_msgs:
                    return 0
                return self.compact(self._nth_from_end(keep))
            return 0
        total = self.num_pending(0, filt)
        if total == 0:
            return 0
        maxp = 0
        if keep > 0:
            if keep >= total:
                return 0
            maxp = total - keep
        return self._remove_matching(filt, seq if seq > 1 else 0, maxp)

    def state(self):
        msgs = self._msgs_count()
        first, last = self._first(), self._last()
        return {
            "messages": msgs,
            "bytes": self._bytes(),
            "first_seq": first,
            "first_ts": self._first_ts(),
            "last_seq": last,
            "last_ts": self._last_ts(),
            "num_deleted": (last - first + 1 - msgs) if msgs else 0,
            "num_subjects": self._num_subjects(),
        }

class MemoryStore(StreamStore):
    """Messages in a dict by seq, and per subject an ascending list of its seqs."""

    def __init__(self, first_seq=0, **_):
        self._m = {}                 # seq -> StoredMsg
        self._subj = {}              # subject -> [seq, ...] ascending
        self._first_cfg = first_seq or 0
        self.first = first_seq or 0
        self.last = max(0, (first_seq or 1) - 1)
        self.last_ts = 0
        self.nbytes = 0
        self._ttl = []

    @staticmethod
    def msg_size(subject, hdr, msg):
        return len(subject) + len(hdr or b"") + len(msg) + 16

    # state helpers
    def _msgs_count(self):
        return len(self._m)

    def _first(self):
        return self.first

    def _last(self):
        return self.last

    def _bytes(self):
        return self.nbytes

    def _first_ts(self):
        return self._m[self.first].ts if self._m else 0

    def _last_ts(self):
        return self.last_ts

    def _num_subjects(self):
        return len(self._subj)

    # appending
    def store_msg(self, subject, hdr, msg, ts=None, ttl=0):
        seq = self.last + 1
        ts = ts or time.time_ns()
        self.store_raw(seq, ts, subject, hdr, msg, ttl)
        return seq, ts

    def store_raw(self, seq, ts, subject, hdr, msg, ttl=0):
        if seq <= self.last and not (self.last == 0 and not self._m):
            raise ValueError(f"sequence {seq} <= last {self.last}")
        subject = _bytes(subject)
        sm = StoredMsg(subject, None if hdr is None else bytes(hdr), bytes(msg), seq, ts)
        if not self._m:
            self.first = seq
        self._m[seq] = sm
        self._subj.setdefault(subject, []).append(seq)
        self.nbytes += self.msg_size(subject, hdr, msg)
        self.last = seq
        self.last_ts = ts
        if ttl > 0:
            heapq.heappush(self._ttl, (ts + ttl * 1_000_000_000, seq))

    # reading
    def load(self, seq):
        return self._m.get(seq)

    def _matching(self, filt):
        if b"*" in filt or b">" in filt:
            return [s for s in self._subj if subject_match(filt, s)]
        return [filt] if filt in self._subj else []

    def load_next(self, seq, filter=None):
        return self._nearest(max(seq, self.first), filter, 1)

    def load_prev(self, seq, filter=None):
        return self._nearest(min(seq, self.last), filter, -1)

    def _nearest(self, seq, filter, step):
        """The message matching `filter` nearest to `seq` (itself included), looking up the
        sequences (step 1: load_next) or down (step -1: load_prev)."""
        filt = _filter(filter)
        if filt is None:
            for s in range(seq, self.last + 1 if step > 0 else self.first - 1, step):
                m = self._m.get(s)
                if m is not None:
                    return m
            return None
        best = None
        for subj in self._matching(filt):
            lst = self._subj[subj]
            if step > 0:
                i = bisect.bisect_left(lst, seq)
                s = lst[i] if i < len(lst) else None
            else:
                i = bisect.bisect_right(lst, seq)
                s = lst[i - 1] if i > 0 else None
            if s is not None and (best is None or (s < best if step > 0 else s > best)):
                best = s
        return None if best is None else self._m[best]

    # removing
    def _drop(self, seq):
        sm = self._m.pop(seq)
        lst = self._subj[sm.subject]
        del lst[bisect.bisect_left(lst, seq)]
        if not lst:
            del self._subj[sm.subject]
        self.nbytes -= self.msg_size(sm.subject, sm.hdr, sm.msg)
        return sm

    def _fix_first(self):
        if not self._m:
            self.first = self.last + 1
            return
        while self.first not in self._m:
            self.first += 1

    def remove(self, seq, erase=False):
        if seq not in self._m:
            return False
        self._drop(seq)
        self._fix_first()
        return True

    def _nth_from_end(self, k):
        for s in range(self.last, self.first - 1, -1):
            if s in self._m:
                k -= 1
                if k == 0:
                    return s
        return 0

    def _remove_matching(self, filt, below, maxp):
        seqs = sorted(s for subj in self._matching(filt) for s in self._subj[subj]
                      if not below or s < below)
        if maxp:
            seqs = seqs[:maxp]
        for s in seqs:
            self._drop(s)
        self._fix_first()
        return len(seqs)

    def compact(self, seq):
        if seq <= self.first and not (not self._m and seq > self.last + 1):
            return 0
        n = 0
        if len(self._m) and seq - self.first < 2 * len(self._m):
            for s in range(self.first, min(seq, self.last + 1)):
                if s in self._m:
                    self._drop(s)
                    n += 1
        else:
            for s in [s for s in self._m if s < seq]:
                self._drop(s)
                n += 1
        if seq > self.last + 1:
            self.last = seq - 1
        self.first = seq
        self._fix_first()
        return n

    def skip_to(self, seq):
        if seq > self.last:
            self.last = seq
            if not self._m:
                self.first = seq + 1

    def skip_msg(self, ts, n=1):
        self.skip_to(self.last + n)
        self.last_ts = ts
        return self.last

    def truncate(self, seq):
        if seq >= self.last:
            return
        for s in [s for s in self._m if s > seq]:
            self._drop(s)
        self.last = seq
        prev = self.load_prev(seq)
        self.last_ts = prev.ts if prev else 0
        if not self._m or self.first > seq:
            self.first = seq + 1

    def messages(self):
        """Every stored message in sequence order: a list of its own, which later changes to
        the store leave as it is (what a replicated memory stream writes beside its group's
        snapshot, natsd/jetstream/replicated/snapshots.py)."""
        return list(self._m.values())

    # queries
    def deleted(self):
        if not self._m:
            return []
        return [s for s in range(self.first, self.last + 1) if s not in self._m]

    def subjects(self, filter=None):
        filt = _filter(filter)
        subjs = self._subj if filt is None else self._matching(filt)
        return {s: len(self._subj[s]) for s in subjs}

    def subject_state(self, subject):
        lst = self._subj.get(_bytes(subject))
        return (len(lst), lst[0], lst[-1]) if lst else (0, 0, 0)

    def num_pending(self, start_seq, filter=None, last_per_subject=False):
        filt = _filter(filter)
        subjs = list(self._subj) if filt is None else self._matching(filt)
        if last_per_subject:
            return sum(1 for s in subjs if self._subj[s][-1] >= start_seq)
        if filt is None and start_seq <= self.first:
            return len(self._m)
        return sum(len(lst) - bisect.bisect_left(lst, start_seq)
                   for lst in (self._subj[s] for s in subjs))

    def expired_ttls(self, now):
        out = []
        while self._ttl and self._ttl[0][0] <= now:
            _, s = heapq.heappop(self._ttl)
            if s in self._m:
                out.append(s)
        return out

    def close(self):
        pass

    def delete(self):
        self.__init__(self._first_cfg)


class FileStore(StreamStore):
    """A stream's messages in a segmented log directory (see natsd/_core/log.pyx)."""

    def __init__(self, directory, block_size=8 * 1024 * 1024, compression="none", first_seq=0,
                 sync_always=False, crypt=None, call_soon=None, zero_ahead=False, **_):
        """crypt: the stream's keys (natsd/jetstream/jscrypt.StreamCrypt) to encrypt the log
        at rest, or None. call_soon: the loop's, when every acknowledgement waits for a sync
        (group commit): the log then writes one loop iteration's messages with one pwrite.
        zero_ahead: a store synced for every PubAck keeps zeros ahead of its records
        (natsd/_core/log.pyx, "Zero ahead", plaintext only), so a sequential publisher's
        fdatasync needs no journal commit; one synced rarely would only write twice."""
        self.dir = os.fspath(directory)
        self.log = open_log(self.dir, block_size, compression, first_seq or 0, crypt,
                            call_soon if crypt is None else None, zero_ahead=zero_ahead)
        self.sync_always = sync_always
        self._first_cfg = first_seq or 0

    @staticmethod
    def msg_size(subject, hdr, msg):
        if hdr:
            return 22 + len(subject) + 4 + len(hdr) + len(msg) + 8
        return 22 + len(subject) + len(msg) + 8

    # state helpers
    def _msgs_count(self):
        return self.log.msgs

    def _first(self):
        lg = self.log
        if lg.msgs == 0 and lg.last == 0:
            return self._first_cfg                # never used: nats-server reports 0
        return lg.first

    def _last(self):
        return self.log.last

    def _bytes(self):
        return self.log.bytes

    def _first_ts(self):
        return self.log.first_ts

    def _last_ts(self):
        return self.log.last_ts

    def _num_subjects(self):
        return self.log.nsubj_live

    @property
    def lost_tail(self):
        return self.log.lost_tail

    def fast_log(self):
        return self.log

    # appending
    def store_msg(self, subject, hdr, msg, ts=None, ttl=0):
        seq = self.log.last + 1
        ts = ts or time.time_ns()
        self.log.append(seq, ts, subject if type(subject) is bytes else _bytes(subject), hdr,
                        msg if type(msg) is bytes else bytes(msg), ttl)
        if self.sync_always:
            self.log.sync()
        return seq, ts

    def store_raw(self, seq, ts, subject, hdr, msg, ttl=0):
        self.log.append(seq, ts, _bytes(subject), hdr, bytes(msg), ttl)
        if self.sync_always:
            self.log.sync()

    # reading
    def load(self, seq):
        r = self.log.read(seq)
        return None if r is None else StoredMsg(r[0], r[1], r[2], seq, r[3])

    def load_next(self, seq, filter=None):
        s = self.log.next_seq(max(seq, 1), _filter(filter))
        while s:
            m = self.load(s)
            if m is not None:
                return m
            s = self.log.next_seq(s + 1, _filter(filter))     # unreadable record: skip it
        return None

    def load_prev(self, seq, filter=None):
        s = self.log.prev_seq(seq, _filter(filter)) if seq > 0 else 0
        while s:
            m = self.load(s)
            if m is not None:
                return m
            s = self.log.prev_seq(s - 1, _filter(filter)) if s > 1 else 0
        return None

    # removing
    def remove(self, seq, erase=False):
        return self.log.remove(seq, erase)

    def _nth_from_end(self, k):
        return self.log.nth_from_end(k)

    def _remove_matching(self, filt, below, maxp):
        return self.log.remove_matching(filt, below, maxp)

    def compact(self, seq):
        return self.log.compact(seq)

    def truncate(self, seq):
        self.log.truncate(seq)

    def skip_to(self, seq):
        if seq > self.log.last:
            self.log.skip(seq)

    def skip_msg(self, ts, n=1):
        seq = self.log.last + n
        self.log.skip(seq, ts)
        if self.sync_always:
            self.log.sync()
        return seq

    # queries
    def deleted(self):
        return self.log.deleted()

    def subjects(self, filter=None):
        return self.log.subject_counts(_filter(filter))

    def subject_state(self, subject):
        return self.log.subject_state(_bytes(subject))

    def num_pending(self, start_seq, filter=None, last_per_subject=False):
        return self.log.count(max(start_seq, 0), _filter(filter), last_per_subject)

    def expired_ttls(self, now):
        return self.log.expired_ttls(now)

    # durability
    def sync(self, callback=None):
        """fdatasync now (blocking, without the GIL); then callback() if given."""
        self.log.sync()
        if callback is not None:
            callback()

    def sync_async(self, hand_off, callback, on_error=None, may_inline=True):
        """callback() once everything stored so far is durable; the log hands its syncs to
        `hand_off` (the server's Loop) directly."""
        self.log.sync_async(hand_off, callback, on_error, may_inline)

    @property
    def sync_waiting(self):
        return self.log.sync_waiting

    def close(self):
        self.log.close()

    def delete(self):
        self.log.abandon()
        shutil.rmtree(self.dir, ignore_errors=True)
