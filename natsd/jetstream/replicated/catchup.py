"""Copying messages between the replicas of a replicated stream: what a replica does when its
copy lacks messages that its group's snapshot says the stream has (a follower the leader sent
its snapshot, a server back with an empty disk; natsd/jetstream/replicated/snapshots.py).

- Every replica answers on `$JSC.CATCHUP.<group>.<peer>` in the system account, from its own
  copy, once it has applied the snapshot the asking replica aligns to and is not copying
  itself; else it answers "not yet".
- A request is JSON: {"from", "to", "index", "id", "peer"}: the sequences wanted, the
  snapshot's index, the asker's request number and its peer id (a leader does not count a
  replica that is copying as caught up when it changes the group's members). An answer is a header (status, the request number,
  the next sequence to ask for or 0 when the range is done) and the messages in the range,
  up to CHUNK_BYTES, each as (sequence, time, subject, headers, payload).
- The `Fetcher` asks the group's leader (without one, it waits) one chunk at a time, so the
  copying replica sets the pace. A request without an answer is asked again after
  REQUEST_TIMEOUT from where the copy is. It logs its progress and reports it to /healthz.
"""
import json
import logging
import struct
import time

from natsd._core.loop import cancel_timer

log = logging.getLogger("natsd")

CHUNK_BYTES = 256 * 1024        # payload bytes in one answer (at least one message)
REQUEST_TIMEOUT = 2.0           # seconds before a request is asked again
NO_LEADER_WAIT = 0.25           # seconds between two looks for a leader to ask
PROGRESS_EVERY = 5.0            # seconds between two progress lines in the log
OK, NOT_YET = 0, 1
_HEAD = struct.Struct("<BQQ")   # status, request id, next sequence (0: the range is done)
_REC = struct.Struct("<QqIII")  # seq, ts, len(subject), len(headers) + 1 (0: none), len(payload)


def subject(group, peer):
    return "$JSC.CATCHUP.%s.%s" % (group, peer)


def answer(store, req, ready):
    """The answer to one request, from `store` (ready: this replica may serve it) ->
    (bytes, whether it ends the range)."""
    lo, hi, rid = req["from"], req["to"], req["id"]
    if not ready:
        return _HEAD.pack(NOT_YET, rid, lo), False
    parts, size, seq = [], 0, lo
    while seq <= hi and size < CHUNK_BYTES:
        sm = store.load_next(seq)
        if sm is None or sm.seq > hi:
            seq = hi + 1
            break
        size += add_record(parts, sm)
        seq = sm.seq + 1
    return _HEAD.pack(OK, rid, seq if seq <= hi else 0) + b"".join(parts), seq > hi


def add_record(parts, sm):
    """A stored message's record (the answers' layout) onto `parts` -> its subject, header
    and payload bytes."""
    hdr = b"" if sm.hdr is None else sm.hdr
    parts += (_REC.pack(sm.seq, sm.ts, len(sm.subject), len(hdr) + 1 if sm.hdr is not None else 0,
                        len(sm.msg)), sm.subject, hdr, sm.msg)
    return len(sm.subject) + len(hdr) + len(sm.msg)


def subject_and_headers(data, off, slen, hl):
    """A subject of `slen` bytes at `off`, then headers of `hl` - 1 bytes (0: none), as the
    replicated streams' encodings lay them out -> (subject, headers or None, next offset)."""
    subj = bytes(data[off:off + slen])
    off += slen
    if not hl:
        return subj, None, off
    return subj, bytes(data[off:off + hl - 1]), off + hl - 1


def records(data):
    """-> (status, request id, next, [(seq, ts, subject, headers or None, payload)])."""
    status, rid, nxt = _HEAD.unpack_from(data)
    return status, rid, nxt, parse_records(data, _HEAD.size)


def parse_records(data, off=0):
    """The records from `off` to the end of `data` -> [(seq, ts, subject, headers or None,
    payload)]; ValueError when the last is cut short."""
    out = []
    while off < len(data):
        seq, ts, slen, hl, plen = _REC.unpack_from(data, off)
        subj, hdr, off = subject_and_headers(data, off + _REC.size, slen, hl)
        payload = bytes(data[off:off + plen])
        off += plen
        if off > len(data):
            raise ValueError("a record is cut short")
        out.append((seq, ts, subj, hdr, payload))
    return out


class Fetcher:
    """Copies sequences lo..hi into `store` from the leader of `group` (a RaftGroup);
    done() once the range is copied."""

    def __init__(self, server, group, store, lo, hi, index, what, done, name_of=str):
        self.server = server
        self.group = group
        self.store = store
        self.lo, self.hi, self.index = lo, hi, index
        self.what = what                # for the log: "stream 'A > S'"
        self.done = done
        self.name_of = name_of          # peer id -> server name, for the log and /healthz
        self.next = lo
        self.copied = 0
        self.rid = 0
        self.started = time.monotonic()
        self.logged = self.started
        self.source = ""
        self.timer = None
        self.inbox = server.system.new_inbox()
        self.sub = server.system.subscribe(self.inbox, self._on_answer)
        self.stopped = False

    def start(self):
        log.info("JetStream %s copies messages %d-%d from another replica (its group's snapshot "
                 "at entry %d names them)", self.what, self.lo, self.hi, self.index)
        self._ask()

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        self.timer = cancel_timer(self.timer)
        self.server.system.unsubscribe(self.sub)

    def progress(self):
        """(messages copied, sequences in the range, seconds since the start, the replica asked)."""
        return self.copied, self.hi - self.lo + 1, time.monotonic() - self.started, self.source

    def _ask(self, delay=None):
        if self.stopped:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None
        leader = self.group.leader
        if delay is None and leader and leader != self.group.peer:
            self.rid += 1
            self.source = self.name_of(leader)
            req = {"from": self.next, "to": self.hi, "index": self.index, "id": self.rid,
                   "peer": self.group.peer}
            self.server.system.publish(subject(self.group.group, leader), json.dumps(req).encode(), self.inbox)
            delay = REQUEST_TIMEOUT
        self.timer = self.server.loop.call_later(delay or NO_LEADER_WAIT, self._ask)

    def _on_answer(self, sub, subj, reply, hdr, payload, origin):
        if self.stopped:
            return
        try:
            status, rid, nxt, recs = records(bytes(payload))
        except (ValueError, struct.error) as e:
            log.warning("JetStream %s: dropped a malformed catch-up answer: %s", self.what, e)
            return
        if rid != self.rid:
            return                      # an answer to a request asked again since
        if status == NOT_YET:
            self._ask(NO_LEADER_WAIT)
            return
        store = self.store
        for seq, ts, subj, h, data in recs:
            if self.next <= seq <= self.hi and seq > store.last_seq:
                store.store_raw(seq, ts, subj, h, data)
                self.copied += 1
        self.next = nxt if nxt else self.hi + 1
        now = time.monotonic()
        if self.next > self.hi:
            self.stop()
            log.info("JetStream %s copied %d messages from %s in %.1fs", self.what, self.copied,
                     self.source, now - self.started)
            self.done()
            return
        if now - self.logged >= PROGRESS_EVERY:
            self.logged = now
            log.info("JetStream %s is copying messages from %s: at sequence %d of %d-%d",
                     self.what, self.source, self.next, self.lo, self.hi)
        self._ask()
