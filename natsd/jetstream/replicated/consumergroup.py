"""A replicated consumer's own Raft group, as nats-server gives each one (`C-R<n>F-<id>`).

Which consumers: those natsd/jetstream/replicated/consumers.py's `ReplicatedConsumers.wants_group`
picks (more than one replica as nats-server counts them, `replica_count`); the one-replica
ones ride in their stream's group. The stream's group still carries the consumer's
assignment (its `consumer_create` entry names the group and its first servers) and its
deletion, so every replica of the stream knows it; its delivered and ack state and its
waiting pull requests ride in its own group.

- Members: as many of the stream's servers as the consumer counts replicas (`voters`): all
  of them for `num_replicas` 0 (it follows the stream's count), some for a smaller count,
  which it keeps when the stream scales up. A `num_replicas` update changes the members
  (`update_row`), or gives the consumer a group or takes it back into the stream's
  (ReplicatedConsumers.propose_create; `dissolve`). The stream's other servers observe the group:
  its leader replicates to them without counting them (RaftGroup.observe), so they apply
  its entries and the stream's leader, wherever it is, knows the consumer's state (lists,
  retention); `/raftz` lists the group on its members only, as nats-server's does. Such
  a consumer is on a limits stream only: on workqueue and interest streams
  nats-server refuses a count other than the stream's.

- On each of the consumer's servers a ConsumerGroup holds that group: a RaftGroup under
  `<stream group>/consumers/<group>/raft`, and a ReplicatedConsumers of one row, which stands
  to it as the stream's ReplicatedConsumers stands to the stream's group. Everything that
  module does for a consumer (state entries, AckSync answers after commit, waiting requests
  and `409 Leadership Change`, the hand-off of acks to the next leader through
  natsd/jetstream/replicated/forward.py) works here unchanged; only the group is another.
- The consumer runs on its group's leader, which may be any replica of the stream: it reads
  that server's copy, which the stream's group keeps applying (Stream.process wakes it).
  Its leader claims the API subjects that name it (natsd/jetstream/replicated/placement.py), so INFO,
  NEXT, PAUSE, UNPIN, RESET and its LEADER.STEPDOWN reach it; creation, update and deletion
  stay with the stream's leader, which proposes them in the stream's group.
- Workqueue and interest retention: an ack removes nothing where the consumer runs. The
  stream's leader is a member of every consumer group of its stream, so it applies each
  committed state too; it then removes what that state has acked (workqueue) or what no
  consumer needs any more (interest: `needs` of each consumer's committed view) and proposes
  the removals in the stream's group, as it does for the consumers that ride there
  (ReplicatedConsumers.hosted_acked). A message leaves the stream only once its ack is
  committed, and every copy of the stream drops it at the same place in the stream's log.
- The group's log is compacted to a snapshot of the row every COMPACT_ENTRIES entries.

- A scale or move of the stream changes the stream's servers; the consumer group's leader
  then brings its members in line with them, one step at a time (`reconcile`). A server the
  stream moved to learns of the consumer from the stream's log or snapshot and waits to be
  added or observe; one it left stops the group and deletes its directory with the
  stream's copy. A server whose copy of the stream is incomplete does not stand for election
  (ReplicatedStream.set_electable).
"""
import json
import logging
import os
import shutil
import time

from natsd._core.loop import cancel_timer
from natsd._core.router import publish
from natsd.raft.node import LEADER, NotLeader
from natsd.raft.group import RaftGroup
from natsd.jetstream.replicated import clusterinfo, forward as replforward
from natsd.jetstream.engine import consumerconfig as cc, errors as E
from natsd.jetstream.engine.consumer import Consumer
from natsd.jetstream.replicated.clusterinfo import step_down
from natsd.jetstream.replicated.consumers import ReplicatedConsumers, replica_count
from natsd.jetstream.replicated.placement import CONSUMER_LED, Claim

log = logging.getLogger("natsd")

K_OP = 2                        # the stream group's operation kind, kept for the same decoding
COMPACT_ENTRIES = 4096          # applied entries between two snapshots of the row
FIRST_CAMPAIGN_EVERY = 0.1
FIRST_CAMPAIGN_TRIES = 20
RECONCILE = 0.25                # seconds between two steps of a change of members
CREATE_ANSWER_WAIT = 2.0        # seconds a create waits for the group's leader to answer it
NEEDS_ALL = {"delivered": {"consumer_seq": 0, "stream_seq": 0},     # a state from before the
             "ack_floor": {"consumer_seq": 0, "stream_seq": 0}}     # first message


