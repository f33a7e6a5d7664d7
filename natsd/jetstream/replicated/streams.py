"""Replicated streams (`num_replicas` > 1 on a cluster): one Raft group per stream, its members
the servers the meta group assigned (natsd/jetstream/replicated/meta.py).

- Every replica keeps a local copy of the stream, an ordinary Stream (natsd/jetstream/engine/stream.py)
  whose store lives in the group's directory, `<store_dir>/jetstream/$SYS/_js_/<group>/msgs`.
- Only the group's leader subscribes to the stream's subjects and claims its API requests
  (natsd/jetstream/replicated/placement.py). The messages it receives in one loop iteration become one
  Raft entry (K_BATCH: the leader's time, then each message's subject, headers and payload);
  nothing is stored yet.
- Once the entry is committed, on the disks of a quorum, every replica applies it through
  Stream.process, in log order, so all copies take the same checks and sequence numbers. The
  leader that proposed it then answers the publisher with what its own apply gave: the
  PubAck or the error (if it lost the leadership meanwhile, it still answers, provided the
  entry is still its own). Acknowledged therefore means committed on a quorum of
  fdatasynced logs.
- A leader handing its leadership on holds the publishes that reach it and forwards them
  to the next one (natsd/jetstream/replicated/forward.py).
- Purge, message delete and configuration updates are entries too (natsd/jetstream/engine/streamops.py
  runs them on every replica at apply); the leader answers the request.
- The group's log is the stream's durable record until a snapshot replaces its beginning:
  once COMPACT_ENTRIES messages and operations (or COMPACT_BYTES of log) were applied since
  the last one (counted since the server started; a batch entry counts its messages), and at
  most once per COMPACT_MIN_INTERVAL, a file stream's replica syncs its copy and has the
  group keep a snapshot of it in place of those entries (natsd/jetstream/replicated/snapshots.py),
  written on a worker thread; a leader waits for its reachable followers to have every entry
  first, unless the log grew four times that. A server that starts with no snapshot
  rebuilds its copy from the log; one with a snapshot keeps its copy, cut back to the
  snapshot, and replays the entries after it.
- A copy that lacks what a snapshot names (a follower the leader sent its snapshot, a server
  back with an empty disk) copies those messages from the leader (natsd/jetstream/replicated/catchup.py)
  and holds the entries after the snapshot until it has them; meanwhile it does not stand
  for election, and the leader does not count it as caught up when it changes members.
- A one-replica stream scaled up becomes a group whose first state is its server's copy, and
  a group scaled down to one replica leaves its leader's copy as a one-replica stream
  (natsd/jetstream/replicated/scale.py).

- Consumers with more than one replica ride in the same group (natsd/jetstream/replicated/consumers.py):
  they run on the leader, and their state is committed as the stream's entries are; or, the
  durable consumers, each in a group of its own that this group assigns
  (natsd/jetstream/replicated/consumergroup.py).
"""
import json
import logging
import os
import shutil
import struct
import time

from natsd._core.loop import cancel_timer
from natsd._core.router import publish
from natsd.raft.node import LEADER, NotLeader
from natsd.raft.group import RaftGroup
from natsd.jetstream.engine import advisories, errors as E, streamops
from natsd.jetstream.replicated import (
    catchup, clusterinfo, forward as replforward, scale as replscale, snapshots as replsnapshot)
from natsd.jetstream.replicated.clusterinfo import peer_infos, step_down
from natsd.jetstream.replicated.consumergroup import ConsumerGroup
from natsd.jetstream.replicated.consumers import OPS as CONSUMER_OPS, ReplicatedConsumers

log = logging.getLogger("natsd")

_MSG = struct.Struct("<BqII")           # kind, leader time (ns), len(subject), len(headers) + 1 (0: None)
K_MSG = 1                               # a published message (written before K_BATCH; still read)
K_OP = 2                                # a stream operation: JSON {"op", "req"}
K_SRC = 3                               # a message a mirror or source copied (origin seq or 0)
K_BATCH = 4                             # published messages: _BATCH, then per message _BATCH_MSG and its bytes
_SRC_SEQ = struct.Struct("<Q")
_BATCH = struct.Struct("<BqI")          # kind, leader time (ns), number of messages
_BATCH_MSG = struct.Struct("<III")      # len(subject), len(headers) + 1 (0: None), len(payload)
BATCH_MSGS = 1024                       # messages of one K_BATCH entry, at most
BATCH_BYTES = 64 << 10                  # and their bytes (a bigger message gets an entry of its own)
MAX_DEFERRED = 1024                     # API requests a new leader holds until it is ready
RECONCILE = 0.25                        # seconds between two steps of a change of members
FIRST_CAMPAIGN_EVERY = 0.1              # seconds between a new group's first server's campaigns
FIRST_CAMPAIGN_TRIES = 20
COMPACT_ENTRIES = 8192                  # applied messages and operations between two snapshots
COMPACT_BYTES = 64 << 20                # or log bytes
COMPACT_MIN_INTERVAL = 5.0              # seconds between two snapshots of a busy stream
COMPACT_RETRY = 0.5                     # leader: seconds before a put-off snapshot is looked at again
FETCHING_FOR = 5.0                      # leader: seconds a copying replica counts as copying
ANSWER_WAIT = 5.0                       # seconds an answer waits for the group's next leader


