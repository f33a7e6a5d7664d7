"""The JetStream meta group of a cluster: one Raft group (natsd/cluster/raftgroup.py) of every
JetStream server, named `_meta_` as on nats-server, with its log under
`<store_dir>/jetstream/$SYS/_js_/_meta_/`. Peer ids are nats-server's: 8 base-62 characters of
the server name's SHA-256.

What it does now: it elects the meta leader and keeps the members, and it answers what
monitoring and operators ask about it (`/jsz` and `/varz` `meta_cluster`, `/raftz`,
`/healthz?js-enabled-only=true`, `$JS.API.META.LEADER.STEPDOWN`). Stream and consumer
assignments do not go through it yet: streams are still one-replica streams of the server that
created them (natsd/jetstream/placement.py).

Membership:
- a server with the group on disk starts from it;
- a new server waits until it sees, over routes, a JetStream server for every route URL it was
  given (that is not itself) and that set has held still for SETTLE seconds, then all of them
  together are the first members (a server given no routes waits ALONE seconds for others to
  find it). A server that hears from a leader first joins that leader's group instead;
- the leader adds every JetStream server it sees over routes that is not yet a member, one at
  a time. Nobody is removed automatically.
Give every server the same route list: servers that see different sets at their start can
form more than one group.
"""
import logging
import os
import time

from natsd.cluster.raft import NotLeader
from natsd.cluster.raftgroup import RaftGroup
from natsd.jetstream import errors as E
from natsd.jetstream.apilevel import required_level_too_high
from natsd.jetstream.sourcing import get_hash
from natsd.jetstream.streamconfig import PLACEMENT_FIELDS, decode_request

log = logging.getLogger("natsd")

GROUP = "_meta_"
SETTLE = 1.0                    # seconds the set of JetStream peers must hold still before a bootstrap
ALONE = 3.0                     # a server without routes waits this long for others first
CHECK = 0.25                    # seconds between membership checks
CURRENT_LAG = 2.0               # a replica heard from within this many seconds is current
STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"
STEPDOWN_TYPE = "meta_leader_stepdown_response"
STEPDOWN_REQUEST = {"placement": ("*server.Placement", "obj", PLACEMENT_FIELDS)}


