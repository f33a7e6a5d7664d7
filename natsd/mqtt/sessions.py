"""MQTT state in JetStream, per account, in nats-server's streams and formats: the account's
session manager (its streams, retained messages, the sessions of its clients) and one
session (its subscriptions, their consumers, the packet identifiers of messages in flight).

Streams (created when an account's first MQTT client connects, as nats-server creates them):
`$MQTT_sess` (session records, one per client id hash), `$MQTT_msgs` (QoS 1/2 messages,
interest retention), `$MQTT_rmsgs` (retained messages, one per subject), `$MQTT_qos2in` and
`$MQTT_out` (QoS 2 state). The layouts of nats-server's releases before 2.10 are moved into
these at that moment, as nats-server moves them: retained messages kept on the one subject
`$MQTT.rmsgs`, and sessions kept in a stream each (`$MQTT_sess_<hash>`)."""
from __future__ import annotations

import base64
import json
import logging
from time import monotonic

from natsd._core.sublist import Subscription
from natsd.gofmt import go_duration, go_quote
from natsd.ids import get_hash, random_token
from natsd.mqtt import jsa as jsa_mod
from natsd.mqtt.tasks import run
from natsd.mqtt.stree import SubjectTree

log = logging.getLogger("natsd")

SESS_STREAM = "$MQTT_sess"
SESS_PREFIX = "$MQTT.sess."
MSGS_STREAM = "$MQTT_msgs"
MSGS_PREFIX = "$MQTT.msgs."
RETAINED_STREAM = "$MQTT_rmsgs"
RETAINED_PREFIX = "$MQTT.rmsgs."
OLD_RETAINED_SUBJECT = "$MQTT.rmsgs"    # before nats-server 2.10: every retained message here
OLD_SESS_STREAM_PREFIX = "$MQTT_sess_"  # nats-server's first MQTT releases: a stream per session
TRANSFER_RETRY = 5.0                    # seconds (nats-server's mqttDefaultTransferRetry)
RETAINED_TRANSFER_TIMEOUT = 10.0        # seconds (nats-server's mqttRetainedTransferTimeout)
QOS2IN_STREAM = "$MQTT_qos2in"
QOS2IN_PREFIX = "$MQTT.qos2.in."
OUT_STREAM = "$MQTT_out"
OUT_PREFIX = "$MQTT.out."
SUB_PREFIX = "$MQTT.sub."
PUBREL_PREFIX = "$MQTT.out.pubrel."
PUBREL_DELIVERY_PREFIX = "$MQTT.deliver.pubrel."
PUBREL_DURABLE_PREFIX = "$MQTT_PUBREL_"

NATS_HEADER = "Nmqtt-Pub"
SUBJECT_HEADER = "Nmqtt-Subject"
PUBREL_HEADER = "Nmqtt-PubRel"
RETAINED_TOPIC = "Nmqtt-RTopic"
RETAINED_ORIGIN = "Nmqtt-ROrigin"
RETAINED_FLAGS = "Nmqtt-RFlags"
RETAINED_SOURCE = "Nmqtt-RSource"

FLAPPER_JAIL = 1.0                      # nats-server's mqttSessFlappingJailDur
LOCKED_WAIT, LOCKED_TRIES = 0.1, 10     # a CONNECT waiting for another of its client id
DEFAULT_ACK_WAIT = 30.0
DEFAULT_MAX_ACK_PENDING = 1024
MAX_ACK_TOTAL = 0xFFFF


def publish_header(qos: int) -> bytes:
    """The header nats-server puts on what an MQTT client publishes."""
    return b"NATS/1.0\r\nNmqtt-Pub:%d\r\n\r\n" % qos


def staged_qos2_header(flags: int, subject: bytes) -> bytes:
    """The header of a QoS 2 message kept in `$MQTT_qos2in` until its PUBREL: the QoS, then
    the PUBLISH flags as one hex digit, and the subject."""
    return b"NATS/1.0\r\nNmqtt-Pub:2%s\r\nNmqtt-Subject:%s\r\n\r\n" % (
        b"0123456789abcdef"[flags & 0x0F:(flags & 0x0F) + 1], subject)


