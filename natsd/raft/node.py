"""Raft as a pure state machine: one member of one group, with no clock, socket or disk of its own.

The driver owns those. It calls `tick(now)` on a timer and `step(msg, now)` for every message,
then sends what `outbox` holds (`(destination, message)` pairs, natsd/raft/messages.py), runs
the syncs the storage asked for (natsd/raft/storage.py) and reports their end with
`durable(index)`, and hands the state machine what `take_ready()` returns. So a test can run a
whole group in one thread with a seeded clock and network and replay any schedule exactly.

What it implements (Ongaro's dissertation, with natsd's choices):

- Elections with randomised timeouts, preceded by a pre-vote so that a server cut off by a
  partition does not depose a working leader when it comes back; voters that heard a leader
  within the minimum timeout refuse (unless the candidate was asked to take over).
- A leader steps down when it has not heard from a quorum within an election timeout (check
  quorum), so that a leader on the minority side of a partition stops accepting writes.
- Replication with pipelined appends; a follower answers an append only once the entries are
  durable, and a leader counts its own copy only once it is durable, so a committed entry is on
  the disks of a quorum. Entries are applied once committed and locally durable.
- A new leader's NOOP commits what earlier terms left; conflicting uncommitted suffixes are
  truncated; a lagging follower past the compacted prefix gets the snapshot.
- Membership changes one server at a time (a CONFIG entry takes effect when appended); a leader
  that removed itself steps down once the change commits. A server to be added is first a
  learner: the leader replicates to it without counting it, and it joins once it has the log.
  A server votes once it holds a log, even before it hears that it was added.
- Leader transfer: proposals pause, the target is brought up to date and told to campaign now;
  a leader whose target has not taken over within the election timeout steps down all the
  same (as nats-server's StepDown always ends the leadership), and an election follows.
- A node whose state machine is still incomplete (it is copying what a snapshot names from
  another member) is made not `electable`: it votes and acknowledges, but does not campaign.
"""
import random

from natsd.raft.messages import (
    Append, AppendResponse, CONFIG, Entry, NOOP, NORMAL, Snapshot, SnapshotResponse, TimeoutNow,
    VoteRequest, VoteResponse, decode_members, encode_members)

FOLLOWER, PRE_CANDIDATE, CANDIDATE, LEADER = "follower", "pre-candidate", "candidate", "leader"
MAX_APPEND = 256            # entries per Append message
MAX_APPEND_BYTES = 1 << 20   # and their data's bytes (but at least one entry)
MAX_INFLIGHT = 4096         # entries sent beyond a follower's acknowledged match
MAX_INFLIGHT_BYTES = 32 << 20   # and their data's bytes (a slow follower's route buffer)


class NotLeader(Exception):
    """A proposal to a node that is not the leader (or is handing leadership over)."""

    def __init__(self, leader):
        super().__init__("not the leader" + (" (the leader is %s)" % leader if leader else ""))
        self.leader = leader