def encode_sourced(subject, hdr, payload, seq, ts):
    """A copied message: the K_MSG layout with the origin's sequence (0 for a source) after
    the fixed part; `ts` is the origin's time for a mirror, the leader's for a source."""
    h = b"" if hdr is None else bytes(hdr)
    return b"".join((_MSG.pack(K_SRC, ts, len(subject), len(h) + 1 if hdr is not None else 0),
                     _SRC_SEQ.pack(seq), bytes(subject), h, bytes(payload)))


def encode_batches(msgs, ts, max_msgs=BATCH_MSGS, max_bytes=BATCH_BYTES):
    """The messages of one loop iteration, (subject, reply, headers or None, payload, origin)
    -> K_BATCH entries of at most `max_msgs` messages and `max_bytes` bytes (but one message)."""
    out = []
    parts, count, size = None, 0, 0
    pack = _BATCH_MSG.pack
    for subject, reply, hdr, payload, origin in msgs:
        n = len(subject) + len(payload) + (0 if hdr is None else len(hdr))
        if parts is not None and (count == max_msgs or size + n > max_bytes):
            parts[0] = _BATCH.pack(K_BATCH, ts, count)
            out.append(b"".join(parts))
            parts = None
        if parts is None:
            parts, count, size = [None], 0, 0
        if hdr is None:
            parts += (pack(len(subject), 0, len(payload)), subject, payload)
        else:
            parts += (pack(len(subject), len(hdr) + 1, len(payload)), subject, hdr, payload)
        count += 1
        size += n
    if parts is not None:
        parts[0] = _BATCH.pack(K_BATCH, ts, count)
        out.append(b"".join(parts))
    return out


def encode_batch(msgs, ts):
    """One K_BATCH entry of all `msgs` (as encode_batches takes them), however many."""
    return encode_batches(msgs, ts, len(msgs), float("inf"))[0]


def decode_batch(data, replies):
    """A K_BATCH entry -> (the leader's time, [(subject, reply, headers or None, payload,
    None)]), the replies taken from `replies` (the leader's, in order) or None."""
    kind, ts, count = _BATCH.unpack_from(data)
    off = _BATCH.size
    unpack, size = _BATCH_MSG.unpack_from, _BATCH_MSG.size
    msgs = []
    for i in range(count):
        slen, hl, plen = unpack(data, off)
        off += size
        subject = data[off:off + slen]
        off += slen
        hdr = None
        if hl:
            hdr = data[off:off + hl - 1]
            off += hl - 1
        msgs.append((subject, replies[i] if replies else None, hdr, data[off:off + plen], None))
        off += plen
    if off != len(data):
        raise ValueError("a batch of %d messages takes %d bytes, the entry has %d" % (count, off, len(data)))
    return ts, msgs


def decode_msg(data):
    """-> (subject, headers or None, payload, ts, origin seq (0 unless copied by a mirror))."""
    kind, ts, slen, hl = _MSG.unpack_from(data)
    if kind not in (K_MSG, K_SRC):
        raise ValueError("unknown replicated stream entry kind %d" % kind)
    off = _MSG.size
    seq = 0
    if kind == K_SRC:
        seq = _SRC_SEQ.unpack_from(data, off)[0]
        off += _SRC_SEQ.size
    subject, hdr, off = catchup.subject_and_headers(data, off, slen, hl)
    return subject, hdr, bytes(data[off:]), ts, seq


