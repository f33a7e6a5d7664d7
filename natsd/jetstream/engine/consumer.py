"""Consumer: one JetStream consumer of a stream — delivery, acks, redelivery, pull requests.

Owns: the consumer's position (next stream sequence `sseq`, next delivery sequence `dseq`), ack
state (`pending` sseq -> (dseq, deliver time ns), a compact natsd/jetstream/engine/pending.pyx, ack floors,
redelivery counts, the redelivery queue), push delivery (interest, deliver_group, flow
control, idle heartbeats, rate limit, replay original, headers_only), pull delivery (the waiting-request queue in `pull.py`), the ack
protocol on `$JS.ACK.<stream>.<consumer>.>` (+ACK, -NAK [delay], +WPI, +NXT, +TERM, AckSync),
max_deliver + advisories, ephemeral inactivity deletion, ConsumerInfo, and the on-disk state
(`meta.json`, `state.json` in the consumer's directory; see `persist.py`). The ack protocol and
redelivery live in the `AckState` mixin (ackstate.py), push fan-out, flow control and
heartbeats in `PushDelivery` (delivery.py), pull requests in `PullQueue` (pull.py).

Everything runs on the server loop. Delivery is batched: events (new message, ack, pull
request, timer) only *schedule* `_run` with `call_soon`; `_run` then delivers as much as it may.
The stream drives us through `on_stored(seq, subject)`, `on_purged()`, `on_removed(seq)` and
`stop()`, and asks `needs(seq, subject)` for interest retention.
"""
import heapq
import logging
import os
import random
import time

from natsd.jetstream.engine.fastdeliver import client_target, deliver_batch
from natsd.jetstream.engine.pending import Pending
from natsd._core.sublist import Subscription
from natsd.gofmt import go_time
from natsd.jetstream.engine.store import StoreError
from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import persist
from natsd.jetstream.engine.ackstate import AckState
from natsd.jetstream.engine.delivery import PushDelivery
from natsd.jetstream.engine.pull import PullQueue, status_hdr
from natsd.protocol import KIND_GATEWAY
from natsd.subject import has_wildcard, subject_matches

log = logging.getLogger("natsd")

NS = 1_000_000_000
FC_MAX_PENDING = 32 * 1024 * 1024
RUN_BUDGET = 2048
SAVE_INTERVAL = 0.1                 # seconds between two state.json writes (see schedule_save)
ADV = "$JS.EVENT.ADVISORY.CONSUMER."


def now_ns():
    return time.time_ns()



def account_of(stream):
    """The natsd Account (with .sublist) the stream lives in."""
    for cand in (getattr(stream, "account", None), getattr(stream, "jsa", None)):
        if cand is None:
            continue
        if hasattr(cand, "sublist"):
            return cand
        inner = getattr(cand, "account", None)
        if inner is not None and hasattr(inner, "sublist"):
            return inner
    raise RuntimeError("stream has no account with a sublist")


def store_first_last(store):
    """(first_seq, last_seq, messages) of a stream's store."""
    st = store.state()
    return st["first_seq"], st["last_seq"], st["messages"]


