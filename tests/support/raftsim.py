"""A deterministic world for Raft groups (natsd/raft/node.py): simulated time, a network
that delays, reorders, drops and partitions, disks with a sync latency, kill -9 and restarts,
clients that propose while faults happen. One seed, one schedule, replayable exactly.

Every message goes through the binary codec (natsd/raft/messages.py) on its way. The state
machine of each server is the list of commands it applied; its snapshot is that list.
Invariants are checked as the world runs (at most one leader per term; no two servers apply
different commands at one index) and at the end by the tests (every acknowledged command is
applied exactly once, in order, on every server).
"""
import heapq
import json
import random

from natsd.raft import messages as raftmsg
from natsd.raft.node import LEADER, Node, NotLeader
from natsd.raft.storage import MemoryStorage

TICK = 0.01


class World:
    def __init__(self, n, seed, *, delay=(0.0005, 0.005), drop=0.0, disk=(0.0001, 0.0003),
                 election_timeout=(0.3, 0.6), heartbeat=0.05, snapshot_every=0, storage=None):
        """storage(server id) -> a new, empty RaftStorage (default: MemoryStorage)."""
        self.rng = random.Random(seed)
        self.seed = seed
        self.now = 0.0
        self.ids = ["s%d" % i for i in range(n)]
        self.delay, self.drop = delay, drop
        self.disk = {i: disk for i in self.ids}
        self.et, self.hb = election_timeout, heartbeat
        self.snapshot_every = snapshot_every
        self.new_storage = storage or (lambda sid: MemoryStorage())
        self.stores = {i: self.new_storage(i) for i in self.ids}
        self.nodes = {}
        self.incarnation = {i: 0 for i in self.ids}
        self.applied = {}
        self.events = []            # heap (time, seq, kind, payload)
        self.seq = 0
        self.cut = set()            # frozenset({a, b}) pairs that cannot talk
        self.leaders = {}           # term -> the one leader it had
        self.truth = {}             # index -> command applied there (by anyone)
        self.proposals = {}         # command -> (server, term, index)
        self.acked = {}             # command -> index, once the server that took it applied it
        self.next_cmd = 0
        for i in self.ids:
            self._boot(i, self.ids)
        self._at(TICK, "tick", None)

    # ---- building blocks ----

    def _at(self, t, kind, payload):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, payload))

    def _boot(self, sid, members):
        self.incarnation[sid] += 1
        st = self.stores[sid]
        node = Node(sid, members, st, now=self.now, rng=random.Random(self.rng.random()),
                    election_timeout=self.et, heartbeat=self.hb)
        self.nodes[sid] = node
        data = st.snapshot_data()
        self.applied[sid] = [tuple(x) for x in json.loads(data)] if data else []

    def up(self, sid):
        return sid in self.nodes

    def leader(self):
        """The leader a client would find: a live server that leads the highest term."""
        best = None
        for sid, n in self.nodes.items():
            if n.role == LEADER and (best is None or n.term > self.nodes[best].term):
                best = sid
        return best

    # ---- faults ----

    def kill(self, sid):
        """kill -9: the process is gone, and whatever its disk had not synced."""
        self.nodes.pop(sid, None)
        self.stores[sid] = self.stores[sid].crash()

    def restart(self, sid):
        if sid not in self.nodes:
            self._boot(sid, self.ids)

    def wipe_and_restart(self, sid):
        """The server comes back with an empty store: it knows nothing, not even its group."""
        self.nodes.pop(sid, None)
        self.stores[sid] = self.new_storage(sid)
        self._boot(sid, None)

    def partition(self, side):
        side = set(side)
        self.cut = {frozenset((a, b)) for a in side for b in self.ids if b not in side}

    def heal(self):
        self.cut = set()

    def slow_disk(self, sid, latency):
        self.disk[sid] = (latency, latency * 1.2)

    # ---- clients ----

    def propose(self, sid=None):
        """A client sends the next command to `sid` (or whoever leads); False if refused."""
        sid = sid or self.leader()
        node = self.nodes.get(sid)
        if node is None:
            return False
        cmd = "c%d" % self.next_cmd
        try:
            index = node.propose(cmd.encode(), self.now)
        except NotLeader:
            return False
        self.next_cmd += 1
        self.proposals[cmd] = (sid, node.term, index)
        self._flush(sid)
        return True

    # ---- running ----

    def run(self, duration, load=0.0):
        """Advance `duration` seconds; with `load`, a client proposes that many commands a
        second to the current leader."""
        end = self.now + duration
        next_load = self.now if load else None
        while self.events and self.events[0][0] <= end:
            if next_load is not None and next_load <= self.events[0][0]:
                self.now = next_load
                self.propose()
                next_load += 1.0 / load
                continue
            t, _, kind, payload = heapq.heappop(self.events)
            self.now = t
            if kind == "tick":
                for sid in list(self.nodes):
                    self.nodes[sid].tick(t)
                    self._flush(sid)
                self._at(t + TICK, "tick", None)
            elif kind == "msg":
                dst, inc, data = payload
                if self.up(dst) and self.incarnation[dst] == inc:
                    self.nodes[dst].step(raftmsg.decode(data), t)
                    self._flush(dst)
            elif kind == "sync":
                sid, inc, sync = payload
                if self.up(sid) and self.incarnation[sid] == inc:
                    self.nodes[sid].durable(self.stores[sid].complete_sync(sync))
                    self._flush(sid)
            self._check_leaders()
        self.now = end

    def _flush(self, sid):
        node = self.nodes[sid]
        out, node.outbox = node.outbox, []
        for dst, msg in out:
            if frozenset((sid, dst)) in self.cut or dst not in self.incarnation:
                continue
            if self.drop and self.rng.random() < self.drop:
                continue
            self._at(self.now + self.rng.uniform(*self.delay), "msg",
                     (dst, self.incarnation[dst], raftmsg.encode(msg)))
        st = self.stores[sid]
        if st.sync_requested and len(st.syncs_in_flight()) < 2:
            self._at(self.now + self.rng.uniform(*self.disk[sid]), "sync",
                     (sid, self.incarnation[sid], st.begin_sync()))
        for item in node.take_ready():
            self._apply(sid, item)

    def _apply(self, sid, item):
        kind, index, data = item
        if kind == "snapshot":
            self.applied[sid] = [tuple(x) for x in json.loads(data)]
            return
        cmd = data.decode()
        seen = self.truth.setdefault(index, cmd)
        assert seen == cmd, "seed %d: %s applied %s at %d, another server %s" % (self.seed, sid, cmd, index, seen)
        assert not self.applied[sid] or self.applied[sid][-1][0] < index, "applied out of order"
        self.applied[sid].append((index, cmd))
        prop = self.proposals.get(cmd)
        if prop and prop[0] == sid and prop[2] == index:
            self.acked[cmd] = index
        if self.snapshot_every and len(self.applied[sid]) % self.snapshot_every == 0:
            self.nodes[sid].compact(index, json.dumps(self.applied[sid]).encode())

    def _check_leaders(self):
        for sid, n in self.nodes.items():
            if n.role == LEADER:
                first = self.leaders.setdefault(n.term, sid)
                assert first == sid, "seed %d: two leaders in term %d: %s and %s" % (self.seed, n.term, first, sid)

    # ---- verdicts ----

    def settle(self, timeout=10.0):
        """Heal, restart everyone, and run until every server applied the same commands (the
        leader's commit). -> the seconds it took."""
        self.heal()
        for sid in self.ids:
            self.restart(sid)
        start = self.now
        while self.now - start < timeout:
            self.run(0.1)
            lead = self.leader()
            if lead is None:
                continue
            target = self.nodes[lead].commit
            if all(n.applied >= target for n in self.nodes.values()) and \
                    len({tuple(self.applied[s]) for s in self.ids}) == 1:
                return self.now - start
        raise AssertionError("seed %d: the group did not settle in %.0fs: %s" % (
            self.seed, timeout, {s: n.status(self.now) for s, n in self.nodes.items()}))

    def check_acked(self):
        """Every acknowledged command is applied once, at its index, on every server."""
        for sid in self.ids:
            cmds = [c for _, c in self.applied[sid]]
            assert len(cmds) == len(set(cmds)), "seed %d: %s applied a command twice" % (self.seed, sid)
            where = {c: i for i, c in self.applied[sid]}
            for cmd, index in self.acked.items():
                assert where.get(cmd) == index, "seed %d: %s lost acknowledged %s (index %d)" % (
                    self.seed, sid, cmd, index)
