"""A Raft group on a running server: the pure state machine of natsd/raft/node.py driven by
the server's loop, talking over the system account, with its log on disk.

- Transport: every member subscribes to `$NRG.<group>.<peer>` in the system account, so route
  interest carries a message for peer p to the server where p lives. A message is the binary
  encoding of natsd/raft/messages.py (natsd's own; nats-server's Raft traffic is not
  understood, and a mixed group is not a goal). One that does not decode is logged and dropped.
- Time: the node is ticked every TICK seconds (`loop.call_later`) on the monotonic clock.
- Disk: natsd/raft/wal.py's LogStorage under the group's directory. When the node asks
  for a sync it goes to the loop's sync threads (natsd/_core/syncer.pyx; a follower's may run
  at once when the loop is idle); the node learns the durable index when it ends, and only
  then acknowledges or counts those entries.
- Output: after every tick, message and sync the node's outbox is sent, what became ready goes
  to `apply(items)` in one call (items: [(kind, index, data)], see Node.take_ready), a
  change of leader to `on_leader(leader_peer)`, a new leader's having applied everything its
  predecessors committed (its first entry, a NOOP, is applied) to `on_leader_ready()`, and a
  leader's step-down for want of a quorum to `on_quorum_lost()`.

`status()` is the group as nats-server's `/raftz` shows one (RaftzGroup).
"""
import logging
import time

from natsd._core.conn import flush_all, totals
from natsd._core.loop import cancel_timer
from natsd.raft import messages as raftmsg
from natsd.raft.node import LEADER, Node
from natsd.raft.wal import LogStorage
from natsd.gofmt import go_duration, go_time

log = logging.getLogger("natsd")

TICK = 0.05                     # seconds between two ticks of the node
MAX_SYNCS = 2                   # syncs of one group in flight
CATCHUP_REPORT = 1.0            # seconds behind the leader before a follower reports catching up
CATCHUP_LOG_EVERY = 5.0         # seconds between two progress lines in the log
BAD_MESSAGE_REPORTS = 10        # malformed messages logged before the group goes quiet about them
CAUGHT_UP_LAG = 64              # committed entries a member may miss and still count as caught up
_STATE = {"follower": "FOLLOWER", "pre-candidate": "CANDIDATE", "candidate": "CANDIDATE",
          "leader": "LEADER"}


def subject(group, peer):
    return "$NRG.%s.%s" % (group, peer)