class Node:
    def __init__(self, node_id, members, storage, *, now=0.0, rng=None,
                 election_timeout=(1.0, 2.0), heartbeat=0.25, log=None, group="", eager_commit=False):
        """members: the group at creation (with this node), or None for a server joining an
        existing group, which waits to hear from its leader. A restarted node reads its
        members from its storage. group: the group's name, for the log."""
        self.id = node_id
        self.group = group
        self.store = storage
        self.rng = rng or random.Random()
        self.et_lo, self.et_hi = election_timeout
        self.hb = heartbeat
        self.log = log
        self.eager_commit = eager_commit    # tell followers of every new commit at once
        self.term, self.vote = storage.hard_state()
        snap_index, snap_term, snap_members = storage.snapshot_meta()
        self.commit = self.applied = snap_index
        self.leader_commit = snap_index     # a follower: the highest commit index a leader sent
        self.durable_index = storage.last_index()   # a storage opens synced
        self.config_index = 0
        self.members = self._config_from_log() or tuple(snap_members) or tuple(members or ())
        self.role = FOLLOWER
        self.leader = ""
        self.outbox = []
        self.ready = []
        self.votes = set()
        self.pending_acks = []              # follower: (leader, term, match) until durable
        self.next_index = {}
        self.match_index = {}
        self.inflight = {}                  # leader: peer -> [(last index, bytes)] of Appends not yet acknowledged
        self.inflight_bytes = {}            # leader: peer -> their bytes
        self.learners = set()               # leader: servers it replicates to before they join
        self.last_heard = {}
        self.sent_snapshot = {}
        self.transfer_to = None
        self.transfer_deadline = 0.0
        self.heard_leader_at = -1e18
        self.elections = 0
        self.quorum_losses = 0              # times this leader stepped down for want of a quorum
        self.electable = True               # False: the state machine is incomplete here
        self.now = now
        self._reset_election(now)
        self.next_heartbeat = now

    # ---------------------------------------------------------------- driver API

    def tick(self, now):
        self.now = now
        if self.role == LEADER:
            if now >= self.next_heartbeat:
                self.next_heartbeat = now + self.hb
                self._broadcast(heartbeat=True)
            if now >= self.quorum_check_at:
                self.quorum_check_at = now + self.et_lo
                if not self._quorum_heard(now):
                    self._note("stepping down: no quorum heard within %.1fs" % self.et_lo)
                    self.quorum_losses += 1
                    self._become_follower(self.term, "", now)
            if self.transfer_to and now >= self.transfer_deadline:
                self._note("stepping down: %s did not take over in time" % self.transfer_to)
                self.transfer_to = None
                self._become_follower(self.term, "", now)
        elif now >= self.election_at and self.id in self.members and self.electable:
            self._campaign(now, pre_vote=True)

    def step(self, msg, now):
        """Handle one message from another member."""
        self.now = now
        if msg.term > self.term and not self._is_pre_vote(msg):
            if type(msg) is VoteRequest and not msg.transfer and self._leader_lease(now):
                # a leader was heard recently: do not let a disruptive candidate move the term
                self._send(msg.src, VoteResponse(self.term, self.id, False))
                return
            self._become_follower(msg.term, msg.src if type(msg) in (Append, Snapshot, TimeoutNow) else "", now)
        handler = _HANDLERS[type(msg)]
        handler(self, msg, now)

    def propose(self, data, now=0.0, kind=NORMAL):
        """Append a command; returns its index. It is committed once `take_ready` yields it."""
        return self.propose_many([data], now, kind)

    def propose_many(self, datas, now=0.0, kind=NORMAL):
        """Append several commands, sent to the followers together; returns the last index."""
        if self.role != LEADER or self.transfer_to:
            raise NotLeader(self.leader if self.role != LEADER else "")
        index = self._append_local([Entry(self.term, kind, d) for d in datas])
        self._broadcast()
        return index

    def durable(self, index):
        """The storage's sync finished: entries up to `index` are on disk."""
        index = min(index, self.store.last_index())
        if index <= self.durable_index:
            return
        self.durable_index = index
        if self.role == LEADER:
            self.match_index[self.id] = index
            self._advance_commit()
        still = []
        for leader, term, match in self.pending_acks:
            if match <= index:
                if term == self.term:
                    self._send(leader, AppendResponse(self.term, self.id, True, match))
            else:
                still.append((leader, term, match))
        self.pending_acks = still
        self._apply()

    def take_ready(self):
        """What the state machine must apply, in order: ("entry", index, data) for commands,
        ("snapshot", index, data) when a leader's snapshot replaced the log."""
        out, self.ready = self.ready, []
        return out

    def compact(self, index, data):
        """The state machine's snapshot taken after applying `index`: the log before it goes."""
        point = self.snapshot_point(index)
        if point is not None:
            self.store.compact(index, point[0], point[1], data)

    def snapshot_point(self, index):
        """(term, members) of a snapshot at `index`, or None when the log no longer has it;
        for a driver that writes the snapshot itself (RaftGroup.compact)."""
        if index > self.applied:
            raise ValueError("cannot compact past what was applied (%d > %d)" % (index, self.applied))
        term = self.store.term_at(index)
        if term is None:
            return None
        return term, self._members_at(index)

    def bootstrap(self, members, now):
        """The first members of a new group, for a node that started without any, has an
        empty log and has heard no leader; the first leader writes them into the log (its
        term may have moved: candidates asked it for a vote it could not give)."""
        if self.members or self.store.last_index() or self.leader:
            raise ValueError("the group already exists here")
        self.members = tuple(sorted(members))
        self._reset_election(now)

    def campaign_soon(self, now):
        """Stand for election at the next tick (a group just created, whose first member is
        expected to lead it) instead of after a whole election timeout."""
        if self.role != LEADER and not self.leader and self.id in self.members:
            self.election_at = now

    def add_learner(self, member, now=0.0):
        """Replicate to `member` without counting it, so that it has the log before it joins
        (add_member): a new member that has nothing yet would be one more vote to win and
        one more copy to wait for, and, while it catches up, a failure of one old member
        would leave the group without a quorum."""
        if self.role != LEADER:
            raise NotLeader(self.leader)
        if member in self.members or member in self.learners:
            return
        self.learners.add(member)
        self.last_heard[member] = now
        self._replicate(member, heartbeat=True)

    def observe(self, peers, within, now=0.0):
        """Replicate to `peers` as to learners, but never make them members (observers: they
        apply what the group commits, without a vote); learners outside `within` are dropped.
        A leader elected later is told again."""
        for p in sorted(set(peers) - self.learners - set(self.members)):
            self.add_learner(p, now)
        self.learners.intersection_update(within)

    def add_member(self, member, now=0.0):
        return self._change_members(tuple(sorted(set(self.members) | {member})), now)

    def remove_member(self, member, now=0.0):
        return self._change_members(tuple(m for m in self.members if m != member), now)

    def transfer_leadership(self, target, now):
        """Hand leadership to `target`: proposals pause until it campaigns, or the election
        timeout passes and this leader steps down."""
        if self.role != LEADER:
            raise NotLeader(self.leader)
        if target not in self.members or target == self.id:
            raise ValueError("%s is not another member of the group" % target)
        self.transfer_to = target
        self.transfer_deadline = now + self.et_hi
        self._maybe_send_timeout_now()

    def status(self, now):
        """What monitoring shows: role, term, leader, indexes and, on a leader, each peer's
        match and how long ago it answered."""
        st = {"id": self.id, "role": self.role, "term": self.term, "leader": self.leader,
              "commit": self.commit, "applied": self.applied, "last_index": self.store.last_index(),
              "durable": self.durable_index, "members": list(self.members)}
        if self.role == LEADER:
            st["peers"] = {p: {"match": self.match_index.get(p, 0),
                               "lag": self.store.last_index() - self.match_index.get(p, 0),
                               "last_seen": now - self.last_heard.get(p, -1e18)}
                           for p in self.members if p != self.id}
        return st

    # ---------------------------------------------------------------- roles

    def _reset_election(self, now):
        self.election_at = now + self.rng.uniform(self.et_lo, self.et_hi)

    def _leader_lease(self, now):
        """Whether a leader is known to be alive: this node leads, or heard its leader within
        the minimum election timeout."""
        return self.role == LEADER or (self.leader != "" and now - self.heard_leader_at < self.et_lo)

    def _become_follower(self, term, leader, now):
        if term != self.term:
            self.term, self.vote = term, ""
            self.store.save_hard_state(term, "")
        was_leader = self.role == LEADER
        self.role = FOLLOWER
        self.leader = leader
        self.votes = set()
        self.transfer_to = None
        if leader:
            self.heard_leader_at = now
        if was_leader:
            self.next_index, self.match_index = {}, {}
            self.inflight, self.inflight_bytes = {}, {}
            self.learners = set()
        self._reset_election(now)

    def _campaign(self, now, pre_vote, transfer=False):
        self.elections += 1
        self._reset_election(now)
        self.votes = {self.id}
        last = self.store.last_index()
        last_term = self.store.term_at(last) or 0
        if pre_vote:
            self.role = PRE_CANDIDATE
            term = self.term + 1
        else:
            self.role = CANDIDATE
            self.term += 1
            self.vote = self.id
            self.store.save_hard_state(self.term, self.id)
            term = self.term
        self.leader = ""
        if self._quorum(self.votes):
            return self._campaign(now, False) if pre_vote else self._become_leader(now)
        for p in self.members:
            if p != self.id:
                self._send(p, VoteRequest(term, self.id, last, last_term, pre_vote, transfer))

    def _become_leader(self, now):
        self.role = LEADER
        self.leader = self.id
        self.transfer_to = None
        last = self.store.last_index()
        self.next_index = {p: last + 1 for p in self.members}
        self.match_index = {p: 0 for p in self.members}
        self.match_index[self.id] = self.durable_index
        self.inflight, self.inflight_bytes = {}, {}
        self.last_heard = {p: now for p in self.members}
        self.sent_snapshot = {}
        self.quorum_check_at = now + self.et_lo
        self.next_heartbeat = now + self.hb
        self._note("elected leader for term %d" % self.term)
        first = [Entry(self.term, NOOP, b"")]
        if not self.config_index and not self.store.snapshot_meta()[2]:
            # the group's first leader writes the members down, so that the log alone tells
            # a server that rejoins with an empty disk who the group is
            first.append(Entry(self.term, CONFIG, encode_members(self.members)))
        self._append_local(first)
        self._broadcast()

    # ---------------------------------------------------------------- votes

    @staticmethod
    def _is_pre_vote(msg):
        return type(msg) in (VoteRequest, VoteResponse) and msg.pre_vote

    def _on_vote_request(self, msg, now):
        last = self.store.last_index()
        last_term = self.store.term_at(last) or 0
        # a server with nothing (it lost its disk, or it is new and has not heard from a
        # leader yet) has no vote to give; one that holds the log votes even before it learns
        # that it was added (the leader that added it may die first)
        up_to_date = ((msg.last_term, msg.last_index) >= (last_term, last)
                      and (self.id in self.members or last > 0))
        if msg.pre_vote:
            grant = msg.term > self.term and up_to_date and (msg.transfer or not self._leader_lease(now))
            self._send(msg.src, VoteResponse(msg.term if grant else self.term, self.id, grant, True))
            return
        grant = (msg.term == self.term and up_to_date and self.vote in ("", msg.src)
                 and self.role != LEADER)
        if grant:
            self.vote = msg.src
            self.store.save_hard_state(self.term, msg.src)
            self._reset_election(now)
        self._send(msg.src, VoteResponse(self.term, self.id, grant))

    def _on_vote_response(self, msg, now):
        if msg.pre_vote:
            if self.role != PRE_CANDIDATE or msg.term != self.term + 1:
                return
        elif self.role != CANDIDATE or msg.term != self.term:
            return
        if not msg.granted or msg.src not in self.members:
            return
        self.votes.add(msg.src)
        if self._quorum(self.votes):
            if msg.pre_vote:
                self._campaign(now, False)
            else:
                self._become_leader(now)

    def _on_timeout_now(self, msg, now):
        if msg.term == self.term and self.id in self.members and self.role != LEADER and self.electable:
            self._campaign(now, pre_vote=False, transfer=True)

    # ---------------------------------------------------------------- replication (leader)

    def _append_local(self, entries):
        first = self.store.last_index() + 1
        self.store.append(entries)
        for i, e in enumerate(entries):
            if e.kind == CONFIG:
                self._set_members(decode_members(e.data), first + i)
        self.store.request_sync()
        return first + len(entries) - 1

    def _broadcast(self, heartbeat=False):
        for p in self.members:
            if p != self.id:
                self._replicate(p, heartbeat)
        for p in self.learners:
            self._replicate(p, heartbeat)

    def _replicate(self, peer, heartbeat=False):
        nxt = self.next_index.get(peer)
        if nxt is None:
            nxt = self.next_index[peer] = self.store.last_index() + 1
            self.match_index.setdefault(peer, 0)
        snap_index = self.store.snapshot_meta()[0]
        if nxt <= snap_index:
            if heartbeat or self.sent_snapshot.get(peer) != snap_index:
                si, st, sm = self.store.snapshot_meta()
                self.sent_snapshot[peer] = si
                self._send(peer, Snapshot(self.term, self.id, si, st, tuple(sm), self.store.snapshot_data()))
            return
        last = self.store.last_index()
        match = self.match_index.get(peer, 0)
        hi = min(last, nxt + MAX_APPEND - 1, match + MAX_INFLIGHT)
        if hi < nxt and not heartbeat:
            return
        prev = nxt - 1
        entries = tuple(self.store.entries(nxt, hi)) if hi >= nxt else ()
        # an Append carries at most MAX_APPEND_BYTES, and what the peer has not acknowledged
        # stays within MAX_INFLIGHT_BYTES; one entry larger than either goes alone, once
        # nothing else is in flight
        inflight = self.inflight_bytes.get(peer, 0)
        budget = min(MAX_APPEND_BYTES, MAX_INFLIGHT_BYTES - inflight)
        size = 0
        for k, e in enumerate(entries):
            if size + len(e.data) > budget and (k or inflight):
                entries, hi = entries[:k], nxt + k - 1
                break
            size += len(e.data)
        if not entries and not heartbeat:
            return
        self._send(peer, Append(self.term, self.id, prev, self.store.term_at(prev) or 0, entries,
                                self.commit))
        if entries:
            self.next_index[peer] = hi + 1
            self.inflight.setdefault(peer, []).append((hi, size))
            self.inflight_bytes[peer] = inflight + size

    def _acknowledged(self, peer, match):
        """The peer has everything up to `match`: its Appends up to there are no longer in
        flight."""
        q = self.inflight.get(peer)
        if not q:
            return
        k, done = 0, 0
        while k < len(q) and q[k][0] <= match:
            done += q[k][1]
            k += 1
        if k:
            del q[:k]
            self.inflight_bytes[peer] -= done

    def _resend_from(self, peer, nxt):
        """The peer will be sent its log again from `nxt`: nothing is in flight any more."""
        self.next_index[peer] = nxt
        self.inflight.pop(peer, None)
        self.inflight_bytes.pop(peer, None)

    def _on_append_response(self, msg, now):
        if self.role != LEADER or msg.term != self.term:
            return
        self.last_heard[msg.src] = now
        if msg.success:
            if msg.match_index > self.match_index.get(msg.src, 0):
                self.match_index[msg.src] = msg.match_index
            self._acknowledged(msg.src, msg.match_index)
            if self.next_index.get(msg.src, 0) <= msg.match_index:
                self.next_index[msg.src] = msg.match_index + 1
            self._advance_commit()
            self._maybe_send_timeout_now()
            if self.next_index[msg.src] <= self.store.last_index():
                self._replicate(msg.src)
        else:
            match = self.match_index.get(msg.src, 0)
            if 0 < msg.hint <= match:
                # entries it acknowledged are gone: a server that came back with an empty (or
                # older) disk. Nothing committed is undone here; it is sent its log again.
                self._note("%s no longer has entries %d-%d: sending them again" % (msg.src, msg.hint, match))
                match = self.match_index[msg.src] = msg.hint - 1
            nxt = max(match + 1, min(msg.hint, self.next_index.get(msg.src, 1) - 1), 1)
            self._resend_from(msg.src, nxt)
            self._replicate(msg.src, heartbeat=True)

    def _on_snapshot_response(self, msg, now):
        if self.role != LEADER or msg.term != self.term:
            return
        self.last_heard[msg.src] = now
        if msg.last_index > self.match_index.get(msg.src, 0):
            self.match_index[msg.src] = msg.last_index
        self._acknowledged(msg.src, msg.last_index)
        self.next_index[msg.src] = max(self.next_index.get(msg.src, 0), msg.last_index + 1)
        self._advance_commit()
        self._replicate(msg.src)

    def _advance_commit(self):
        matches = sorted((self.match_index.get(p, 0) for p in self.members), reverse=True)
        if not matches:
            return
        n = matches[len(matches) // 2]          # the highest index a majority has
        if n > self.commit and self.store.term_at(n) == self.term:
            self.commit = n
            self._apply()
            if self.eager_commit and self.role == LEADER:
                self._broadcast(heartbeat=True)
            if self.id not in self.members and self._config_committed():
                self._note("removed from the group: stepping down")
                self.role = FOLLOWER
                self.leader = ""

    def _quorum(self, voters):
        return len(voters & set(self.members)) * 2 > len(self.members)

    def _quorum_heard(self, now):
        heard = {p for p in self.members if p == self.id or now - self.last_heard.get(p, -1e18) < self.et_lo}
        return self._quorum(heard)

    def _maybe_send_timeout_now(self):
        t = self.transfer_to
        if t and self.match_index.get(t, 0) >= self.store.last_index():
            self._send(t, TimeoutNow(self.term, self.id))

    # ---------------------------------------------------------------- replication (follower)

    def _on_append(self, msg, now):
        if msg.term < self.term:
            self._send(msg.src, AppendResponse(self.term, self.id, False, 0, 0))
            return
        if self.role != FOLLOWER or self.leader != msg.src:
            self._become_follower(msg.term, msg.src, now)
        if not self.vote:
            # this term has a leader: never vote for anyone else in it (also covers a server
            # that lost its disk and with it the vote it gave)
            self.vote = msg.src
            self.store.save_hard_state(self.term, msg.src)
        self.heard_leader_at = now
        self._reset_election(now)
        last = self.store.last_index()
        snap_index = self.store.snapshot_meta()[0]
        prev, entries = msg.prev_index, msg.entries
        if prev < snap_index:                   # the part we compacted is committed: skip it
            skip = snap_index - prev
            if skip > len(entries):
                self._ack(msg.src, snap_index)
                return
            entries = entries[skip:]
            prev = snap_index
        if prev > last:
            self._send(msg.src, AppendResponse(self.term, self.id, False, 0, last + 1))
            return
        if prev == msg.prev_index and self.store.term_at(prev) != msg.prev_term:
            self._send(msg.src, AppendResponse(self.term, self.id, False, 0, self._conflict_hint(prev)))
            return
        idx = prev
        new = []
        for i, e in enumerate(entries):
            idx = prev + 1 + i
            if idx <= last:
                if self.store.term_at(idx) == e.term:
                    continue
                if idx <= self.commit:          # never happens in Raft; refuse rather than lose
                    self._note("append conflicts with committed entry %d: ignored" % idx)
                    return
                self.store.truncate_after(idx - 1)
                self.durable_index = min(self.durable_index, idx - 1)
                self.members = self._config_from_log() or tuple(self.store.snapshot_meta()[2]) or self.members
                last = idx - 1
            new = list(entries[i:])
            break
        if new:
            self._append_local(new)
        match = prev + len(entries)
        self.leader_commit = max(self.leader_commit, msg.commit)
        if msg.commit > self.commit:
            self.commit = min(msg.commit, match)
        self._ack(msg.src, match)
        self._apply()

    def _ack(self, leader, match):
        if match <= self.durable_index:
            self._send(leader, AppendResponse(self.term, self.id, True, match))
        else:
            self.pending_acks.append((leader, self.term, match))

    def _conflict_hint(self, prev):
        """The first index of the conflicting term at `prev` (one round trip per term)."""
        t = self.store.term_at(prev)
        lo = max(self.commit + 1, self.store.snapshot_meta()[0] + 1)
        i = prev
        while i > lo and self.store.term_at(i - 1) == t:
            i -= 1
        return max(i, 1)

    def _on_snapshot(self, msg, now):
        if msg.term < self.term:
            self._send(msg.src, SnapshotResponse(self.term, self.id, 0))
            return
        self.heard_leader_at = now
        self._reset_election(now)
        if msg.last_index <= self.commit:
            self._send(msg.src, SnapshotResponse(self.term, self.id, self.commit))
            return
        self.store.install_snapshot(msg.last_index, msg.last_term, msg.members, msg.data)
        self.members = tuple(msg.members)
        self.commit = self.applied = self.durable_index = msg.last_index
        self.pending_acks = []
        self.ready.append(("snapshot", msg.last_index, msg.data))
        self._note("installed a snapshot at %d from %s" % (msg.last_index, msg.src))
        self._send(msg.src, SnapshotResponse(self.term, self.id, msg.last_index))

    # ---------------------------------------------------------------- applying, members

    def _apply(self):
        upto = min(self.commit, self.durable_index)
        if upto <= self.applied:
            return
        for i, e in enumerate(self.store.entries(self.applied + 1, upto)):
            if e.kind == NORMAL:
                self.ready.append(("entry", self.applied + 1 + i, e.data))
        self.applied = upto

    def _change_members(self, members, now):
        if self.role != LEADER or self.transfer_to:
            raise NotLeader(self.leader if self.role != LEADER else "")
        if not self._config_committed():
            raise ValueError("a membership change is already in progress")
        if members == tuple(self.members):
            return self.store.last_index()
        return self.propose(encode_members(members), now, kind=CONFIG)

    def _set_members(self, members, index):
        self.members = tuple(members)
        self.config_index = index
        self.learners.difference_update(self.members)
        if self.role == LEADER:
            for p in self.members:
                if p not in self.next_index:
                    self.next_index[p] = self.store.last_index() + 1
                    self.match_index[p] = 0
                    self.last_heard[p] = self.now

    def _config_committed(self):
        return self.config_index <= self.commit

    def _config_from_log(self):
        """The members named by the last CONFIG entry still in the log, or ()."""
        return self._members_at(self.store.last_index(), note=True)

    def _members_at(self, index, note=False):
        """The members as of entry `index`: its last CONFIG entry at or before it, else the
        snapshot's (() when neither names any)."""
        if not note and self.config_index <= index:
            return tuple(self.members)          # no change of members after it
        snap_index, _, snap_members = self.store.snapshot_meta()
        for i in range(index, snap_index, -1):
            e = self.store.entries(i, i)[0]
            if e.kind == CONFIG:
                if note:
                    self.config_index = i
                return decode_members(e.data)
        return tuple(snap_members) if not note else ()

    # ---------------------------------------------------------------- plumbing

    def _send(self, dst, msg):
        self.outbox.append((dst, msg))

    def _note(self, text):
        if self.log is not None:
            self.log.info("raft %s%s: %s", self.id, " in group " + self.group if self.group else "", text)


_HANDLERS = {
    VoteRequest: Node._on_vote_request,
    VoteResponse: Node._on_vote_response,
    Append: Node._on_append,
    AppendResponse: Node._on_append_response,
    Snapshot: Node._on_snapshot,
    SnapshotResponse: Node._on_snapshot_response,
    TimeoutNow: Node._on_timeout_now,
}
