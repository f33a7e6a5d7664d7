"""The one place where streams touch a store: thin functions over MemoryStore/FileStore
(natsd/jetstream/store.py) that give stream.py and api.py a fixed shape — records are
(seq, subject bytes, hdr bytes|None, msg bytes, ts ns) — plus `make_store()`.

Until store.py exists a small in-memory fallback keeps JetStream usable (memory semantics
for both storage types).
"""
import time

NS = 1_000_000_000

try:
    from natsd.jetstream import store as _store_mod
except ImportError:         # the storage module is not there yet
    _store_mod = None


def _b(s):
    return s.encode() if isinstance(s, str) else s


def _norm(seq, r):
    """Normalize a store record to (seq, subject, hdr, msg, ts)."""
    if r is None:
        return None
    if isinstance(r, tuple):
        if len(r) == 4:                     # (subject, hdr, msg, ts)
            return (seq, _b(r[0]), r[1], r[2], r[3])
        if len(r) == 5:                     # (seq, subject, hdr, msg, ts)
            return (r[0], _b(r[1]), r[2], r[3], r[4])
    # an object with attributes
    return (getattr(r, "seq", seq), _b(r.subject), getattr(r, "hdr", None),
            getattr(r, "msg", getattr(r, "data", b"")), getattr(r, "ts", 0))


def make_store(storage, directory, cfg, sync_always=False, crypt=None):
    """crypt: the stream's keys (natsd/jetstream/jscrypt.py) when JetStream encrypts at rest;
    file stores seal their log with them (memory stores keep nothing on disk)."""
    if _store_mod is not None:
        if storage == "memory":
            return _store_mod.MemoryStore(**_kw(_store_mod.MemoryStore, cfg))
        kw = _kw(_store_mod.FileStore, cfg, sync_always)
        if crypt is not None:
            kw["crypt"] = crypt
        return _store_mod.FileStore(directory, **kw)
    return _MemStore(cfg.get("first_seq", 0) or 0, file=storage == "file")


def _kw(cls, cfg, sync_always=False):
    import inspect
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    kw = {}
    if "first_seq" in params:
        kw["first_seq"] = cfg.get("first_seq", 0) or 0
    if "compression" in params:
        kw["compression"] = cfg.get("compression", "none")
    if "sync_always" in params:
        kw["sync_always"] = sync_always
    if "config" in params:
        kw["config"] = cfg
    return kw


def store_msg(st, subject, hdr, msg, ttl=0):
    return st.store_msg(subject, hdr, msg, ttl=ttl) if ttl else st.store_msg(subject, hdr, msg)


def store_raw(st, seq, ts, subject, hdr, msg, ttl=0):
    """Store under a given sequence and time (mirrors); a gap leaves deleted sequences."""
    fn = getattr(st, "store_raw", None)
    if fn is None:
        raise NotImplementedError("store has no store_raw")
    if ttl:
        fn(seq, ts, subject, hdr, msg, ttl)
    else:
        fn(seq, ts, subject, hdr, msg)


def load(st, seq):
    r = _norm(seq, st.load(seq))
    return None if r is None else r[1:]            # (subject, hdr, msg, ts)


def load_next(st, seq, filt=None):
    return _norm(0, st.load_next(max(seq, 1), _b(filt) if filt else None))


def load_prev(st, seq):
    if seq < 1:
        return None
    return _norm(0, st.load_prev(seq))


def load_last(st, filt):
    return _norm(0, st.load_last(_b(filt)))


def remove(st, seq, erase=False):
    return bool(st.remove(seq, erase))


def purge(st, subject=None, seq=0, keep=0):
    return st.purge(_b(subject) if subject else None, seq, keep)


def compact(st, seq):
    return st.compact(seq)


def truncate(st, seq):
    """Drop every message above `seq`; the last sequence becomes `seq`."""
    st.truncate(seq)


def state(st):
    s = st.state()
    if isinstance(s, dict):
        return s
    return {k: getattr(s, k, 0) for k in ("messages", "bytes", "first_seq", "first_ts", "last_seq",
                                          "last_ts", "num_deleted", "num_subjects")}


def subjects(st, filt):
    out = st.subjects(_b(filt) if filt else None)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in dict(out).items()}


def subject_count(st, subject):
    s = st.subject_state(_b(subject))
    if s is None:
        return 0
    if isinstance(s, dict):
        return s.get("messages", s.get("msgs", 0))
    if isinstance(s, tuple):
        return s[0]
    return getattr(s, "messages", getattr(s, "count", 0))


def num_pending(st, start, filt=None, last_per_subject=False):
    return st.num_pending(start, _b(filt) if filt else None, last_per_subject)


def deleted(st):
    return list(st.deleted())


def record_size(st, subject, hdr, msg):
    fn = getattr(st, "msg_size", None)
    if fn is not None:
        return fn(subject, hdr, msg)
    return 22 + len(subject) + len(msg) + 8 + (4 + len(hdr) if hdr else 0)


