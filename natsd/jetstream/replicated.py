"""Replicated streams (`num_replicas` > 1 on a cluster): one Raft group per stream, its members
the servers the meta group assigned (natsd/jetstream/meta.py).

- Every replica keeps a local copy of the stream, an ordinary Stream (natsd/jetstream/stream.py)
  whose store lives in the group's directory, `<store_dir>/jetstream/$SYS/_js_/<group>/msgs`.
- Only the group's leader subscribes to the stream's subjects and claims its API requests
  (natsd/jetstream/placement.py). A message it receives becomes a Raft entry (subject, headers,
  payload, the leader's time); nothing is stored yet.
- Once the entry is committed, on the disks of a quorum, every replica applies it through
  Stream.process, in log order, so all copies take the same checks and sequence numbers. The
  leader then answers the publisher with what its own apply gave: the PubAck or the error.
  Acknowledged therefore means committed on a quorum of fdatasynced logs.
- Purge, message delete and configuration updates are entries too (natsd/jetstream/streamops.py
  runs them on every replica at apply); the leader answers the request.
- The group's log is the stream's durable record: the local copy is rebuilt from it when the
  server starts (the log is replayed as the group learns what is committed), so the copy is
  never its own source of truth.

- Consumers with more than one replica ride in the same group (natsd/jetstream/replconsumers.py):
  they run on the leader, and their state is committed as the stream's entries are.

Not there yet: the log is never compacted (a restart replays the whole stream).
"""
import json
import logging
import os
import shutil
import struct
import time

from natsd._core.router import publish
from natsd.cluster.raft import NotLeader
from natsd.cluster.raftgroup import RaftGroup
from natsd.jetstream import advisories, errors as E, streamops
from natsd.jetstream.clusterinfo import peer_infos, step_down
from natsd.jetstream.replconsumers import OPS as CONSUMER_OPS, ReplicatedConsumers

log = logging.getLogger("natsd")

_MSG = struct.Struct("<BqII")           # kind, leader time (ns), len(subject), len(headers) + 1 (0: None)
K_MSG = 1                               # a published message
K_OP = 2                                # a stream operation: JSON {"op", "req"}
K_SRC = 3                               # a message a mirror or source copied (origin seq or 0)
_SRC_SEQ = struct.Struct("<Q")
MAX_DEFERRED = 1024                     # API requests a new leader holds until it is ready
RECONCILE = 0.25                        # seconds between two steps of a change of members


def encode_msg(subject, hdr, payload, ts):
    h = b"" if hdr is None else bytes(hdr)
    return b"".join((_MSG.pack(K_MSG, ts, len(subject), len(h) + 1 if hdr is not None else 0),
                     bytes(subject), h, bytes(payload)))


def encode_sourced(subject, hdr, payload, seq, ts):
    """A copied message: the K_MSG layout with the origin's sequence (0 for a source) after
    the fixed part; `ts` is the origin's time for a mirror, the leader's for a source."""
    h = b"" if hdr is None else bytes(hdr)
    return b"".join((_MSG.pack(K_SRC, ts, len(subject), len(h) + 1 if hdr is not None else 0),
                     _SRC_SEQ.pack(seq), bytes(subject), h, bytes(payload)))


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
    subject = bytes(data[off:off + slen])
    off += slen
    hdr = None
    if hl:
        hdr = bytes(data[off:off + hl - 1])
        off += hl - 1
    return subject, hdr, bytes(data[off:]), ts, seq