def pubrel_header(pi: int) -> bytes:
    return b"NATS/1.0\r\nNmqtt-PubRel:%d\r\n\r\n" % pi


def header_values(hdr: bytes | None) -> dict[str, bytes]:
    """The fields of a NATS header block, first value of each (nats-server's mqttSliceHeaders)."""
    out: dict[str, bytes] = {}
    if not hdr or not hdr.startswith(b"NATS/1.0"):
        return out
    for line in hdr.split(b"\r\n")[1:]:
        key, sep, value = line.partition(b":")
        if sep and key.strip():
            out.setdefault(key.strip().decode("latin-1"), value.strip())
    return out


def published_qos(hdr: bytes | None) -> int | None:
    """The QoS an MQTT publisher sent with (its Nmqtt-Pub header), None for a NATS message."""
    v = header_values(hdr).get(NATS_HEADER)
    if not v or v[0:1] not in (b"0", b"1", b"2"):
        return None
    return v[0] - 48


# ---- retained messages ----

class Retained:
    """One retained message: what a new matching subscription receives."""

    __slots__ = ("subject", "topic", "flags", "origin", "source", "msg", "seq")

    def __init__(self, subject, topic, flags, origin, source, msg, seq=0):
        self.subject, self.topic, self.flags = subject, topic, flags
        self.origin, self.source, self.msg, self.seq = origin, source, msg, seq

    @property
    def qos(self):
        return (self.flags & 0x06) >> 1

    def encode(self) -> tuple[bytes, bytes]:
        """(header, payload) as nats-server stores it in `$MQTT_rmsgs`."""
        h = [b"NATS/1.0", b"%s:%s" % (RETAINED_TOPIC.encode(), self.topic),
             b"%s:%s%x" % (RETAINED_FLAGS.encode(), b"-" if not self.msg else b"", self.flags)]
        if self.origin:
            h.append(b"%s:%s" % (RETAINED_ORIGIN.encode(), self.origin.encode()))
        if self.source:
            h.append(b"%s:%s" % (RETAINED_SOURCE.encode(), self.source.encode()))
        return b"\r\n".join(h) + b"\r\n\r\n", self.msg


def decode_retained(subject: str, hdr: bytes | None, payload: bytes, seq: int) -> Retained | None:
    """A `$MQTT_rmsgs` message (headers form, or the older JSON form) or None if invalid."""
    from natsd.mqtt.topics import subject_to_topic
    fields = header_values(hdr)
    flags_v = fields.get(RETAINED_FLAGS)
    if flags_v:
        if len(flags_v) > 1 and flags_v[:1] == b"-":
            flags_v = flags_v[1:]
        try:
            flags = int(flags_v, 16)
        except ValueError:
            return None
        origin = fields.get(RETAINED_ORIGIN, b"").decode("utf-8", "replace")
        source = fields.get(RETAINED_SOURCE, b"").decode("utf-8", "replace")
        msg = payload
    else:
        try:
            rec = json.loads(payload)
            flags = int(rec.get("flags", 0))
        except (ValueError, AttributeError, TypeError):
            return None
        import base64
        origin, source = rec.get("origin", ""), rec.get("source", "")
        msg = base64.b64decode(rec.get("msg", "") or "")
    if flags >= 0x0F or (flags & 0x06) >> 1 > 2:
        return None
    subj = subject[len(RETAINED_PREFIX):] if subject.startswith(RETAINED_PREFIX) else subject
    return Retained(subj, subject_to_topic(subj.encode()), flags, origin, source, msg, seq)