def sync(st):
    st.sync()


def sync_async(st, submit, done, failed):
    fn = getattr(st, "sync_async", None)
    if fn is None:
        done()
        return
    try:
        fn(submit, done, failed)
    except TypeError:
        fn(submit, done)


def close(st):
    st.close()


def delete(st):
    st.delete()


class _MemStore:
    """Fallback store (used only while natsd/jetstream/store.py is missing)."""

    def __init__(self, first_seq=0, file=False):
        self.msgs = {}
        self.first = first_seq or 1
        self.last = (first_seq or 1) - 1
        self.bytes = 0
        self.file = file
        self.last_ts = 0

    def msg_size(self, subj, hdr, msg):
        return self._size(subj, hdr, msg)

    def _size(self, subj, hdr, msg):
        if self.file:
            return 22 + len(subj) + len(msg) + 8 + (4 + len(hdr) if hdr else 0)
        return len(subj) + len(hdr or b"") + len(msg) + 16

    def store_msg(self, subject, hdr, msg, ts=None, ttl=0):
        self.last += 1
        ts = ts or time.time_ns()
        self.msgs[self.last] = (subject, hdr, msg, ts)
        self.bytes += self._size(subject, hdr, msg)
        self.last_ts = ts
        if len(self.msgs) == 1:
            self.first = self.last
        return self.last, ts

    def load(self, seq):
        return self.msgs.get(seq)

    def _fix_first(self):
        if not self.msgs:
            self.first = self.last + 1
        else:
            while self.first not in self.msgs:
                self.first += 1

    def load_next(self, seq, filt=None):
        from natsd.subject import subject_matches
        for s in range(max(seq, self.first), self.last + 1):
            r = self.msgs.get(s)
            if r and (filt is None or subject_matches(filt.decode(), r[0].decode())):
                return (s,) + r
        return None

    def load_prev(self, seq):
        for s in range(min(seq, self.last), self.first - 1, -1):
            r = self.msgs.get(s)
            if r:
                return (s,) + r
        return None

    def load_last(self, filt):
        from natsd.subject import subject_matches
        for s in range(self.last, self.first - 1, -1):
            r = self.msgs.get(s)
            if r and subject_matches(filt.decode(), r[0].decode()):
                return (s,) + r
        return None

    def remove(self, seq, erase=False):
        r = self.msgs.pop(seq, None)
        if r is None:
            return False
        self.bytes -= self._size(r[0], r[1], r[2])
        self._fix_first()
        return True

    def purge(self, subject=None, seq=0, keep=0):
        from natsd.subject import subject_matches
        cands = [s for s, r in sorted(self.msgs.items())
                 if (subject is None or subject_matches(subject.decode(), r[0].decode()))
                 and (not seq or s < seq)]
        if keep:
            cands = cands[:-keep] if keep < len(cands) else []
        for s in cands:
            self.remove(s)
        if subject is None and not seq and not keep:
            self.first = self.last + 1
        return len(cands)

    def compact(self, seq):
        n = 0
        for s in [s for s in self.msgs if s < seq]:
            self.remove(s)
            n += 1
        if seq > self.first:
            self.first = seq if not self.msgs else min(self.msgs)
            if seq > self.last:
                self.last = seq - 1
        return n

    def state(self):
        first_ts = self.msgs[self.first][3] if self.msgs else 0
        return {"messages": len(self.msgs), "bytes": self.bytes,
                "first_seq": self.first if (self.msgs or self.last) else 0, "first_ts": first_ts,
                "last_seq": self.last, "last_ts": self.last_ts if self.last else 0,
                "num_deleted": (self.last - self.first + 1 - len(self.msgs)) if self.msgs else 0,
                "num_subjects": len({r[0] for r in self.msgs.values()})}

    def deleted(self):
        if not self.msgs:
            return []
        return [s for s in range(self.first, self.last + 1) if s not in self.msgs]

    def subjects(self, filt=None):
        from natsd.subject import subject_matches
        out = {}
        for r in self.msgs.values():
            if filt is None or subject_matches(filt.decode(), r[0].decode()):
                out[r[0]] = out.get(r[0], 0) + 1
        return out

    def subject_state(self, subject):
        return sum(1 for r in self.msgs.values() if r[0] == subject)

    def num_pending(self, start, filt=None, last_per_subject=False):
        from natsd.subject import subject_matches
        return sum(1 for s, r in self.msgs.items() if s >= start and
                   (filt is None or subject_matches(filt.decode(), r[0].decode())))

    def sync(self):
        pass

    def close(self):
        pass

    def delete(self):
        self.msgs.clear()


def load_prev_filtered(st, seq, filt):
    if seq < 1:
        return None
    return _norm(0, st.load_prev(seq, _b(filt)))