def claimed_subjects(stream, consumer):
    """The API subjects a consumer's leader answers (placement.CONSUMER_LED)."""
    return ["$JS.API.%s.%s.%s" % (op, stream, consumer) for op in sorted(CONSUMER_LED)]


class ConsumerGroup:
    def __init__(self, rs, name, row, fresh=False):
        """rs: the stream's ReplicatedStream; row: the consumer's row in the stream's table
        (created, config, group, peers); fresh: the assignment was just committed (not
        replayed at a start): the first of its servers stands for election at once."""
        self.rs = rs
        self.meta = rs.meta
        self.jsa = rs.jsa
        self.server = rs.server
        self.name = name
        self.group_name = row["group"]
        self.peers = tuple(row["peers"])
        self.dir = os.path.join(rs.dir, "consumers", self.group_name)
        self.deferred = []              # requests held until this leader is ready
        self.claim = None
        self.leader_peer = ""
        self.creator = None             # the reply of the create request this server answers
        self.applied_entries = 0
        self.compacting = False
        self.committed = None           # Consumer.view of the last committed state (retention)
        self.swept = 0                  # the stream's leader: retention looked at all up to here
        self.consumers = ReplicatedConsumers(self)
        # a group given to a consumer that rode in the stream's group (a scale up) starts
        # from the state that group committed last
        self.consumers.rows[name] = {"created": row["created"], "config": row["config"],
                                     "state": row.get("state")}
        self.reconcile_timer = None
        raft_dir = os.path.join(self.dir, "raft")
        known = os.path.isdir(raft_dir)
        # a server that was not among the first ones waits for the leader to add it
        first = not known and self.meta.peer in self.peers
        self.group = RaftGroup(self.server, self.group_name, self.meta.peer, raft_dir,
                               members=self.peers if first else None, apply=self._apply,
                               on_leader=self._leader_changed, on_leader_ready=self._leader_ready,
                               on_quorum_lost=self._quorum_lost)
        # a server whose copy of the stream is incomplete must not run the consumer
        self.group.node.electable = rs.group.node.electable
        self._restore(self.group.storage.snapshot_meta()[0], self.group.storage.snapshot_data)
        self.forwarder = replforward.Forwarder(self)
        self.group.start()
        if fresh and not known and rs.is_leader():
            self._first_campaign(FIRST_CAMPAIGN_TRIES)

    # ---- what ReplicatedConsumers and replforward ask of their host ----

    @property
    def stream(self):
        return self.rs.stream

    def is_leader(self):
        return self.group.is_leader()

    def propose_op(self, op, req, reply):
        """A consumer_state entry in this group; creation and deletion belong to the stream's.
        This leader's own deletion (inactivity) on a server that does not lead the stream is
        asked of the stream's leader with the API's request."""
        if op == "consumer_delete" and not reply and not self.rs.is_leader():
            subject = "$JS.API.CONSUMER.DELETE.%s.%s" % (self.stream.name, self.name)
            publish(self.jsa.sublist, subject.encode(), None, None, b"")
            return None
        if op != "consumer_state":
            return self.rs.propose_op(op, req, reply)
        try:
            return self.group.propose(bytes([K_OP]) + json.dumps({"op": op, "req": req}).encode())
        except NotLeader:
            return None

    def own_entry(self, index, term):
        node = self.group.node
        return (term == node.term and node.role == LEADER) or node.store.term_at(index) == term

    def defer_until_ready(self, fn, *args):
        if not self.is_leader() or self.consumers.live:
            return False
        if len(self.deferred) < 1024:
            self.deferred.append((fn, tuple(bytes(a) if isinstance(a, memoryview) else a for a in args)))
        return True

    def advise_consumer_leader(self, name):
        self.rs._advise("LEADER_ELECTED", "io.nats.jetstream.advisory.v1.consumer_leader_elected",
                        consumer=name, group=self.group, leader=self.meta.name)

    def on_publish(self, sub, msgs, taker=None):
        """The forwarder's publishes: a consumer group holds none."""

    def ack_filter(self):
        return "$JS.ACK.%s.%s.>" % (self.stream.name, self.name)

    def resubscribe(self):
        """The forwarder's grace is over: nothing of the stream's to subscribe here."""

    # ---- the stream's table tells it ----

    def update_row(self, row):
        """A committed update of the consumer's configuration (the stream's group)."""
        mine = self.consumers.rows.get(self.name)
        if mine is not None:
            self.consumers._apply_create({"name": self.name, "created": row["created"],
                                          "config": row["config"], "action": "update"})
            self.committed = None
            self.reconcile()            # its num_replicas may have changed

    def answer_create(self, reply):
        """This server proposed the consumer's creation: it answers once the consumer runs
        (here, as its group's first leader, most often), or with the committed row."""
        self.creator = reply
        if self.consumers.live:
            self._answer_creator()
        else:
            self.server.loop.call_later(CREATE_ANSWER_WAIT, self._answer_creator)

    def _answer_creator(self):
        if self.creator is None:
            return
        reply, self.creator = self.creator, None
        o = self.running()
        if o is not None:
            info = o.info(initial=True)
        else:
            info = self.view().info(initial=True)
        publish(self.jsa.sublist, reply, None, None, E.api_response("consumer_create_response", info))

    def view(self):
        """The consumer as its last committed state has it (its info's cluster block: this
        group's)."""
        v = self.consumers.views()[0]
        v.replica = self.consumers
        return v

    def row(self):
        return self.consumers.rows.get(self.name)

    def committed_view(self):
        """The consumer as its last committed state has it, for retention's `needs` (kept
        until the next state is applied). Before any state is known here (a new consumer whose
        leader has not yet committed its starting position, or a server whose group has not
        applied its log again since it started), the consumer needs every message."""
        if self.committed is None:
            row = self.consumers.rows[self.name]
            self.committed = Consumer.view(self.stream, self.name, cc.decode_config(row["config"]),
                                           row["created"], row["state"] or NEEDS_ALL, count_pending=False)
        return self.committed

    def _state_committed(self):
        self.committed = None
        self.rs.consumers.hosted_acked(self)

    # ---- the group ----

    def _first_campaign(self, tries):
        if self.group.stopped or self.group.leader or not tries:
            return
        self.group.node.campaign_soon(time.monotonic())
        self.server.loop.call_later(FIRST_CAMPAIGN_EVERY, self._first_campaign, tries - 1)

    def _apply(self, items):
        for kind, index, data in items:
            if kind == "snapshot":
                self.consumers.forget_through(index)
                self._restore(index, lambda: data)
                continue
            if kind != "entry" or not data or data[0] != K_OP:
                continue
            try:
                body = json.loads(bytes(data[1:]))
                op, req = body["op"], body["req"]
            except (ValueError, KeyError, TypeError) as e:
                log.error("JetStream consumer '%s > %s > %s': entry %d does not decode: %s",
                          self.jsa.name, self.stream.name, self.name, index, e)
                continue
            if op == "consumer_state":
                self.consumers._apply_state(req, index)
                self.applied_entries += 1
                self._state_committed()
        self._maybe_compact()

    def _restore(self, index, data):
        if not index:
            return
        try:
            snap = json.loads(bytes(data()))
            row = snap["row"]
        except (ValueError, KeyError, TypeError) as e:
            log.error("JetStream consumer group %s: the snapshot at entry %d cannot be read: %s",
                      self.group_name, index, e)
            return
        mine = self.consumers.rows[self.name]
        mine["state"] = row.get("state")
        if row.get("config"):
            mine["config"] = row["config"]
        self.consumers.pulls = {self.name: set(snap.get("pulls") or ())}
        if self.rs.consumers.hosts.get(self.name) is self:     # not while it starts
            self._state_committed()

    def _maybe_compact(self):
        if self.compacting or self.applied_entries < COMPACT_ENTRIES or self.group.stopped:
            return
        self.compacting = True
        self.applied_entries = 0
        row = self.consumers.rows.get(self.name)
        data = json.dumps({"row": row, "pulls": sorted(self.consumers.pulls.get(self.name, ()))}).encode()

        def done(exc):
            self.compacting = False
            if exc is not None:
                log.error("JetStream consumer group %s could not take a snapshot: %s", self.group_name, exc)
        self.group.compact(self.group.node.applied, data, done)

    def _leader_changed(self, leader):
        me = leader == self.meta.peer
        was = self.leader_peer == self.meta.peer
        self.leader_peer = leader
        self.rs.consumers.host_leaders_changed()
        if not me:
            if was:
                self.forwarder.stepped_down()
            self.forwarder.hold_acks(self.consumers.stop_all())
            self.deferred = []
            if self.claim is not None:
                self.claim.release()
                self.claim = None
        else:
            self.forwarder.leading()
            if self.claim is None:
                self.claim = Claim(self.jsa.sublist, claimed_subjects(self.stream.name, self.name))

    def voters(self):
        """The servers that are to be the group's members: as many of the stream's servers
        as the consumer counts replicas (all of them, for `num_replicas` 0), the members
        that are among them first (this one, the leader, first of all), then those this
        server reaches."""
        peers = self.rs.peers
        count = min(replica_count(self.config(), self.stream, len(peers)), len(peers))
        members = set(self.group.members())
        me = self.meta.peer
        ranked = sorted(peers, key=lambda p: (p not in members, p != me, p not in self.meta.connected, p))
        return set(ranked[:count])

    def config(self):
        return cc.decode_config(self.consumers.rows[self.name]["config"])

    def reconcile(self):
        """On the leader, one step towards the servers that are to be members (`voters`; a
        scale or a move of the stream): unreachable members that left go first, then new
        servers come in (as learners until they have the log), then the rest that left; a
        leader that left hands over last. The stream's other servers observe: they get the
        log and apply it, without a vote (a consumer with fewer replicas than its stream)."""
        if self.reconcile_timer is not None:
            self.reconcile_timer.cancel()
        self.reconcile_timer = None
        if self.group.stopped or not self.is_leader():
            return
        g, me = self.group, self.meta.peer
        members, target = set(g.members()), self.voters()
        try:
            g.observe(set(self.rs.peers) - target, self.rs.peers)
            if members == target:
                return
            gone, new = sorted(members - target - {me}), sorted(target - members)
            dead = [p for p in gone if p not in self.meta.connected]
            if dead:
                g.remove_member(dead[0])
            elif new:
                g.admit(new[0])
            elif gone and all(g.caught_up(p) for p in members & target):
                g.remove_member(gone[0])
            elif not gone and me not in target:
                heirs = [p for p in sorted(target) if p in self.meta.connected]
                if heirs:
                    self.transfer_leadership(heirs[0])
        except (ValueError, NotLeader):
            pass                        # a change is in flight: the next step
        self.reconcile_timer = self.server.loop.call_later(RECONCILE, self.reconcile)

    def _leader_ready(self):
        first = self.consumers.rows[self.name]["state"] is None     # no leader ran it before
        self.consumers.start_all()
        self.reconcile()
        o = self.running()
        if first and o is not None:
            o.advisory("CREATED", "io.nats.jetstream.advisory.v1.consumer_action", action="create")
            self.consumers.changed(o)   # its starting position, chosen now, is replicated
        self._answer_creator()
        held, self.deferred = self.deferred, []
        for fn, args in held:
            fn(*args)

    def _quorum_lost(self):
        log.warning("JetStream consumer '%s > %s > %s' lost quorum", self.jsa.name, self.stream.name, self.name)
        self.rs._advise("QUORUM_LOST", "io.nats.jetstream.advisory.v1.consumer_quorum_lost",
                        consumer=self.name, group=self.group)

    def health_errors(self):
        """nats-server's healthz error for a replica of a consumer whose group has no leader,
        then (beyond nats-server) which of its servers are unreachable from here."""
        if self.group.leader or self.meta.peer not in self.group.members():
            return []                   # led, or observed here
        acc, st, name = self.jsa.name, self.stream.name, self.name
        where = {"type": "CONSUMER", "account": acc, "stream": st, "consumer": name}
        out = [dict(where, error="JetStream consumer '%s > %s > %s' is not current: group node unhealthy"
                    % (acc, st, name))]
        members = self.group.members()
        gone = [self.meta.peer_names.get(p, p) for p in members
                if p != self.meta.peer and p not in self.meta.connected]
        if gone:
            out.append(dict(where, error="JetStream consumer '%s > %s > %s' has no leader: it needs %d of "
                            "its %d servers and cannot reach %s" % (acc, st, name, len(members) // 2 + 1,
                                                                    len(members), ", ".join(gone))))
        return out

    # ---- operations ----

    def step_down(self, placement):
        step_down(self.group, self.meta.peer, placement, self.meta.peer_clusters, self.transfer_leadership)

    def transfer_leadership(self, target):
        self.consumers.hand_on()
        self.group.transfer_leadership(target)

    def running(self):
        """The consumer, when it runs here (this server leads its group), else None."""
        o = self.stream.consumers.get(self.name)
        return o if o is not None and o.replica is self.consumers else None

    def stop(self, delete=False):
        """Stop the group here; `delete`: the consumer is deleted (its leader tells so)."""
        if self.claim is not None:
            self.claim.release()
            self.claim = None
        self.reconcile_timer = cancel_timer(self.reconcile_timer)
        self.forwarder.stop()
        if delete:
            self.consumers._apply_delete(self.name)     # its leader deletes it: the advisory
        self.consumers.stop_all()
        self.group.stop()
        if delete:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dissolve(self):
        """The consumer goes back to its stream's group (scaled down to one replica): the
        group stops here and its directory goes, the consumer lives on."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cluster_info(self):
        """nats-server's ClusterInfo of the consumer's group."""
        return clusterinfo.cluster_info(self.meta, self.group, self.group_name)