class ReplicatedStream:
    def __init__(self, meta, jsa, assignment, fresh=False, joining=False, adopt=None):
        """fresh: the assignment was just made (not replayed at a start): its first server
        stands for election at once. joining: this server was added to the stream's servers;
        the group's leader adds it and sends it the log. adopt: the one-replica Stream (stopped,
        out of its account) that this group continues: its files become this server's copy
        and its state the group's first snapshot."""
        self.meta = meta
        self.jsa = jsa
        self.engine = meta.engine
        self.server = meta.server
        self.group_name = assignment["group"]
        self.peers = tuple(assignment["peers"])
        self.dir = os.path.join(meta.js_dir, self.group_name)
        self.local_dir = os.path.join(self.dir, "copy")
        self.pending = {}               # raft index -> (term, the reply subject (an operation) or
                                        # the publishers' replies, None where none (a K_BATCH)):
                                        # what this server proposed as leader, answered at apply
                                        # (even once it no longer leads) if the entry is its own
        self.forwarder = None           # publishes held while handing leadership on (replforward)
        self.deferred = []              # a new leader: API requests held until it is ready
        self.reconcile_timer = None     # leader: members being brought in line with self.peers
        self.move_asked = float("-inf")  # a one-replica move's last request to keep it here
        self.unanswered = None          # (reply, via, type, until): a change applied while no leader was there to answer
        self.leaving = None             # moved off this server: called once it can go
        self.leader_peer = ""
        self.fetcher = None             # copying what a snapshot names from another replica
        self.held = []                  # meanwhile: the entries committed after it
        self.copying = {}               # leader: peer -> when it last asked for messages
        self.compacting = False         # a snapshot waits for its copy's sync
        self.compact_timer = None       # a snapshot put off (followers lag, or too soon)
        self.last_compact = 0.0         # monotonic time of the last snapshot begun
        self.applied_records = 0        # messages and operations applied since this server started
        self.snapshot_records = 0       # applied_records at the group's latest snapshot
        self.compact_records = 0        # and at the one being taken
        self.creator = assignment if fresh and assignment.get("reply") else None
        if assignment.get("adopt"):
            self.creator = None         # its server answers at once (replscale)
        self.consumers = ReplicatedConsumers(self, host_group=ConsumerGroup)
        if adopt is not None:
            replscale.adopt(self, adopt)
        self.group = RaftGroup(self.server, self.group_name, meta.peer, os.path.join(self.dir, "raft"),
                               members=None if joining else self.peers, apply=self._apply,
                               on_leader=self._leader_changed,
                               on_leader_ready=self._leader_ready,
                               on_quorum_lost=self._quorum_lost)
        index, snap = self._local_snapshot()
        cfg = dict(assignment["cfg"])
        created = assignment.get("since") or assignment["created"]
        if snap is None:
            shutil.rmtree(self.local_dir, ignore_errors=True)   # rebuilt from the group's log
            os.makedirs(self.local_dir, exist_ok=True)
            self.stream = jsa.add_stream(cfg, created, replica=self)
        else:
            os.makedirs(self.local_dir, exist_ok=True)
            self.stream = jsa.add_stream(self._snapshot_config(snap, cfg), created,
                                         recovering=True, replica=self)
        if assignment.get("adopt") not in (None, meta.peer) and not index:
            # the adopted copy is the group's only state until this server has the snapshot
            # of it: an empty copy must not lead
            self.set_electable(False)
        self.serve_sub = self.server.system.subscribe(catchup.subject(self.group_name, meta.peer), self._serve)
        self.forwarder = replforward.Forwarder(self)
        self.group.start()
        if self.peers[0] == meta.peer and fresh:
            self._first_campaign(FIRST_CAMPAIGN_TRIES)
        if not self.stream.file:
            replsnapshot.drop_messages(self.dir, index if snap is not None else None, unfinished=True)
            if adopt is not None:
                replsnapshot.copy_all(adopt.store, self.stream.store)   # a memory stream's messages
            elif snap is not None:
                self._restore_messages(index, snap)
        if snap is not None:
            self._align(index, snap)
        if adopt is not None and fresh and assignment.get("reply"):
            replscale.answer_scale_up(self, assignment)

    def _first_campaign(self, tries):
        """A new group's first server stands at once, and again every FIRST_CAMPAIGN_EVERY
        while nobody leads: the others start the group only once they learn that the meta
        entry is committed, which may be after its first vote requests went unheard (else the
        create would wait out a whole election timeout)."""
        if self.group.stopped or self.group.leader or not tries:
            return
        self.group.node.campaign_soon(time.monotonic())
        self.server.loop.call_later(FIRST_CAMPAIGN_EVERY, self._first_campaign, tries - 1)

    def is_leader(self):
        return self.group.is_leader()

    def takes_publishes(self):
        """Whether this server subscribes to the stream's subjects: its leader, and a leader
        that stepped down a moment ago (replforward: it forwards them)."""
        return self.group.is_leader() or (self.forwarder is not None and self.forwarder.forwarding())

    def stop(self, delete=False):
        self.reconcile_timer = cancel_timer(self.reconcile_timer)
        self.compact_timer = cancel_timer(self.compact_timer)
        if self.fetcher is not None:
            self.fetcher.stop()
        self.server.system.unsubscribe(self.serve_sub)
        self.forwarder.stop()
        self.consumers.stop_all()
        self.consumers.stop_hosts()
        self.group.stop()
        if delete:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- the leader takes messages ----

    def on_publish(self, sub, msgs, taker=None):
        """The messages the loop read for the stream in one iteration (a batched
        subscription), that its previous leader forwarded, or that this server held while it
        handed its leadership on and leads again: one proposal for all of them. `taker`: the
        server whose subscription took them (None: this one). A new leader takes each publish
        once, whichever of those ways it came (the same publish can come two: a server still
        in its grace second after a step-down holds what reaches its own subscription while
        the routes take it to the leader too)."""
        taker = taker or self.meta.peer
        if self.forwarder.taking_until or taker != self.meta.peer:
            msgs = self.forwarder.fresh(msgs, taker)
        if self.stream.closed or not msgs:
            return
        entries = encode_batches(msgs, time.time_ns())
        try:
            last = self.group.propose_many(entries)
        except NotLeader:
            self.forwarder.refused(msgs, taker)     # handing leadership on, or just handed: passed on
            return
        term = self.group.node.term
        pos = 0                         # the publishers' replies, kept per entry in order
        for index, data in enumerate(entries, last - len(entries) + 1):
            count = _BATCH.unpack_from(data)[2]
            replies = [bytes(m[1]) if m[1] else None for m in msgs[pos:pos + count]]
            pos += count
            if any(replies):
                self.pending[index] = (term, replies)

    def ack_filter(self):
        """The acks this group's consumers take (replforward catches them after a step-down)."""
        return "$JS.ACK.%s.>" % self.stream.name

    def resubscribe(self):
        self.stream.resubscribe()

    def copies_here(self):
        """Mirrors and sources run on the leader, once it is ready."""
        return self.consumers.live

    def propose_sourced(self, subject, hdr, payload, seq, ts):
        """A message the leader's mirror or source copied: an entry, stored on every replica
        once committed. -> whether it was proposed (False: the link retries)."""
        try:
            self.group.propose(encode_sourced(subject, hdr, payload, seq or 0, ts or time.time_ns()))
        except NotLeader:
            return False
        return True

    def propose_op(self, op, req, reply):
        """A stream or consumer operation asked of the leader: done on every replica once
        committed, answered by the leader then. -> its log index, None when not the leader."""
        try:
            index = self.group.propose(bytes([K_OP]) + json.dumps({"op": op, "req": req}).encode())
        except NotLeader:
            rtype = streamops.OPS[op][1] if op in streamops.OPS else CONSUMER_OPS[op]
            if reply and rtype:
                publish(self.jsa.sublist, reply, None, None,
                        E.api_response(rtype, E.error("JSClusterNotAvailErr")))
            return None
        if reply:
            self.pending[index] = (self.group.node.term, reply.encode() if isinstance(reply, str) else bytes(reply))
        return index

    # ---- every replica applies ----

    def _apply(self, items):
        """What the group made ready, in log order: committed entries, and a leader's snapshot
        that replaced the log here. Held while the copy is copying what a snapshot names."""
        if self.fetcher is not None:
            self.held.extend(items)
            return
        self._apply_entries(items)
        if self.fetcher is None:
            self._maybe_compact()

    def _apply_entries(self, items):
        """Committed entries: runs of messages go through the stream's batched ingest
        (Stream._on_batch, the path one-replica streams take), operations one by one. Only
        the server that proposed an entry has its publishers' replies, so only it answers
        (it may have handed its leadership on since). A snapshot (rare: this
        replica was behind the leader's log) aligns the copy; what follows it waits while
        the copy fetches the messages the snapshot names."""
        pending = self.pending
        run, run_ts = [], None
        for i, (kind, index, data) in enumerate(items):
            if kind != "entry":
                if kind == "snapshot":
                    self._ingest(run, run_ts)
                    run = []
                    for gone in [x for x in pending if x <= index]:
                        del pending[gone]   # replaced by another leader's snapshot: not answered
                    self.consumers.forget_through(index)
                    self._align(index, self._decode_snapshot(index, data))
                    if self.fetcher is not None:
                        self.held.extend(items[i + 1:])
                        return
                continue
            if not data:
                continue
            reply = self._proposed_here(index) if pending else None
            if data[0] == K_BATCH:
                self._ingest(run, run_ts)
                run = []
                try:
                    run_ts, run = decode_batch(data, reply)
                    self.applied_records += len(run)
                except (ValueError, struct.error) as e:
                    log.error("Replicated stream '%s > %s': entry %d does not decode: %s", self.jsa.name,
                              self.stream.name, index, e)
                continue
            self.applied_records += 1
            if data[0] == K_OP:
                self._ingest(run, run_ts)
                run = []
                self._apply_op(index, data, reply)
                continue
            try:
                subject, hdr, payload, ts, seq = decode_msg(data)
            except (ValueError, struct.error) as e:
                log.error("Replicated stream '%s > %s': entry %d does not decode: %s", self.jsa.name,
                          self.stream.name, index, e)
                continue
            if data[0] == K_SRC:
                self._ingest(run, run_ts)
                run = []
                self._store_copied(subject, hdr, payload, seq, ts)
                continue
            if ts != run_ts:
                self._ingest(run, run_ts)
                run, run_ts = [], ts
            run.append((subject, reply, hdr, payload, None))
        self._ingest(run, run_ts)

    def _proposed_here(self, index):
        """The replies of the entry at `index` if this server proposed it, else None."""
        got = self.pending.pop(index, None)
        if got is None:
            return None
        term, reply = got
        return reply if self.own_entry(index, term) else None

    def own_entry(self, index, term):
        """Whether the entry being applied at `index` is the one this server proposed there as
        leader in `term` (a later leader may have put another there)."""
        node = self.group.node
        return (term == node.term and node.role == LEADER) or node.store.term_at(index) == term

    def _store_copied(self, subject, hdr, payload, seq, ts):
        st = self.stream
        if st.closed:
            return
        st.leader_ts = ts
        try:
            st.store_sourced_here(subject, hdr, payload, seq or None, ts if seq else None)
        finally:
            st.leader_ts = None

    def _ingest(self, msgs, ts):
        """Store with the leader's time: every copy has the same timestamps."""
        if msgs and not self.stream.closed:
            self.stream.leader_ts = ts
            try:
                self.stream._on_batch(None, msgs)
            finally:
                self.stream.leader_ts = None

    def _apply_op(self, index, data, reply):
        try:
            body = json.loads(bytes(data[1:]))
            op, req = body["op"], body["req"]
            fn, rtype = streamops.OPS[op] if op in streamops.OPS else (None, CONSUMER_OPS[op])
        except (ValueError, KeyError, TypeError) as e:
            log.error("Replicated stream '%s > %s': operation %d does not decode: %s", self.jsa.name,
                      self.stream.name, index, e)
            return
        try:
            result = fn(self.stream, req) if fn is not None else self.consumers.apply(op, req, index, reply)
        except E.ApiError as err:
            result = err
        except (KeyError, TypeError, ValueError) as e:
            log.error("Replicated stream '%s > %s': operation %d (%s) failed: %s", self.jsa.name,
                      self.stream.name, index, op, e)
            return
        if reply and result is not None:
            publish(self.jsa.sublist, reply, None, None, E.api_response(rtype, result))
        if op == "update" and not isinstance(result, E.ApiError) and self.is_leader():
            advisories.stream_action(self.stream, "modify")

    def _leader_changed(self, leader):
        me = leader == self.meta.peer
        was_leader = self.leader_peer == self.meta.peer
        self.leader_peer = leader
        if leader and not me:
            self.unanswered = None      # that leader answers it
        if not me:
            if was_leader:
                self.forwarder.stepped_down()   # first: the routes keep hearing of ack interest
            self.forwarder.hold_acks(self.consumers.stop_all())
            self.stream.stop_sourcing()
            self.deferred = []
        self.forwarder.leader_now(leader)
        self.jsa.claim(self.stream.name, me)
        self.stream.resubscribe()
        if me:
            self.forwarder.leading()
            self._advise("LEADER_ELECTED", "io.nats.jetstream.advisory.v1.stream_leader_elected",
                         leader=self.meta.name)
        if me and self.creator:
            # as nats-server, the stream's first leader answers the create request (or the
            # update that scaled a one-replica stream up)
            info = self.stream.info()
            info["did_create"] = True
            self.meta.answer(self.jsa.name, self.creator["reply"], self.creator.get("via"),
                             E.api_response("stream_create_response", info))
            advisories.stream_action(self.stream, "create")     # the leader's, once, as nats-server's
        self.creator = None

    def defer_until_ready(self, fn, *args):
        """On a leader that has not applied its predecessors' entries yet (its consumers do
        not run yet), hold an API request: fn(*args) runs once it is ready. -> held?"""
        if not self.is_leader() or self.consumers.live:
            return False
        if len(self.deferred) < MAX_DEFERRED:
            self.deferred.append((fn, tuple(bytes(a) if isinstance(a, memoryview) else a for a in args)))
        return True

    def _leader_ready(self):
        if self.unanswered is not None:
            reply, via, rtype, until = self.unanswered
            self.unanswered = None
            if time.monotonic() < until:
                self.meta.answer(self.jsa.name, reply, via, E.api_response(rtype, self.stream.info()))
        self.consumers.start_all()
        if self.stream.sourcing is None:
            self.stream._start_sourcing()
        self._reconcile()
        held, self.deferred = self.deferred, []
        for fn, args in held:
            fn(*args)

    # ---- snapshots and copying (natsd/jetstream/replicated/snapshots.py, catchup.py) ----

    def _maybe_compact(self):
        """A snapshot in place of the entries applied since the last one, when there are
        enough of them. A memory stream's snapshot is written with its messages
        (replsnapshot.write_messages): worth it once the log holds twice their bytes."""
        g = self.group
        n = g.node
        st = self.stream
        if st.closed or g.stopped or self.compacting:
            return
        since = self.applied_records - self.snapshot_records
        if since < COMPACT_ENTRIES and (since < 64 or g.storage.log.bytes < COMPACT_BYTES):
            return
        if not st.file and g.storage.log.bytes < 2 * st.store.num_bytes:
            return
        wait = self.last_compact + COMPACT_MIN_INTERVAL - time.monotonic()
        if wait > 0:                    # a busy stream: at most one snapshot per interval
            self._compact_again(wait)
            return
        if n.role == LEADER and since < 4 * COMPACT_ENTRIES:
            # followers that lack entries would need the snapshot and a copy: wait for them
            for p in n.members:
                if p != self.meta.peer and p in self.meta.connected and n.match_index.get(p, 0) < n.applied:
                    self._compact_again(COMPACT_RETRY)      # and look again when the writes stop
                    return
        self.last_compact = time.monotonic()
        # the copy must be on disk up to the snapshot before the log gives up those entries
        index, data = n.applied, replsnapshot.take(st, self.consumers.rows, self.consumers.pulls)
        self.compacting = True
        self.compact_records = self.applied_records
        if st.file:
            st.store.sync_async(self.server.loop, lambda: self._compact(index, data),
                                lambda e: self._compact(index, None, e))
        else:
            self.server.loop.run_in_worker(replsnapshot.write_messages,
                                           lambda _, e: self._compact(index, data, e),
                                           self.dir, index, st.store.messages())

    def _compact_again(self, delay):
        if self.compact_timer is None:
            self.compact_timer = self.server.loop.call_later(delay, self._compact_later)

    def _compact_later(self):
        self.compact_timer = None
        self._maybe_compact()

    def _compact(self, index, data, error=None):
        if error is None and not self.group.stopped:
            self.group.compact(index, data, lambda e: self._compacted(index, e))
            return
        self._compacted(index, error)

    def _compacted(self, index, error):
        self.compacting = False
        if error is None:
            self.snapshot_records = self.compact_records
        if not self.stream.file:        # the messages of the group's snapshot, whichever it is now
            replsnapshot.drop_messages(self.dir, self.group.storage.snapshot_meta()[0] or None)
        if error is not None and not self.group.stopped:
            log.error("JetStream stream '%s > %s' could not take a snapshot at entry %d: %s (its "
                      "log keeps growing until one succeeds)", self.jsa.name, self.stream.name, index, error)

    def _local_snapshot(self):
        """(index, snapshot) of the group's own snapshot on this disk, or (0, None)."""
        index = self.group.storage.snapshot_meta()[0]
        if not index:
            return 0, None
        return index, self._decode_snapshot(index, self.group.storage.snapshot_data())

    def _decode_snapshot(self, index, data):
        try:
            return replsnapshot.decode(data)
        except (ValueError, TypeError) as e:
            # a snapshot from a newer natsd, or damaged past its checksum: nothing to align to
            log.error("JetStream stream '%s' (group %s): the snapshot at entry %d cannot be read: %s",
                      self.jsa.name, self.group_name, index, e)
            return None

    @staticmethod
    def _snapshot_config(snap, cfg):
        """The stream's configuration at the snapshot; its servers are the meta group's."""
        out = dict(snap["config"])
        for key in ("num_replicas", "placement"):
            if key in cfg:
                out[key] = cfg[key]
            else:
                out.pop(key, None)
        return out

    def _align(self, index, snap):
        """Bring the copy in line with the snapshot at `index`: cut back, or copy what it
        lacks from the leader (the entries after it wait)."""
        if snap is None:
            return
        self.snapshot_records = self.applied_records
        st = self.stream
        self.consumers.rows = snap["consumers"]
        self.consumers.pulls = replsnapshot.pulls_of(snap)
        self.consumers.sync_hosts()
        cfg = self._snapshot_config(snap, st.config)
        if cfg != st.config:
            st.update_config(cfg)
        missing = replsnapshot.align(st.store, snap)
        if missing is None:
            st.reread_store()
            self.set_electable(True)
            self._keep_messages(index)
            return
        self.set_electable(False)

        def copied():
            replsnapshot.finish(st.store, snap)
            st.reread_store()
            self._keep_messages(index)
            self.fetcher = None
            self.set_electable(True)
            held, self.held = self.held, []
            if held:
                self._apply(held)
        self.fetcher = catchup.Fetcher(self.server, self.group, st.store, missing[0], missing[1], index,
                                       "stream '%s > %s'" % (self.jsa.name, st.name), copied,
                                       lambda p: self.meta.peer_names.get(p, p))
        self.fetcher.start()

    def _restore_messages(self, index, snap):
        """A restarted memory copy: the messages its snapshot at `index` names, from the file
        written with it (without one, _align copies them from another replica)."""
        recs = replsnapshot.read_messages(self.dir, index)
        if recs is None:
            return
        store = self.stream.store
        for seq, ts, subj, hdr, payload in recs:
            store.store_raw(seq, ts, subj, hdr, payload)
        replsnapshot.finish(store, snap)
        log.info("JetStream stream '%s > %s': %d messages read back from its snapshot at entry %d",
                 self.jsa.name, self.stream.name, len(recs), index)

    def _keep_messages(self, index):
        """A memory copy aligned to the snapshot at `index` (a leader's, or its own at the
        start): its messages written beside it, unless they are, so that a restart needs no
        other replica."""
        st = self.stream
        if st.file or os.path.exists(replsnapshot.messages_path(self.dir, index)):
            return

        def written(_, exc):
            if exc is not None:
                log.error("JetStream stream '%s > %s' could not write the messages of its snapshot "
                          "at entry %d: %s (a restart copies them from another replica)",
                          self.jsa.name, st.name, index, exc)
            elif not self.group.stopped and not self.compacting:     # else _compacted drops them
                replsnapshot.drop_messages(self.dir, self.group.storage.snapshot_meta()[0] or None)
        self.server.loop.run_in_worker(replsnapshot.write_messages, written, self.dir, index,
                                       st.store.messages())

    def _serve(self, sub, subj, reply, hdr, payload, origin):
        """Another replica asks for messages of this copy."""
        if not reply or self.group.stopped:
            return
        try:
            req = json.loads(bytes(payload))
            for key in ("from", "to", "index", "id"):
                int(req[key])
        except (ValueError, KeyError, TypeError) as e:
            log.warning("JetStream stream '%s > %s': dropped a malformed catch-up request: %s",
                        self.jsa.name, self.stream.name, e)
            return
        ready = self.fetcher is None and self.group.node.applied >= req["index"] and not self.stream.closed
        out, done = catchup.answer(self.stream.store, req, ready)
        peer = req.get("peer")
        if isinstance(peer, str):
            if done:
                self.copying.pop(peer, None)
            else:
                self.copying[peer] = time.monotonic()
        self.server.system.publish(reply, out)

    def set_electable(self, electable):
        """Whether this server may lead the stream's group, and its consumers' own groups:
        not while its copy lacks messages that the group's snapshot names."""
        self.group.node.electable = electable
        for host in self.consumers.hosts.values():
            host.group.node.electable = electable

    def is_copying(self, peer):
        """On the leader: has `peer` asked for messages lately (its copy is incomplete)?"""
        t = self.copying.get(peer)
        return t is not None and time.monotonic() - t < FETCHING_FOR

    # ---- a change of servers (natsd/jetstream/replicated/remap.py) ----

    def reassign(self, assignment, change):
        """The meta group gave the stream other servers (`assignment`, by the committed
        `change`): the leader changes the group's members to match, one at a time
        (_reconcile); it answers the update (or the cancel: the change's `answer` is its
        response type)."""
        self.peers = tuple(assignment["peers"])
        if assignment["cfg"] != self.stream.config:
            self.stream.update_config(dict(assignment["cfg"]))
        reply, via = change.get("reply", ""), change.get("via")
        rtype = change.get("answer") or "stream_update_response"
        if reply and self.is_leader():
            self.meta.answer(self.jsa.name, reply, via, E.api_response(rtype, self.stream.info()))
            if rtype == "stream_update_response":
                advisories.stream_action(self.stream, "modify")
        elif reply and not self.group.node.leader:
            # applied between two leaders (a move hands leadership over): the next one answers
            self.unanswered = (reply, via, rtype, time.monotonic() + ANSWER_WAIT)
        self._reconcile()
        self.consumers.peers_changed()

    def _reconcile(self):
        """One step towards the assigned members, on the leader. Members that are gone (no
        route) are removed first, so the group never counts on them for its quorum; then new
        ones are added, to at most one more than the assignment has, each once it has the log
        (replicated to it as a learner until then); a member still reachable
        is removed only once every assigned member has caught up, so a move never has fewer
        up-to-date copies than it had. A leader that is not among the assigned servers hands
        over last. Once the members match, the meta group hears of it (a move or scale ends)."""
        self.reconcile_timer = None
        if self.group.stopped or not self.is_leader():
            return
        g, me = self.group, self.meta.peer
        members, target = set(g.members()), set(self.peers)
        key = (self.jsa.name, self.stream.name)
        if members == target:
            origin = self.meta.reconfiguring(key)
            if origin is None:
                return
            if origin.get("one"):
                replscale.move_one_step(self, origin["one"])
            else:
                self.meta.settle(key, self.peers)   # again each step until the meta group has it
        else:
            gone = sorted(members - target - {me})
            new = sorted(target - members)
            dead = [p for p in gone if p not in self.meta.connected]
            caught_up = all(g.caught_up(p) and not self.is_copying(p) for p in members & target)
            try:
                if dead:
                    g.remove_member(dead[0])
                elif new and (len(members) <= len(target) or not gone):
                    g.admit(new[0])             # a learner first, a member once it has the log
                elif gone and caught_up:
                    g.remove_member(gone[0])
                elif not gone and not new and caught_up:
                    heirs = [p for p in self.peers if p in self.meta.connected]
                    if heirs:
                        self.transfer_leadership(heirs[0])  # this server is the last to go
            except (ValueError, NotLeader):
                pass                    # a change is in flight: try again
        self.reconcile_timer = self.server.loop.call_later(RECONCILE, self._reconcile)

    def leave(self, on_gone):
        """The stream moved off this server: a leader hands over first; then on_gone()."""
        self.leaving = on_gone
        self._try_leave()

    def _try_leave(self):
        if self.group.stopped:
            return
        if self.is_leader():
            heirs = [p for p in self.peers if p in self.meta.connected and p in self.group.members()]
            try:
                if heirs:
                    self.transfer_leadership(heirs[0])
            except (ValueError, NotLeader):
                pass
            self.server.loop.call_later(RECONCILE, self._try_leave)
            return
        self.leaving()

    def _quorum_lost(self):
        gone = [self.meta.peer_names.get(p, p) for p in self.group.members()
                if p != self.meta.peer and p not in self.meta.connected]
        log.warning("JetStream stream '%s > %s' lost quorum: it needs %d of its %d servers; "
                    "unreachable: %s", self.jsa.name, self.stream.name, len(self.peers) // 2 + 1,
                    len(self.peers), ", ".join(gone) or "none (they stopped answering)")
        self._advise("QUORUM_LOST", "io.nats.jetstream.advisory.v1.stream_quorum_lost")

    def _advise(self, what, type_name, consumer=None, group=None, **fields):
        """A stream advisory (or, naming `consumer`, a consumer's) as nats-server sends it: in
        the stream's account, and in the system account with the account named; its replicas
        are those of `group` (a consumer's own), else the stream's."""
        if consumer is None:
            subject = "$JS.EVENT.ADVISORY.STREAM.%s.%s" % (what, self.stream.name)
        else:
            subject = "$JS.EVENT.ADVISORY.CONSUMER.%s.%s.%s" % (what, self.stream.name, consumer)
            fields["consumer"] = consumer
        meta = self.meta

        def replicas():
            return peer_infos(group or self.group, meta.peer, meta.peer_names, meta.connected, everyone=True)
        domain = self.engine.domain or ""
        if self.jsa.account is not self.server.accounts.system:
            advisories.send(self.jsa.sublist, subject, type_name, domain, stream=self.stream.name,
                            **fields, replicas=replicas)
        advisories.send(self.server.accounts.system.sublist, subject, type_name, domain,
                        account=self.jsa.name, stream=self.stream.name, **fields, replicas=replicas)

    def advise_consumer_leader(self, name):
        """A replicated consumer now runs here (it follows the stream's leader)."""
        self._advise("LEADER_ELECTED", "io.nats.jetstream.advisory.v1.consumer_leader_elected",
                     consumer=name, leader=self.meta.name)

    def health_errors(self):
        """nats-server's healthz error for a replica whose group has no leader, then (beyond
        nats-server) which of its servers are unreachable from here; for a replica catching up,
        nats-server's error and (beyond it) how far it is."""
        acc, name = self.jsa.name, self.stream.name
        if self.group.leader and self.fetcher is not None:
            copied, total, secs, source = self.fetcher.progress()
            return [{"type": "STREAM", "account": acc, "stream": name,
                     "error": "JetStream stream '%s > %s' is not current: stream catching up" % (acc, name)},
                    {"type": "STREAM", "account": acc, "stream": name,
                     "error": "JetStream stream '%s > %s' is catching up from %s: copied %d of the "
                              "%d messages its snapshot names (%d%%) in %.1fs; nothing to do, it goes "
                              "on by itself" % (acc, name, source or "its leader", copied, total,
                                                copied * 100 // max(1, total), secs)}]
        if self.group.leader:
            progress = self.group.catching_up()
            if progress is None:
                return []
            applied, target, secs = progress
            leader = self.meta.peer_names.get(self.group.leader, self.group.leader)
            return [{"type": "STREAM", "account": acc, "stream": name,
                     "error": "JetStream stream '%s > %s' is not current: stream catching up" % (acc, name)},
                    {"type": "STREAM", "account": acc, "stream": name,
                     "error": "JetStream stream '%s > %s' is catching up from %s: applied %d of %d "
                              "entries (%d%%) in %.1fs; nothing to do, it goes on by itself"
                              % (acc, name, leader, applied, target, applied * 100 // max(1, target), secs)}]
        out = [{"type": "STREAM", "account": acc, "stream": name,
                "error": "JetStream stream '%s > %s' is not current: group node unhealthy" % (acc, name)}]
        gone = [self.meta.peer_names.get(p, p) for p in self.group.members()
                if p != self.meta.peer and p not in self.meta.connected]
        if gone:
            out.append({"type": "STREAM", "account": acc, "stream": name,
                        "error": "JetStream stream '%s > %s' has no leader: it needs %d of its %d "
                                 "servers and cannot reach %s" % (acc, name, len(self.peers) // 2 + 1,
                                                                  len(self.peers), ", ".join(gone))})
        return out

    def scale_down_answer(self, cfg):
        """The answer to an update to one replica, given at once (natsd/jetstream/replicated/scale.py)."""
        return replscale.scale_down_answer(self, cfg)

    def step_down(self, placement):
        step_down(self.group, self.meta.peer, placement, self.meta.peer_clusters, self.transfer_leadership)

    def transfer_leadership(self, target):
        """Hand the group's leadership to `target` (ValueError, NotLeader: not now); the
        consumers propose their state first (ReplicatedConsumers.hand_on)."""
        self.consumers.hand_on()
        self.group.transfer_leadership(target)

    # ---- what info shows ----

    def cluster_info(self):
        """nats-server's ClusterInfo of the stream's group."""
        return clusterinfo.cluster_info(self.meta, self.group, self.group_name)