def consumer_config(name: str, deliver: str, filter_subject: str, ack_wait: float,
                    max_ack_pending: int, memory: bool, inactive: float) -> dict:
    """A QoS 1/2 subscription's durable consumer, its fields in Go's order and omitempty."""
    c = {"durable_name": name, "deliver_policy": "new", "ack_policy": "explicit",
         "ack_wait": int(ack_wait * 1e9), "filter_subject": filter_subject,
         "replay_policy": "instant", "max_ack_pending": max_ack_pending,
         "deliver_subject": deliver}
    if inactive > 0:
        c["inactive_threshold"] = int(inactive * 1e9)
    c["num_replicas"] = 0
    if memory:
        c["mem_storage"] = True
    return c


# ---- a session ----

class Session:
    """One client id's session: what survives the connection (clean=0) and what is in flight."""

    def __init__(self, manager, client_id: str, seq: int = 0):
        self.manager = manager
        self.id = client_id
        self.id_hash = get_hash(client_id)
        self.seq = seq                  # the record's sequence in $MQTT_sess (0: not stored)
        self.clean = False
        self.subs: dict[str, int] = {}  # NATS subject of the filter -> QoS
        self.cons: dict[str, dict] = {} # sid (the filter's subject) -> consumer config
        self.conn = None                # the connection that owns it now
        self.pending: dict[int, list] = {}      # pi -> [durable, stream seq, ack subject]
        self.pending_pubrel: dict[int, list] = {}   # QoS 2 out, PUBREC received: the same
        self.pubrel: dict | None = None         # the PUBREL consumer's config (QoS 2 out)
        self.cpending: dict[str, dict] = {}     # durable -> {stream seq: pi}
        self.last_pi = 0
        self.tmaxack = 0

    def record(self) -> bytes:
        """nats-server's mqttPersistedSession JSON."""
        rec = {"origin": self.manager.jsa.id, "id": self.id}
        if self.clean:
            rec["clean"] = True
        if self.subs:
            rec["subs"] = self.subs
        if self.cons:
            rec["cons"] = self.cons
        if self.pubrel:
            rec["pubrel"] = self.pubrel
        return json.dumps(rec, separators=(",", ":")).encode()

    def save(self):
        """A call: store the record, expecting the last one's sequence (a server of the
        cluster that took the session over makes this fail)."""
        def call(done):
            hdr = None
            if self.seq:
                hdr = b"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence:%d\r\n\r\n" % self.seq

            def stored(ack, error):
                if error is None:
                    self.seq = ack.get("seq", 0)
                    done(None, None)
                else:
                    done(None, RuntimeError("unable to persist session %r (seq=%d): %s"
                                            % (self.id, self.seq, error)))
            self.manager.jsa.store(self.manager.session_subject(self.id_hash), hdr, self.record(),
                                   stored, kind=jsa_mod.SESSION_PERSIST, client_hash=self.id_hash)
        return call

    def clear(self):
        """A call: delete the session's consumers and its record."""
        def call(done):
            jsa = self.manager.jsa
            for cc in self.cons.values():
                jsa.delete_consumer(MSGS_STREAM, cc["durable_name"], lambda *_: None)
            self.cons.clear()
            if self.pubrel:
                jsa.delete_consumer(OUT_STREAM, self.pubrel["durable_name"], lambda *_: None)
                self.pubrel = None
            self.subs.clear()
            self.pending.clear()
            self.pending_pubrel.clear()
            self.cpending.clear()
            self.last_pi = self.tmaxack = 0
            seq, self.seq = self.seq, 0
            if seq:
                jsa.delete_msg(SESS_STREAM, seq, lambda *_: done(None, None))
            else:
                done(None, None)
        return call

    # ---- packet identifiers of deliveries in flight ----

    def bump_pi(self) -> int:
        nxt = self.last_pi
        for _ in range(0xFFFF):
            nxt = nxt % 0xFFFF + 1
            if nxt not in self.pending and nxt not in self.pending_pubrel:
                self.last_pi = nxt
                return nxt
        return 0

    def track(self, durable: str, ack_subject: str, max_pending: int) -> tuple[int, bool]:
        """The packet identifier of a JetStream delivery (the same one for a redelivery) and
        whether it is a redelivery; pi 0 when too many are in flight."""
        parts = ack_subject.split(".")
        try:
            sseq, dcount = int(parts[-4]), int(parts[-5])
        except (IndexError, ValueError):
            return 0, False
        per = self.cpending.setdefault(durable, {})
        pi = per.get(sseq, 0)
        if pi and pi in self.pending_pubrel:
            return 0, False                     # its PUBREC came: the PUBREL flow owns it
        if pi:
            entry = self.pending.get(pi)
            if entry is not None:
                entry[2] = ack_subject
            return pi, dcount > 1
        if len(self.pending) >= max_pending:
            return 0, False
        pi = self.bump_pi()
        if not pi:
            return 0, False
        per[sseq] = pi
        self.pending[pi] = [durable, sseq, ack_subject]
        return pi, dcount > 1

    def track_retained(self, sid: str) -> int:
        pi = self.bump_pi()
        if pi:
            self.pending[pi] = ["%s/%s" % (RETAINED_STREAM, sid), pi, ""]
        return pi

    def untrack(self, pi: int) -> str:
        """A PUBACK: the JetStream ack subject to acknowledge, '' when there is none."""
        return self._untrack(self.pending, pi)

    def _untrack(self, table: dict, pi: int) -> str:
        entry = table.pop(pi, None)
        if entry is None:
            return ""
        per = self.cpending.get(entry[0])
        if per is not None:
            per.pop(entry[1], None)
        return entry[2]

    def track_pubrel(self, pi: int, ack_subject: str = ""):
        """QoS 2 out: the PUBREC of `pi` came (no ack subject yet), or its PUBREL was
        delivered by the PUBREL consumer (`ack_subject`)."""
        if not self.pubrel:
            return
        durable = self.pubrel["durable_name"]
        if not ack_subject:
            self.pending_pubrel[pi] = [durable, 0, ""]
            return
        sseq = _ack_seq(ack_subject)
        self.cpending.setdefault(durable, {})[sseq] = pi
        self.pending_pubrel[pi] = [durable, sseq, ack_subject]

    def untrack_pubrel(self, pi: int) -> str:
        """A PUBCOMP: the ack subject of the PUBREL's message, '' when there is none."""
        return self._untrack(self.pending_pubrel, pi)

    def forget_durable(self, durable: str):
        for pi in self.cpending.pop(durable, {}).values():
            self.pending.pop(pi, None)


