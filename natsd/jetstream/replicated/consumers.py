"""The replicated consumers of a replicated stream (natsd/jetstream/replicated/streams.py): their
configurations and their delivery and ack state ride in the stream's Raft group, so that the
stream's next leader carries on where the last one stopped.

- Which consumers: all of them but the internal consumers of mirrors and sources. Those
  nats-server gives one replica (`num_replicas` 1, or 0 for an ephemeral on a limits stream)
  ride in the group, so that they follow the stream's leader: on nats-server an R1
  consumer stays on one server, here its state is replicated. Their info's cluster block is
  nats-server's for an R1 consumer (the server it runs on alone).
- Every replica keeps the table of the stream's replicated consumers: name -> creation time,
  configuration and the last committed state (natsd/jetstream/engine/persist.py's state.json dict).
  The table is rebuilt from the group's log when the server starts, like the stream's copy.
- Only the group's leader runs them, as ordinary Consumers reading its copy of the stream, and
  only once it has applied everything earlier leaders committed (RaftGroup.on_leader_ready).
  On the other replicas they are rows in the table: nothing subscribes, nothing delivers.
- The leader proposes, as stream operations (K_OP entries):
    consumer_create {name, created, config, action}  after the API has checked the request
    consumer_delete {name}                           the API, or the inactivity threshold
    consumer_state  {"consumers": {name: {"state", ["config"]}}, "removed": [seqs]}
  A consumer_state entry carries what changed since the last one (at most one entry per
  STATE_INTERVAL), and the messages that workqueue or interest retention removed on the
  leader, which the other replicas then remove too.
- An ack that asks for an answer (AckSync) is answered when the state entry that carries it
  is committed: an answered ack survives the leader. The server that proposed the entry
  answers, even if it handed its leadership on meanwhile.
- Handing leadership on (a stepdown, lame duck mode, a move): first the consumers' state so
  far is proposed, while the group still takes proposals, and they deliver nothing more here
  (what they delivered during the transfer would not be in the next leader's state). The acks
  taken since the last state entry was proposed (the raw acks, AckSyncs' replies included),
  and those the loop read but had not handed over yet (Consumer.take_queued_acks), go
  to the next leader when this server stops leading, and so do acks that reach it in its
  grace second afterwards (natsd/jetstream/replicated/forward.py); that leader applies them as if
  its clients had sent them, and answers the AckSyncs. Applying an ack twice changes nothing.
- Waiting pull requests: a consumer_state entry also carries, per consumer, the reply subjects
  of its waiting pull requests that the replicas do not know yet, and of those gone since
  (served, expired, refused, or nobody listens any more) ("pulls": {"add", "del"}); every
  replica keeps them. A server that starts leading tells each request its log knows of
  `409 Leadership Change`, as nats-server's new consumer leader does, so that its client asks
  again at once rather than wait out its expiry; the old leader tells them nothing. Requests
  that reached the old leader after its last entry go to the next leader with its acks.

A consumer that rides here has its stream's leader as its own: `CONSUMER.LEADER.STEPDOWN`
moves both. One with a Raft group of its own (natsd/jetstream/replicated/consumergroup.py; `wants_group`
picks them) has only its assignment in this table (`group` and `peers` in its row; a state
only as it was when a scale up gave it its group): a ConsumerGroup (`hosts`) on each of the
stream's servers (a member or an observer of its group) holds the rest, with a ReplicatedConsumers
of its own whose host is that group. On workqueue and interest streams the stream's leader
removes what such a consumer's committed state has acked (`hosted_acked`), and proposes the
removals here as it does for the consumers that ride here.
"""
import logging
import random
import secrets

from natsd._core.router import publish
from natsd.jetstream.engine import consumerconfig as cc, errors as E, persist
from natsd.jetstream.engine.consumer import Consumer
from natsd.jetstream.engine.pull import status_hdr

log = logging.getLogger("natsd")

