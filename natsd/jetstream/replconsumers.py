"""The replicated consumers of a replicated stream (natsd/jetstream/replicated.py): their
configurations and their delivery and ack state ride in the stream's Raft group, so that the
stream's next leader carries on where the last one stopped.

- Which consumers: all of them but the internal consumers of mirrors and sources. Those
  nats-server gives one replica (`num_replicas` 1, or 0 for an ephemeral on a limits stream)
  ride in the group too, so that they follow the stream's leader: on
  nats-server an R1 consumer stays on one server, on natsd a consumer away from its stream's
  leader would have nothing to answer its requests. Their config keeps the count asked.
- Every replica keeps the table of the stream's replicated consumers: name -> creation time,
  configuration and the last committed state (natsd/jetstream/persist.py's state.json dict).
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

The consumer's leader is its stream's leader: `CONSUMER.LEADER.STEPDOWN` moves both.
"""
import logging

from natsd._core.router import publish
from natsd.jetstream import consumerconfig as cc, errors as E, persist
from natsd.jetstream.consumer import Consumer

log = logging.getLogger("natsd")

STATE_INTERVAL = 0.02           # seconds between two consumer_state entries of one stream
OPS = {"consumer_create": "consumer_create_response", "consumer_delete": "consumer_delete_response",
       "consumer_state": None}


class ReplicatedConsumers:
    def __init__(self, rs):
        self.rs = rs                    # the ReplicatedStream
        self.rows = {}                  # name -> {"created", "config" (JSON), "state"}
        self.live = False               # this server is the leader and runs them
        self.changed_cfg = {}           # name -> Consumer: state (and config) to propose
        self.changed_state = {}
        self.removed = []               # retention removals to propose
        self.ack_replies = []           # AckSync replies for the next state entry
        self.waiting = {}               # raft index -> (term, AckSync replies), answered at its
                                        # apply, even once this server no longer leads
        self.timer = None

    def wants(self, cfg, stream):
        return not cfg.get("direct")

    # ---- the leader's API ----

    def propose_create(self, cfg, name, created, action, reply):
        self.rs.propose_op("consumer_create", {"name": name, "created": created, "action": action,
                                               "config": cc.to_json(cfg)}, reply)

    def propose_delete(self, name, reply):
        self.rs.propose_op("consumer_delete", {"name": name}, reply)

    # ---- what the leader's consumers report ----

    def changed(self, o, config=False):
        if not self.live or o.closed:
            return
        (self.changed_cfg if config else self.changed_state)[o.name] = o
        self._arm()

    def answer_after_commit(self, o, reply):
        self.ack_replies.append(bytes(reply) if not isinstance(reply, str) else reply.encode())
        self.changed(o)

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
        out = {}
        for name, o in self.changed_state.items():
            if not o.closed:
                out[name] = {"state": persist.state_of(o)}
        for name, o in self.changed_cfg.items():
            if not o.closed:
                out.setdefault(name, {"state": persist.state_of(o)})["config"] = cc.to_json(o.cfg)
        req = {"consumers": out}
        if self.removed:
            req["removed"] = self.removed
        replies = self.ack_replies
        self.changed_state, self.changed_cfg, self.removed, self.ack_replies = {}, {}, [], []
        index = self.rs.propose_op("consumer_state", req, None)
        if index is not None and replies:
            self.waiting[index] = (self.rs.group.node.term, replies)

    # ---- every replica applies ----

    def apply(self, op, req, index):
        """A committed consumer operation; -> the answer for the leader's client (None: none)."""
        if op == "consumer_create":
            return self._apply_create(req)
        if op == "consumer_delete":
            return self._apply_delete(req["name"])
        self._apply_state(req, index)
        return None

    def _apply_create(self, req):
        name = req["name"]
        row = self.rows.get(name)
        if row is None:
            if req.get("action") == "update":
                return E.error("JSConsumerDoesNotExist")
            row = self.rows[name] = {"created": req["created"], "state": None}
        row["config"] = req["config"]
        if not self.live:
            return None
        stream = self.rs.stream
        o = stream.consumers.get(name)
        cfg = cc.decode_config(req["config"])
        if o is None:
            o = self._run(name, row)
            o.advisory("CREATED", "io.nats.jetstream.advisory.v1.consumer_action", action="create")
            self.changed(o)             # its starting position, chosen now, is replicated
        elif cfg != o.cfg:
            o.update_config(cfg)
        return o.info(initial=True)

    def _apply_delete(self, name):
        if self.rows.pop(name, None) is None:
            return E.error("JSConsumerNotFoundErr")
        o = self.rs.stream.consumers.get(name)
        if o is not None and self.live:
            self.changed_state.pop(name, None)
            self.changed_cfg.pop(name, None)
            o.delete()
        return {"success": True}

    def _apply_state(self, req, index):
        for name, c in (req.get("consumers") or {}).items():
            row = self.rows.get(name)
            if row is not None:
                row["state"] = c["state"]
                if "config" in c:
                    row["config"] = c["config"]
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
        return [Consumer.view(stream, name, cc.decode_config(row["config"]), row["created"], row["state"])
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
        for name, row in self.rows.items():
            if name not in self.rs.stream.consumers:
                try:
                    self._run(name, row)
                except Exception:
                    log.exception("JetStream could not start consumer '%s > %s > %s'",
                                  self.rs.jsa.name, self.rs.stream.name, name)
        self.rs.stream.consumer_removed()       # interest retention: what nobody needs now

    def stop_all(self):
        """Leadership left this server: its consumers go dormant. State not yet committed is
        lost: the next leader redelivers those messages, unacknowledged ones included."""
        self.live = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.changed_state, self.changed_cfg, self.removed, self.ack_replies = {}, {}, [], []
        consumers = self.rs.stream.consumers
        for name in self.rows:
            o = consumers.get(name)
            if o is not None and o.replica is self:
                del consumers[name]
                o.stop()
