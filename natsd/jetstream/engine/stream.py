"""Stream: ingest (PubAck, dedup, expected-* headers, rollup, TTL), limits, retention, purge,
expiry timers, republish, durability (group commit) and the info/state JSON.

Owns the contract with consumers: a Stream exposes `name, account (JsAccount), server, config
(dict, API JSON), store, consumers (name -> Consumer), created (ns)`; it calls
`consumer.on_stored(seq, subject)` after each stored message, `consumer.on_purged()` after a
purge and `consumer.stop()` when the stream is deleted; consumers call `stream.ack_removal(seq,
consumer)` (workqueue: delete on ack; interest: delete once no consumer `needs(seq, subject)`)
and `stream.consumer_removed(consumer)`.
"""
import heapq
import itertools
import json
import logging
import os
import time

from natsd._core.conn import flush_all
from natsd._core.router import publish, publish_many
from natsd._core.sublist import Subscription
from natsd.gofmt import go_time
from natsd.jetstream.engine import counters
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine import schedules
from natsd.jetstream.engine import fastbatch
from natsd.jetstream.engine.batch import AtomicBatches, Limits as BatchLimits
from natsd.jetstream.engine.headers import build_headers, parse_headers, parse_ttl, ttl_header
from natsd.jetstream.engine.streamconfig import config_json
from natsd.ids import get_hash
from natsd.output.logger import rate_limited_warning
from natsd.subject import subject_matches

log = logging.getLogger("natsd")

MAX_HDR = 64 * 1024
NS = 1_000_000_000
MAX_TTL = (1 << 62) // NS       # seconds; a larger Nats-TTL (valid for nats-server) never expires



# nats-server's stream ingest queue limits when jetstream's max_buffered_* are not set
DEFAULT_MAX_QUEUE_MSGS = 100_000
DEFAULT_MAX_QUEUE_BYTES = 128 * 1024 * 1024
TOO_MANY_REQUESTS = b"NATS/1.0 429 Too Many Requests\r\n\r\n"
ACK_CHUNK = 16                  # messages of one ingest batch answered together
SYNC_CHUNK = 0.0003             # seconds of storing after which a chunk gets a sync of its own
MARKER_RECHECK = 0.25           # seconds before a replica looks again at a message awaiting its marker
MARKER_RETRY = 5.0              # seconds before a leader proposes a marker again (its entry was lost)
MARKING_MAX = 4096              # proposed markers remembered before the old ones are first dropped


def _batch_id(hdr):
    """The Nats-Batch-Id of an atomic batch message, or None."""
    if not hdr or b"Nats-Batch-Id:" not in hdr:
        return None
    return parse_headers(hdr).get("Nats-Batch-Id") or None


def _expected_seq(value):
    """The sequence a Nats-Expected-Last-(Subject-)Sequence header names (-1 when it names
    none, which no stream's last sequence is)."""
    try:
        return int(value)
    except ValueError:
        return -1


def _is_marker(hdr):
    """nats-server's isSubjectDeleteMarker: a Nats-Marker-Reason, or a KV purge."""
    if not hdr:
        return False
    h = parse_headers(hdr)
    return bool(h.get("Nats-Marker-Reason")) or h.get("KV-Operation") == "PURGE"