class MetaGroup:
    def __init__(self, engine):
        s = engine.server
        self.engine = engine
        self.server = s
        self.routes = s.cluster
        self.name = s.name
        self.peer = get_hash(s.name)
        self.dir = os.path.join(engine.store_dir, s.accounts.system.name, "_js_", GROUP)
        self.group = None
        self.peer_names = {self.peer: self.name}
        self.peer_clusters = {self.peer: self.routes.name}
        self.started_at = time.monotonic()
        self.seen = frozenset()
        self.seen_since = self.started_at
        self.last_connected = {}        # peer -> monotonic time it was last seen over a route
        self.connected = frozenset()    # peers with a route at the last check
        self.leaderless_since = None    # monotonic time the group lost its leader (None: has one)
        self.reported = False           # the loss was logged
        self.timer = None

    # ---- lifecycle ----

    def start(self):
        log.info("Creating JetStream metadata controller")
        existing = os.path.isdir(self.dir)
        self.group = RaftGroup(self.server, GROUP, self.peer, self.dir, members=None,
                               on_leader=self._leader_changed)
        if not existing or not self.group.members():
            log.info("JetStream cluster bootstrapping")
        self.group.start()
        self.server.system.subscribe(STEPDOWN, self._on_stepdown)
        self.timer = self.server.loop.call_later(CHECK, self._check)

    def stop(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.group is not None:
            self.group.stop()

    # ---- membership ----

    def js_peers(self):
        """peer id -> server name of the JetStream servers this one has routes to."""
        out = {}
        for conns in self.routes.routes.values():
            c = next((r for r in conns if r is not None), None)
            if c is None or not c.state.jetstream or not c.state.remote_name:
                continue
            peer = get_hash(c.state.remote_name)
            out[peer] = c.state.remote_name
        return out

    def _expected_peers(self):
        return len({u.label for u in self.routes.explicit if u.label not in self.routes.self_addrs})

    def _check(self):
        self.timer = self.server.loop.call_later(CHECK, self._check)
        now = time.monotonic()
        peers = self.js_peers()
        self.peer_names.update(peers)
        for p in peers:
            self.peer_clusters[p] = self.routes.name
        seen = frozenset(peers)
        if seen != self.seen:
            self.seen, self.seen_since = seen, now
        g = self.group
        if not g.members():
            self._maybe_bootstrap(now)
        elif g.is_leader():
            for p in sorted(seen - set(g.members())):
                try:
                    g.add_member(p)
                    log.info("JetStream cluster adding peer %s (%s) to the metadata group", p, peers[p])
                except (ValueError, NotLeader):
                    pass                # a change is in flight: the next check tries again
                break
        for p in peers:
            self.last_connected[p] = now
        self.connected = seen
        self._watch_quorum(now)

    def missing(self, now):
        """[(peer, seconds)]: members with no route to this server, and for how long."""
        out = []
        for p in sorted(self.group.members(), key=lambda p: self.peer_names.get(p, p)):
            if p != self.peer and p not in self.connected:
                out.append((p, now - self.last_connected.get(p, self.started_at)))
        return out

    def _watch_quorum(self, now):
        """Log once when the group has been without a leader for an election timeout."""
        g = self.group
        if g.leader or not g.members():
            if self.reported:
                log.info("JetStream meta group has a leader again")
            self.leaderless_since, self.reported = None, False
            return
        if self.leaderless_since is None:
            self.leaderless_since = now
        if not self.reported and now - self.leaderless_since > g.node.et_hi:
            self.reported = True
            gone = self.missing(now)
            size = len(g.members())
            log.warning("JetStream meta group has no leader: it needs %d of its %d members and %s "
                        "unreachable (%s)", size // 2 + 1, size,
                        "1 is" if len(gone) == 1 else "%d are" % len(gone),
                        ", ".join(self.peer_names.get(p, p) for p, _ in gone) or "none")

    def _maybe_bootstrap(self, now):
        g = self.group
        if g.node.leader:
            return                      # a leader will add us
        expected = self._expected_peers()
        if len(self.seen) < expected or now - self.seen_since < SETTLE:
            return
        if expected == 0 and now - self.started_at < ALONE:
            return
        g.node.bootstrap(set(self.seen) | {self.peer}, now)

    def _leader_changed(self, leader):
        if leader == self.peer:
            log.info("Self is new JetStream cluster metadata leader")
        elif not leader:
            log.info("JetStream cluster no metadata leader")
        else:
            log.info("JetStream cluster new metadata leader: %s/%s",
                     self.peer_names.get(leader, leader), self.peer_clusters.get(leader, self.routes.name))

    # ---- questions ----

    def is_leader(self):
        return self.group is not None and self.group.is_leader()

    def leader_name(self):
        leader = self.group.leader if self.group is not None else ""
        return self.peer_names.get(leader, "") if leader else ""

    def cluster_info(self):
        """MetaClusterInfo for /jsz and /varz (nats-server's field order)."""
        g = self.group
        members = g.members()
        out = {"name": self.routes.name}
        leader = self.leader_name()
        if leader:
            out["leader"] = leader
            out["peer"] = get_hash(leader)
        replicas = []
        connected = self.js_peers()
        for p in members:
            if p == self.peer and g.leader:
                continue                # the others, and this server too while leaderless
            heard = g.last_heard(p)
            r = {"name": self.peer_names.get(p, p),
                 "current": heard is not None and heard < CURRENT_LAG and (p == g.leader or g.is_leader()
                                                                           and g.match(p) >= g.node.commit)}
            if p != self.peer and p not in connected:
                r["offline"] = True
            r["active"] = int(heard * 1e9) if heard is not None else 0
            lag = g.node.store.last_index() - g.match(p) if g.is_leader() else 0
            if lag:
                r["lag"] = lag
            r["peer"] = p
            replicas.append(r)
        replicas.sort(key=lambda r: r["name"])
        if replicas:
            out["replicas"] = replicas
        size = len(members)
        out.update({"cluster_size": size, "quorum_needed": size // 2 + 1, "pending": 0,
                    "pending_requests": 0, "pending_infos": 0,
                    "snapshot": {"pending_entries": 0, "pending_size": 0,
                                 "last_time": "0001-01-01T00:00:00Z"}})
        return out

    def raftz(self):
        return {GROUP: self.group.status(self.peer_names)}

    def health_errors(self):
        """What /healthz reports about the meta group: nats-server's text when there is no
        leader, then (beyond nats-server) which members this server has not heard from since
        when, and what to do."""
        g = self.group
        if g.leader:
            return []
        out = [{"type": "JETSTREAM", "error": "JetStream has not established contact with a meta leader"}]
        size = len(g.members())
        for p, secs in self.missing(time.monotonic()):
            out.append({"type": "JETSTREAM",
                        "error": "JetStream meta group member %s (%s) unreachable for %.1fs: the group "
                                 "needs %d of its %d members; restart that server (its store keeps "
                                 "its state) or restore its network"
                                 % (self.peer_names.get(p, p), p, secs, size // 2 + 1, size)})
        return out

    # ---- $JS.API.META.LEADER.STEPDOWN (system account; only the leader answers) ----

    def _on_stepdown(self, sub, subject, reply, hdr, payload, origin):
        if not self.is_leader() or not reply:
            return
        try:
            if required_level_too_high(hdr):
                raise E.error("JSRequiredApiLevelErr")
            body = bytes(payload).strip()
            placement = None
            if body[:1] in (b"{", b"["):
                placement = decode_request(payload, STEPDOWN_REQUEST, "JSApiLeaderStepdownRequest",
                                           True).get("placement")
            self.step_down(placement or {})
            answer = {"success": True}
        except E.ApiError as err:
            answer = err
        self.server.system.publish(reply, E.api_response(STEPDOWN_TYPE, answer))

    def step_down(self, placement):
        """Hand leadership to the placement's `preferred` server, or else to the most up-to-date
        member heard from lately (in the placement's cluster); ApiError as nats-server's."""
        g = self.group
        members = [p for p in g.members() if p != self.peer]
        preferred = placement.get("preferred") or ""
        if preferred:
            target = get_hash(preferred)
            if target == self.peer:
                raise E.error("JSClusterNoPeersErrF",
                              err='preferred server "%s" is already leader' % preferred)
            if target not in members:
                raise E.error("JSClusterNoPeersErrF", err='preferred server "%s" not known' % preferred)
        else:
            cluster = placement.get("cluster") or ""
            live = [p for p in members if (g.last_heard(p) or 1e9) < CURRENT_LAG
                    and (not cluster or self.peer_clusters.get(p) == cluster)]
            if not live:
                raise E.error("JSClusterNoPeersErrF", err="no replacement peer connected")
            target = max(live, key=g.match)
        try:
            g.transfer_leadership(target)
        except (NotLeader, ValueError) as e:
            raise E.error("JSRaftGeneralErrF", err=str(e))
