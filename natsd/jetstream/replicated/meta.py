"""The JetStream meta group of a cluster: one Raft group (natsd/raft/group.py) of every
JetStream server, named `_meta_` as on nats-server, with its log under
`<store_dir>/jetstream/$SYS/_js_/_meta_/`. Peer ids are nats-server's: 8 base-62 characters of
the server name's SHA-256.

What it does: it elects the meta leader and keeps the members; it assigns replicated streams
(`num_replicas` > 1) to servers and records their creation and deletion, which every server
applies (the assigned ones run the stream, natsd/jetstream/replicated/streams.py); and it answers
what monitoring and operators ask about it (`/jsz` and `/varz` `meta_cluster`, `/raftz`,
`/healthz?js-enabled-only=true`, `$JS.API.META.LEADER.STEPDOWN`). One-replica streams do not
go through it: they belong to the server that created them (natsd/jetstream/replicated/placement.py).

A replicated stream's create or delete request reaches the meta leader from whichever server
the client asked (forwarded on `$JSC.META.<leader peer>` in the system account); the leader
places it (its own server first, then the others from a rotation by the stream's name),
proposes the assignment and answers the client in its account once the entry is committed.
Servers are chosen by nats-server's placement rules (natsd/jetstream/replicated/peerselect.py): the
placement's cluster and tags, `unique_tag`, `max_ha_assets`, room for `max_bytes`; other
servers' tags and storage are learnt from their `$SYS.SERVER.<id>.STATSZ` events, as
nats-server learns them.

Membership:
- a server with the group on disk starts from it;
- a new server waits until it sees, over routes, a JetStream server for every route URL it was
  given (that is not itself) and that set has held still for SETTLE seconds, then all of them
  together are the first members (a server given no routes waits ALONE seconds for others to
  find it). A server that hears from a leader first joins that leader's group instead;
- the leader adds every JetStream server it sees over routes that is not yet a member, one at
  a time. Nobody is removed automatically.
Servers routed through one seed (the seed's list names itself, the others' the seed) form one
group: the first to bootstrap leads it and the others adopt its members from its log (tested
with seeded start intervals). Servers that cannot see each other at their start, each with a
quorum of its own, could form more than one: give every server the same route list.

Every COMPACT_ENTRIES applied entries a server keeps a snapshot of the assignments in place of
its log's beginning; a server that starts reads its snapshot, then replays what follows, and a
server far behind gets its leader's.
"""
import json
import logging
import os
import time

from natsd._core.router import publish
from natsd.raft.node import NotLeader
from natsd.raft.group import RaftGroup
from natsd.jetstream.engine import advisories, errors as E, gojson
from natsd.jetstream.replicated import remap, scale as replscale
from natsd.jetstream.replicated.peerselect import Pool, Rules, Server, room_of
from natsd.jetstream.engine.apilevel import required_level_too_high
from natsd.jetstream.replicated.clusterinfo import peer_infos, step_down
from natsd.jetstream.replicated.streams import ReplicatedStream
from natsd.ids import get_hash
from natsd.jetstream.engine.streamconfig import STEPDOWN_REQUEST, decode_request

log = logging.getLogger("natsd")

GROUP = "_meta_"
SETTLE = 1.0                    # seconds the set of JetStream peers must hold still before a bootstrap
ALONE = 3.0                     # a server without routes waits this long for others first
CHECK = 0.25                    # seconds between membership checks
LOST_QUORUM = 10.0              # nats-server's lostQuorumInterval: leaderless this long is an outage
COMPACT_ENTRIES = 64            # applied entries between two snapshots of the assignments
SNAPSHOT_VERSION = 1
FORWARD = "$JSC.META.%s"        # requests for the meta leader, by its peer id
ANSWER = "$JSC.META.ANSWER.%s"  # the meta leader's answers to requests a server forwarded
STEPDOWN = "$JS.API.META.LEADER.STEPDOWN"
ONE_REPLICA_ELSEWHERE = ("no suitable peers for placement, natsd keeps a one-replica stream on the "
                         "server its request reached: send it through a server that meets the placement")