class RaftGroup:
    def __init__(self, server, group, peer, directory, *, members=None, apply=None, on_leader=None,
                 on_leader_ready=None, on_quorum_lost=None, election_timeout=(1.5, 3.0), heartbeat=0.3,
                 eager_commit=False):
        """members: the group at its creation, or None for a restarted member (its log knows)
        or one that waits to be added by a leader. eager_commit: the leader tells followers of
        each commit at once rather than with its next append or heartbeat (a group with few
        entries whose followers act on them, as the meta group)."""
        self.server = server
        self.loop = server.loop
        self.group = group
        self.peer = peer
        self.storage = LogStorage(directory, self.loop.call_soon)
        self.node = Node(peer, members, self.storage, now=time.monotonic(),
                         election_timeout=election_timeout, heartbeat=heartbeat, log=log, group=group,
                         eager_commit=eager_commit)
        self.apply = apply
        self.on_leader = on_leader
        self.on_leader_ready = on_leader_ready
        self.ready_at = None                # a new leader: the index of its term's first entry
        self.on_quorum_lost = on_quorum_lost
        self.quorum_losses = 0
        self.leader = ""
        self.leader_since = None            # wall clock (ns) this server became leader
        self.ever_had_leader = False
        self.timer = None
        self.sub = None
        self.stopped = False
        self.bad_messages = 0
        self.behind_since = None            # a follower: since when it has been behind its leader
        self.catchup_logged = 0.0
        self.outside_msgs = 0               # messages from clients and leaf nodes at the last sync

    # ---- lifecycle ----

    def start(self):
        self.sub = self.server.system.subscribe(subject(self.group, self.peer), self._on_message)
        self.timer = self.loop.call_later(TICK, self._tick)

    def stop(self):
        """Leave the group on this server (shutdown): the log is closed, the disk keeps it."""
        if self.stopped:
            return
        self.stopped = True
        self.timer = cancel_timer(self.timer)
        if self.sub is not None:
            self.server.system.unsubscribe(self.sub)
            self.sub = None
        self.storage.close()

    # ---- what the owner asks ----

    def is_leader(self):
        return self.node.role == LEADER

    def propose(self, data):
        """Append a command (raises raft.NotLeader elsewhere than on the leader) -> its index."""
        index = self.node.propose(data, time.monotonic())
        self._flush()
        return index

    def propose_many(self, datas):
        """Append commands in one go (one Append to each follower) -> the index of the last."""
        index = self.node.propose_many(datas, time.monotonic())
        self._flush()
        return index

    def compact(self, index, data, done):
        """A snapshot (`data`, the state machine's after applying `index`) in place of the log
        up to `index`: the file is written and synced on a worker, then the log gives up those
        entries here. done(error or None) on the loop."""
        point = self.node.snapshot_point(index)
        if point is None:
            done(None)
            return
        term, members = point

        def written(ok, exc):
            if exc is None and ok and not self.stopped:
                self.storage.compact_written(index, term, members, data)
            done(exc)
        self.loop.run_in_worker(self.storage.write_snapshot, written, index, term, members, data)

    def admit(self, peer):
        """On the leader, one step of adding `peer`: it gets the log as a learner
        (Node.add_learner) and becomes a member once it has it. -> True when this step made
        it a member."""
        now = time.monotonic()
        if self.caught_up(peer):
            self.node.add_member(peer, now)
        else:
            self.node.add_learner(peer, now)
        self._flush()
        return peer in self.node.members

    def remove_member(self, peer):
        self.node.remove_member(peer, time.monotonic())
        self._flush()

    def observe(self, peers, within):
        """On the leader: replicate to `peers` too, without counting them and without ever
        making them members (observers: they apply what the group commits; a leader elected
        later is told again). Learners outside `within` (gone elsewhere) are dropped."""
        self.node.observe(peers, within, time.monotonic())
        self._flush()

    def transfer_leadership(self, target):
        self.node.transfer_leadership(target, time.monotonic())
        self._flush()

    def members(self):
        return tuple(self.node.members)

    def last_heard(self, peer):
        """Seconds since this server heard from `peer` (leader: any member; follower: its
        leader), or None when it never did."""
        n = self.node
        now = time.monotonic()
        if n.role == LEADER:
            t = n.last_heard.get(peer)
        else:
            t = n.heard_leader_at if peer == n.leader else None
        if t is None or t < -1e17:
            return None
        return max(0.0, now - t)

    def match(self, peer):
        """The leader's view of how far `peer`'s log is known to match (0 elsewhere)."""
        return self.node.match_index.get(peer, 0) if self.node.role == LEADER else 0

    def caught_up(self, peer):
        """On the leader: has `peer` the latest change of members (so everything before it) and
        the entries committed since, but for the last CAUGHT_UP_LAG, which a busy group commits
        while the answer travels?"""
        n = self.node
        if peer == self.peer:
            return True
        return n.role == LEADER and n.match_index.get(peer, 0) >= max(n.config_index, n.commit - CAUGHT_UP_LAG)

    # ---- the loop's side ----

    def _tick(self):
        if self.stopped:
            return
        self.timer = self.loop.call_later(TICK, self._tick)
        self.node.tick(time.monotonic())
        self._flush()

    def _on_message(self, sub, subj, reply, hdr, payload, origin):
        if self.stopped:
            return
        try:
            msg = raftmsg.decode(bytes(payload))
        except raftmsg.MalformedMessage as e:
            self.bad_messages += 1
            if self.bad_messages <= BAD_MESSAGE_REPORTS:
                log.warning("Raft group %s: dropped a malformed message on %s: %s", self.group, subj, e)
            return
        self.node.step(msg, time.monotonic())
        self._flush()

    def _may_sync_inline(self):
        # A leader's sync goes to a thread: run inline it would hold back the Append just
        # queued for the followers, whose syncs must run alongside it. A follower acknowledges
        # only after its sync anyway, so it may run it at once when the loop is idle, unless
        # clients or leaf nodes published here since its last sync: their next messages and
        # their PubAcks would wait out the whole sync (R3 KV put from 16 connections to a
        # follower: 9,950 puts/s inline, 12,080 on the threads).
        outside = totals.in_msgs - totals.route_in_msgs
        quiet = outside == self.outside_msgs
        self.outside_msgs = outside
        return self.node.role != LEADER and quiet

    def _synced(self, index):
        if self.stopped:
            return
        self.node.durable(index)
        self._flush()

    def _flush(self):
        n = self.node
        out, n.outbox = n.outbox, []
        system = self.server.system
        blobs = {} if len(out) > 1 else None
        for dst, msg in out:
            system.publish(subject(self.group, dst), raftmsg.encode(msg, blobs))
        if out:
            # on the wire now, not when the iteration ends: a leader's Appends before its own
            # write and sync, a follower's answer before it applies what was committed
            flush_all()
        st = self.storage
        if st.sync_requested and len(st.syncs_in_flight()) < MAX_SYNCS:
            st.sync_async(self.loop, self._synced, self._may_sync_inline())
        ready = n.take_ready()
        if ready and self.apply is not None:
            self.apply(ready)
        if n.leader != self.leader:
            self.leader = n.leader
            if n.leader:
                self.ever_had_leader = True
            self.leader_since = time.time_ns() if n.leader == self.peer else None
            # the leader's NOOP is the last entry when it is elected
            self.ready_at = self.storage.last_index() if n.leader == self.peer else None
            if self.on_leader is not None:
                self.on_leader(n.leader)
        self._watch_catchup(n)
        if self.ready_at is not None and n.applied >= self.ready_at and n.role == LEADER:
            self.ready_at = None
            if self.on_leader_ready is not None:
                self.on_leader_ready()
        if n.quorum_losses != self.quorum_losses:
            self.quorum_losses = n.quorum_losses
            if self.on_quorum_lost is not None:
                self.on_quorum_lost()

    # ---- catching up ----

    def _watch_catchup(self, n):
        behind = n.role != LEADER and n.leader and n.applied < n.leader_commit
        if not behind:
            if self.behind_since is not None and self.catchup_logged:
                log.info("Raft group %s caught up with its leader at entry %d", self.group, n.applied)
            self.behind_since, self.catchup_logged = None, 0.0
            return
        now = time.monotonic()
        if self.behind_since is None:
            self.behind_since = now
        elif now - self.behind_since >= CATCHUP_REPORT and now - self.catchup_logged >= CATCHUP_LOG_EVERY:
            self.catchup_logged = now
            applied, target, _ = self.catching_up()
            log.info("Raft group %s is catching up with its leader: applied %d of %d entries (%d%%)",
                     self.group, applied, target, applied * 100 // max(1, target))

    def catching_up(self):
        """(applied, the leader's commit, seconds behind) for a follower that has been behind
        its leader for CATCHUP_REPORT seconds or more, else None."""
        n = self.node
        if self.behind_since is None or n.applied >= n.leader_commit:
            return None
        behind = time.monotonic() - self.behind_since
        return (n.applied, n.leader_commit, behind) if behind >= CATCHUP_REPORT else None

    # ---- monitoring ----

    def status(self, names):
        """nats-server's RaftzGroup; names: peer id -> server name."""
        n = self.node
        lg = self.storage.log
        size = len(n.members)
        last = self.storage.last_index()
        out = {"id": self.peer, "state": _STATE[n.role], "size": size,
               "quorum_needed": size // 2 + 1, "committed": n.commit, "applied": n.applied}
        if n.leader:
            out["leader"] = n.leader
        if self.leader_since is not None and n.role == LEADER:
            out["leader_since"] = go_time(self.leader_since)
        out["ever_had_leader"] = self.ever_had_leader
        out["term"] = n.term
        if n.vote:
            out["voted_for"] = n.vote
        out.update({"pterm": self.storage.term_at(last) or 0, "pindex": last,
                    "system_account": True, "traffic_account": self.server.accounts.system.name,
                    "ipq_proposal_len": 0, "ipq_entry_len": 0, "ipq_resp_len": 0,
                    "ipq_apply_len": 0})
        st = self.storage
        out["wal"] = {"messages": lg.msgs, "bytes": lg.bytes, "first_seq": lg.first,
                      "first_ts": go_time(st.appended_at(lg.first) if lg.msgs else 0),
                      "last_seq": lg.last,
                      "last_ts": go_time(st.appended_at(lg.last) if lg.msgs else 0),
                      "consumer_count": 0}
        peers = {}
        for p in sorted(n.members):
            if p == self.peer:
                continue
            e = {"name": names.get(p, ""), "known": True}
            if self.match(p):
                e["last_replicated_index"] = self.match(p)
            seen = self.last_heard(p)
            if seen is not None:
                e["last_seen"] = go_duration(int(seen * 1e9))
            peers[p] = e
        out["peers"] = peers
        return out