class ReplicatedStream:
    def __init__(self, meta, jsa, assignment, fresh=False, joining=False):
        """fresh: the assignment was just made (not replayed at a start): its first server
        stands for election at once. joining: this server was added to the stream's servers;
        the group's leader adds it and sends it the log."""
        self.meta = meta
        self.jsa = jsa
        self.engine = meta.engine
        self.server = meta.server
        self.group_name = assignment["group"]
        self.peers = tuple(assignment["peers"])
        self.dir = os.path.join(meta.js_dir, self.group_name)
        self.local_dir = os.path.join(self.dir, "copy")
        self.pending = {}               # leader: raft index -> reply subject of the publisher
        self.deferred = []              # a new leader: API requests held until it is ready
        self.reconcile_timer = None     # leader: members being brought in line with self.peers
        self.leaving = None             # moved off this server: called once it can go
        self.leader_peer = ""
        shutil.rmtree(self.local_dir, ignore_errors=True)   # rebuilt from the group's log
        os.makedirs(self.local_dir, exist_ok=True)
        self.creator = (assignment["acc"], assignment["reply"]) if fresh and assignment.get("reply") else None
        self.consumers = ReplicatedConsumers(self)
        self.group = RaftGroup(self.server, self.group_name, meta.peer, os.path.join(self.dir, "raft"),
                               members=None if joining else self.peers, apply=self._apply,
                               on_leader=self._leader_changed,
                               on_leader_ready=self._leader_ready,
                               on_quorum_lost=self._quorum_lost)
        self.stream = jsa.add_stream(dict(assignment["cfg"]), assignment["created"], replica=self)
        if self.peers[0] == meta.peer and fresh:
            self.group.node.campaign_soon(time.monotonic())
        self.group.start()

    def is_leader(self):
        return self.group.is_leader()

    def stop(self, delete=False):
        if self.reconcile_timer is not None:
            self.reconcile_timer.cancel()
            self.reconcile_timer = None
        self.consumers.stop_all()
        self.group.stop()
        if delete:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- the leader takes messages ----

    def on_publish(self, sub, msgs):
        """The messages the loop read for the stream in one iteration (a batched
        subscription): one proposal for all of them."""
        if self.stream.closed or not msgs:
            return
        now = time.time_ns()
        try:
            last = self.group.propose_many([encode_msg(subject, hdr, payload, now)
                                            for subject, reply, hdr, payload, origin in msgs])
        except NotLeader:
            return                      # leadership just moved: the publishers retry
        index = last - len(msgs)
        pending = self.pending
        for subject, reply, hdr, payload, origin in msgs:
            index += 1
            if reply:
                pending[index] = bytes(reply)

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
            self.pending[index] = reply.encode() if isinstance(reply, str) else bytes(reply)
        return index

    # ---- every replica applies ----

    def _apply(self, items):
        """Committed entries, in log order: runs of messages go through the stream's batched
        ingest (Stream._on_batch, the path one-replica streams take), operations one by one.
        Only the leader has the publishers' replies, so only it answers."""
        pending = self.pending
        run, run_ts = [], None
        for kind, index, data in items:
            if kind != "entry" or not data:
                continue
            reply = pending.pop(index, None) if pending else None
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
            result = fn(self.stream, req) if fn is not None else self.consumers.apply(op, req, index)
        except E.ApiError as err:
            result = err
        except (KeyError, TypeError, ValueError) as e:
            log.error("Replicated stream '%s > %s': operation %d (%s) failed: %s", self.jsa.name,
                      self.stream.name, index, op, e)
            return
        if reply and result is not None:
            publish(self.jsa.sublist, reply, None, None, E.api_response(rtype, result))

    def _leader_changed(self, leader):
        self.leader_peer = leader
        me = leader == self.meta.peer
        if not me:
            self.pending.clear()        # their entries may still commit; the publishers retry
            self.consumers.stop_all()
            self.stream.stop_sourcing()
            self.deferred = []
        self.jsa.claim(self.stream.name, me)
        self.stream.resubscribe()
        if me:
            self._advise("LEADER_ELECTED", "io.nats.jetstream.advisory.v1.stream_leader_elected",
                         leader=self.meta.name)
        if me and self.creator:
            # as nats-server, the stream's first leader answers the create request
            info = self.stream.info()
            info["did_create"] = True
            publish(self.jsa.sublist, self.creator[1].encode(), None, None,
                    E.api_response("stream_create_response", info))
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
        self.consumers.start_all()
        if self.stream.sourcing is None:
            self.stream._start_sourcing()
        self._reconcile()
        held, self.deferred = self.deferred, []
        for fn, args in held:
            fn(*args)

    # ---- a change of servers (natsd/jetstream/remap.py) ----

    def reassign(self, entry, reply, answer=None):
        """The meta group gave the stream other servers: the leader changes the group's
        members to match, one at a time (_reconcile); it answers the update (or the cancel:
        `answer` is its response type)."""
        self.peers = tuple(entry["peers"])
        if entry["cfg"] != self.stream.config:
            self.stream.update_config(dict(entry["cfg"]))
        if reply and self.is_leader():
            publish(self.jsa.sublist, reply.encode(), None, None,
                    E.api_response(answer or "stream_update_response", self.stream.info()))
        self._reconcile()

    def _reconcile(self):
        """One step towards the assigned members, on the leader. Members that are gone (no
        route) are removed first, so the group never counts on them for its quorum; then new
        ones are added, to at most one more than the assignment has; a member still reachable
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
            if self.meta.reconfiguring(key) is None:
                return
            self.meta.settle(key, self.peers)       # again each step until the meta group has it
        else:
            gone = sorted(members - target - {me})
            new = sorted(target - members)
            dead = [p for p in gone if p not in self.meta.connected]
            caught_up = all(g.caught_up(p) for p in members & target)
            try:
                if dead:
                    g.remove_member(dead[0])
                elif new and (len(members) <= len(target) or not gone):
                    g.add_member(new[0])
                elif gone and caught_up:
                    g.remove_member(gone[0])
                elif not gone and not new and caught_up:
                    heirs = [p for p in self.peers if p in self.meta.connected]
                    if heirs:
                        g.transfer_leadership(heirs[0])     # this server is the last to go
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
                    self.group.transfer_leadership(heirs[0])
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

    def _advise(self, what, type_name, **fields):
        """A stream advisory as nats-server sends it: in the stream's account, and in the
        system account with the account named."""
        subject = "$JS.EVENT.ADVISORY.STREAM.%s.%s" % (what, self.stream.name)
        meta = self.meta

        def replicas():
            return peer_infos(self.group, meta.peer, meta.peer_names, meta.connected, everyone=True)
        domain = self.engine.domain or ""
        if self.jsa.account is not self.server.accounts.system:
            advisories.send(self.jsa.sublist, subject, type_name, domain, stream=self.stream.name,
                            **fields, replicas=replicas)
        advisories.send(self.server.accounts.system.sublist, subject, type_name, domain,
                        account=self.jsa.name, stream=self.stream.name, **fields, replicas=replicas)

    def health_errors(self):
        """nats-server's healthz error for a replica whose group has no leader, then (beyond
        nats-server) which of its servers are unreachable from here; for a replica catching up,
        nats-server's error and (beyond it) how far it is."""
        acc, name = self.jsa.name, self.stream.name
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

    def step_down(self, placement):
        step_down(self.group, self.meta.peer, placement, self.meta.peer_clusters)

    # ---- what info shows ----

    def cluster_info(self):
        """nats-server's ClusterInfo of the stream's group."""
        g = self.group
        names = self.meta.peer_names
        out = {"name": self.meta.routes.name, "raft_group": self.group_name}
        if g.leader:
            out["leader"] = names.get(g.leader, g.leader)
        replicas = peer_infos(g, self.meta.peer, names, self.meta.connected)
        if replicas:
            out["replicas"] = replicas
        return out