STATE_INTERVAL = 0.02           # seconds between two consumer_state entries of one stream
KEPT_ACKS = 100000              # acks kept for the next leader at most (more: redelivered)
LEADERSHIP_CHANGE = status_hdr(409, "Leadership Change")
NEXT = b"$JS.API.CONSUMER.MSG.NEXT."     # a forwarded pull request's subject, before <stream>.<consumer>
OPS = {"consumer_create": "consumer_create_response", "consumer_delete": "consumer_delete_response",
       "consumer_state": None}


_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def replica_count(cfg, stream, stream_replicas):
    """A consumer's replicas as nats-server counts them: `num_replicas`, where 0 means the
    stream's, but one for an ephemeral of a limits stream."""
    r = cfg.get("num_replicas", 0)
    if r:
        return r
    if not cfg.get("durable_name") and stream.config.get("retention", "limits") == "limits":
        return 1
    return stream_replicas


def new_group_name(replicas):
    """A new consumer group's name, shaped as nats-server's."""
    return "C-R%dF-%s" % (replicas, "".join(secrets.choice(_ID_CHARS) for _ in range(8)))


class ReplicatedConsumers:
    def __init__(self, rs, host_group=None):
        """rs: the ReplicatedStream (or the ConsumerGroup whose one row this table is);
        host_group: what hosts a consumer with a Raft group of its own (ConsumerGroup), on a
        stream's table."""
        self.rs = rs
        self.host_group = host_group
        self.rows = {}                  # name -> {"created", "config" (JSON), "state"}
        self.live = False               # this server is the leader and runs them
        self.changed_cfg = {}           # name -> Consumer: state (and config) to propose
        self.changed_state = {}
        self.removed = []               # retention removals to propose
        self.ack_replies = []           # AckSync replies for the next state entry
        self.waiting = {}               # raft index -> (term, AckSync replies), answered at its
                                        # apply, even once this server no longer leads
        self.recent = []                # batches of raw acks taken since the last proposed
        self.recent_count = 0           # state entry (the loop's own lists, not copied)
        self.holding = False            # handing leadership on: the consumers deliver nothing
        self.timer = None
        self.pulls = {}                 # name -> reply subjects of its waiting pull requests,
                                        # as the log has them
        self.told = {}                  # the leader: name -> those the proposed entries name
        self.changed_pulls = {}         # the leader: name -> Consumer whose requests changed
        self.hosts = {}                 # name -> ConsumerGroup of a consumer with a group of its own

    def wants(self, cfg, stream):
        return not cfg.get("direct")

    # ---- the leader's API ----

    def wants_group(self, cfg, stream):
        """Whether a consumer gets a Raft group of its own, on a stream's table: one that
        counts more than one replica (replica_count); a consumer with fewer
        than its stream has some of the stream's servers as members."""
        n = len(getattr(self.rs, "peers", ()))
        return n > 1 and replica_count(cfg, stream, n) > 1

    def new_group(self, cfg, stream):
        """A new consumer group's assignment -> (name, servers): this server (the stream's
        leader) and as many others of the stream's as the consumer counts replicas, those it
        reaches first."""
        me, peers = self.rs.meta.peer, self.rs.peers
        count = min(replica_count(cfg, stream, len(peers)), len(peers))
        connected = self.rs.meta.connected
        others = [p for p in peers if p != me]
        random.shuffle(others)
        others.sort(key=lambda p: p not in connected)
        return new_group_name(count), [me] + others[:count - 1]

    def propose_create(self, cfg, name, created, action, reply):
        """A create or update; one that changes whether the consumer has a group of its own
        (its `num_replicas` to or from one) carries the group, or the state to go on from."""
        req = {"name": name, "created": created, "action": action, "config": cc.to_json(cfg)}
        row = self.rows.get(name)
        wants = self.wants_group(cfg, self.rs.stream)
        if row is not None and row.get("group"):
            if wants:
                req["group"], req["peers"] = row["group"], row["peers"]
            else:                       # down to one replica: it rides here from the state
                req["state"] = self.hosts[name].row()["state"]   # its group committed last
        elif wants:
            if row is not None:         # up from one replica: what it did so far first
                self._propose_state()
            req["group"], req["peers"] = self.new_group(cfg, self.rs.stream)
        self.rs.propose_op("consumer_create", req, reply)

    def led_elsewhere(self):
        """The consumers with groups of their own that do not run here (another server leads
        them): the stream's leader counts and shows them too."""
        running = self.rs.stream.consumers
        return [name for name in self.hosts if name not in running]

    def hosted_view(self, name):
        """Consumer `name`, which has a group of its own, as this server knows it: the running
        one if it leads here, else its last committed state (Consumer.view); None: no such."""
        host = self.hosts.get(name)
        if host is None:
            return None
        o = self.rs.stream.consumers.get(name)
        return o if o is not None and o.replica is host.consumers else host.view()

    def retention_consumers(self):
        """The consumers whose `needs` keep a message of an interest stream: those that ride
        here as they run, and those with groups of their own as their last committed state
        has them (natsd/jetstream/replicated/consumergroup.py)."""
        out = [o for o in self.rs.stream.consumers.values()
               if o.replica is None or o.replica is self]
        for host in self.hosts.values():
            out.append(host.committed_view())
        return out

    def hosted_acked(self, host):
        """A consumer group committed a new state of its consumer. The stream's leader removes
        what workqueue or interest retention no longer keeps of the messages that consumer
        has acked since the last look (its committed view's `needs`); the removals reach the
        other replicas through this group (retention_removed)."""
        stream = self.rs.stream
        retention = stream.config.get("retention", "limits")
        if not self.live or retention == "limits":
            return
        v = host.committed_view()
        store = stream.store
        seq, end = max(host.swept + 1, store.first_seq), v.sseq    # v.sseq: not delivered yet
        while seq < end:
            sm = store.load_next(seq, None)
            if sm is None or sm.seq >= end:
                break
            seq = sm.seq + 1
            if v.has_acked(sm.seq, sm.subject):
                stream.acked(sm.seq, sm.subject)
        acked_through = end - 1 if v.cfg["ack_policy"] == "none" else v.asflr
        host.swept = max(host.swept, acked_through)

    def sync_hosts(self):
        """The table changed wholesale (a snapshot): start and stop consumer groups to match."""
        for name in [n for n in self.hosts if not (self.rows.get(n) or {}).get("group")]:
            self.hosts.pop(name).stop(delete=True)
        for name, row in self.rows.items():
            if row.get("group") and name not in self.hosts:
                self.hosts[name] = self.host_group(self.rs, name, row)

    def host_leaders_changed(self):
        """A consumer group's leader changed (or one came or went). A consumer led by another
        server than the stream's leader serves from that server's copy, which applies a
        message once it hears it committed: while there is one, the stream's leader tells its
        followers of each commit at once rather than with its next append or heartbeat."""
        me = self.rs.meta.peer
        self.rs.group.node.eager_commit = any(h.leader_peer not in ("", me) for h in self.hosts.values())

    def committed_rows(self):
        """name -> row with its last committed configuration and state, those of consumers
        with groups of their own taken from their groups."""
        out = dict(self.rows)
        for name, host in self.hosts.items():
            out[name] = host.row() or out[name]
        return out

    def peers_changed(self):
        """The stream's servers changed: the consumer groups follow (their leaders do)."""
        for host in self.hosts.values():
            host.reconcile()

    def stop_hosts(self):
        for host in self.hosts.values():
            host.stop()
        self.hosts = {}

    def cluster_info(self, o=None):
        """nats-server's ClusterInfo of consumer `o`: its group's (its stream's, or its own).
        One that nats-server gives one replica has no group there and shows the server it
        runs on alone; here it runs on its stream's leader."""
        if o is None or replica_count(o.cfg, self.rs.stream, len(self.rs.peers)) != 1:
            return self.rs.cluster_info()
        out = {"name": self.rs.meta.routes.name}
        leader = self.rs.group.leader
        if leader:
            out["leader"] = self.rs.meta.peer_names.get(leader, leader)
        return out

    def propose_delete(self, name, reply):
        self.rs.propose_op("consumer_delete", {"name": name}, reply)

    # ---- what the leader's consumers report ----

    def changed(self, o, config=False):
        if not self.live or o.closed:
            return
        (self.changed_cfg if config else self.changed_state)[o.name] = o
        self._arm()

    def pulls_changed(self, o):
        if self.live and not o.closed:
            self.changed_pulls[o.name] = o
            self._arm()

    def answer_after_commit(self, o, reply):
        self.ack_replies.append(bytes(reply) if not isinstance(reply, str) else reply.encode())
        self.changed(o)

    def note_acks(self, msgs):
        """Acks a running consumer is about to apply: kept until the state entry that carries
        them is proposed, for the next leader should this one hand on first."""
        if self.live and self.recent_count < KEPT_ACKS:
            self.recent.append(msgs)
            self.recent_count += len(msgs)

    def take_acks(self, msgs):
        """Acks the previous leader took and never proposed, or that reached it after it
        handed on (replforward): applied by the consumers they name, once they run here."""
        if self.rs.defer_until_ready(self.take_acks, msgs) or not self.live:
            return                      # not ready yet; or leads no more: the ack wait redelivers
        by_name, pulls = {}, {}
        for m in msgs:
            if m[0].startswith(NEXT):   # a pull request: $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>
                pulls.setdefault(m[0].rsplit(b".", 1)[1].decode("utf-8", "replace"), []).append(m[1])
                continue
            toks = m[0].split(b".", 4)  # $JS.ACK.<stream>.<consumer>.<rest>
            if len(toks) == 5:
                by_name.setdefault(toks[3].decode("utf-8", "replace"), []).append(m)
        consumers = self.rs.stream.consumers
        for name, acks in by_name.items():
            o = consumers.get(name)
            if o is not None and o.replica is self:
                o._on_acks(None, acks)  # as its own subscription hands them over
        for name, replies in pulls.items():
            o = consumers.get(name)
            if o is not None and o.replica is self:
                self._tell_leadership_changed(o, [r.decode("utf-8", "replace") for r in replies if r])

    def hand_on(self):
        """The group is about to hand leadership on: what the consumers did so far is proposed
        while the group still takes proposals, and they deliver nothing more here. Should the
        transfer fail, they go on once the group takes proposals again (_propose_state)."""
        if not self.live:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._propose_state()
        self.holding = True
        self._arm()

    def retention_removed(self, seq):
        if self.live:
            self.removed.append(seq)
            self._arm()

    def _arm(self):
        if self.timer is None:
            self.timer = self.rs.server.loop.call_later(STATE_INTERVAL, self._propose_state)

    def _propose_state(self):
        self.timer = None
        if not self.live or self.rs.group.stopped:
            return
        if self.rs.group.node.transfer_to or not self.rs.is_leader():
            self._arm()                 # handing on: proposals wait for the transfer's end
            return                      # (or for stop_all, the leadership gone)
        if self.holding:                # the transfer failed: this server still leads
            self.holding = False
            for o in self.rs.stream.consumers.values():
                if o.replica is self:
                    o.kick()
        if not (self.changed_state or self.changed_cfg or self.removed or self.ack_replies
                or self.changed_pulls):
            return
        out = {}
        for name, o in self.changed_state.items():
            if not o.closed:
                out[name] = {"state": persist.state_of(o)}
        for name, o in self.changed_cfg.items():
            if not o.closed:
                out.setdefault(name, {"state": persist.state_of(o)})["config"] = cc.to_json(o.cfg)
        told = {}                       # a delivery may have served a request: looked at too
        for name, o in {**self.changed_state, **self.changed_pulls}.items():
            if not o.closed and o.waiting is not None:
                now, before = o.waiting.replies(), self.told.get(name, set())
                if now != before:
                    out.setdefault(name, {})["pulls"] = {"add": sorted(now - before),
                                                         "del": sorted(before - now)}
                    told[name] = now
        if not out and not self.removed and not self.ack_replies:
            self.changed_state, self.changed_cfg, self.changed_pulls = {}, {}, {}
            return                      # closed consumers, or requests the replicas know
        req = {"consumers": out}
        if self.removed:
            req["removed"] = self.removed
        index = self.rs.propose_op("consumer_state", req, None)
        if index is None:
            self._arm()                 # not the leader now: stop_all follows
            return
        if self.ack_replies:
            self.waiting[index] = (self.rs.group.node.term, self.ack_replies)
        self.changed_state, self.changed_cfg, self.removed, self.ack_replies = {}, {}, [], []
        self.recent, self.recent_count = [], 0
        self.changed_pulls = {}
        self.told.update(told)

    # ---- every replica applies ----

    def apply(self, op, req, index, reply=None):
        """A committed consumer operation; -> the answer for the leader's client (None: none,
        or the answer comes later: `reply` is the proposer's, handed to a consumer group)."""
        if op == "consumer_create":
            return self._apply_create(req, reply)
        if op == "consumer_delete":
            return self._apply_delete(req["name"])
        self._apply_state(req, index)
        return None

    def _apply_create(self, req, reply=None):
        name = req["name"]
        row = self.rows.get(name)
        if row is None:
            if req.get("action") == "update":
                return E.error("JSConsumerDoesNotExist")
            row = self.rows[name] = {"created": req["created"], "state": None}
            if req.get("group"):
                row["group"], row["peers"] = req["group"], list(req["peers"])
        elif req.get("group") and not row.get("group"):
            self._stop_riding(name)     # up from one replica: its group goes on from its
            row["group"], row["peers"] = req["group"], list(req["peers"])   # committed state
        elif "state" in req and row.get("group"):
            self.hosts.pop(name).dissolve()     # down to one replica: it rides here again
            del row["group"], row["peers"]
            row["state"] = req["state"]
            self.host_leaders_changed()
        row["config"] = req["config"]
        if row.get("group"):
            return self._apply_hosted_create(name, row, reply)
        if not self.live:
            return None
        stream = self.rs.stream
        o = stream.consumers.get(name)
        cfg = cc.decode_config(req["config"])
        if o is None:
            o = self._run(name, row)
            if "state" not in req:      # new, not back from a group of its own
                o.advisory("CREATED", "io.nats.jetstream.advisory.v1.consumer_action", action="create")
                self.changed(o)         # its starting position, chosen now, is replicated
        elif cfg != o.cfg:
            o.update_config(cfg)
        return o.info(initial=True)

    def _stop_riding(self, name):
        """Consumer `name` leaves this group for one of its own: it stops running here."""
        for table in (self.changed_state, self.changed_cfg, self.changed_pulls, self.pulls, self.told):
            table.pop(name, None)
        o = self.rs.stream.consumers.get(name)
        if o is not None and o.replica is self:
            del self.rs.stream.consumers[name]
            o.stop()

    def _apply_hosted_create(self, name, row, reply):
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = self.host_group(self.rs, name, row, fresh=True)
        else:
            host.update_row(row)
        if reply:
            host.answer_create(reply)
        return None

    def _apply_delete(self, name):
        if self.rows.pop(name, None) is None:
            return E.error("JSConsumerNotFoundErr")
        host = self.hosts.pop(name, None)
        if host is not None:
            host.stop(delete=True)
            self.host_leaders_changed()
            if self.live:
                self.rs.stream.consumer_removed()   # interest retention: what nobody needs now
            return {"success": True}
        self.pulls.pop(name, None)
        self.told.pop(name, None)
        o = self.rs.stream.consumers.get(name)
        if o is not None and self.live:
            self.changed_state.pop(name, None)
            self.changed_cfg.pop(name, None)
            o.delete()
        return {"success": True}

    def _apply_state(self, req, index):
        for name, c in (req.get("consumers") or {}).items():
            row = self.rows.get(name)
            if row is None:
                continue
            if "state" in c:
                row["state"] = c["state"]
            if "config" in c:
                row["config"] = c["config"]
            pulls = c.get("pulls")
            if pulls is not None:
                known = self.pulls.setdefault(name, set())
                known.difference_update(pulls["del"])
                known.update(pulls["add"])
        waiting = self.waiting.pop(index, None)
        if waiting is not None and self.rs.own_entry(index, waiting[0]):
            sublist = self.rs.jsa.sublist
            for reply in waiting[1]:
                publish(sublist, reply, None, None, b"")
        if not self.live:
            store = self.rs.stream.store
            for seq in req.get("removed") or ():
                store.remove(seq)

    def forget_through(self, index):
        """A leader's snapshot replaced the log up to `index` here: its entries are not applied
        one by one, so nobody waits for them."""
        for i in [i for i in self.waiting if i <= index]:
            del self.waiting[i]

    # ---- what monitoring shows ----

    def views(self):
        """On a replica that does not run them: each consumer as its last committed state has
        it (Consumer.view), as nats-server's followers show theirs in /jsz."""
        stream = self.rs.stream
        return [self.hosted_view(name) if name in self.hosts else
                Consumer.view(stream, name, cc.decode_config(row["config"]), row["created"], row["state"])
                for name, row in self.rows.items()]

    # ---- leadership ----

    def _run(self, name, row):
        stream = self.rs.stream
        o = Consumer(stream, name, cc.decode_config(row["config"]), row["created"])
        o.replica = self
        stream.consumers[name] = o
        o.start(recovered_state=row["state"] or {})
        self.rs.advise_consumer_leader(name)
        return o

    def start_all(self):
        """This server leads the group and has applied what earlier leaders committed."""
        self.live = True
        self.told = {name: set(replies) for name, replies in self.pulls.items() if replies}
        for name, row in self.rows.items():
            if name not in self.rs.stream.consumers and not row.get("group"):
                try:
                    o = self._run(name, row)
                except Exception:
                    log.exception("JetStream could not start consumer '%s > %s > %s'",
                                  self.rs.jsa.name, self.rs.stream.name, name)
                    continue
                if self.told.get(name):
                    self._tell_leadership_changed(o, self.told[name])
                    self.pulls_changed(o)       # the next entry drops them from every log
        for host in self.hosts.values():        # workqueue retention: what their groups
            host.swept = 0                      # committed as acked
            self.hosted_acked(host)
        self.rs.stream.consumer_removed()       # interest retention: what nobody needs now

    def _tell_leadership_changed(self, o, replies):
        """Pull requests an earlier leader of `o` held: they ask again, here."""
        for reply in replies:
            o.send_status(reply, LEADERSHIP_CHANGE)

    def stop_all(self):
        """Leadership left this server: its consumers go dormant. -> the acks they took that
        no state entry carries, for the next leader. Deliveries not yet proposed are lost: the
        next leader delivers those messages again."""
        self.live = self.holding = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        kept = [m for batch in self.recent for m in batch]     # the forwarder copies them
        self.changed_state, self.changed_cfg, self.removed, self.ack_replies = {}, {}, [], []
        self.recent, self.recent_count = [], 0
        self.changed_pulls = {}
        consumers = self.rs.stream.consumers
        for name in self.rows:
            o = consumers.get(name)
            if o is not None and o.replica is self:
                kept += o.take_queued_acks()
                kept += self._untold_pulls(o)
                del consumers[name]
                o.stop()
        self.told = {}
        return kept

    def _untold_pulls(self, o):
        """`o`'s waiting pull requests that no proposed entry names, as messages for the next
        leader, which tells them to ask again."""
        if o.waiting is None:
            return []
        subject = NEXT + ("%s.%s" % (self.rs.stream.name, o.name)).encode()
        untold = o.waiting.replies() - self.told.get(o.name, set())
        return [(subject, reply.encode(), None, b"", None) for reply in sorted(untold)]