class Consumer(AckState, PushDelivery):
    def __init__(self, stream, name, cfg, created_ns=None):
        self.stream = stream
        self.server = stream.server
        self.loop = self.server.loop
        self.account = account_of(stream)
        self.name = name
        self.cfg = cfg
        self.created = created_ns or now_ns()
        self.closed = False
        self.filters = cc.filters(cfg)
        self._literal_filters = bool(self.filters) and not any(has_wildcard(f) for f in self.filters)
        self.sseq = 1                   # next stream sequence to consider
        self.dseq = 1                   # next delivery (consumer) sequence
        self.adflr = 0                  # ack floor, consumer sequence
        self.asflr = 0                  # ack floor, stream sequence
        self.pending = Pending()        # sseq -> (dseq, deliver/ack-wait base time ns)
        self.rdc = {}                   # sseq -> delivery count (only when redelivered)
        self.rdq = []                   # heap of sseqs to redeliver
        self.rdq_set = set()
        self.npc = 0                    # matching messages at or after sseq not yet delivered
        self.lss = None                 # last-per-subject skip list: [seqs], resume
        self.lss_resume = 0
        self.last_delivered_ns = None
        self.last_ack_ns = None
        self.waiting = PullQueue(self, cfg["max_waiting"]) if not cc.is_push(cfg) else None
        self.active = False             # push: deliver subject has interest
        self._scheduled = False
        self._ptimer = None             # ack-wait timer
        self._ptimer_at = None
        self._hbtimer = None
        self._wtimer = None             # pull requests expiry/heartbeat timer
        self._dtimer = None             # inactivity deletion timer
        self._watched = None            # the deliver subject watched for a subscriber
        self._ptimer_cb = None
        self._delay_timer = None        # replay/rate-limit/pause wake-up
        self.holding = False            # delivers nothing yet: its create is not answered
        self._save_scheduled = False
        self._last_save = 0.0           # loop time of the last state.json write
        self.last_activity = self.loop.time()
        # flow control
        self.pblimit = FC_MAX_PENDING if cfg["flow_control"] else 0
        self.maxpb = max(1, FC_MAX_PENDING // 16) if cfg["flow_control"] else 0
        self.pbytes = 0
        self.fcid = None
        self.fcsz = 0
        # rate limit / replay
        self.rl_tokens = None
        self.rl_last = 0.0
        self.replay = cfg["replay_policy"] == "original"
        self.replay_lseq = 0
        self.replay_last = None         # (loop time, msg ts) of the previous delivery
        self.sample = _parse_sample(cfg["sample_freq"])
        self.directory = None
        self.files_pending = False      # its first files are being written (write_new_files)
        self._missed = set()            # what was asked of the files meanwhile: "state", "meta", "remove"
        self.replica = None             # ReplicatedConsumers when its state rides in a Raft group
        self.ack_sub = None             # the `$JS.ACK.<stream>.<consumer>.>` subscription
        self.subs = []
        self.dthresh = self._dthresh()
        self.internal = bool(cfg["direct"])

    # ---- identity ----

    @property
    def stream_name(self):
        return self.stream.name

    def is_durable(self):
        return bool(self.cfg["durable_name"])

    def is_push(self):
        return bool(self.cfg["deliver_subject"])

    def _dthresh(self):
        it = self.cfg["inactive_threshold"]
        if it <= 0:
            return 0.0
        return it / NS + (0.1 + random.random() * 0.9 if not self.is_push() else 0.0)

    # ---- lifecycle ----

    @classmethod
    def view(cls, stream, name, cfg, created_ns, state, count_pending=True):
        """The consumer as a replica that does not run it knows it, from its last committed
        state: for monitoring (/jsz on a follower) and retention (`needs`), nothing subscribed,
        nothing delivered, no timer. count_pending: work out num_pending (monitoring)."""
        o = cls(stream, name, cfg, created_ns)
        persist.restore_position(o, state or {})
        if count_pending:
            o.npc = o._calc_num_pending()
        return o

    def start(self, recovered_state=None):
        """Select the starting position (or apply recovered state) and subscribe."""
        if recovered_state is not None:
            persist.apply_state(self, recovered_state)
        else:
            self._select_start()
        self.npc = self._calc_num_pending()
        if self.replay:
            self.replay_lseq = store_first_last(self.stream.store)[1]
        sn, on = self.stream.name, self.name
        if self.cfg["ack_policy"] not in ("none", "flow_control"):
            self.ack_sub = self._sub("$JS.ACK.%s.%s.>" % (sn, on), self._on_acks, batched=True)  # as nats-server
        self._sub("$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (sn, on), self._on_next)
        if self._domain():
            self._sub("$JS.%s.API.CONSUMER.MSG.NEXT.%s.%s" % (self._domain(), sn, on), self._on_next)
        if self.is_push():
            if self.cfg["flow_control"]:
                self._sub("$JS.FC.%s.%s.*" % (sn, on), self._on_fc)
            self.active = self._has_interest()
            if self.cfg["idle_heartbeat"]:
                self._hbtimer = self.loop.call_later(self.cfg["idle_heartbeat"] / NS, self._hb)
        if self.dthresh:
            self._dtimer = self.loop.call_later(self.dthresh, self._check_inactive)
        self._check_paused()
        self.kick()

    def answer_ack(self, reply):
        """Answer an AckSync: at once, or for a replicated consumer once the state that
        holds the ack is committed."""
        if self.replica is not None:
            self.replica.answer_after_commit(self, reply)
        else:
            self.send_status(reply, None)

    def _on_next(self, sub, subject, reply, hdr, payload, origin):
        if self.closed or not reply:
            return
        if self.waiting is None:
            self.send_status(reply, status_hdr(409, "Consumer is push based"))
            return
        self.waiting.request(reply.decode(), payload, hdr)
        self.pulls_changed()

    def pulls_changed(self):
        """Its waiting pull requests changed: a replicated consumer's replicas hear of it."""
        if self.replica is not None:
            self.replica.pulls_changed(self)

    def _sub(self, subject, handler, batched=False):
        s = Subscription(None, subject.encode(), b"", None, handler)
        s.batched = batched             # handler(sub, [(subject, reply, hdr, payload, origin)])
        self.account.sublist.insert(s)
        self.subs.append(s)
        return s

    def take_queued_acks(self):
        """Acks the loop read for this consumer but has not handed over yet (it hands a
        batched subscription's messages over after the work queued before them) -> them,
        taken: the consumer is about to stop and would drop them."""
        s = self.ack_sub
        if s is None or not s.batch:
            return []
        msgs, s.batch = s.batch, None
        return msgs

    def stop(self, delete=False, advisory=False):
        """Stream delete/shutdown: stop everything; optional DELETED advisory, remove state."""
        delete_state = delete
        if self.closed:
            return
        if not delete_state:
            self.save_now()
        self.closed = True
        for s in self.subs:
            s.closed = True
            self.account.sublist.remove(s)
        self.subs = []
        self._unwatch()
        for t in (self._ptimer, self._hbtimer, self._wtimer, self._dtimer, self._delay_timer):
            if t is not None:
                t.cancel()
        if self.waiting is not None:
            self.waiting.close(deleted=delete_state)
        if advisory:
            self.advisory("DELETED", "io.nats.jetstream.advisory.v1.consumer_action",
                          action="delete")
        if delete_state and self.directory:
            if self.files_pending:
                self._missed.add("remove")
            else:
                persist.remove_dir(self.directory)

    def delete(self):
        """API delete / inactivity: remove from the stream, advisory, forget state."""
        if self.closed:
            return
        consumers = getattr(self.stream, "consumers", None)
        if consumers is not None and consumers.get(self.name) is self:
            del consumers[self.name]
        self.stop(delete=True, advisory=True)
        hook = getattr(self.stream, "consumer_removed", None)
        if hook is not None:
            try:
                hook(self)
            except Exception:
                log.exception("stream consumer_removed hook failed")

    # ---- starting position ----

    def _select_start(self):
        store = self.stream.store
        first, last, msgs = store_first_last(store)
        cfg = self.cfg
        dp = cfg["deliver_policy"]
        if cfg["opt_start_seq"]:
            sseq = cfg["opt_start_seq"]
        elif dp == "all":
            sseq = first
        elif dp == "last":
            if not self.filters:
                sseq = last
            else:
                sseq = 0
                for f in self.filters:
                    m = store.load_last(f)
                    if m is not None and m.seq > sseq:
                        sseq = m.seq
                if sseq == 0:
                    sseq = last + 1
        elif dp == "last_per_subject":
            seqs = self._last_per_subject_seqs()
            if seqs:
                self.lss = seqs
                self.lss_resume = last + 1
                sseq = seqs[0]
            else:
                sseq = last + 1
        elif dp == "by_start_time":
            sseq = self._seq_from_time(cfg["opt_start_time"][1], first, last)
        else:                                           # new
            sseq = last + 1
        if first == 0 and msgs == 0 and not cfg["opt_start_seq"]:
            sseq = last + 1 if last else 1
        elif sseq > last and not cfg["opt_start_seq"]:
            sseq = last + 1
        elif sseq < first:
            sseq = first
        self.sseq = max(1, sseq)
        self.dseq = 1
        self.adflr = 0
        self.asflr = self.sseq - 1

    def _last_per_subject_seqs(self):
        store = self.stream.store
        seqs = set()
        for f in self.filters or [">"]:
            for subj in store.subjects(f):
                last = store.subject_state(subj)[2]
                if last:
                    seqs.add(last)
        return sorted(seqs)

    def _seq_from_time(self, ts, first, last):
        for sm in self._iter_from(first):
            if sm.ts >= ts:
                return sm.seq
        return last + 1

    def _iter_from(self, seq):
        for sm in self.stream.store.messages_from(seq):
            if self.matches(sm.subject):
                yield sm

    def matches(self, subject):
        """Whether a message on `subject` passes this consumer's filters."""
        if not self.filters:
            return True
        if isinstance(subject, bytes):
            subject = subject.decode()
        for f in self.filters:
            if f == subject or subject_matches(f, subject):
                return True
        return False

    def _calc_num_pending(self):
        if self.lss:
            n = len(self.lss)
            return n + self._store_pending(self.lss_resume)
        return self._store_pending(self.sseq)

    def _store_pending(self, start):
        store = self.stream.store
        if not self.filters:
            return store.num_pending(start, None, False)
        return sum(store.num_pending(start, f, False) for f in self.filters)

    # ---- stream events ----

    def on_stored(self, seq, subject):
        if self.closed:
            return
        if seq >= self.sseq and self.matches(subject):
            self.npc += 1
            self.kick()

    def on_removed(self, seq, subject=None):
        if self.closed:
            return
        if seq >= self.sseq and (subject is None or self.matches(subject)) and self.npc > 0:
            self.npc -= 1

    def on_purged(self):
        if self.closed:
            return
        first, last, _ = store_first_last(self.stream.store)
        if self.sseq < first:
            self.sseq = first
            if self.asflr < first - 1:
                self.asflr = first - 1
        for seq in self.pending.remove_below(first):
            self.rdc.pop(seq, None)
        for seq in [s for s in self.rdc if s < first]:
            del self.rdc[seq]
        self.rdq = [s for s in self.rdq if s >= first]
        heapq.heapify(self.rdq)
        self.rdq_set = set(self.rdq)
        if self.lss:
            self.lss = [s for s in self.lss if s >= first] or None
        if not self.pending:
            self.adflr = self.dseq - 1
            self.asflr = max(self.asflr, self.sseq - 1)
        self.npc = self._calc_num_pending()
        self.schedule_save()
        self.kick()

    def has_acked(self, seq, subject):
        """Is message `seq` (of `subject`) one of this consumer's, done with (acked, or
        delivered with no ack wanted)?"""
        return self.matches(subject) and not self.needs(seq)

    def needs(self, seq, subject=None):
        """Interest retention: does this consumer still need message `seq`?"""
        if subject is not None and not self.matches(subject):
            return False
        ap = self.cfg["ack_policy"]
        if ap == "none":
            return seq >= self.sseq
        if seq <= self.asflr:
            return False
        if seq >= self.sseq:
            return True
        if ap == "all":
            return True
        return seq in self.pending

    # ---- scheduling ----

    def kick(self):
        if not self._scheduled and not self.closed:
            self._scheduled = True
            self.loop.call_soon(self._run)

    def _later(self, delay):
        if self._delay_timer is not None:
            self._delay_timer.cancel()
        self._delay_timer = self.loop.call_later(max(0.0, delay), self._delay_fire)

    def _delay_fire(self):
        self._delay_timer = None
        self.kick()

    def _has_interest(self):
        """A subscriber for a push consumer, as nats-server counts one: a subscription on the
        deliver subject itself (not a wildcard that matches it), a queue subscription of the
        deliver group when there is one and a plain one otherwise; an import's forwarder,
        which stands for the subscribers of another account; or any matching interest of
        another cluster across a gateway (nats-server's hasGatewayInterest)."""
        subject = self.cfg["deliver_subject"].encode()
        r = self.account.sublist.match(subject)
        if not r.total:
            return False
        group = self.cfg["deliver_group"]
        group = group.encode() if group else None
        for sub in r.psubs:
            if (sub.subject == subject and group is None) or sub.forwarder or _via_gateway(sub):
                return True
        for members in r.qsubs:
            sub = members[0]
            if _via_gateway(sub) or (sub.queue == group and (sub.subject == subject or sub.forwarder)):
                return True
        return False

    def _paused_for(self):
        pu = self.cfg["pause_until"]
        if pu is None:
            return 0.0
        rem = (pu[1] - now_ns()) / NS
        return rem if rem > 0 else 0.0

    def _check_paused(self):
        rem = self._paused_for()
        if rem > 0:
            self._later(rem + 0.001)

    # ---- delivery ----

    def _run(self):
        self._scheduled = False
        if self.closed or self.holding or (self.replica is not None and self.replica.holding):
            return                      # a replica handing leadership on delivers nothing
        budget = RUN_BUDGET
        push = self.is_push()
        eos = False
        if push:
            self.active = self._has_interest()
        while budget > 0:
            if self._paused_for() > 0:
                break
            if push:
                if not self.active:
                    self.active = self._has_interest()
                    if not self.active:
                        self._watch_interest()
                        break
                    self.last_activity = self.loop.time()
                if self.maxpb and self.pbytes > self.maxpb:
                    break
            elif not self.waiting.has_requests():
                break
            fast = self._push_fast(budget) if push else self._pull_fast(budget)
            if fast is not None:
                n, at_end = fast
                if n:
                    budget -= n
                    continue
                if at_end:
                    eos = True
                    break
            got = self._next_msg()
            if got is None:
                eos = True
                break
            if got is False:            # max ack pending
                break
            sm, dc = got
            if dc == 1:
                self.npc = max(0, self.npc - 1)
                if self.npc:
                    # Removals by limits are not signalled, so the count can run high: be exact
                    # at the tail, where clients look at it (KV watchers wait for pending 0).
                    if sm.seq >= self.stream.store.last_seq:
                        self.npc = 0
                    elif self.npc <= 2 and self._literal_filters:
                        self.npc = self._calc_num_pending()
            reply = "$JS.ACK.%s.%s.%d.%d.%d.%d.%d" % (self.stream.name, self.name, dc, sm.seq,
                                                     self.dseq, sm.ts, self.npc)
            hdr, payload = sm.hdr, sm.msg
            if self.cfg["headers_only"]:
                hdr, payload = _headers_only(hdr, payload), b""
            subj = sm.subject if isinstance(sm.subject, str) else sm.subject.decode()
            sz = len(subj) + len(reply) + len(hdr or b"") + len(payload or b"")
            delay = self._delay_needed(sm, sz)
            if delay > 0:
                self._unget(sm, dc)
                self._later(delay)
                break
            wr = None
            if push:
                target = self.cfg["deliver_subject"]
            else:
                wr = self.waiting.next_for(sz)
                if wr is None:
                    self._unget(sm, dc)
                    break
                target = wr.reply
                if self.waiting.policy == "pinned_client":
                    hdr = self.waiting.pin_header(hdr)
                    sz = len(subj) + len(reply) + len(hdr) + len(payload or b"")
            self._deliver(target, subj, reply, hdr, payload, sm, dc, sz)
            if wr is not None:
                self.waiting.after_delivery(wr)
            budget -= 1
        else:
            self.kick()
        if eos:
            first, last, _ = store_first_last(self.stream.store)
            if self.sseq > last and self.npc:
                self.npc = 0
        if not push:
            self.waiting.process(eos=eos)

    def _fast_ok(self):
        """Whether the consumer's state allows the batched path at all (both kinds): only
        first deliveries in order from one or no filter, no replay, rate limit or
        headers_only, on a FileStore -> its log, or None."""
        if self.rdq or self.lss is not None or self.replay or len(self.filters) > 1:
            return None
        cfg = self.cfg
        if cfg["rate_limit_bps"] or cfg["headers_only"]:
            return None
        return self.stream.store.fast_log()

    def _fast_batch(self, lg, target, k, byte_room=-1):
        """Up to k first deliveries to the single client (or route) subscription of `target`
        with one C call (natsd/jetstream/engine/fastdeliver.pyx): pending, ack floors, timers and
        counters as _deliver keeps them -> (delivered, bytes, at_end), or None when `target`
        is not one plain client or route subscription."""
        sl = self.account.sublist
        sub = client_target(sl, target)
        if sub is None:
            return None
        acks = self.cfg["ack_policy"] != "none"
        ts = now_ns()
        n, nbytes, self.sseq, self.npc, at_end = deliver_batch(
            lg, sub, self.filters[0] if self.filters else None, self.sseq, k,
            ("$JS.ACK.%s.%s.1." % (self.stream.name, self.name)).encode(), self.dseq, self.npc,
            self._literal_filters, ts, self.pending if acks else None, byte_room, target, sl.account)
        if n:
            self.dseq += n
            self.last_delivered_ns = ts
            if acks:
                # one ack-wait timer per batch: a first delivery's deadline does not depend on seq
                self._arm_ptimer(self._deadline(self.sseq - 1) / NS)
            else:
                self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
            self.last_activity = self.loop.time()
            self.schedule_save()
        return n, nbytes, at_end

    def _max_ack_room(self, k):
        mp = self.cfg["max_ack_pending"]
        if mp > 0 and self.cfg["ack_policy"] != "none":
            k = min(k, mp - len(self.pending))
        return k

    def _pull_fast(self, budget):
        """Serve the pull request at the head of the queue with one C call per batch instead
        of once per message: -> (delivered, at_end), or None when the per-message path must
        serve - several waiting requests (they take turns per message), redeliveries,
        last-per-subject starts, replay/rate limits, headers_only, max_bytes, an expired
        request, ack policy none, memory storage, several filters, or a reply subject that is
        not exactly one client or route subscription (imports, leaf nodes, queue groups, several
        matches). The wire format, pending map and num_pending match _run's."""
        q = self.waiting.q
        if len(q) != 1 or self.maxpb or self._hbtimer is not None:
            return None
        cfg = self.cfg
        if cfg["ack_policy"] not in ("explicit", "all") \
                or cfg["priority_policy"] not in ("none", "prioritized"):  # one request: no order to keep
            return None
        lg = self._fast_ok()
        if lg is None:
            return None
        wr = q[0]
        if wr.b > 0 or wr.n <= 0:
            return None
        loop = self.loop
        if wr.expires is not None and loop.time() >= wr.expires:
            return None
        k = self._max_ack_room(min(wr.n, budget))
        if k <= 0:
            return None
        got = self._fast_batch(lg, wr.reply.encode(), k)
        if got is None:
            return None
        n, _, at_end = got
        if n:
            wr.d += n
            wr.n -= n
            if wr.n <= 0:
                q.popleft()
            elif wr.hb:
                wr.hbt = self.last_activity + wr.hb
        return n, at_end

    def _push_fast(self, budget):
        """Push deliveries (ordered consumers included) with one C call per run of messages:
        -> (delivered, at_end), or None for the per-message path (a deliver group, ack policy
        none on a non-limits stream, what _fast_ok refuses, or a deliver subject that is not
        exactly one client or route subscription). Flow control as _deliver does it: a batch stops
        where the pending bytes cross half the window (the FC request follows that message)
        or, with a request outstanding, the whole window; idle heartbeats restart per batch."""
        cfg = self.cfg
        if cfg["deliver_group"] or (cfg["ack_policy"] == "none"
                                    and self.stream.config.get("retention", "limits") != "limits"):
            return None
        lg = self._fast_ok()
        if lg is None:
            return None
        k = self._max_ack_room(budget)
        if k <= 0:
            return None
        room = -1
        if self.maxpb:
            room = (self.maxpb // 2 if self.fcid is None else self.maxpb) - self.pbytes
        target = cfg["deliver_subject"].encode()
        got = self._fast_batch(lg, target, k, room)
        if got is None:
            return None
        n, nbytes, at_end = got
        if n:
            if self.maxpb:
                self.pbytes += nbytes
                if self.fcid is None and self.pbytes > self.maxpb // 2:
                    self._send_fc()
            if self._hbtimer is not None:
                self._hbtimer.cancel()
                self._hbtimer = self.loop.call_later(cfg["idle_heartbeat"] / NS, self._hb)
        return n, at_end

    def _watch_interest(self):
        """Wait for a subscriber on the deliver subject: the account's sublist calls back
        when one is inserted (Sublist.watch). Offline MQTT sessions are push consumers
        without one, by the thousand: asked every half second, they kept the loop busy."""
        subject = self.cfg["deliver_subject"].encode()
        if self._watched == subject or self.closed:
            return
        self._unwatch()
        self._watched = subject
        self.account.sublist.watch(subject, self._interest_came)

    def _unwatch(self):
        if self._watched is not None:
            self.account.sublist.unwatch(self._watched, self._interest_came)
            self._watched = None

    def _interest_came(self):
        self._watched = None
        self.loop.call_soon(self._check_interest)   # called inside the insert: later

    def _check_interest(self):
        if self.closed:
            return
        if self._has_interest():
            self.active = True
            self.last_activity = self.loop.time()
            self.kick()
        else:
            self._watch_interest()

    def _next_msg(self):
        """(StoredMsg, delivery count) | None at end of stream | False when stalled."""
        store = self.stream.store
        maxdc = self.cfg["max_deliver"]
        while self.rdq:
            seq = heapq.heappop(self.rdq)
            self.rdq_set.discard(seq)
            if seq not in self.pending:
                continue
            dc = self.rdc.get(seq, 1) + 1
            if maxdc > 0 and dc > maxdc:
                if dc == maxdc + 1:
                    self._notify_max_deliveries(seq, dc - 1)
                self._drop_pending(seq)
                continue
            sm = _load(store, seq)
            if sm is None:                  # gone from the stream meanwhile
                self._drop_pending(seq)
                self.rdc.pop(seq, None)
                continue
            self.rdc[seq] = dc
            return sm, dc
        mp = self.cfg["max_ack_pending"]
        if mp > 0 and len(self.pending) >= mp:
            return False
        if self.lss:
            seq = self.lss.pop(0)
            if not self.lss:
                self.lss = None
                self.sseq = self.lss_resume
            else:
                self.sseq = seq + 1
            sm = _load(store, seq)
            if sm is None:
                self.npc = max(0, self.npc - 1)
                return self._next_msg()
            return sm, 1
        sm = self._load_next(self.sseq)
        if sm is None:
            return None
        self.sseq = sm.seq + 1
        return sm, 1

    def _load_next(self, seq):
        store = self.stream.store
        if len(self.filters) <= 1:
            return store.load_next(seq, self.filters[0] if self.filters else None)
        best = None
        for f in self.filters:
            sm = store.load_next(seq, f)
            if sm is not None and (best is None or sm.seq < best.seq):
                best = sm
        return best

    def _unget(self, sm, dc):
        if dc > 1:
            self.rdc[sm.seq] = dc - 1
            if self.rdc[sm.seq] <= 1:
                self.rdc.pop(sm.seq, None)
            if sm.seq not in self.rdq_set:
                heapq.heappush(self.rdq, sm.seq)
                self.rdq_set.add(sm.seq)
        elif self.lss is not None or (self.cfg["deliver_policy"] == "last_per_subject"
                                      and self.sseq == self.lss_resume and sm.seq < self.sseq - 1):
            if self.lss is None:
                self.lss = [sm.seq]
            else:
                self.lss.insert(0, sm.seq)
            self.sseq = sm.seq
            self.npc += 1
        else:
            self.sseq = sm.seq
            self.npc += 1

    def _delay_needed(self, sm, sz):
        now = self.loop.time()
        if self.replay and sm.seq <= self.replay_lseq:
            if self.replay_last is not None:
                lt, lts = self.replay_last
                due = lt + max(0, sm.ts - lts) / NS
                if due - now > 0.001:
                    return due - now
        elif self.replay:
            self.replay = False
        bps = self.cfg["rate_limit_bps"]
        if bps:
            # token bucket as nats-server: bytes/s = bps/8, burst = max msg size / max payload
            rate = bps / 8.0
            burst = self._rl_burst()
            if self.rl_tokens is None:
                self.rl_tokens, self.rl_last = float(burst), now
            self.rl_tokens = min(float(burst), self.rl_tokens + (now - self.rl_last) * rate)
            self.rl_last = now
            if self.rl_tokens < sz:
                return (sz - self.rl_tokens) / rate
        return 0.0

    def _rl_burst(self):
        mms = int(self.stream.config.get("max_msg_size") or -1)
        if mms > 0:
            return mms
        acc_max = getattr(getattr(self.account, "account", self.account), "max_payload", -1) or -1
        if acc_max > 0:
            return acc_max
        return getattr(getattr(self.server, "opts", None), "max_payload", 1024 * 1024)

    def _deliver(self, target, subj, reply, hdr, payload, sm, dc, sz):
        dseq = self.dseq
        self.dseq += 1
        ts = now_ns()
        self.last_delivered_ns = ts
        if self.cfg["ack_policy"] == "none":
            self.adflr, self.asflr = dseq, sm.seq
        else:
            self.pending.add(sm.seq, dseq, ts)
            self._arm_ptimer(self._deadline(sm.seq) / NS)
        if self.replay:
            self.replay_last = (self.loop.time(), sm.ts)
        if self.cfg["rate_limit_bps"] and self.rl_tokens is not None:
            self.rl_tokens -= sz
        self._send(target.encode(), subj.encode(), reply.encode(), hdr, payload)
        self.last_activity = self.loop.time()
        if self.maxpb:
            # flow control counts what nats-server's jsPubMsg.size() does: the deliver
            # subject, not the message's own (max_bytes and rate limits count that one)
            sz = len(target) + len(reply) + len(hdr or b"") + len(payload or b"")
            self.pbytes += sz
            if self.fcid is None and self.pbytes > self.maxpb // 2:
                self._send_fc()
            elif self.fcid is not None and self.pbytes - self.fcsz >= self.maxpb:
                self.fcsz += sz
        if self._hbtimer is not None:
            self._hbtimer.cancel()
            self._hbtimer = self.loop.call_later(self.cfg["idle_heartbeat"] / NS, self._hb)
        if self.cfg["ack_policy"] == "none" and self.stream.config.get("retention", "limits") != "limits":
            self._ack_removal(sm.seq)
        self.schedule_save()

    # ---- inactivity ----

    def _check_inactive(self):
        self._dtimer = None
        if self.closed or not self.dthresh:
            return
        now = self.loop.time()
        if self.is_push():
            interest = self._has_interest()
            if interest:
                self.last_activity = now
                if not self.active:
                    self.active = True
                    self.kick()
        else:
            if self.waiting.has_requests():
                self.last_activity = now
        idle = now - self.last_activity
        if idle >= self.dthresh:
            log.debug("JetStream consumer %s > %s deleted for inactivity", self.stream.name,
                      self.name)
            if self.replica is not None:
                self.replica.propose_delete(self.name, None)    # deleted on every replica;
                # asked again if it is still here then (the stream's leader did not hear it)
                self._dtimer = self.loop.call_later(max(1.0, self.dthresh), self._check_inactive)
            else:
                self.delete()
            return
        self._dtimer = self.loop.call_later(max(0.05, min(1.0, self.dthresh - idle)),
                                            self._check_inactive)

    def update_inactive_threshold(self):
        self.dthresh = self._dthresh()
        if self._dtimer is not None:
            self._dtimer.cancel()
            self._dtimer = None
        if self.dthresh:
            self._dtimer = self.loop.call_later(min(1.0, self.dthresh), self._check_inactive)

    # ---- config update ----

    def update_config(self, new):
        old = self.cfg
        self.cfg = new
        if new["deliver_subject"] != old["deliver_subject"]:
            for seq in self.pending.keys():
                if seq not in self.rdq_set:
                    heapq.heappush(self.rdq, seq)
                    self.rdq_set.add(seq)
            self.active = False
        if new["filter_subject"] != old["filter_subject"] or new["filter_subjects"] != old["filter_subjects"]:
            self.filters = cc.filters(new)
            self._literal_filters = bool(self.filters) and not any(has_wildcard(f) for f in self.filters)
            self.npc = self._calc_num_pending()
        if new["inactive_threshold"] != old["inactive_threshold"]:
            self.update_inactive_threshold()
        if new["rate_limit_bps"] != old["rate_limit_bps"]:
            self.rl_tokens = None
        self.sample = _parse_sample(new["sample_freq"])
        if self.waiting is not None:
            self.waiting.max = new["max_waiting"]
        self._check_paused()
        self.save_meta()
        self.kick()

    def reset_to(self, seq):
        """$JS.API.CONSUMER.RESET (nats-server 2.14): start again from the ack floor (`seq` 0)
        or from `seq`, which may not precede the configured start (deliver policies all,
        by_start_sequence and by_start_time only). Everything pending is forgotten, delivery
        sequences restart at 1. -> the new starting sequence; ValueError(reason) when refused."""
        cfg = self.cfg
        dp = cfg["deliver_policy"]
        if seq == 0:
            seq = self.asflr + 1
        elif dp == "by_start_sequence":
            if seq < cfg["opt_start_seq"]:
                raise ValueError("below start seq")
        elif dp == "by_start_time":
            first, last, _ = store_first_last(self.stream.store)
            if seq < self._seq_from_time(cfg["opt_start_time"][1], first, last):
                raise ValueError("below start time")
        elif dp != "all":
            raise ValueError("not allowed")
        seq = max(1, seq)
        self.pending = Pending()
        self.rdc, self.rdq, self.rdq_set = {}, [], set()
        if self._ptimer is not None:
            self._ptimer.cancel()
            self._ptimer = self._ptimer_at = None
        self.lss = None
        self.sseq, self.dseq = seq, 1
        self.adflr, self.asflr = 0, seq - 1
        self.last_delivered_ns = self.last_ack_ns = None
        self.npc = self._calc_num_pending()
        self.save_now()
        self.stream.consumer_removed(self)    # interest retention: drop what nobody needs now
        self.kick()
        return seq

    def unpin(self, group):
        """$JS.API.CONSUMER.UNPIN: the group's pinned client loses its pin."""
        if self.waiting is not None:
            self.waiting.pins.unpin(group, "admin")

    def set_pause(self, pause):
        self.cfg["pause_until"] = pause
        cc.set_static_metadata(self.cfg)
        self.save_meta()
        self._check_paused()
        self.kick()

    # ---- info ----

    def num_pending_fast(self):
        return self.npc

    def num_pending(self):
        try:
            self.npc = self._calc_num_pending()
        except Exception:
            pass
        return self.npc

    def info(self, initial=False, dynamic_metadata=True):
        now = now_ns()
        delivered = {"consumer_seq": self.dseq - 1, "stream_seq": self.sseq - 1}
        if self.lss:
            delivered["stream_seq"] = max(0, self.lss[0] - 1) if self.dseq == 1 else self.sseq - 1
        if self.last_delivered_ns:
            delivered["last_active"] = go_time(self.last_delivered_ns)
        floor = {"consumer_seq": self.adflr, "stream_seq": self.asflr}
        if self.last_ack_ns and self.adflr:
            floor["last_active"] = go_time(self.last_ack_ns)
        if self.dseq == 1 and self.asflr == self.sseq - 1 and not self.lss:
            delivered["stream_seq"] = self.asflr
        if self.dseq == 1:
            floor["stream_seq"] = delivered["stream_seq"]
        out = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": go_time(self.created),
            "config": cc.to_json(self.cfg, dynamic_metadata=dynamic_metadata),
            "delivered": delivered,
            "ack_floor": floor,
            "num_ack_pending": len(self.pending),
            "num_redelivered": len(self.rdc) if self.cfg["max_deliver"] != 1 else 0,
            "num_waiting": self.waiting.count() if self.waiting is not None else 0,
            "num_pending": self.num_pending(),
        }
        cluster = self._cluster_info()
        if cluster is not None and (not initial or self._clustered()):
            # a single server's create answer has none; a cluster's (its leader's) has it
            out["cluster"] = cluster
        if self.is_push() and self.active and self._has_interest():
            out["push_bound"] = True
        rem = self._paused_for()
        if rem > 0:
            out["paused"] = True
            out["pause_remaining"] = int(rem * NS)
        out["ts"] = go_time(now)
        groups = self.waiting.group_state() if self.waiting is not None else None
        if groups:
            out["priority_groups"] = groups
        return out

    def _clustered(self):
        return getattr(getattr(self.stream, "engine", None), "meta", None) is not None

    def _cluster_info(self):
        engine = getattr(self.stream, "engine", None)
        try:
            if engine is None or not engine.cluster_name():
                return None
        except Exception:
            return None
        try:
            if self.replica is not None:
                return self.replica.cluster_info(self)
            return self.stream.cluster_info()
        except Exception:
            return None

    # ---- advisories ----

    def advisory(self, kind, type_name, **fields):
        """Built and sent only when someone listens (natsd/jetstream/engine/advisories.py)."""
        from natsd.jetstream.engine import advisories
        advisories.send(self.account.sublist, ADV + "%s.%s.%s" % (kind, self.stream.name, self.name),
                        type_name, self._domain(), stream=self.stream.name, consumer=self.name,
                        **fields)

    def _domain(self):
        engine = getattr(self.stream, "engine", None)
        return getattr(engine, "domain", "") or ""

    # ---- persistence ----

    def schedule_save(self):
        # At most one state.json write per SAVE_INTERVAL: the tmp-file + rename costs ~2 ms on
        # ext4 (rename over a file forces the new data out), which at one write per Fetch batch
        # was a third of the pull path. stop() still saves synchronously (save_now), and like
        # nats-server the consumer state is not fsynced, so a crash can redeliver either way.
        if self.replica is not None:
            self.replica.changed(self)
            return
        if self.directory and not self._save_scheduled and not self.closed:
            self._save_scheduled = True
            wait = self._last_save + SAVE_INTERVAL - self.loop.time()
            if wait > 0:
                self.loop.call_later(wait, self._save)
            else:
                self.loop.call_soon(self._save)

    def _save(self):
        self._save_scheduled = False
        if self.closed or not self.directory:
            return
        self._last_save = self.loop.time()
        self._save_state()

    def save_now(self):
        if self.replica is not None:
            self.replica.changed(self)
        elif self.directory and not self.closed:
            self._save_scheduled = False
            self._save_state()

    def _save_state(self):
        if self.files_pending:
            self._missed.add("state")
        else:
            persist.save_state(self.directory, self)

    def save_meta(self):
        if self.replica is not None:
            self.replica.changed(self, config=True)
        elif self.directory and not self.closed:
            if self.files_pending:
                self._missed.add("meta")
            else:
                persist.write_meta(self.directory, self)

    def write_new_files(self, directory, ready):
        """A new consumer's directory, meta.json and first state.json. Made on the loop while
        that is quick; on a disk where new files are slow (each new inode can cost half a
        millisecond on a virtual disk) they go to a worker thread, so a storm of creates (MQTT
        sessions) is not made one after the other. ready(OSError or None) runs on the loop once
        they are written; what was asked of the files meanwhile (a save, a new config, a
        delete) is done then."""
        files = persist.new_files(directory, self)
        self.directory = directory
        if persist.new_files_quick():
            try:
                persist.create_files(directory, files)
            except OSError as e:
                self._files_written(e, ready)
            else:
                self._files_written(None, ready)
            return
        self.files_pending = True
        self.loop.run_in_worker(persist.create_files, lambda _, exc: self._files_written(exc, ready),
                                directory, files)

    def _files_written(self, exc, ready):
        self.files_pending = False
        missed, self._missed = self._missed, set()
        if exc is None:
            if "remove" in missed:
                persist.remove_dir(self.directory)
            else:
                if "meta" in missed:
                    persist.write_meta(self.directory, self)
                if "state" in missed:       # also the last save of one stopped meanwhile
                    persist.save_state(self.directory, self)
        ready(exc)

    @classmethod
    def recover(cls, stream, directory):
        """Rebuild a consumer from `<dir>/meta.json` + `state.json`; None if unreadable."""
        meta = persist.read_json(os.path.join(directory, "meta.json"))
        if not meta:
            return None
        try:
            cfg = cc.decode_config(meta.get("config") or {})
        except Exception:
            log.warning("JetStream consumer state in %s is unreadable", directory)
            return None
        name = meta.get("name") or cfg["durable_name"] or cfg["name"] or os.path.basename(directory)
        created = meta.get("created_ns") or None
        o = cls(stream, name, cfg, created)
        o.directory = directory
        o.start(recovered_state=persist.read_json(os.path.join(directory, "state.json")) or {})
        return o


def _via_gateway(sub):
    return sub.conn is not None and sub.conn.kind == KIND_GATEWAY


def _load(store, seq):
    """A message to deliver, or None when it is gone or its record cannot be read."""
    try:
        return store.load(seq)
    except (StoreError, OSError):
        return None


def _headers_only(hdr, payload):
    size = len(payload or b"")
    if hdr:
        h = hdr[:-2] if hdr.endswith(b"\r\n\r\n") else hdr
        return h + b"Nats-Msg-Size: %d\r\n\r\n" % size
    return b"NATS/1.0\r\nNats-Msg-Size: %d\r\n\r\n" % size


def _parse_sample(s):
    if not s:
        return 0
    try:
        return int(s.rstrip("%"))
    except ValueError:
        return 0


def consumer_dir(stream, name):
    """`<stream dir>/consumers/<name>`, or None for memory streams / no store dir."""
    fn = getattr(stream, "consumer_dir", None)
    if fn is not None:
        return fn(name)
    base = getattr(stream, "dir", None)
    if not base:
        return None
    return os.path.join(base, "consumers", name)


def recover_consumers(stream):
    """Engine hook: rebuild every consumer persisted under the stream's directory."""
    base = getattr(stream, "dir", None)
    if not base:
        return
    cdir = os.path.join(base, "consumers")
    if not os.path.isdir(cdir):
        return
    for name in sorted(os.listdir(cdir)):
        d = os.path.join(cdir, name)
        try:
            o = Consumer.recover(stream, d)
        except Exception:
            log.exception("JetStream could not recover consumer %s > %s", stream.name, name)
            continue
        if o is not None:
            stream.consumers[o.name] = o