def _ack_seq(ack_subject: str) -> int:
    """The stream sequence in a JetStream ack subject."""
    try:
        return int(ack_subject.split(".")[-4])
    except (IndexError, ValueError):
        return 0


# ---- an account's sessions ----

class AccountSessions:
    """nats-server's mqttAccountSessionManager: the streams, the retained messages and the
    sessions of one account's MQTT clients on this server."""

    def __init__(self, mqtt, account):
        self.mqtt = mqtt
        self.server = mqtt.server
        self.account = account
        # the domain of the JetStream requests: the account's default_js_domain, else the
        # mqtt block's js_domain; with neither set, the sessions' subjects carry this server's
        self.domain, self.domain_set = "", False
        if account.name in self.server.opts.default_js_domain:
            self.domain, self.domain_set = self.server.opts.default_js_domain[account.name], True
        if not self.domain and mqtt.settings.js_domain:
            self.domain, self.domain_set = mqtt.settings.js_domain, True
        own = self.server.opts.jetstream.domain
        self.domain_token = (self.domain + "." if self.domain else "") if self.domain_set else (own + "." if own else "")
        self.jsa = jsa_mod.Jsa(self.server, account, get_hash(self.server.name), self.domain)
        if mqtt.settings.api_timeout:
            self.jsa.set_timeout(mqtt.settings.api_timeout)
        self.sessions: dict[str, Session] = {}
        self.retained: SubjectTree = SubjectTree()     # subject -> Retained, in nats-server's shape
        self.ready = False
        self.failed: Exception | None = None
        self.waiters: list = []
        self.subs: list[Subscription] = []
        self.retained_count = 0             # messages the retained consumer sent
        self.retained_waiter = None
        self.flappers: dict[str, float] = {}   # client id -> when its connection was replaced
        self.connecting: set[str] = set()      # client ids a CONNECT is being handled for

    # ---- client ids that flap between connections (nats-server's flappers) ----

    def replaced(self, client_id: str):
        """A connection of `client_id` gave way to another one: a further connection with it
        within FLAPPER_JAIL seconds is held that long and closed (two applications sharing
        a client id and reconnecting at once would otherwise take turns without end)."""
        now = monotonic()
        for cid in [cid for cid, when in self.flappers.items() if now - when > FLAPPER_JAIL]:
            del self.flappers[cid]
        self.flappers[client_id] = now

    def jailed(self, client_id: str) -> bool:
        when = self.flappers.get(client_id)
        if when is None:
            return False
        if monotonic() - when > FLAPPER_JAIL:
            del self.flappers[client_id]
            return False
        return True

    def settled(self, client_id: str):
        """The connection bound to `client_id`'s session ended by itself."""
        self.flappers.pop(client_id, None)

    def session_subject(self, id_hash: str) -> str:
        return SESS_PREFIX + self.domain_token + id_hash

    # ---- start: subscriptions and streams ----

    def when_ready(self, done):
        """A call: answers once the streams are there (or with the error that stopped them)."""
        if self.ready or self.failed is not None:
            done(None, self.failed)
            return
        self.waiters.append(done)
        if len(self.waiters) == 1:
            run(self._start(), self._started)

    def _started(self, _, error):
        if error is not None:
            log.error("MQTT streams for account %r: %s", self.account.name, error)
            self.failed = error
            self.mqtt.forget(self)
        else:
            self.ready = True
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            w(None, error)

    def _internal_sub(self, subject: str, handler) -> Subscription:
        s = Subscription(None, subject.encode(), b"", None, handler)
        owner = self.account.internal_client
        if owner is not None:
            s.owner = owner
            s.sid = owner.next_sid()
        self.account.sublist.insert(s)
        self.subs.append(s)
        return s

    def _start(self):
        settings = self.mqtt.settings
        replicas = settings.stream_replicas or self.mqtt.default_replicas()
        if self.domain_set:
            log.info("Creating MQTT streams/consumers with replicas %d for account %s in domain %s",
                     replicas, go_quote(self.account.name), go_quote(self.domain))
        else:
            log.info("Creating MQTT streams/consumers with replicas %d for account %s",
                     replicas, go_quote(self.account.name))
        retained_inbox = SUB_PREFIX + random_token(22)
        self._internal_sub(retained_inbox, self._retained_arrived)
        self._internal_sub(jsa_mod.REPLIES_PREFIX + "*." + jsa_mod.SESSION_PERSIST + ".*.*",
                           self._session_persisted)
        streams = [
            {"name": SESS_STREAM, "subjects": [SESS_PREFIX + self.domain_token + ">"],
             "retention": "limits", "max_msgs_per_subject": 1},
            {"name": MSGS_STREAM, "subjects": [MSGS_PREFIX + ">"], "retention": "interest"},
            {"name": QOS2IN_STREAM, "subjects": [QOS2IN_PREFIX + ">"], "retention": "limits",
             "discard": "new", "max_msgs_per_subject": 1, "discard_new_per_subject": True},
            {"name": OUT_STREAM, "subjects": [OUT_PREFIX + ">"], "retention": "interest"},
            {"name": RETAINED_STREAM, "subjects": [RETAINED_PREFIX + ">"], "retention": "limits",
             "max_msgs_per_subject": 1},
        ]
        for cfg in streams:
            cfg.update(storage="file", num_replicas=replicas)
            try:
                info = yield lambda done, n=cfg["name"]: self.jsa.lookup_stream(n, done)
                if cfg["name"] == RETAINED_STREAM:
                    yield from self._upgrade_retained(info["config"])
                continue
            except jsa_mod.JsApiError as e:
                if e.err_code != 10059:                 # stream not found
                    raise RuntimeError("lookup %s stream for account %r: %s"
                                       % (cfg["name"], self.account.name, e)) from None
            try:
                yield lambda done, c=cfg: self.jsa.create_stream(c, done)
            except jsa_mod.JsApiError as e:
                if e.err_code != 10058:                 # created meanwhile by another server
                    raise RuntimeError("create %s stream for account %r: %s"
                                       % (cfg["name"], self.account.name, e)) from None
                continue
            if cfg["name"] == SESS_STREAM:              # new here: older sessions move in
                yield from self._transfer_session_streams()
        consumer = {"name": RETAINED_STREAM + "_" + random_token(22), "deliver_policy": "all",
                    "ack_policy": "none", "filter_subject": RETAINED_PREFIX + ">",
                    "replay_policy": "instant", "deliver_subject": retained_inbox,
                    "inactive_threshold": 300_000_000_000, "num_replicas": 0}
        info = yield lambda done: self.jsa.api(jsa_mod.CONSUMER_CREATE,
                                               "$JS.API.CONSUMER.CREATE." + RETAINED_STREAM,
                                               {"stream_name": RETAINED_STREAM, "config": consumer}, done)
        # the retained messages stored so far are known before the first client goes on
        yield self._retained_loaded(info.get("num_pending", 0))

    def _transfer_session_streams(self):
        """Sessions of nats-server's first MQTT releases, a stream each (`$MQTT_sess_<hash>`),
        moved into `$MQTT_sess` and their streams deleted, as nats-server's
        transferUniqueSessStreamsToMuxed. A failure is logged and the transfer tried again
        5 s later, in the background."""
        try:
            yield from self._move_session_streams()
        except (jsa_mod.JsApiError, jsa_mod.JsTimeout):
            log.warning("Failed to transfer all MQTT session streams, will try again in %s",
                        go_duration(TRANSFER_RETRY * 1e9))
            self.server.loop.call_later(TRANSFER_RETRY, lambda: run(self._transfer_session_streams()))

    def _move_session_streams(self):
        try:
            names = yield lambda done: self.jsa.stream_names(done)
        except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
            log.error("Unable to transfer MQTT session streams: %s", e)
            raise
        old = [n for n in names.get("streams") or [] if n.startswith(OLD_SESS_STREAM_PREFIX)]
        if not old:
            return
        log.info("Transferring %d MQTT session streams...", len(old))
        for name in old:
            log.info("  Transferring stream %s to %s", go_quote(name), go_quote(SESS_STREAM))
            try:
                got = yield lambda done, n=name: self.jsa.load_last(n, n, done)
            except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
                log.error("   Unable to load session record: %s", e)
                raise
            data = base64.b64decode(got["message"].get("data") or "")
            try:
                client_id = json.loads(data).get("id", "")
                if not isinstance(client_id, str):
                    raise TypeError(client_id)
            except (ValueError, TypeError, AttributeError):
                log.warning("    Unable to unmarshal the content of this stream, may not be a "
                            "legitimate MQTT session stream, skipping")
                continue
            id_hash = get_hash(client_id)
            try:
                yield lambda done: self.jsa.store(self.session_subject(id_hash), None, data, done,
                                                  kind=jsa_mod.SESSION_PERSIST, client_hash=id_hash)
            except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
                log.error("    Unable to transfer the session record: %s", e)
                raise
            try:
                yield lambda done, n=name: self.jsa.delete_stream(n, done)
            except (jsa_mod.JsApiError, jsa_mod.JsTimeout):
                pass                                    # nats-server does not look either
        log.info("Transfer of %d MQTT session streams done!", len(old))

    def _upgrade_retained(self, config: dict):
        """A `$MQTT_rmsgs` from before nats-server 2.10 (every retained message on the one
        subject `$MQTT.rmsgs`, no per-subject limit) made what nats-server 2.10 makes of it:
        the subjects `$MQTT.rmsgs.>`, each message moved to its topic's subject, one per
        subject. nats-server's order: the subjects, the messages, then the limit."""
        wanted = [RETAINED_PREFIX + ">"]
        if config.get("subjects") != wanted:
            config["subjects"] = wanted
            yield lambda done: self.jsa.update_stream(config, done)
        if config.get("max_msgs_per_subject") == 1:
            return
        yield from self._transfer_retained()
        config["max_msgs_per_subject"] = 1
        yield lambda done: self.jsa.update_stream(config, done)

    def _transfer_retained(self):
        """Each message on `$MQTT.rmsgs` (the JSON form) stored again on `$MQTT.rmsgs.<its
        subject>` and removed, as nats-server's transferRetainedToPerKeySubjectStream: at most
        RETAINED_TRANSFER_TIMEOUT long, and a failure to load or remove ends it without
        failing the start (what is left on the old subject is cut to its last message by the
        per-subject limit that follows, as on nats-server)."""
        processed = transferred = 0
        start = monotonic()
        while True:
            try:
                got = yield lambda done: self.jsa.load_next(RETAINED_STREAM, OLD_RETAINED_SUBJECT, done)
            except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
                if getattr(e, "err_code", None) == 10037:   # no message found: all moved
                    break
                log.warning("    Unable to transfer a retained message: failed to load from "
                            "'%s': %s", OLD_RETAINED_SUBJECT, e)
                return
            msg = got["message"]
            data = base64.b64decode(msg.get("data") or "")
            try:
                subject = json.loads(data)["subject"]
                if not isinstance(subject, str):
                    raise TypeError(subject)
            except (ValueError, TypeError, KeyError):
                log.warning("    Unable to unmarshal retained message with sequence %d, skipping", msg["seq"])
            else:
                try:
                    yield lambda done: self.jsa.store(RETAINED_PREFIX + subject, None, data, done)
                except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
                    log.error("    Unable to transfer the retained message with sequence %d: %s", msg["seq"], e)
                transferred += 1
            try:
                yield lambda done, seq=msg["seq"]: self.jsa.delete_msg(RETAINED_STREAM, seq, done)
            except (jsa_mod.JsApiError, jsa_mod.JsTimeout) as e:
                log.error("    Unable to clean up the retained message with sequence %d: %s", msg["seq"], e)
                return
            processed += 1
            took = monotonic() - start
            if took > RETAINED_TRANSFER_TIMEOUT:
                log.info("timed out while transferring retained messages from '%s' after %s, %d processed, "
                         "%d successfully transferred", OLD_RETAINED_SUBJECT, go_duration(took * 1e9),
                         processed, transferred)
                return
        if processed:
            log.info("Processed %d messages from '%s', successfully transferred %d in %s", processed,
                     OLD_RETAINED_SUBJECT, transferred, go_duration((monotonic() - start) * 1e9))

    def _retained_loaded(self, count: int):
        """A call that answers once the consumer has sent the `count` retained messages it
        had when made (waiting at most one API timeout)."""
        def call(done):
            if self.retained_count >= count:
                done(None, None)
                return
            timer = None

            def check():
                if self.retained_count >= count and self.retained_waiter is not None:
                    self.retained_waiter = None
                    timer.cancel()
                    done(None, None)

            def give_up():
                if self.retained_waiter is not None:
                    self.retained_waiter = None
                    done(None, None)
            timer = self.server.loop.call_later(self.jsa.timeout, give_up)
            self.retained_waiter = check
        return call

    def close(self):
        for s in self.subs:
            s.closed = True
            self.account.sublist.remove(s)
        self.subs.clear()
        self.jsa.close()

    def _session_persisted(self, sub, subject, reply, hdr, payload, origin=None):
        """Another server stored a session record (the PubAck to its request): a session of
        the same client id connected here gives way (nats-server's processSessionPersist)."""
        tokens = bytes(subject).decode().split(".")
        if len(tokens) != 6 or tokens[2] == self.jsa.id:
            return
        try:
            ack = json.loads(payload)
        except ValueError:
            return
        if not isinstance(ack, dict) or ack.get("error") or "seq" not in ack:
            return
        if ack.get("domain", "") != self.domain_token[:-1]:
            return
        sess = next((s for s in self.sessions.values() if s.id_hash == tokens[4]), None)
        if sess is None or ack["seq"] < sess.seq:
            return
        self.remove(sess)
        c, sess.conn = sess.conn, None
        if c is not None and not c.closed:
            self.replaced(sess.id)
            log.warning("%sClosing because a remote connection has started with the same client ID: %s",
                        self.mqtt.proto._prefix(c), go_quote(sess.id))
            c.state.mqtt.will = None
            c.state.mqtt.session = None
            c.schedule_close("Duplicate Client ID")

    # ---- retained messages ----

    def _retained_arrived(self, sub, subject, reply, hdr, payload, origin=None):
        parts = reply.decode().split(".") if reply else []
        try:
            seq = int(parts[-4])
        except (IndexError, ValueError):
            seq = 0
        self.retained_count += 1
        if self.retained_waiter is not None:
            self.retained_waiter()
        rm = decode_retained(subject.decode("utf-8", "surrogateescape"), hdr, bytes(payload), seq)
        if rm is None:
            return
        if not rm.msg:
            old = self.retained.pop(rm.subject, None)
            if rm.origin == self.jsa.id:
                self.jsa.delete_msg(RETAINED_STREAM, seq, lambda *_: None)
                if old is not None and old.seq and old.seq != seq:
                    self.jsa.delete_msg(RETAINED_STREAM, old.seq, lambda *_: None)
        else:
            self.retained[rm.subject] = rm

    def store_retained(self, rm: Retained, done):
        hdr, payload = rm.encode()
        self.jsa.store(RETAINED_PREFIX + rm.subject, hdr, payload, done)

    def retained_for(self, filter_subject: str) -> list[Retained]:
        """The retained messages a subscription's subject matches, in nats-server's order."""
        return [rm for _, rm in self.retained.match(filter_subject)]

    # ---- sessions ----

    def create_or_restore(self, client_id: str):
        """A call: (session, whether it was restored from its stored record)."""
        def call(done):
            if client_id in self.sessions:
                done((self.sessions[client_id], True), None)
                return
            id_hash = get_hash(client_id)

            def loaded(answer, error):
                if error is not None:
                    if isinstance(error, jsa_mod.JsApiError) and error.err_code == 10037:
                        done((Session(self, client_id), False), None)
                    else:
                        done(None, RuntimeError("loading session record: %s" % error))
                    return
                import base64
                msg = answer.get("message", {})
                try:
                    rec = json.loads(base64.b64decode(msg.get("data", "") or ""))
                except ValueError as e:
                    done(None, RuntimeError("unmarshal of session record at sequence %s: %s"
                                            % (msg.get("seq"), e)))
                    return
                if rec.get("id") != client_id:
                    done(None, SessionCollision())
                    return
                sess = Session(self, client_id, msg.get("seq", 0))
                sess.clean = bool(rec.get("clean"))
                sess.subs = dict(rec.get("subs") or {})
                sess.cons = {k: v for k, v in (rec.get("cons") or {}).items() if v}
                sess.pubrel = rec.get("pubrel") or None
                self.sessions[client_id] = sess
                done((sess, True), None)
            self.jsa.load_last(SESS_STREAM, self.session_subject(id_hash), loaded)
        return call

    def add(self, sess: Session):
        self.sessions[sess.id] = sess

    def remove(self, sess: Session):
        if self.sessions.get(sess.id) is sess:
            del self.sessions[sess.id]


class SessionCollision(Exception):
    def __init__(self):
        super().__init__("stored session does not match client ID")