class Stream:
    is_stream = True                    # what a message trace reports as its `js` event

    def __init__(self, jsa, config, created_ns, store, directory=None):
        self.jsa = self.account = jsa
        self.engine = jsa.engine
        self.server = jsa.engine.server
        self.loop = self.server.loop
        self.name = config["name"]
        self.config = config
        self.created = created_ns
        self.store = store
        self.dir = directory
        self.consumers = {}
        self.subs = []
        self._ack_template = None       # (domain, prefix, suffix) of this stream's PubAck JSON
        self.dedup = {}                 # msg id -> (seq, ts)
        self.dedup_order = []           # (ts, msg id) FIFO
        self.last_msg_id = ""
        batch_limits = BatchLimits(self.engine.opts.limits.get("batch"))
        self.batches = AtomicBatches(self, batch_limits)
        self.fast_batches = fastbatch.FastBatches(self, batch_limits)
        self.schedules = schedules.Timetable(self)
        self.age_timer = None
        self.ttl_heap = []              # (expire ns, seq)
        self.marking = {}               # a replicated stream's leader: subject -> (seq, when) of a proposed marker
        self.marking_cap = MARKING_MAX  # its size that starts the next pruning
        self.ttl_timer = None
        self.closed = False
        self.pending_acks = []          # (reply, bytes) waiting for the group sync
        self.counter_values = counters.LastValues()     # each counter subject's last value
        self.transform = None
        self.republish = None
        self.sourcing = None            # natsd.jetstream.engine.sourcing.Sourcing (mirror/sources)
        self.replica = None             # natsd.jetstream.replicated.streams.ReplicatedStream (num_replicas > 1)
        self.leader_ts = None           # a replica applying: the time its group's leader stamped
        self._configure()

    # ---- configuration ----

    def _configure(self):
        from natsd.accounts.transform import SubjectTransform
        cfg = self.config
        st = cfg.get("subject_transform")
        self.transform = SubjectTransform.compile(st.get("src") or ">", st["dest"]) if st and st.get("dest") else None
        rp = cfg.get("republish")
        self.republish = SubjectTransform.compile(rp.get("src") or ">", rp["dest"]) if rp and rp.get("dest") else None
        self.file = cfg.get("storage", "file") == "file"
        self.dup_window = cfg.get("duplicate_window", 0) or 0
        # what process() asks of every message, read once per configuration
        self.sealed = bool(cfg.get("sealed"))
        self.max_msg_size = cfg.get("max_msg_size", -1)
        self.max_age = cfg.get("max_age", 0)
        self.discard_new = cfg.get("discard") == "new"
        self.count_limits = (cfg.get("max_msgs", -1) > 0 or cfg.get("max_bytes", -1) > 0
                             or cfg.get("max_msgs_per_subject", -1) > 0)
        self.counting = bool(cfg.get("allow_msg_counter"))
        self.scheduling = bool(cfg.get("allow_msg_schedules"))
        self.interest = cfg.get("retention") == "interest"
        # a message without headers meets none of these before it is stored (process())
        self.checks_plain = bool(self.transform or self.discard_new or self.republish)

    def start(self):
        self._subscribe()
        self._schedule_age()
        self._schedule_ttl()
        self._start_sourcing()

    def _start_sourcing(self):
        if self.replica is not None and not self.replica.copies_here():
            return                      # a replicated stream's leader copies, for every replica
        if self.config.get("mirror") or self.config.get("sources"):
            from natsd.jetstream.engine import sourcing
            self.sourcing = sourcing.attach(self)

    def _subscribe(self):
        for s in self.subs:
            s.closed = True
            self.jsa.sublist.remove(s)
        self.subs = []
        if self.replica is not None:
            # a replicated stream takes messages on its group's leader only, through Raft (and
            # on a leader that just stepped down, for a moment, to forward them)
            if self.replica.takes_publishes():
                for subj in self.config.get("subjects") or []:
                    s = Subscription(None, subj.encode(), b"", None, self.replica.on_publish)
                    s.batched = True    # one proposal per loop iteration
                    s.data = self
                    self.jsa.sublist.insert(s)
                    self.subs.append(s)
            return
        for subj in self.config.get("subjects") or []:
            s = Subscription(None, subj.encode(), b"", None, self._on_batch)
            s.batched = True            # one Python call per loop iteration (_on_batch)
            s.data = self
            self.jsa.sublist.insert(s)
            self.subs.append(s)

    def resubscribe(self):
        """Take (or stop taking) messages again: a replicated stream's leader changed."""
        if self.closed or (self.subs and self.replica is not None and self.replica.takes_publishes()):
            return                      # still taking them
        self._subscribe()

    def update_config(self, cfg):
        old = self.config
        self.config = cfg
        self._configure()
        if old.get("subjects") != cfg.get("subjects"):
            self._subscribe()
        self.enforce_limits()
        self._schedule_age()
        self.save_meta()
        if self.sourcing is not None:
            if cfg.get("mirror") or cfg.get("sources"):
                self.sourcing.update()
            else:
                self.sourcing.stop()
                self.sourcing = None
        else:
            self._start_sourcing()

    def save_meta(self):
        if not self.dir:
            return
        path = os.path.join(self.dir, "meta.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"config": self.config, "created": self.created}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # ---- ingest: one path for every message ----

    def _on_batch(self, sub, msgs):
        """The one ingest path: every message the loop read for this stream in one iteration
        (the router's batched mode), and a replica's committed batch, is stored by process(),
        one after the other. Answers (PubAcks, duplicates' and errors' too) go out in publish
        order, in chunks of ACK_CHUNK messages: for file storage each chunk after a
        group-commit sync that covers it, started once storing the chunk took longer than
        SYNC_CHUNK (a sync's time on a fast disk). A replicated stream's leader applying a
        committed batch (its entries are on a quorum of disks already) answers all of it at
        the end: there, storing is quick and a chunk sent early costs a send and a wake-up of
        the publishers' side for little overlap (R3 async publishing, 300,000 messages:
        66-75k msgs/s chunked against 76-81k whole with the publishers on a follower, 71-79k
        against 89-91k on the leader)."""
        if self.closed:
            return
        if sub is not None and len(msgs) > 1:
            msgs = self._within_ingest_limits(msgs)
        no_ack = self.config.get("no_ack")
        group = self.acks_after_sync
        answers = self.pending_acks if group else []    # in publish order
        queued = len(answers)
        chunk_start = time.monotonic()
        chunked = self.leader_ts is None
        process = self.process
        needs_sync = False
        if self.interest and not self.consumers and self.replica is None and not no_ack \
                and sub is not None:
            skipped, msgs = self._unwanted_run(msgs)
            answers.extend(skipped)
        for i, (subject, reply, hdr, payload, origin) in enumerate(msgs):
            if chunked and i and not i % ACK_CHUNK:
                # answer in chunks, not all at the batch's end: the publishers get their first
                # PubAcks while the rest is stored, and the two sides overlap instead of
                # taking turns. With file storage a chunk needs a sync of its own, worth it
                # only once the chunk took longer than a sync takes.
                if not group:
                    if answers:
                        self._reply_many(answers)
                        answers = []
                        flush_all()
                elif time.monotonic() - chunk_start > SYNC_CHUNK:
                    self._answer_stored(answers, queued, needs_sync, mid_batch=True)
                    answers = self.pending_acks
                    queued = 0
                    needs_sync = False
                    chunk_start = time.monotonic()
            if self.closed:
                break
            if (reply is not None and reply.endswith(fastbatch.SUFFIX)) or (hdr and _batch_id(hdr)):
                # a message of a batch: its batch answers it (in order with what came before)
                if answers and not group:
                    self._reply_many(answers)
                    answers = []
                self._on_batched(subject, reply, hdr, payload)
                if group:
                    answers = self.pending_acks
                    queued = len(answers)
                continue
            try:
                answer, stored = process(subject, None, hdr, payload)
                needs_sync = needs_sync or stored
            except E.ApiError as err:
                answer = E.dumps({"error": err.to_dict(), "stream": self.name, "seq": 0})
            except Exception as exc:    # a store failure must not kill the loop
                answer = self._store_failed_answer(exc)
                needs_sync = True
            if reply and not no_ack:
                answers.append((reply, answer))
        if group:
            if len(answers) > queued:
                self._answer_stored(answers, queued, needs_sync)
        elif answers:
            self._reply_many(answers)

    def _answer_stored(self, answers, queued, needs_sync, mid_batch=False):
        """Group commit: `answers` (pending_acks, `queued` of them from before this batch)
        go out after the sync that covers what was stored; at once when this batch stored
        nothing (messages nobody wanted, duplicates, errors) and no answer waits before them."""
        if needs_sync or queued or self.store.sync_waiting:
            if mid_batch:
                self.flush_acks(mid_batch=True)
            else:
                self.engine.want_sync(self)
        else:
            self.pending_acks = []
            self._reply_many(answers)

    def _within_ingest_limits(self, msgs):
        """nats-server's stream ingest queue limits (jetstream `max_buffered_msgs`, 100,000,
        and `max_buffered_size`, 128 MiB, by default).  natsd's queue is what the loop read
        for this stream in one iteration: past the limits the rest is dropped, logged, and
        each dropped message with a reply is answered 429 Too Many Requests."""
        opts = self.engine.opts
        max_msgs = opts.max_buffered_msgs or DEFAULT_MAX_QUEUE_MSGS
        max_size = opts.max_buffered_size or DEFAULT_MAX_QUEUE_BYTES
        size = 0
        for i, (subject, reply, hdr, payload, _) in enumerate(msgs):
            if i == max_msgs:
                why = "IPQ len limit reached"
                break
            size += len(subject) + len(reply or b"") + len(hdr or b"") + len(payload)
            if size > max_size:
                why = "IPQ size limit reached"
                break
        else:
            return msgs
        rate_limited_warning("Dropping messages due to excessive stream ingest rate on '%s' > '%s': %s"
                             % (self.jsa.name, self.name, why))
        answer = E.dumps({"error": E.error("JSStreamTooManyRequests").to_dict(), "stream": self.name,
                          "seq": 0})
        for _, reply, _, _, _ in msgs[i:]:
            if reply:
                publish(self.jsa.sublist, reply, None, TOO_MANY_REQUESTS, answer)
        return msgs[:i]

    def _store_failed_answer(self, exc):
        """A store failure while ingesting: logged (the stream goes on) -> the error answer."""
        self.store_failed(exc)
        err = E.error("JSStreamStoreFailedF", err=str(exc))
        return E.dumps({"error": err.to_dict(), "stream": self.name, "seq": 0})

    def _on_batched(self, subject, reply, hdr, payload):
        """A message of a fast batch (its reply names the batch) or of an atomic batch
        (Nats-Batch-Id): staged by its batch, which stores the batch through process() and
        answers (the fast batch its flow control too)."""
        try:
            if reply and reply.endswith(fastbatch.SUFFIX):
                req, _ = fastbatch.parse_reply(reply)
                self.fast_batches.handle(req, subject, reply, hdr, payload)
                return
            ack = self.batches.handle(_batch_id(hdr), subject, reply, hdr, payload,
                                      parse_headers(hdr))
        except E.ApiError as err:
            ack = (E.dumps({"error": err.to_dict(), "stream": self.name, "seq": 0}),)
        except Exception as exc:    # a store failure must not kill the loop
            self.store_failed(exc)
            err = E.error("JSStreamStoreFailedF", err=str(exc))
            ack = (E.dumps({"error": err.to_dict(), "stream": self.name, "seq": 0}),)
        if reply and ack is not None and not self.config.get("no_ack"):
            self.respond_after_sync(reply, ack[0])

    def _reply(self, reply, data):
        publish(self.jsa.sublist, reply, None, None, data)

    def _reply_many(self, pairs):
        publish_many(self.jsa.sublist, pairs)   # one call into Cython for the chunk

    def respond_after_sync(self, reply, data):
        """Answer in order with the PubAcks: after the group-commit sync of what was stored
        before (file storage), or now. Errors and duplicates' acks wait their turn too, so a
        burst is answered in publish order, as nats-server answers it."""
        if self.acks_after_sync:
            self.pending_acks.append((reply, data))
            self.engine.want_sync(self)
        else:
            self._reply(reply, data)

    @property
    def acks_after_sync(self):
        """PubAcks wait for the group-commit sync of this store. Not for a replicated stream's
        copy: its group's log is the durable record, synced before anything is applied."""
        return self.file and self.engine.group_commit and self.replica is None

    def last_seq(self):
        return self.store.state()["last_seq"]

    store_error = None              # (path, text) of the last disk error (kept until restart)

    def store_failed(self, exc):
        """A write to this stream's store failed (disk full, EFBIG, EIO, ...): mark the stream and
        log the path; the store is unchanged, later publishes try again."""
        path = getattr(exc, "path", None)
        if path is None:
            log.exception("JetStream ingest failed on '%s > %s'", self.jsa.name, self.name)
            return
        text = getattr(exc, "text", str(exc))
        if self.store_error != (path, text):
            log.error("JetStream store write failed for stream '%s > %s' at %s: %s",
                      self.jsa.name, self.name, path, text)
        self.store_error = (path, text)

    def flush_acks(self, mid_batch=False):
        """Called once per loop iteration by the engine (and by _on_batch between chunks,
        `mid_batch`: its sync never runs on the loop thread, the batch goes on meanwhile):
        one sync covers every pending ack."""
        acks, self.pending_acks = self.pending_acks, []
        if not acks:
            return

        def done():
            self._reply_many(acks)

        def failed(exc):
            self.store_failed(exc)
            err = E.error("JSStreamStoreFailedF", err=str(exc))
            data = E.dumps({"error": err.to_dict(), "stream": self.name, "seq": 0})
            for reply, _ in acks:
                self._reply(reply, data)
        self.store.sync_async(self.loop, done, failed, not mid_batch)

    def _puback(self, seq, duplicate=False, value=None, batch=None):
        """`{"stream":..[,"domain":..],"seq":..[,"duplicate": true][,"val":..]}`, byte for byte
        as nats-server writes it, from a per-stream template (this runs once per stored
        message)."""
        head = self._puback_head()
        if not duplicate and batch is None and value is None:
            return b"%s%d}" % (head, seq)
        tail = b',"duplicate": true' if duplicate else b""
        if batch is not None:
            tail += b',"batch":%s,"count":%d' % (E.dumps(batch[0]), batch[1])
        if value is not None:
            tail += b',"val":"%s"' % value.encode()
        return b"%s%d%s}" % (head, seq, tail)

    def _puback_head(self):
        """A PubAck up to its sequence: `{"stream":..[,"domain":..],"seq":`."""
        tpl = self._ack_template
        if tpl is None or tpl[0] != self.engine.domain:
            dom = self.engine.domain
            prefix = E.dumps({"stream": self.name})[:-1]
            if dom:
                prefix += b',"domain":' + E.dumps(dom)
            tpl = self._ack_template = (dom, prefix + b',"seq":', b"")
        return tpl[1]

    def stop_sourcing(self):
        if self.sourcing is not None:
            self.sourcing.stop()
            self.sourcing = None

    def store_sourced(self, subject, hdr, payload, seq=None, ts=None):
        """Store a message copied by a mirror (origin `seq`/`ts`, byte-for-byte) or a source
        (new local sequence). Returns False when it could not be stored. A replicated stream's
        copy goes through its group first and is stored on every replica at apply."""
        if self.replica is not None:
            return self.replica.propose_sourced(subject, hdr, payload, seq, ts)
        return self.store_sourced_here(subject, hdr, payload, seq, ts)

    def store_sourced_here(self, subject, hdr, payload, seq=None, ts=None):
        if self.closed:
            return False
        try:
            r = self.process(subject, None, hdr, payload, raw=(seq, ts) if seq else None,
                             sourced=True)
        except E.ApiError as err:
            log.debug("sourced message for '%s > %s' not stored: %s", self.jsa.name, self.name,
                      err.description)
            return False
        if r is not None and r[1] and self.acks_after_sync:
            self.engine.want_sync(self)
        return True

    def process(self, subject, reply, hdr, payload, raw=None, sourced=False, batch=None):
        """Store one message by every rule of the stream's configuration -> (PubAck bytes,
        needs_sync), or raise the ApiError nats-server answers. Every message a stream stores
        comes through here: publishes (_on_batch), a replica's committed entries, mirrored
        and sourced messages (`raw` = (seq, ts): stored under the origin's sequence and time;
        `sourced`: the origin checked its headers), committed atomic batches (`batch` = (id,
        count, last)), due schedules and subject delete markers."""
        if self.sealed:
            raise E.error("JSStreamSealedErr")
        if 0 <= self.max_msg_size < len(payload) + (len(hdr) if hdr else 0):
            raise E.error("JSStreamMessageExceedsMaximumErr")
        h = None
        ttl, msg_id, rollup, value, plain, republish_last = 0, "", "", None, False, None
        if hdr or raw is not None or self.checks_plain:
            sourced = sourced or raw is not None
            if self.transform is not None:
                mapped = self.transform.apply(subject.decode())
                if mapped:
                    subject = mapped.encode()
            if hdr:
                if len(hdr) > MAX_HDR:
                    raise E.error("JSStreamHeaderExceedsMaximumErr")
            if hdr and (self.counting or self.scheduling or b"Nats-" in hdr):
                # (a header block without a Nats- key asks nothing of the stream: the keys
                # are matched as sent, as nats-server's sliceHeader does; MQTT's Nmqtt-Pub)
                if self.counting and not payload and not sourced and not self.scheduling:
                    # headers of nothing but `Nats-Incr: <n>` (a counter's every publish): no
                    # other header rule can apply, the stream only adds the increment up
                    incr = counters.plain_increment(hdr)
                    total = None if incr is None else self.counter_values.total(self.store, subject)
                    if total is not None:
                        total += incr
                        payload, value = b'{"val":"%d"}' % total, str(total)
                        plain = True
                h = None if plain else parse_headers(hdr)
                if h:
                    hdr, h, incr, duplicate = self._check_headers(subject, hdr, h, payload, raw,
                                                                  sourced, batch)
                    if duplicate:
                        return self._puback(duplicate, True), False
                    msg_id = h.get("Nats-Msg-Id", "")
                    rollup = h.get("Nats-Rollup", "")
                    ttl = self._ttl_of(hdr, raw)
                    if incr is not None and self.counting:
                        hdr, payload, value = counters.apply(
                            self.counter_values.last(self.store, subject), subject, hdr, h,
                            payload, incr)
        if self.interest and raw is None and batch is None and not rollup and value is None \
                and self.replica is None and not self.counting and not self.scheduling \
                and not self._wanted(subject):
            return self._skip_unwanted(msg_id), False
        if self.discard_new and not rollup:
            self._check_discard_new(subject, hdr, payload)
        # republished by the leader alone (one copy per message on a cluster), with the
        # subject's last sequence before this message, as nats-server's Nats-Last-Sequence
        if self.republish is not None and (self.replica is None or self.replica.is_leader()):
            republish_last = self.store.subject_state(subject)[2]
        if ttl < 0:
            ttl = 0
        if raw is not None:
            seq, ts = raw
            self.store.store_raw(seq, ts, subject, hdr, payload, ttl)
        else:
            seq, ts = self.store.store_msg(subject, hdr, payload, self.leader_ts, ttl)
        if value is not None:
            self.counter_values.stored(subject, seq, value, None if plain else hdr)
        if h:                                   # what the headers ask for once it is stored
            if msg_id:
                self._dedup_add(msg_id, seq, ts)
                self.last_msg_id = msg_id
            if ttl:
                heapq.heappush(self.ttl_heap, (ts + ttl * NS, seq))
                self._schedule_ttl()
            if rollup == "all":
                self.store.compact(seq)
            elif rollup == "sub":               # keep this one, as nats-server's Keep: 1
                self.store.purge(subject.decode(), 0, 1)
        if self.count_limits:
            self.enforce_limits(subject)
        if self.age_timer is None and self.max_age:
            self._schedule_age()
        if republish_last is not None:
            self._republish(subject, hdr, payload, seq, ts, republish_last)
        if self.consumers:
            for c in list(self.consumers.values()):
                try:
                    c.on_stored(seq, subject)
                except Exception:
                    log.exception("consumer on_stored failed")
        if h and self.scheduling:
            self.schedules.stored(seq, subject.decode("utf-8", "surrogateescape"), h, ts)
        if self.interest:
            self._check_interest(seq, subject)
        tpl = self._ack_template                # the common PubAck without a call (_puback)
        if value is None and batch is None and tpl is not None and tpl[0] == self.engine.domain:
            return b"%s%d}" % (tpl[1], seq), True
        return self._puback(seq, False, value, batch if batch and batch[2] else None), True

    def _wanted(self, subject):
        """Whether a consumer of this (interest) stream wants a message on `subject` (decoded
        once here, not by each consumer's filter check)."""
        if not self.consumers:
            return False
        text = subject.decode() if isinstance(subject, bytes) else subject
        for c in self.consumers.values():
            if c.matches(text):
                return True
        return False

    def _unwanted_run(self, msgs):
        """An interest stream without consumers wants nothing: the leading messages of an
        ingest batch that ask nothing else of it (no Nats- header, no batch, within its
        size limits) are skipped together, as process() would skip them one by one, with one
        record in the store -> (their answers in order, the messages after them)."""
        if self.sealed or self.counting or self.scheduling:
            return [], msgs
        limit = self.max_msg_size
        n = 0
        for _, reply, hdr, payload, _ in msgs:
            size = len(payload)
            if hdr:
                if b"Nats-" in hdr or len(hdr) > MAX_HDR:
                    break
                size += len(hdr)
            if (reply and reply.endswith(fastbatch.SUFFIX)) or 0 <= limit < size:
                break
            n += 1
        if not n:
            return [], msgs
        seq = self.store.skip_msg(time.time_ns(), n) - n
        head = self._puback_head()
        answers = []
        for _, reply, _, _, _ in msgs[:n]:
            seq += 1
            if reply:
                answers.append((reply, b"%s%d}" % (head, seq)))
        return answers, msgs[n:]

    def _skip_unwanted(self, msg_id):
        """A message no consumer of an interest stream wants takes its sequence and is not
        stored (nats-server's SkipMsgNoInterest): nothing is republished, no limit applies,
        its Nats-Msg-Id still dedupes -> its PubAck. Its answer needs no sync (nothing it
        says can be lost); a crash before the next sync may give the sequence out again."""
        ts = time.time_ns()
        seq = self.store.skip_msg(ts)
        if msg_id:
            self._dedup_add(msg_id, seq, ts)
            self.last_msg_id = msg_id
        return self._puback(seq)

    def _check_headers(self, subject, hdr, h, payload, raw, sourced, batch):
        """The rules of a message's headers before it is stored -> (headers, parsed headers,
        a counter's increment or None, the sequence of the message it duplicates or 0)."""
        incr = None
        if raw is None:
            incr = counters.increment(h, payload, self.counting, sourced)
        if not sourced:
            if h.get("Nats-Batch-Id") and batch is None:
                raise E.error("JSAtomicPublishDisabledErr")     # only batch.py stores these
            if "Nats-Schedule" in h or "Nats-Schedule-Next" in h or "Nats-Scheduler" in h:
                checked = schedules.check(self, subject, hdr, h, sourced)
                if checked is not hdr:          # a schedule rolls up its subject
                    hdr, h = checked, parse_headers(checked)
        es = h.get("Nats-Expected-Stream")
        if es is not None and es != self.name:
            raise E.error("JSStreamNotMatchErr")
        msg_id = h.get("Nats-Msg-Id", "")
        if msg_id and raw is None:
            d = self._dedup_lookup(msg_id)
            if d is not None:
                return hdr, h, incr, d
        elm = h.get("Nats-Expected-Last-Msg-Id")
        if elm is not None and elm != self.last_msg_id:
            raise E.error("JSStreamWrongLastMsgIDErrF", id=self.last_msg_id)
        els = h.get("Nats-Expected-Last-Sequence")
        if els is not None:
            last = self.store.state()["last_seq"]
            if _expected_seq(els) != last:
                raise E.error("JSStreamWrongLastSequenceErrF", seq=last)
        elss = h.get("Nats-Expected-Last-Subject-Sequence")
        if elss is not None:
            filt = h.get("Nats-Expected-Last-Subject-Sequence-Subject") or subject.decode()
            sm = self.store.load_last(filt)
            last = sm.seq if sm else 0
            if _expected_seq(elss) != last:
                raise E.error("JSStreamWrongLastSequenceErrF", seq=last)
        rollup = h.get("Nats-Rollup", "")
        if rollup:
            if not self.config.get("allow_rollup_hdrs") and not sourced:
                raise E.error("JSStreamRollupFailedF", err="rollup not permitted")
            if rollup not in ("sub", "all"):
                raise E.error("JSStreamRollupFailedF", err='rollup value invalid: "%s"' % rollup)
        return hdr, h, incr, 0

    def _ttl_of(self, hdr, raw):
        """A message's Nats-TTL in seconds (0: none, -1: never), or the ApiError for one the
        stream does not allow or cannot read."""
        tv = ttl_header(hdr)
        allowed = self.config.get("allow_msg_ttl")
        if not tv or (raw is not None and not allowed):
            return 0                    # a mirror keeps the message, without expiring it
        try:                            # an empty value is no TTL (as nats-server)
            ttl, bad = parse_ttl(tv), False
        except ValueError:
            ttl, bad = 0, True
        if ttl != 0 and not allowed:
            raise E.error("JSMessageTTLDisabledErr")
        if bad:                         # an invalid value reads as 0: "invalid", not "disabled"
            raise E.error("JSMessageTTLInvalidErr")
        return min(ttl, MAX_TTL)

    def _limit_subject(self, subject, keep):
        """max_msgs_per_subject after a store (discard old): the subject's oldest messages go.
        One over, the common case (a KV put replacing a key's value), is one removal."""
        n, first, _ = self.store.subject_state(subject)
        if n == keep + 1:
            self.store.remove(first)
        elif n > keep:
            self.store.purge(subject.decode(), 0, keep)

    def _check_discard_new(self, subject, hdr, payload):
        cfg = self.config
        st = self.store.state()
        mm = cfg.get("max_msgs", -1)
        if mm > 0 and st["messages"] + 1 > mm:
            raise E.error("JSStreamStoreFailedF", err="maximum messages exceeded")
        mb = cfg.get("max_bytes", -1)
        if mb > 0 and st["bytes"] + self.store.msg_size(subject, hdr, payload) > mb:
            raise E.error("JSStreamStoreFailedF", err="maximum bytes exceeded")
        mps = cfg.get("max_msgs_per_subject", -1)
        if mps > 0 and cfg.get("discard_new_per_subject"):
            if self.store.subject_count(subject.decode()) + 1 > mps:
                raise E.error("JSStreamStoreFailedF", err="maximum messages per subject exceeded")

    def enforce_limits(self, subject=None):
        """Discard-old limits after a store (and after a config update)."""
        cfg = self.config
        mps, mm, mb = (cfg.get("max_msgs_per_subject", -1), cfg.get("max_msgs", -1),
                       cfg.get("max_bytes", -1))
        if mps <= 0 and mm <= 0 and mb <= 0:
            return                      # no count limits: nothing to read per message
        store = self.store
        if mps > 0:
            if subject is not None:
                self._limit_subject(subject, mps)
            else:
                for subj, n in store.subjects().items():
                    if n > mps:
                        store.purge(subj, 0, mps)
        if mm > 0 and store.num_msgs > mm:
            self._remove_first(store.num_msgs - mm)
        if mb > 0:
            while store.num_bytes > mb and store.num_msgs > 0:
                self._remove_first(1)

    def _remove_first(self, n):
        for sm in itertools.islice(self.store.messages_from(self.store.first_seq), max(n, 0)):
            self.store.remove(sm.seq)

    # ---- dedup ----

    def is_duplicate(self, msg_id):
        return self._dedup_lookup(msg_id) is not None

    def rollback_to(self, last_seq, msg_ids=()):
        """Undo a failed batch commit: drop what it stored after `last_seq` (consumers have not
        been run yet: they deliver from the loop, after this step)."""
        self.store.truncate(last_seq)
        for mid in msg_ids:
            self.dedup.pop(mid, None)
        for c in list(self.consumers.values()):
            c.npc = c._calc_num_pending()

    def _dedup_lookup(self, msg_id):
        d = self.dedup.get(msg_id)
        if d is None:
            return None
        if self.dup_window and time.time_ns() - d[1] > self.dup_window:
            return None
        return d[0]

    def _dedup_add(self, msg_id, seq, ts):
        if not self.dup_window:
            return
        self.dedup[msg_id] = (seq, ts)
        self.dedup_order.append((ts, msg_id))
        if len(self.dedup_order) > 64 and self.dedup_order[0][0] < time.time_ns() - self.dup_window:
            cutoff = time.time_ns() - self.dup_window
            i = 0
            while i < len(self.dedup_order) and self.dedup_order[i][0] < cutoff:
                t, mid = self.dedup_order[i]
                if self.dedup.get(mid, (0, None))[1] == t:
                    del self.dedup[mid]
                i += 1
            del self.dedup_order[:i]

    def rebuild_dedup(self):
        """After recovery: msg ids stored within the window, and the last msg id."""
        st = self.store.state()
        if not st["messages"]:
            return
        cutoff = time.time_ns() - self.dup_window
        seq = st["last_seq"]
        found = []
        while seq >= st["first_seq"]:
            sm = self.store.load_prev(seq)
            if sm is None:
                break
            rseq, hdr, ts = sm.seq, sm.hdr, sm.ts
            if ts < cutoff and (self.last_msg_id or not hdr):
                break
            if hdr:
                mid = parse_headers(hdr).get("Nats-Msg-Id")
                if mid:
                    if not self.last_msg_id:
                        self.last_msg_id = mid
                    if ts >= cutoff:
                        found.append((ts, mid, rseq))
            if ts < cutoff and self.last_msg_id:
                break
            seq = rseq - 1
        for ts, mid, rseq in reversed(found):
            self.dedup[mid] = (rseq, ts)
            self.dedup_order.append((ts, mid))

    # ---- republish ----

    def _republish(self, subject, hdr, payload, seq, ts, last):
        """`last`: the subject's last sequence before `seq` (0: none), which lets a client
        that follows one subject see a gap."""
        dest = self.republish.apply(subject.decode())
        if not dest:
            return
        pairs = [("Nats-Stream", self.name), ("Nats-Subject", subject.decode()),
                 ("Nats-Sequence", seq), ("Nats-Time-Stamp", go_time(ts)),
                 ("Nats-Last-Sequence", last)]
        body = payload
        if self.config["republish"].get("headers_only"):
            pairs.append(("Nats-Msg-Size", len(payload)))
            body = b""
        publish(self.jsa.sublist, dest.encode(), None, build_headers(pairs, hdr), body)

    # ---- expiry ----

    def _schedule_age(self):
        if self.age_timer is not None:
            self.age_timer.cancel()
            self.age_timer = None
        max_age = self.config.get("max_age", 0)
        if not max_age or self.closed:
            return
        st = self.store.state()
        if not st["messages"]:
            return
        first_ts = st["first_ts"]
        delay = max(0.0, (first_ts + max_age - time.time_ns()) / NS)
        self.age_timer = self.loop.call_later(delay + 0.001, self._expire_age)

    def _expire_age(self):
        """max_age: expire from the front; a message whose Nats-TTL is "never" stays."""
        self.age_timer = None
        if self.closed:
            return
        cutoff = time.time_ns() - self.config.get("max_age", 0)
        waiting = False                 # for a marker from the group's leader
        for sm in self.store.messages_from(self.store.first_seq):
            if sm.ts > cutoff:
                break
            tv = ttl_header(sm.hdr)
            if tv:
                try:
                    if parse_ttl(tv) < 0:
                        continue
                except ValueError:
                    pass
            if not self._expire(sm.seq, sm.subject, sm.hdr):
                waiting = True
        if waiting:
            self.age_timer = self.loop.call_later(MARKER_RECHECK, self._expire_age)
        else:
            self._schedule_age()

    def _expire(self, seq, subject, hdr):
        """Remove an expired message (nats-server's handleRemovalOrSdm): with subject delete
        markers, the last message of a subject is replaced by a marker, a `Nats-Rollup: sub`
        publish that removes it; a marker (or a KV purge) that expires just goes. On a
        replicated stream the marker is the leader's entry, stored on every copy (the rollup
        removes the message there): -> False while this copy waits for it."""
        if (self.config.get("subject_delete_marker_ttl") and not _is_marker(hdr)
                and self.store.subject_count(subject) == 1):
            ttl = self.config["subject_delete_marker_ttl"] // NS
            marker = build_headers([("Nats-Marker-Reason", "MaxAge"), ("Nats-TTL", "%ds" % ttl),
                                    ("Nats-Rollup", "sub")])
            if self.replica is not None:
                now = time.monotonic()
                proposed = self.marking.get(subject)
                if self.replica.copies_here() and (proposed is None or proposed[0] != seq
                                                   or now - proposed[1] > MARKER_RETRY):
                    if self.replica.propose_sourced(subject, marker, b"", 0, None):
                        if len(self.marking) >= self.marking_cap:
                            # entries past their retry are done with; a burst of expiries
                            # that are all recent doubles the cap instead of pruning each time
                            self.marking = {k: v for k, v in self.marking.items()
                                            if now - v[1] <= MARKER_RETRY}
                            self.marking_cap = max(MARKING_MAX, 2 * len(self.marking))
                        self.marking[subject] = (seq, now)
                return False
            try:
                self.process(subject, None, marker, b"", sourced=True)
                return True
            except E.ApiError as err:
                log.warning("subject delete marker for '%s > %s' not stored: %s",
                            self.jsa.name, self.name, err.description)
        self.store.remove(seq)
        return True

    def _schedule_ttl(self):
        if self.ttl_timer is not None or not self.ttl_heap or self.closed:
            return
        delay = max(0.0, (self.ttl_heap[0][0] - time.time_ns()) / NS)
        self.ttl_timer = self.loop.call_later(delay + 0.001, self._expire_ttl)

    def _expire_ttl(self):
        self.ttl_timer = None
        now = time.time_ns()
        again = []                      # waiting for the leader's marker: looked at later
        while self.ttl_heap and self.ttl_heap[0][0] <= now:
            _, seq = heapq.heappop(self.ttl_heap)
            sm = self.store.load(seq)
            if sm is not None and not self._expire(seq, sm.subject, sm.hdr):
                again.append((now + int(MARKER_RECHECK * NS), seq))
        for item in again:
            heapq.heappush(self.ttl_heap, item)
        self._schedule_ttl()

    def reread_store(self):
        """The store changed under the stream (a replica cut its copy back to a snapshot, or
        copied messages from another replica): what the stream derives from its stored
        messages (msg ids in the duplicate window, TTL expiries, schedules) is read again."""
        self.dedup, self.dedup_order, self.last_msg_id = {}, [], ""
        self.rebuild_dedup()
        if self.ttl_timer is not None:
            self.ttl_timer.cancel()
            self.ttl_timer = None
        self.ttl_heap = []
        self.schedules.close()
        self.schedules = schedules.Timetable(self)
        self.rebuild_timers()
        self._schedule_ttl()

    def rebuild_timers(self):
        """At start, one pass over the stream: the expiry of every message with a Nats-TTL,
        and the timetable of every stored schedule (a missed one fires once)."""
        ttls = self.config.get("allow_msg_ttl")
        scheds = self.config.get("allow_msg_schedules")
        if not ttls and not scheds:
            return
        for sm in self.store.messages_from(self.store.first_seq):
            hdr = sm.hdr
            if not hdr:
                continue
            v = ttl_header(hdr) if ttls else None
            if v:
                try:
                    t = min(parse_ttl(v), MAX_TTL)
                except ValueError:
                    t = 0
                if t > 0:
                    heapq.heappush(self.ttl_heap, (sm.ts + t * NS, sm.seq))
            if scheds and b"Nats-Schedul" in hdr:
                self.schedules.stored(sm.seq, sm.subject.decode("utf-8", "surrogateescape"),
                                      parse_headers(hdr), sm.ts, replay=True)

    def client_consumers(self):
        """The consumers clients made (not the internal ones of mirrors and sources): those
        running here and, on a replicated stream's leader, those with Raft groups of their own
        that lead elsewhere, as this server knows them (natsd/jetstream/replicated/consumergroup.py)."""
        out = [c for c in self.consumers.values() if not getattr(c, "internal", False)]
        if self.replica is not None and self.replica.is_leader():
            rc = self.replica.consumers
            out += [rc.hosted_view(name) for name in rc.led_elsewhere()]
        return out

    # ---- retention (consumer contract) ----

    def ack_removal(self, seq, consumer=None):
        if (consumer is not None and self.replica is not None
                and consumer.replica not in (None, self.replica.consumers)):
            return      # a consumer group of its own: its committed ack removes (hosted_acked)
        self.acked(seq)

    def acked(self, seq, subject=None):
        """A consumer acked message `seq` (of `subject`, when the caller has it): workqueue
        retention removes it, interest retention once no consumer needs it."""
        ret = self.config.get("retention")
        if ret == "workqueue":
            self._retention_remove(seq)
        elif ret == "interest":
            if subject is None:
                sm = self.store.load(seq)
                if sm is None:
                    return
                subject = sm.subject
            self._check_interest(seq, subject)

    def _retention_remove(self, seq):
        if self.store.remove(seq) and self.replica is not None:
            self.replica.consumers.retention_removed(seq)   # the other replicas remove it too

    def _check_interest(self, seq, subject):
        if self.replica is not None and not self.replica.consumers.live:
            return      # consumers run on the group's leader, which tells the others what to drop
        keeping = self.consumers.values() if self.replica is None else self.replica.consumers.retention_consumers()
        for c in keeping:
            try:
                if c.needs(seq, subject):
                    return
            except Exception:
                log.exception("consumer needs() failed")
                return
        self._retention_remove(seq)

    def consumer_removed(self, consumer=None):
        """Interest streams: drop messages no remaining consumer needs."""
        if self.config.get("retention") != "interest":
            return
        for sm in self.store.messages_from(self.store.first_seq):
            self._check_interest(sm.seq, sm.subject)

    wants_ack_removal = property(lambda self: self.config.get("retention") in ("workqueue", "interest"))

    # ---- operations ----

    def purge(self, subject=None, seq=0, keep=0):
        n = self.store.purge(subject, seq, keep)
        for c in list(self.consumers.values()):
            try:
                c.on_purged()
            except Exception:
                log.exception("consumer on_purged failed")
        self._schedule_age()
        return n

    def delete_msg(self, seq, erase=True):
        ok = self.store.remove(seq, erase)
        if ok and self.config.get("subject_delete_marker_ttl"):
            pass
        return ok

    def stop(self, delete=False):
        self.closed = True
        self.batches.close()
        self.fast_batches.close()
        self.schedules.close()
        if self.sourcing is not None:
            self.sourcing.stop()
        for s in self.subs:
            s.closed = True
            self.jsa.sublist.remove(s)
        self.subs = []
        for t in (self.age_timer, self.ttl_timer):
            if t is not None:
                t.cancel()
        for c in list(self.consumers.values()):
            try:
                if delete:      # stream delete: consumer DELETED advisories first, as nats-server
                    c.stop(delete, advisory=not getattr(c, "internal", False))
                else:
                    c.stop()
            except TypeError:
                c.stop()
            except Exception:
                log.exception("consumer stop failed")
        if delete:
            self.consumers.clear()
        if self.pending_acks:
            try:
                self.store.sync()
            except Exception:
                pass
            acks, self.pending_acks = self.pending_acks, []
            for reply, data in acks:
                self._reply(reply, data)
        try:
            if delete:
                self.store.delete()
            else:
                self.store.close()
        except Exception:
            log.exception("closing the store of %s failed", self.name)

    # ---- info ----

    def state(self, deleted_details=False, subjects_filter=None):
        st = self.store.state()
        out = {"messages": st["messages"], "bytes": st["bytes"], "first_seq": st["first_seq"],
               "first_ts": go_time(st["first_ts"]), "last_seq": st["last_seq"],
               "last_ts": go_time(st["last_ts"])}
        if st.get("num_subjects"):
            out["num_subjects"] = st["num_subjects"]
        if subjects_filter:
            subs = self.store.subjects(subjects_filter)
            if subs:
                out["subjects"] = {k.decode("utf-8", "surrogateescape"): v for k, v in subs.items()}
        if st.get("num_deleted"):
            out["num_deleted"] = st["num_deleted"]
        if deleted_details:
            d = self.store.deleted()
            if d:
                out["deleted"] = d
        out["consumer_count"] = len(self.consumer_names())
        return out

    def consumer_names(self):
        """The stream's consumers (not mirrors' and sources' own); a replica that does not run
        them knows them from its group (natsd/jetstream/replicated/consumers.py)."""
        if self.replica is not None and not self.replica.is_leader():
            return set(self.replica.consumers.rows)
        names = {n for n, c in self.consumers.items() if not getattr(c, "internal", False)}
        if self.replica is not None:
            names.update(self.replica.consumers.hosts)   # groups of their own: led anywhere
        return names

    def cluster_info(self):
        if self.replica is not None:
            return self.replica.cluster_info()
        ci = {}
        name = self.engine.cluster_name()
        if name:
            ci["name"] = name
        ci["leader"] = self.server.name
        return ci

    def identity(self):
        """nats-server 2.15's stream identity (Nats-Stream-Identity): getHash of the creation
        time in RFC 3339, which tells a re-created stream of the same name apart."""
        return get_hash(go_time(self.created))

    def info(self, deleted_details=False, subjects_filter=None, with_cluster=True, dynamic=True):
        out = {"config": config_json(self.config, dynamic), "created": go_time(self.created),
               "state": self.state(deleted_details, subjects_filter)}
        if self.engine.domain:
            out["domain"] = self.engine.domain
        if with_cluster:
            out["cluster"] = self.cluster_info()
        if self.config.get("mirror"):
            out["mirror"] = self.source_info(self.config["mirror"], True)
        if self.config.get("sources"):
            out["sources"] = [self.source_info(s) for s in self.config["sources"]]
        out["ts"] = go_time(time.time_ns())
        return out

    def source_info(self, src, mirror=False):
        if self.sourcing is not None:
            si = self.sourcing.info(src, mirror)
            if si is not None:
                return si
        si = {"name": src["name"]}
        if src.get("external"):
            si["external"] = src["external"]
        si["lag"] = 0
        si["active"] = -1
        if src.get("filter_subject"):
            si["filter_subject"] = src["filter_subject"]
        if src.get("subject_transforms"):
            si["subject_transforms"] = src["subject_transforms"]
        return si

    def matches(self, subject):
        return any(subject_matches(s, subject) for s in self.config.get("subjects") or [])