SERVER_REMOVE = "$JS.API.SERVER.REMOVE"
REMOVE_REQUEST = {"peer": ("string", "str"), "peer_id": ("string", "str")}
STEPDOWN_TYPE = "meta_leader_stepdown_response"
REMOVE_TYPE = "meta_server_remove_response"


class MetaGroup:
    def __init__(self, engine):
        s = engine.server
        self.engine = engine
        self.server = s
        self.routes = s.cluster
        self.name = s.name
        self.peer = get_hash(s.name)
        self.js_dir = os.path.join(engine.store_dir, s.accounts.system.name, "_js_")
        self.dir = os.path.join(self.js_dir, GROUP)
        self.group = None
        self.assignments = {}           # (account, stream) -> the committed assignment
        self.replicas = {}              # (account, stream) -> ReplicatedStream run here
        self.waiting = {}               # leader: raft index -> (account, reply, response type)
        self.proposed = {}              # leader: (account, stream) -> (config JSON, [same creates])
        self.removing = None            # leader: (peer, reply) of a SERVER.REMOVE in progress
        self.removed = set()            # peers removed by request: not added back automatically
        self.peer_names = {self.peer: self.name}
        self.peer_clusters = {self.peer: self.routes.name}
        self.peer_tags = {self.peer: frozenset(t.lower() for t in s.opts.server_tags)}
        self.peer_room = {}             # peer -> storage kind -> bytes left, from its STATSZ
        self.started_at = time.monotonic()
        self.started_ns = time.time_ns()        # assignments made before were replayed, not new
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
                               apply=self._apply, on_leader=self._leader_changed, eager_commit=True)
        if not existing or not self.group.members():
            log.info("JetStream cluster bootstrapping")
        index = self.group.storage.snapshot_meta()[0]
        if index:
            self._install(index, self.group.storage.snapshot_data(), joining=False)
        self.group.start()
        self.server.system.subscribe(STEPDOWN, self._on_stepdown)
        self.server.system.subscribe(SERVER_REMOVE, self._on_server_remove)
        self.server.system.subscribe(FORWARD % self.peer, self._on_forward)
        self.server.system.subscribe(ANSWER % self.peer, self._on_answer)
        self.server.system.remote.on_statsz.append(self._on_statsz)
        self.timer = self.server.loop.call_later(CHECK, self._check)

    def stop(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        on_statsz = self.server.system.remote.on_statsz
        if self._on_statsz in on_statsz:
            on_statsz.remove(self._on_statsz)
        for r in self.replicas.values():
            r.stop()
        if self.group is not None:
            self.group.stop()

    # ---- replicated streams: requests ----

    def request(self, op, jsa, body, reply):
        """A create ("add", body: cfg), delete ("del", body: name) or change of servers ("peers",
        body: name and either cfg with a new `num_replicas` and the peer to keep, or the peer
        to remove) of a replicated stream asked on this server: the meta leader decides. It
        answers a delete and a peer removal; the stream's leader answers a create and an
        update once it has applied them."""
        self._route(dict(body, op=op, acc=jsa.name, reply=reply.decode() if reply else ""))

    def _route(self, msg):
        """A request to the meta leader: led here, forwarded to it, or refused when the group
        has been leaderless too long."""
        if self.is_leader():
            self._lead(msg)
        elif self.group.leader:
            msg["via"] = self.peer      # the answer comes back this way (_answer)
            self.server.system.publish(FORWARD % self.group.leader, json.dumps(msg).encode())
        elif self.leaderless_too_long():
            self._answer(msg, E.error("JSClusterNotAvailErr"))
        else:
            log.debug("JetStream request left unanswered: the meta group has no leader yet")

    def purge_account(self, account, reply):
        """`$JS.API.ACCOUNT.PURGE`, asked on this server: the meta leader records one entry
        that makes every server drop the account's streams (its replicated ones, and the
        one-replica streams natsd keeps on their server) and answers at once, as nats-server's
        leader does."""
        self._route({"op": "purge", "acc": account, "reply": reply.decode() if reply else "",
                     "reply_acc": self.server.accounts.system.name})     # asked by the system account

    def _on_forward(self, sub, subject, reply, hdr, payload, origin):
        try:
            msg = json.loads(bytes(payload))
        except ValueError:
            log.warning("JetStream metadata request that is not JSON dropped")
            return
        if self.is_leader():
            self._lead(msg)
        else:
            self._answer(msg, E.error("JSClusterNotAvailErr"))

    def _lead(self, msg):
        if msg["op"] == "purge":
            try:
                self.group.propose(json.dumps({"op": "purge", "acc": msg["acc"]}).encode())
            except NotLeader:
                return
            streams = sum(1 for a, _ in self.assignments if a == msg["acc"])
            log.info("Purge request for account %s (streams: %d, hasAccount: %s)", msg["acc"], streams,
                     "true" if self.server.accounts.accounts.get(msg["acc"]) is not None else "false")
            self._answer(msg, {"initiated": True})
            return
        try:
            key = (msg["acc"], msg["cfg"]["name"] if msg["op"] == "add" else msg["name"])
            if msg["op"] == "peers":
                self._lead_peers(key, msg)
                return
            if msg["op"] == "add":
                have = self.assignments.get(key)
                cfg_json = json.dumps(msg["cfg"], sort_keys=True)
                if have is not None:
                    if json.dumps(have["cfg"], sort_keys=True) != cfg_json:
                        raise E.error("JSStreamNameExistErr")
                    self._answer(msg, self._created(key, have))
                    return
                if key in self.proposed:
                    # two creates at once: the first proposed wins; the same config is
                    # answered once it is applied, another one is refused now
                    if self.proposed[key][0] != cfg_json:
                        raise E.error("JSStreamNameExistErr")
                    self.proposed[key][1].append(msg)
                    return
                move = msg.get("move_one")
                entry = {"op": "add", "acc": key[0], "cfg": msg["cfg"],
                         "peers": self._place(key, msg["cfg"], msg.get("adopt"), 2 if move else None),
                         "group": "S-R%dF-%s" % (msg["cfg"]["num_replicas"], get_hash("%s.%s" % key)),
                         "created": time.time_ns(), "reply": msg.get("reply", ""), "via": msg.get("via", "")}
                if msg.get("adopt"):
                    # a one-replica stream scaled up: its server's copy becomes the group's
                    entry.update(adopt=msg["adopt"], since=msg.get("since") or entry["created"])
                if move:
                    # a one-replica stream moved (natsd/jetstream/replicated/scale.py): a group of its
                    # server and the new one until the new one has it all and keeps it alone
                    entry["origin"] = {"peers": [msg["adopt"]], "num_replicas": 1,
                                       "placement": move.get("placement"), "move": True,
                                       "one": {"to": entry["peers"][1], "cfg": msg["cfg"]}}
            else:
                if key not in self.assignments:
                    raise E.error("JSStreamNotFoundErr")
                entry = {"op": "del", "acc": key[0], "name": key[1]}
                if msg.get("keep"):
                    # scaled down to one replica: that server keeps its copy (it answered)
                    if msg["keep"] not in self.assignments[key]["peers"]:
                        raise E.error("JSClusterNotAvailErr")
                    entry.update(keep=msg["keep"], cfg=msg["cfg"])
            index = self.group.propose(json.dumps(entry).encode())
            if msg["op"] == "add":
                self.proposed[key] = (cfg_json, [])
            if msg["op"] == "del" and not msg.get("keep"):
                self.waiting[index] = msg   # a create is answered by the stream's first leader
        except E.ApiError as err:
            self._answer(msg, err)
        except NotLeader:
            self._answer(msg, E.error("JSClusterNotAvailErr"))

    def _lead_peers(self, key, msg):
        """A change of a replicated stream's servers. A move (new placement) and a scale (new
        `num_replicas`) record where the stream started (`origin`) until its group reports
        that its members match (`settle`); a cancel goes back there."""
        have = self.assignments.get(key)
        if have is None:
            raise E.error("JSStreamNotFoundErr")
        origin = have.get("origin")
        kind = msg.get("change", "remove" if "remove" in msg else "scale")
        if kind == "settle":
            if origin is not None and msg.get("peers") == have["peers"]:
                self.group.propose(json.dumps({"op": "settle", "acc": key[0], "name": key[1]}).encode())
            return
        if kind == "move" and origin is not None:
            raise E.error("JSStreamMoveInProgressErr" if origin["move"] else "JSStreamReconfigureInProgressErr")
        if kind == "scale" and origin is not None and origin["move"]:
            raise E.error("JSStreamMoveInProgressErr")
        if kind == "cancel" and origin is None:
            raise E.error("JSStreamReconfigureNotInProgressErr")
        cfg = msg.get("cfg") or have["cfg"]
        pool = self.pool(cfg)
        if kind == "remove":
            wanted = msg["remove"]
            peer = get_hash(wanted) if get_hash(wanted) in have["peers"] else wanted
            peers = remap.remove_peer(key, have["peers"], peer, pool, cfg.get("placement"))
        elif kind == "move":
            peers = remap.move(key, have["peers"], pool, cfg.get("placement"))
        elif kind == "cancel":
            cfg = dict(have["cfg"], num_replicas=origin["num_replicas"])
            cfg.pop("placement", None)
            if origin.get("placement"):
                cfg["placement"] = origin["placement"]
            peers = origin["peers"]
            if origin.get("one"):
                # a one-replica move goes back: the server it came from keeps it alone
                peers = have["peers"]
                origin = dict(origin, one={"to": origin["peers"][0], "cfg": cfg})
        else:
            peers = remap.rescale(key, have["peers"], cfg["num_replicas"], pool, cfg.get("placement"),
                                  msg.get("keep"))
        entry = {"op": "peers", "acc": key[0], "name": key[1], "cfg": cfg, "peers": peers,
                 "reply": msg.get("reply", "") if kind != "remove" else "", "via": msg.get("via", "")}
        if kind == "cancel":
            entry["answer"] = "stream_cancel_move_response"
        if kind != "remove":
            entry["origin"] = origin or {"peers": have["peers"], "num_replicas": have["cfg"]["num_replicas"],
                                         "placement": have["cfg"].get("placement"), "move": kind == "move"}
        self.group.propose(json.dumps(entry).encode())
        if kind == "remove":
            self._answer(msg, {"success": True})    # as nats-server: once proposed

    def settle(self, key, peers):
        """A stream group's leader: its members are the assigned ones now."""
        self.request("peers", self.engine.jsas[key[0]], {"name": key[1], "change": "settle", "peers": list(peers)},
                     None)

    def reconfiguring(self, key):
        """The origin of a move or scale of the stream in progress, or None."""
        return (self.assignments.get(key) or {}).get("origin")

    def _place(self, key, cfg, first=None, n=None):
        """The servers of a new replicated stream (natsd/jetstream/replicated/peerselect.py); `first`:
        the server of a one-replica stream scaled up (or moved), which stays; `n`: how many
        when not the config's `num_replicas` (a one-replica move: two)."""
        return self.pool(cfg).select(key, n or cfg["num_replicas"], cfg.get("placement"),
                                     [first] if first else ())

    def meets_here(self, cfg):
        """Does this server meet a one-replica stream's placement? Raises nats-server's
        placement error when no server does."""
        pool, key = self.pool(), ("", cfg["name"])
        pool.select(key, 1, cfg.get("placement"))
        try:
            pool.only(self.peer).select(key, 1, cfg.get("placement"))
        except E.ApiError:
            return False
        return True

    def check_placed_here(self, cfg):
        """A one-replica stream is created on the server the request reached
        (natsd/jetstream/replicated/placement.py): raises nats-server's placement error when no server
        meets its placement, and says so when only other servers do."""
        if not self.meets_here(cfg):
            raise E.error("JSClusterNoPeersErrF", err=ONE_REPLICA_ELSEWHERE)

    def pool(self, cfg=None):
        """The meta group's servers as placement sees them; with a stream's `cfg`, the room a
        new server needs for it (its max_bytes in its storage)."""
        ha, streams = {}, {}
        for a in self.assignments.values():
            for p in a["peers"]:
                streams[p] = streams.get(p, 0) + 1
                if len(a["peers"]) > 1:
                    ha[p] = ha.get(p, 0) + 1
        js = self.server.opts.jetstream
        room = dict(self.peer_room)
        room[self.peer] = room_of({"config": self.engine.config_dict(), "stats": self.engine.stats_dict()})
        servers = [Server(p, self.peer_tags.get(p, frozenset()), p == self.peer or p in self.connected,
                          ha.get(p, 0), p in self.peer_tags, room.get(p), streams.get(p, 0))
                   for p in sorted(set(self.group.members()) | {self.peer})]
        need = None
        if cfg is not None:
            need = ("memory" if cfg.get("storage") == "memory" else "file", cfg.get("max_bytes", -1))
        return Pool(servers, self.peer, Rules(self.routes.name, js.unique_tag, js.limits.get("max_ha_assets", 0)),
                    need)

    def _on_statsz(self, sub, subject, reply, hdr, payload, origin):
        try:
            event = json.loads(bytes(payload))
            server = event["server"]
            peer = get_hash(server["name"])
            new = peer not in self.peer_tags
            self.peer_tags[peer] = frozenset(str(t).lower() for t in server.get("tags") or ())
            jetstream = (event.get("data") or event.get("statsz") or {}).get("jetstream")
            if jetstream:
                self.peer_room[peer] = room_of(jetstream)
        except (ValueError, KeyError, TypeError, AttributeError):
            return                      # not an event of ours to read
        if new:
            self.server.system.announce()   # as nats-server: the new server hears of us at once

    def _answer(self, msg, result):
        if not msg.get("reply"):
            return
        rtype = {"add": "stream_update_response" if msg.get("adopt") else "stream_create_response",
                 "del": "stream_delete_response", "purge": "account_purge_response",
                 "peers": "stream_remove_peer_response" if "remove" in msg else "stream_update_response"}[msg["op"]]
        self.answer(msg.get("reply_acc") or msg["acc"], msg["reply"], msg.get("via"),
                    E.api_response(rtype, result))

    def answer(self, account, reply, via, response):
        """Answer a request this group handled: here, or through the server that forwarded
        it (`via`, a peer id). That server is sure to know the requester's reply subscription;
        another may not yet (the request came over the system account's route, the
        requester's SUB over its own account's)."""
        if via and via != self.peer:
            answer = {"acc": account, "reply": reply, "response": response.decode()}
            self.server.system.publish(ANSWER % via, json.dumps(answer).encode())
            return
        acc = self.server.accounts.get(account)
        if acc is not None:
            publish(acc.sublist, reply.encode(), None, None, response)

    def _on_answer(self, sub, subject, reply, hdr, payload, origin):
        try:
            answer = json.loads(bytes(payload))
            self.answer(answer["acc"], answer["reply"], None, answer["response"].encode())
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("JetStream metadata answer that does not decode dropped")

    def _created(self, key, assignment):
        r = self.replicas.get(key)
        if r is None:
            return E.error("JSClusterNotAvailErr")
        info = r.stream.info()
        info["did_create"] = True
        return info

    # ---- replicated streams: what every server applies ----

    def _apply(self, items):
        for kind, index, data in items:
            if kind == "snapshot":
                self._install(index, data, joining=True)
            elif kind == "entry" and data:
                self._apply_entry(index, data)
        self._maybe_compact()

    # ---- snapshots: the assignments in place of the entries that made them ----

    def _maybe_compact(self):
        n = self.group.node
        if n.applied - self.group.storage.snapshot_meta()[0] < COMPACT_ENTRIES:
            return
        data = json.dumps({"v": SNAPSHOT_VERSION, "assignments": list(self.assignments.values())},
                          separators=(",", ":")).encode()
        try:
            n.compact(n.applied, data)
        except OSError as e:
            log.error("JetStream metadata could not take a snapshot at entry %d: %s (its log keeps "
                      "growing until one succeeds)", n.applied, e)

    def _install(self, index, data, joining):
        """The assignments as of a snapshot: this server's own at its start (joining False, as
        replaying the entries would), or its leader's (a server that was far behind: streams
        assigned to it wait for their groups' leaders). Streams it no longer has go, new ones
        start, changed ones follow."""
        try:
            snap = json.loads(bytes(data))
            if snap.get("v") != SNAPSHOT_VERSION:
                raise ValueError("unknown version %r" % snap.get("v"))
            new = {(e["acc"], e["cfg"]["name"]): e for e in snap["assignments"]}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("JetStream metadata snapshot at entry %d cannot be read: %s", index, e)
            return
        for key in [k for k in self.assignments if k not in new]:
            self._unassign(key)
        for key, entry in new.items():
            have = self.assignments.get(key)
            if have is None:
                self.assignments[key] = entry
                if self.peer in entry["peers"] and key not in self.replicas:
                    self._host(key, entry, fresh=False, joining=joining)
                continue
            if (have["peers"], have["cfg"], have.get("origin")) != (entry["peers"], entry["cfg"], entry.get("origin")):
                self._apply_peers(key, entry)
                if "origin" not in entry:
                    self._apply_settle(key)

    def _apply_entry(self, index, data):
        try:
            entry = json.loads(data)
            if entry["op"] == "purge":
                self._apply_purge(entry["acc"])
                return
            key = (entry["acc"], entry["cfg"]["name"] if entry["op"] == "add" else entry["name"])
            if entry["op"] == "peers":
                self._apply_peers(key, entry)
                return
            if entry["op"] == "settle":
                self._apply_settle(key)
                return
        except (ValueError, KeyError, TypeError) as e:
            log.error("JetStream metadata entry %d does not decode: %s", index, e)
            return
        if entry["op"] == "add":
            same = self.proposed.pop(key, (None, []))[1]
            if key in self.assignments:
                # a second create of the name committed (proposed by another leader): the
                # first one stands
                log.warning("JetStream stream '%s > %s' assigned twice: the first assignment stands", *key)
                return
            self.assignments[key] = entry
            if self.peer in entry["peers"] and key not in self.replicas:
                self._host(key, entry, fresh=entry["created"] >= self.started_ns)
            for msg in same:
                self._answer(msg, self._created(key, entry))
        elif entry["op"] == "del":
            self._unassign(key, entry.get("keep"), entry)
        msg = self.waiting.pop(index, None)
        if msg is not None:
            self._answer(msg, {"success": True})

    def _apply_purge(self, account):
        """An account purged: its replicated streams and this server's one-replica ones go."""
        for key in [k for k in self.assignments if k[0] == account]:
            self._unassign(key)
        jsa = self.engine.jsas.get(account)
        for name, st in sorted(jsa.streams.items()) if jsa is not None else ():
            if st.replica is None:
                jsa.delete_stream(name)

    def _unassign(self, key, keep=None, entry=None):
        """The stream is no longer replicated: its copy here goes, or becomes a one-replica
        stream on the server that `keep` names."""
        self.assignments.pop(key, None)
        r = self.replicas.pop(key, None)
        if r is None:
            return
        if keep == self.peer:
            replscale.become_one(r, entry["cfg"])
            return
        was_leader = r.is_leader()
        r.jsa.delete_stream(key[1])
        r.stop(delete=True)
        if was_leader and keep is None:
            advisories.stream_action(r.stream, "delete")    # the leader's, once, as nats-server's

    def _apply_peers(self, key, entry):
        have = self.assignments.get(key)
        if have is None:
            return
        new = dict(have, peers=entry["peers"], cfg=entry["cfg"])
        if entry.get("origin"):
            new["origin"] = entry["origin"]
        self.assignments[key] = new
        r = self.replicas.get(key)
        if self.peer in new["peers"]:
            if r is None:
                self._host(key, new, fresh=False, joining=True)
            else:
                r.reassign(new, entry)
        elif r is not None and entry.get("origin", {}).get("move"):
            r.reassign(new, entry)      # a member until the move settles
        elif r is not None:
            r.leave(lambda: self._left(key, r))

    def _apply_settle(self, key):
        have = self.assignments.get(key)
        if have is None or "origin" not in have:
            return
        self.assignments[key] = {k: v for k, v in have.items() if k != "origin"}
        r = self.replicas.get(key)
        if r is not None and self.peer not in have["peers"]:
            r.leave(lambda: self._left(key, r))
        log.info("JetStream stream '%s > %s' is on its assigned servers: %s", key[0], key[1],
                 ", ".join(self.peer_names.get(p, p) for p in have["peers"]))

    def _left(self, key, r):
        """A replica moved off this server: its copy and its group's log go."""
        if self.replicas.get(key) is r:
            del self.replicas[key]
        if r.jsa.streams.get(key[1]) is r.stream:
            r.jsa.delete_stream(key[1])
        r.stop(delete=True)
        log.info("JetStream stream '%s > %s' moved off this server", *key)

    def _host(self, key, entry, fresh, joining=False):
        jsa = self.engine.jsas.get(key[0])
        if jsa is None:
            log.error("Replicated stream '%s > %s' assigned here, but the account has no JetStream", *key)
            return
        adopt = None
        if key[1] in jsa.streams:
            if entry.get("adopt") != self.peer or jsa.streams[key[1]].replica is not None:
                if not fresh and jsa.streams[key[1]].replica is None:
                    # replayed at a start: the stream later became this server's one-replica
                    # stream (moved or scaled down here); a later entry says so
                    log.debug("Replicated stream '%s > %s': replayed assignment of a stream now here "
                              "with one replica", *key)
                    return
                log.error("Replicated stream '%s > %s' assigned here, but a stream of that name exists", *key)
                return
            adopt = jsa.release_stream(key[1])
        try:
            self.replicas[key] = ReplicatedStream(self, jsa, entry, fresh, joining, adopt)
        except (OSError, ValueError) as e:
            log.error("Replicated stream '%s > %s' could not start here: %s", key[0], key[1], e)

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
            self._removal_done()
            for p in sorted(seen - set(g.members()) - self.removed):
                try:
                    if g.admit(p):      # a learner first, a member once it has the log
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
        self.proposed.clear()           # the guard against two creates at once is the leader's
        if leader == self.peer:
            log.info("Self is new JetStream cluster metadata leader")
            system = self.server.accounts.system
            advisories.send(system.sublist, "$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED",
                            "io.nats.jetstream.advisory.v1.domain_leader_elected", self.engine.domain or "",
                            leader=self.peer, replicas=lambda: peer_infos(
                                self.group, self.peer, self.peer_names, self.connected, everyone=True),
                            cluster=self.routes.name)
        elif not leader:
            log.info("JetStream cluster no metadata leader")
        else:
            log.info("JetStream cluster new metadata leader: %s/%s",
                     self.peer_names.get(leader, leader), self.peer_clusters.get(leader, self.routes.name))

    # ---- questions ----

    def leader_known(self):
        """Whether the meta group has a leader now (this server knows which)."""
        return bool(self.group.leader)

    def leaderless_too_long(self):
        """nats-server's isLeaderless: no leader, and the group has been up longer than the
        lost-quorum interval. Only then does a request that needs the leader hear 503
        "JetStream system temporarily unavailable"; before (a cluster still electing its first
        leader) it goes unanswered, as nats-server's servers that do not lead leave it, and
        the client's retry finds the leader."""
        return not self.group.leader and time.monotonic() - self.started_at > LOST_QUORUM

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
        replicas = peer_infos(g, self.peer, self.peer_names, self.connected)
        if replicas:
            out["replicas"] = replicas
        size = len(members)
        out.update({"cluster_size": size, "quorum_needed": size // 2 + 1, "pending": 0,
                    "pending_requests": 0, "pending_infos": 0,
                    "snapshot": {"pending_entries": 0, "pending_size": 0,
                                 "last_time": "0001-01-01T00:00:00Z"}})
        return out

    def stream_alternates(self, jsa, stream):
        """STREAM.INFO `alternates` on a cluster: the stream and the streams of its account that
        mirror it (those the meta group assigned, and this server's one-replica streams), or
        None when there is no mirror."""
        configs = {name: a["cfg"] for (acc, name), a in self.assignments.items() if acc == jsa.name}
        for st in jsa.streams.values():
            configs.setdefault(st.name, st.config)
        names = [stream] if stream in configs else []
        names += sorted(n for n, cfg in configs.items() if (cfg.get("mirror") or {}).get("name") == stream)
        if len(names) < 2:
            return None
        out = []
        for name in names:
            alt = {"name": name}
            if self.engine.domain:
                alt["domain"] = self.engine.domain
            alt["cluster"] = self.routes.name
            out.append(alt)
        return out

    def raftz(self, account):
        """The status of the Raft groups here that belong to `account`, by group name: the meta
        group is the system account's, a replicated stream's group its own account's."""
        out = {}
        if account == self.server.accounts.system.name:
            out[GROUP] = self.group.status(self.peer_names)
        for (acc, _), r in self.replicas.items():
            if acc == account and not r.group.stopped:
                out[r.group_name] = r.group.status(self.peer_names)
                for host in r.consumers.hosts.values():     # consumers' groups of their own,
                    if not host.group.stopped and self.peer in host.group.members():   # as a member
                        out[host.group_name] = host.group.status(self.peer_names)
        return out

    def health_errors(self):
        """What /healthz reports about the meta group: nats-server's text when there is no
        leader, then (beyond nats-server) which members this server has not heard from since
        when, and what to do; with a leader, the replicated streams here that have none (then
        the consumers' own groups of the healthy ones)."""
        g = self.group
        if g.leader:
            # as nats-server: a stream's consumers are looked at once the stream is healthy
            return [e for r in self.replicas.values()
                    for e in (r.health_errors() or [ce for h in r.consumers.hosts.values()
                                                    for ce in h.health_errors()])]
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

    # ---- $JS.API.SERVER.REMOVE (system account; only the leader answers) ----

    def _on_server_remove(self, sub, subject, reply, hdr, payload, origin):
        if not self.is_leader() or not reply:
            return
        try:
            if required_level_too_high(hdr):
                raise E.error("JSRequiredApiLevelErr")
            if gojson.is_empty_request(payload):
                raise E.error("JSBadRequestErr")
            req = decode_request(payload, REMOVE_REQUEST, "JSApiMetaServerRemoveRequest", True)
            if self.removing is not None:
                raise E.error("JSClusterServerMemberChangeInflightErr")
            members = self.group.members()
            if req.get("peer_id"):
                found = req["peer_id"] if req["peer_id"] in members else None
            else:
                found = next((p for p in members if self.peer_names.get(p) == req.get("peer", "")), None)
            if found is None:
                raise E.error("JSClusterServerNotMemberErr")
            try:
                self.group.remove_member(found)
            except ValueError:
                raise E.error("JSClusterServerMemberChangeInflightErr") from None
            except NotLeader as e:
                raise E.error("JSRaftGeneralErrF", err=str(e)) from None
        except E.ApiError as err:
            self.server.system.publish(reply, E.api_response(REMOVE_TYPE, err))
            return
        self.removed.add(found)
        self.removing = (found, bytes(reply))
        self._removal_done()

    def _removal_done(self):
        """Answer a SERVER.REMOVE once the change is committed."""
        if self.removing is None:
            return
        peer, reply = self.removing
        g = self.group
        if peer not in g.members() and g.node.config_index <= g.node.commit:
            self.removing = None
            log.info("JetStream cluster removed peer %s (%s) from the metadata group", peer,
                     self.peer_names.get(peer, peer))
            self.server.system.publish(reply, E.api_response(REMOVE_TYPE, {"success": True}))

    def step_down(self, placement):
        """Hand leadership on, as the placement asks (clusterinfo.step_down)."""
        step_down(self.group, self.peer, placement, self.peer_clusters)

    def hand_off_leaders(self):
        """nats-server's transferRaftLeaders, for lame duck mode and shutdown: the meta group and
        each stream and consumer group this server leads hand leadership to the most up-to-date
        member heard from lately, so the cluster need not wait an election timeout -> whether
        any did."""
        moved = 0
        owners = [self] + list(self.replicas.values())
        owners += [host for r in self.replicas.values() for host in r.consumers.hosts.values()]
        for owner in owners:
            if owner.group.stopped or not owner.group.is_leader():
                continue
            try:
                owner.step_down({})
                moved += 1
            except E.ApiError:
                pass                    # no other member to take it
        if moved:
            log.info("JetStream handed the leadership of %d Raft group%s to other members",
                     moved, "" if moved == 1 else "s")
        return moved > 0
