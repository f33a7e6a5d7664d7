"""One MQTT client connection: its packets read in order (a packet that waits for JetStream
holds the ones behind it, as nats-server's read loop does), CONNECT and its session,
PUBLISH in and out, SUBSCRIBE/UNSUBSCRIBE, keep-alive and the will."""
from __future__ import annotations

import logging
from collections import deque
from functools import partial
from time import monotonic

from natsd._core.mqttwire import publish_run
from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.gofmt import go_quote
from natsd.ids import random_token
from natsd.mqtt import packets as P
from natsd.mqtt import sparkplug
from natsd.mqtt.jsa import MSG_STORE
from natsd.mqtt import sessions as S
from natsd.mqtt.tasks import run
from natsd.mqtt.topics import (TopicError, filter_to_subject, is_reserved_filter,
                               needs_parent_level, subject_to_topic, topic_to_subject)
from natsd.net.tls import cert_identity
from natsd.protocol import ProtocolHandler
from natsd.subject import is_valid_subject

log = logging.getLogger("natsd")

PARENT_SID_SUFFIX = " fwc"


class Will:
    __slots__ = ("topic", "subject", "message", "qos", "retain")

    def __init__(self, topic, subject, message, qos, retain):
        self.topic, self.subject, self.message, self.qos, self.retain = topic, subject, message, qos, retain


class MqttState:
    """The MQTT side of one connection (ClientState.mqtt)."""

    __slots__ = ("client_id", "buf", "busy", "connected", "session", "manager", "will",
                 "keepalive", "keepalive_timer", "subs", "label", "acks")

    def __init__(self):
        self.client_id = ""
        self.buf = bytearray()
        self.busy = False               # a packet waits for JetStream: the rest waits in buf
        self.connected = False
        self.session = None
        self.manager = None
        self.will = None
        self.keepalive = 0.0            # 1.5 x the client's keep-alive, 0 for none
        self.keepalive_timer = None
        self.subs: dict[str, Subscription] = {}     # sid -> internal subscription
        self.label = ""
        # QoS 1 PUBLISHes being stored, in arrival order: [pi, stored]; PUBACKs go out in
        # this order (MQTT 4.6) as the stores finish
        self.acks: deque = deque()


class MqttProtocol(ProtocolHandler):
    """The handler of MQTT connections (the core hands it what it reads: raw_data)."""

    def __init__(self, mqtt):
        super().__init__(mqtt.server)
        self.mqtt = mqtt

    # ---- names in log lines ----

    def _prefix(self, c):
        st = c.state
        m = st.mqtt
        base = "%s:%d - mid%s:%d" % (st.host, st.port, "_ws" if st.ws else "", c.cid)
        if m is not None and m.label:
            base += " - " + m.label
        return base + " - "

    # ---- TLS (the core's handshake steps call these) ----

    def tls_server(self, c):
        return self.mqtt.settings.tls

    def tls_plaintext_ok(self, c):
        return False

    def tls_ready(self, c):
        if self.mqtt.settings.tls.settings.verify_and_map:
            der = c.tls.peer_certificate()
            c.state.cert = cert_identity(der) if der is not None else ([], [])

    def auth_timeout(self, c):
        """No CONNECT in time: closed (nats-server sends MQTT clients no -ERR)."""
        c.state.auth_timer = None
        if not c.connected and not c.closed:
            log.debug("%sAuthentication Timeout", self._prefix(c))
            c.schedule_close("Authentication Timeout")

    def error(self, c, text):
        log.error("%s%s", self._prefix(c), text)

    # ---- reading ----

    def raw_data(self, c, data):
        m = c.state.mqtt
        m.buf += data
        if m.connected:
            self._arm_keepalive(c)
        if not m.busy:
            self._process(c)

    def _process(self, c):
        m = c.state.mqtt
        pos = 0
        buf = m.buf
        try:
            while not m.busy and not c.closing and not c.closed:
                if not m.connected and pos < len(buf):
                    if buf[pos] & 0xF0 != P.CONNECT:
                        if not m.connected and bytes(buf[:4]) == b"GET " and not c.state.ws:
                            raise P.PacketError("MQTT clients over websocket must connect to "
                                                "the Websocket port, not the MQTT port")
                        raise P.PacketError("the first packet should be a CONNECT (16), got %d"
                                            % (buf[pos] & 0xF0))
                    total = P.packet_total(buf, pos)
                    if total is not None and total > c.max_payload:
                        self.error(c, "maximum payload exceeded: %d vs %d" % (total, c.max_payload))
                        c.schedule_close("Maximum Payload Exceeded")
                        return
                if m.connected and pos < len(buf) and buf[pos] in _PLAIN_RUNS and self._plain_runs(c):
                    if buf[pos] == _PLAIN_QOS0:
                        end, count, nbytes, _ = publish_run(buf, pos, m.manager.account.sublist, 0,
                                                            _QOS0_HEADER, c.max_payload)
                    else:
                        end, count, nbytes = self._qos1_run(c, m, buf, pos)
                    if end != pos:
                        c.in_msgs += count
                        c.in_bytes += nbytes
                        pos = end
                        continue
                got = P.split_packet(buf, pos)
                if got is None:
                    break
                first, start, end = got
                if m.acks and not _pipelined(first):
                    m.busy = True               # the PUBACKs before it go out first
                    break
                pos = end
                self._packet(c, first, start, end)
        except (P.PacketError, TopicError) as e:
            self.error(c, str(e))
            c.schedule_close("Protocol Violation")
            return
        del buf[:pos]

    def _plain_runs(self, c):
        """Whether this connection's QoS 0 PUBLISHes may take the core's run
        (natsd/_core/mqttwire.pyx): nothing of theirs to check or map here."""
        acc = c.state.account
        return c.state.perms is None and (acc is None or not acc.mappings)

    def _qos1_run(self, c, m, buf, pos):
        """The core's run of plain QoS 1 PUBLISHes: each published and stored as _publish
        does it, its PUBACK owed in order until its store is answered."""
        manager = m.manager
        jsa = manager.jsa
        acks, waiting, stored = m.acks, jsa.waiting, self._stored
        deadline = monotonic() + jsa.timeout

        def noted(pi, reply):
            entry = [pi, False]
            acks.append(entry)
            waiting[reply] = (partial(stored, c, entry), deadline, False)
        end, count, nbytes, jsa.next_token = publish_run(
            buf, pos, manager.account.sublist, 1, _QOS1_HEADER, c.max_payload, _MSGS_PREFIX,
            jsa.reply_base(MSG_STORE), jsa.next_token, noted)
        if count:
            jsa.arm()
        return end, count, nbytes

    def _packet(self, c, first, start, end):
        m = c.state.mqtt
        ptype, flags = first & 0xF0, first & 0x0F
        P.check_fixed_header(ptype, flags, end - start)
        r = P.Reader(bytes(m.buf[start:end]), 0, end - start)
        if ptype == P.PUBLISH:
            self._publish(c, flags, r)
        elif ptype == P.PUBACK:
            self._puback(c, r.uint16("packet identifier"))
        elif ptype == P.PINGREQ:
            c.send_bytes(P.PINGRESP_PACKET)
        elif ptype == P.SUBSCRIBE:
            self._wait(c, self._subscribe(c, r))
        elif ptype == P.UNSUBSCRIBE:
            self._wait(c, self._unsubscribe(c, r))
        elif ptype == P.CONNECT:
            if m.connected:
                raise P.PacketError("received a second CONNECT packet")
            self._wait(c, self._connect(c, r))
        elif ptype == P.DISCONNECT:
            m.will = None
            c.schedule_close("Client Closed")
        elif ptype == P.PUBREC:
            self._wait(c, self._pubrec(c, r.uint16("packet identifier")))
        elif ptype == P.PUBREL:
            self._wait(c, self._pubrel(c, r.uint16("packet identifier")))
        elif ptype == P.PUBCOMP:
            self._pubcomp(c, r.uint16("packet identifier"))
        else:
            raise P.PacketError("received unknown packet type %d" % (ptype >> 4))

    def _wait(self, c, gen):
        """Run a step that may wait for JetStream; the packets behind it wait for it."""
        m = c.state.mqtt
        m.busy = True
        inside = [True]

        def finished(_, error):
            m.busy = False
            if error is not None:
                if not isinstance(error, Closed):
                    self.error(c, str(error))
                    c.schedule_close("Protocol Violation")
                return
            if not inside[0] and not c.closing and not c.closed:
                self._process(c)
        run(gen, finished)
        inside[0] = False

    # ---- CONNECT ----

    def _connect(self, c, r):
        st = c.state
        m = st.mqtt
        proto = r.data("protocol name")
        if proto != b"MQTT":
            if proto == b"MQIsdp":
                raise P.PacketError("older protocol %s not supported" % go_quote(proto.decode("latin-1")))
            raise P.PacketError('expected connect packet with protocol name "MQTT", got %s'
                                % go_quote(proto.decode("latin-1")))
        level = r.byte("protocol level")
        if level != P.PROTOCOL_LEVEL:
            c.send_bytes(P.connack(P.RC_BAD_PROTOCOL, False))
            raise P.PacketError("unacceptable protocol version of %d" % level)
        flags = r.byte("flags")
        if flags & P.FLAG_RESERVED:
            raise P.PacketError("connect flags reserved bit not set to 0")
        wqos = (flags & P.FLAG_WILL_QOS) >> 3
        wretain = bool(flags & P.FLAG_WILL_RETAIN)
        has_will = bool(flags & P.FLAG_WILL)
        if not has_will:
            if wqos:
                raise P.PacketError("if Will flag is set to 0, Will QoS must be 0 too, got %d" % wqos)
            if wretain:
                raise P.PacketError("if Will flag is set to 0, Will Retain flag must be 0 too")
        elif wqos == 3:
            raise P.PacketError("if Will flag is set to 1, Will QoS can be 0, 1 or 2, got 3")
        if has_will and wqos == 2 and self.mqtt.settings.reject_qos2_publish:
            c.send_bytes(P.connack(P.RC_QOS2_WILL_REJECTED, False))
            raise P.PacketError("server does not accept QoS2 for Will messages")
        has_user = bool(flags & P.FLAG_USERNAME)
        has_pass = bool(flags & P.FLAG_PASSWORD)
        if has_pass and not has_user:
            raise P.PacketError("password flag set but username flag is not")
        ka = r.uint16("keep alive")
        client_id = r.data("client ID")
        clean = bool(flags & P.FLAG_CLEAN)
        if not client_id:
            if not clean:
                c.send_bytes(P.connack(P.RC_ID_REJECTED, False))
                raise P.PacketError("when client ID is empty, clean session flag must be set to 1")
            client_id = random_token(22).encode()
        try:
            cid = P.valid_utf8(client_id, "client ID")
        except P.PacketError:
            c.send_bytes(P.connack(P.RC_ID_REJECTED, False))
            raise
        if not _valid_name(cid):
            c.send_bytes(P.connack(P.RC_ID_REJECTED, False))
            raise P.PacketError("invalid character in client ID %s" % go_quote(cid))
        m.client_id = cid
        m.label = go_quote(cid)
        will = None
        if has_will:
            topic = r.data("Will topic")
            if not topic:
                raise P.PacketError("empty Will topic not allowed")
            P.valid_utf8(topic, "Will topic")
            subject, topic = self._mapped(c, topic_to_subject(topic), topic)
            will = Will(topic, subject, r.data("Will message"), wqos, wretain)
        user = password = ""
        if has_user:
            raw_user = r.data("user name")
            if not raw_user:
                c.send_bytes(P.connack(P.RC_BAD_CREDENTIALS, False))
                raise P.PacketError("empty user name not allowed")
            user = P.valid_utf8(raw_user, "user name")
        if has_pass:
            password = r.data("password").decode("utf-8", "surrogateescape")
        # authentication: nats-server's isClientAuthorized with the MQTT block's override
        if st.auth_timer is not None:
            st.auth_timer.cancel()
            st.auth_timer = None
        account = yield lambda done: self.mqtt.authenticate(c, user, password, done)
        if c.closing or c.closed:
            raise Closed()
        if account is None:
            c.send_bytes(P.connack(P.RC_NOT_AUTHORIZED, False))
            self.error(c, "authentication error" + (" - User %s" % go_quote(user) if user else ""))
            c.schedule_close("Authentication Failure")
            raise Closed()
        manager = self.mqtt.manager_for(account)
        try:
            yield manager.when_ready
        except Exception as e:
            raise RuntimeError("unable to connect: %s" % e) from None
        if c.closing or c.closed:
            raise Closed()
        tries = 0
        while True:
            if manager.jailed(cid):
                # its connection was replaced less than a second ago: as nats-server, this
                # one is held for the jail's second and closed, with no CONNACK
                yield lambda done: self.server.loop.call_later(S.FLAPPER_JAIL, done, None, None)
                c.schedule_close("Duplicate Client ID")
                raise Closed()
            if cid not in manager.connecting:
                break
            # another connection of the client id is connecting: this one waits for it to
            # finish (then takes over from it), as nats-server's sessLocked, or gives up
            tries += 1
            if tries == S.LOCKED_TRIES:
                raise RuntimeError("unable to connect: other session with client ID %s is in "
                                   "the process of connecting" % go_quote(cid))
            yield lambda done: self.server.loop.call_later(S.LOCKED_WAIT, done, None, None)
            if c.closing or c.closed:
                raise Closed()
        manager.connecting.add(cid)
        try:
            yield from self._connect_session(c, manager, cid, clean, ka, will)
        finally:
            manager.connecting.discard(cid)

    def _connect_session(self, c, manager, cid, clean, ka, will):
        """CONNECT, its session's part (the client id locked for it): taken over from another
        connection, restored from its record or new; then CONNACK."""
        m = c.state.mqtt
        try:
            sess, exists = yield manager.create_or_restore(cid)
        except S.SessionCollision:
            c.send_bytes(P.connack(P.RC_ID_REJECTED, False))
            raise
        present = False
        if exists:
            if clean or sess.clean:
                yield sess.clear()
            else:
                present = True
            old = sess.conn
            if old is not None and old is not c and not old.closed:
                manager.replaced(cid)
                old.state.mqtt.will = None
                log.warning("%sReplacing old client %s since both have the same client ID %s",
                            self._prefix(c), self.mqtt.conn_label(old), go_quote(cid))
                old.state.mqtt.session = None
                old.schedule_close("Duplicate Client ID")
        sess.conn = c
        sess.clean = clean
        manager.add(sess)
        try:
            yield sess.save()
        except Exception:
            manager.remove(sess)
            raise
        m.session, m.manager, m.will = sess, manager, will
        m.connected = True
        c.connected = True
        m.keepalive = ka * 1.5
        self.mqtt.client_connected(c)
        c.send_bytes(P.connack(P.RC_ACCEPTED, present))
        log.debug("%sClient connected", self._prefix(c))
        self._arm_keepalive(c)
        if sess.subs:
            filters = [(subj, qos) for subj, qos in sess.subs.items()]
            yield from self._add_subs(c, filters, from_packet=False)

    def _arm_keepalive(self, c):
        m = c.state.mqtt
        if m.keepalive_timer is not None:
            m.keepalive_timer.cancel()
            m.keepalive_timer = None
        if m.keepalive > 0 and not c.closed:
            m.keepalive_timer = self.server.loop.call_later(m.keepalive, self._keepalive_expired, c)

    def _keepalive_expired(self, c):
        c.state.mqtt.keepalive_timer = None
        if not c.closed and not c.closing:
            self.error(c, "read error: read tcp: i/o timeout")
            c.schedule_close("Read Error")

    # ---- PUBLISH in ----

    def _mapped(self, c, subject, topic):
        """The account's subject mappings applied to a published topic: (subject, topic),
        the topic converted back from a mapped subject as nats-server does."""
        acc = c.state.account
        if acc is None or not acc.mappings:
            return subject, topic
        mapped = acc.mappings.map(subject.decode("utf-8", "surrogateescape"))
        if not mapped or mapped.encode() == subject:
            return subject, topic
        subject = mapped.encode()
        return subject, subject_to_topic(subject)

    def _publish(self, c, flags, r):
        """A PUBLISH: QoS 0 goes out at once; QoS 1 goes out and is stored, its PUBACK sent
        in order once stored while the next PUBLISHes go on; QoS 2 is kept until its PUBREL."""
        m = c.state.mqtt
        qos = (flags & P.PUB_QOS) >> 1
        if qos > 2:
            raise P.PacketError("QoS=%d is invalid in MQTT" % qos)
        if qos == 2 and self.mqtt.settings.reject_qos2_publish:
            raise P.PacketError("QoS=2 is disabled for PUBLISH messages")
        topic = r.data("topic")
        if not topic:
            raise P.PacketError("topic cannot be empty")
        P.valid_utf8(topic, "topic")
        subject, topic = self._mapped(c, topic_to_subject(topic), topic)
        pi = 0
        if qos:
            pi = r.uint16("packet identifier")
            if pi == 0:
                raise P.PacketError("with QoS=%d, packet identifier cannot be 0" % qos)
        payload = r.rest()
        # the NATS message's size: the Nmqtt-Pub header, and for QoS 2 the subject's too
        total = 25 + len(payload) + (17 + len(subject) if qos == 2 else 0)
        if total > c.max_payload:
            self.error(c, "maximum payload exceeded: %d vs %d" % (total, c.max_payload))
            c.schedule_close("Maximum Payload Exceeded")
            return
        c.in_msgs += 1
        c.in_bytes += len(payload)
        if not self.mqtt.can_publish(c, subject):
            self.error(c, "Publish Violation - %s, Subject %s"
                       % (self.mqtt.user_label(c), go_quote(subject.decode("utf-8", "surrogateescape"))))
            if qos:
                c.send_bytes(P.pi_packet(P.PUBACK, pi))
            return
        if qos == 2:
            self._wait(c, self._stage_qos2(c, flags, subject, pi, payload))
            return
        self._route(c, m.manager, topic, subject, payload, flags)
        if qos == 1:
            entry = [pi, False]
            m.acks.append(entry)
            self._store(m.manager, subject, payload, qos, partial(self._stored, c, entry))

    def _stored(self, c, entry, answer, error):
        """A QoS 1 PUBLISH is in `$MQTT_msgs`: the PUBACKs whose turn it is go out."""
        if c.closed:
            return
        if error is not None:
            self.error(c, str(error))
            c.schedule_close("Protocol Violation")
            return
        entry[1] = True
        m = c.state.mqtt
        acks = m.acks
        if acks and acks[0][1]:
            out = []
            while acks and acks[0][1]:
                out.append(P.pi_packet(P.PUBACK, acks.popleft()[0]))
            c.send_bytes(b"".join(out))
        if not m.acks and m.busy and not c.closing:
            m.busy = False
            self._process(c)

    def _route(self, c, manager, topic, subject, payload, flags, source=""):
        """nats-server's mqttInitiateMsgDelivery, its first half: to NATS (and the MQTT QoS 0
        subscribers), and the retained copy (`flags`: the PUBLISH flags)."""
        qos = (flags & P.PUB_QOS) >> 1
        publish(manager.account.sublist, subject, None, S.publish_header(qos), payload)
        retain = bool(flags & P.PUB_RETAIN)
        birth, _, certificate = sparkplug.birth_death(topic)
        if retain == (birth and not certificate):
            return              # nothing to retain (or, as on nats-server, a retained BIRTH)
        if retain:
            key = subject
        else:                   # a Sparkplug BIRTH: kept, and sent, as its certificate
            topic = sparkplug.certificate_topic(topic)
            key = topic_to_subject(topic)
            flags |= P.PUB_RETAIN
            if payload:
                manager.jsa.send(key.decode("utf-8", "surrogateescape"), payload)
        st = c.state if c is not None else None
        rm = S.Retained(key.decode("utf-8", "surrogateescape"), topic, flags, manager.jsa.id,
                        source or (st.user if st is not None else ""), payload)
        manager.store_retained(rm, lambda _, e: e is not None and log.error(
            "unable to store retained message for account %s, subject %s: %s",
            go_quote(manager.account.name), go_quote(rm.subject), e))

    def _store(self, manager, subject, payload, qos, done):
        """Its second half: into `$MQTT_msgs` for the QoS 1/2 subscribers' consumers."""
        manager.jsa.store(S.MSGS_PREFIX + subject.decode("utf-8", "surrogateescape"),
                          S.publish_header(qos), payload, done, decoded=False)

    def _deliver(self, c, manager, topic, subject, payload, flags, source=""):
        """A step: route a message and, at QoS 1/2, wait for it to be stored."""
        self._route(c, manager, topic, subject, payload, flags, source)
        qos = (flags & P.PUB_QOS) >> 1
        if qos:
            yield lambda done: self._store(manager, subject, payload, qos, done)

    # ---- QoS 2 in: PUBLISH kept until PUBREL, once per packet identifier ----

    def _qos2_subject(self, c, pi):
        return "%s%s.%d" % (S.QOS2IN_PREFIX, c.state.mqtt.client_id, pi)

    def _stage_qos2(self, c, flags, subject, pi, payload):
        """nats-server's mqttStoreQoS2MsgOnce: `$MQTT_qos2in` keeps one message per packet
        identifier and refuses a second (a resent PUBLISH), which is not an error here."""
        manager = c.state.mqtt.manager
        try:
            yield lambda done: manager.jsa.store(self._qos2_subject(c, pi),
                                                 S.staged_qos2_header(flags, subject), payload, done)
        except Exception as e:
            if "maximum messages per subject exceeded" not in str(e):
                raise
        c.send_bytes(P.pi_packet(P.PUBREC, pi))

    def _pubrel(self, c, pi):
        """The PUBREL of a QoS 2 PUBLISH: deliver what was kept (once), then PUBCOMP."""
        manager = c.state.mqtt.manager
        try:
            try:
                stored = yield lambda done: manager.jsa.load_last(S.QOS2IN_STREAM,
                                                                  self._qos2_subject(c, pi), done)
            except Exception:
                return                          # nothing kept: delivered already
            msg = stored.get("message", {})
            yield lambda done: manager.jsa.delete_msg(S.QOS2IN_STREAM, msg.get("seq", 0), done)
            import base64
            hdr = base64.b64decode(msg.get("hdrs") or "")
            fields = S.header_values(hdr)
            value = fields.get(S.NATS_HEADER, b"")
            subject = fields.get(S.SUBJECT_HEADER, b"")
            if value[:1] != b"2" or not subject:
                raise RuntimeError("invalid message in QoS2 PUBREL stream")
            retain = len(value) > 1 and bool(int(value[1:2], 16) & P.PUB_RETAIN)
            payload = base64.b64decode(msg.get("data") or "")
            yield from self._deliver(c, manager, subject_to_topic(subject), subject, payload,
                                     (2 << 1) | (P.PUB_RETAIN if retain else 0))
        finally:
            if not c.closed:
                c.send_bytes(P.pi_packet(P.PUBCOMP, pi))

    # ---- QoS 2 out: PUBREC, PUBREL kept in `$MQTT_out`, PUBCOMP ----

    def _pubrec(self, c, pi):
        sess = c.state.mqtt.session
        if sess is None or sess.conn is not c:
            raise P.PacketError("invalid MQTT session")
        sess.track_pubrel(pi)
        ack = sess.untrack(pi)
        yield lambda done: sess.manager.jsa.store(S.PUBREL_PREFIX + sess.id_hash,
                                                  S.pubrel_header(pi), b"", done)
        if ack:
            sess.manager.jsa.send(ack)

    def _pubcomp(self, c, pi):
        sess = c.state.mqtt.session
        if sess is None or sess.conn is not c:
            return
        ack = sess.untrack_pubrel(pi)
        if ack:
            sess.manager.jsa.send(ack)

    def _deliver_pubrel(self, sub, subject, reply, hdr, payload, origin=None):
        c = sub.data[0]
        sess = c.state.mqtt.session
        if c.closed or sub.closed or not reply or sess is None or sess.conn is not c or not sess.pubrel:
            return
        value = S.header_values(hdr).get(S.PUBREL_HEADER, b"")
        try:
            pi = int(value)
        except ValueError:
            return
        if not 0 < pi <= 0xFFFF:
            return
        sess.track_pubrel(pi, reply.decode())
        c.send_bytes(P.pi_packet(P.PUBREL, pi))

    def _ensure_pubrel(self, c, sess):
        """nats-server's ensurePubRelConsumerSubscription: the subscription on the session's
        PUBREL delivery subject and, once per session, its consumer on `$MQTT_out`."""
        m = c.state.mqtt
        inbox = S.PUBREL_DELIVERY_PREFIX + sess.id_hash
        if inbox not in m.subs:
            self._add_sub(c, inbox, inbox, self._deliver_pubrel, [c])
        if sess.pubrel is not None:
            return
        settings = self.mqtt.settings
        max_pending = settings.max_ack_pending or S.DEFAULT_MAX_ACK_PENDING
        if sess.tmaxack + max_pending > S.MAX_ACK_TOTAL:
            raise RuntimeError("max_ack_pending for all consumers would be %d which exceeds "
                               "the limit of %d" % (sess.tmaxack + max_pending, S.MAX_ACK_TOTAL))
        cc = S.consumer_config(S.PUBREL_DURABLE_PREFIX + sess.id_hash, inbox,
                               S.PUBREL_PREFIX + sess.id_hash, settings.ack_wait or S.DEFAULT_ACK_WAIT,
                               max_pending, settings.consumer_memory_storage,
                               settings.consumer_inactive_threshold)
        yield lambda done: sess.manager.jsa.api(
            "CC", "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s" % (S.OUT_STREAM, cc["durable_name"]),
            {"stream_name": S.OUT_STREAM, "config": cc}, done)
        sess.tmaxack += max_pending
        sess.pubrel = cc

    # ---- SUBSCRIBE / UNSUBSCRIBE ----

    def _filters(self, c, r, with_qos):
        pi = r.uint16("packet identifier")
        out = []
        while r.more():
            topic = r.data("topic filter")
            if not topic:
                raise P.PacketError("topic filter cannot be empty")
            P.valid_utf8(topic, "topic filter")
            try:
                subject = filter_to_subject(topic).decode("utf-8", "surrogateescape")
            except TopicError as e:
                self.error(c, "invalid topic %s: %s" % (go_quote(topic.decode("utf-8", "surrogateescape")), e))
                subject = ""
            qos = 0
            if with_qos:
                qos = r.byte("QoS")
                if qos > 2:
                    raise P.PacketError("subscribe QoS value must be 0, 1 or 2, got %d" % qos)
            out.append([subject, qos])
        if not out:
            raise P.PacketError("%ssubscribe protocol must contain at least 1 topic filter"
                                % ("" if with_qos else "un"))
        return pi, out

    def _subscribe(self, c, r):
        pi, filters = self._filters(c, r, True)
        granted = yield from self._add_subs(c, filters, from_packet=True)
        c.send_bytes(P.suback(pi, granted))
        sess = c.state.mqtt.session
        for subj, qos in zip([f[0] for f in filters], granted):
            if qos != P.SUBACK_FAILURE:
                self._send_retained(c, sess, subj, qos)
                if needs_parent_level(subj):
                    self._send_retained(c, sess, subj[:-2], qos)

    def _add_subs(self, c, filters, from_packet):
        """nats-server's processSubs: for each (subject, qos), the QoS 0 subscription, the
        consumer of a QoS 1 one, and the parent level of a `/#` filter. -> granted QoS list."""
        m = c.state.mqtt
        sess = m.session
        granted = []
        changed = False
        for subject, qos in filters:
            if qos == 2 and self.mqtt.settings.downgrade_qos2_subscribe:
                log.warning("%sDowngrading subscription QoS2 to QoS1 for %s, as configured",
                            self._prefix(c), go_quote(subject))
                qos = 1
            if (not subject or subject.startswith("$MQTT.") or not is_valid_subject(subject)
                    or not self.mqtt.can_subscribe(c, subject)):
                granted.append(P.SUBACK_FAILURE)
                continue
            if qos == 2:
                try:
                    yield from self._ensure_pubrel(c, sess)
                except Exception as e:
                    log.error("%sfailed to initialize PUBREL processing: %s", self._prefix(c), e)
                    granted.append(P.SUBACK_FAILURE)
                    continue
            sids = [(subject, subject)]
            if needs_parent_level(subject):
                sids.append((subject[:-2], subject[:-2] + PARENT_SID_SUFFIX))
            ok = True
            for subj, sid in sids:
                self._nats_sub(c, subj, sid, qos)
                try:
                    yield from self._js_consumer(c, sess, subj, sid, qos, from_packet)
                except Exception as e:
                    log.error("%sUnable to add JetStream consumer for subscription on %s: err=%s",
                              self._prefix(c), go_quote(subj), e)
                    ok = False
            if not ok:
                granted.append(P.SUBACK_FAILURE)
                continue
            granted.append(qos)
            if sess.subs.get(subject) != qos:
                sess.subs[subject] = qos
                changed = True
        if from_packet and changed:
            yield sess.save()
        return granted

    def _nats_sub(self, c, subject, sid, qos):
        m = c.state.mqtt
        s = m.subs.get(sid)
        if s is None:
            self._add_sub(c, subject, sid, self._deliver_qos0, [c, qos, is_reserved_filter(subject)])
        else:
            s.data[1] = qos

    def _add_sub(self, c, subject, sid, handler, data):
        """One of the connection's subscriptions: delivered to `handler`, listed under the
        connection (/connz, /subsz), `data` for the handler."""
        s = Subscription(None, subject.encode(), b"", None, handler)
        s.sid = sid.encode()
        s.owner = c
        s.data = data
        c.state.mqtt.subs[sid] = s
        c.sublist.insert(s)
        self.server.interest_added(c.state.account, s)

    def _js_consumer(self, c, sess, subject, sid, qos, from_packet):
        """The durable consumer of a QoS 1 subscription and the subscription on its deliver
        subject (nats-server's processJSConsumer)."""
        m = c.state.mqtt
        settings = self.mqtt.settings
        cc = sess.cons.get(sid)
        if cc is not None:
            if qos == 0:
                del sess.cons[sid]
                self._drop_inbox(c, cc)
                sess.forget_durable(cc["durable_name"])
                sess.manager.jsa.delete_consumer(S.MSGS_STREAM, cc["durable_name"], lambda *_: None)
                return
            if from_packet:
                inbox_sub = m.subs.get(cc["deliver_subject"])
                if inbox_sub is not None:
                    inbox_sub.data[1] = qos
                    return
        if qos == 0:
            return
        if cc is None:
            max_pending = settings.max_ack_pending or S.DEFAULT_MAX_ACK_PENDING
            if sess.tmaxack + max_pending > S.MAX_ACK_TOTAL:
                raise RuntimeError("max_ack_pending for all consumers would be %d which exceeds "
                                   "the limit of %d" % (sess.tmaxack + max_pending, S.MAX_ACK_TOTAL))
            cc = S.consumer_config(sess.id_hash + "_" + random_token(22), S.SUB_PREFIX + random_token(22),
                                   S.MSGS_PREFIX + subject, settings.ack_wait or S.DEFAULT_ACK_WAIT,
                                   max_pending, settings.consumer_memory_storage,
                                   settings.consumer_inactive_threshold)
            if settings.consumer_replicas:
                cc["num_replicas"] = settings.consumer_replicas
            yield lambda done: sess.manager.jsa.api(
                "CC", "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s" % (S.MSGS_STREAM, cc["durable_name"]),
                {"stream_name": S.MSGS_STREAM, "config": cc}, done)
            sess.tmaxack += max_pending
            sess.cons[sid] = cc
        inbox = cc["deliver_subject"]
        if inbox not in m.subs:
            self._add_sub(c, inbox, inbox, self._deliver_qos12,
                          [c, qos, is_reserved_filter(subject), cc["durable_name"]])

    def _drop_inbox(self, c, cc):
        s = c.state.mqtt.subs.pop(cc["deliver_subject"], None)
        if s is not None:
            self._remove(c, s)

    def _remove(self, c, s):
        s.closed = True
        if c.sublist.remove(s):
            self.server.interest_removed(c.state.account, s)

    def _unsubscribe(self, c, r):
        pi, filters = self._filters(c, r, False)
        m = c.state.mqtt
        sess = m.session
        changed = False
        for subject, _ in filters:
            sids = [subject]
            if needs_parent_level(subject):
                sids.append(subject[:-2] + PARENT_SID_SUFFIX)
            for sid in sids:
                cc = sess.cons.pop(sid, None)
                if cc is not None:
                    self._drop_inbox(c, cc)
                    sess.forget_durable(cc["durable_name"])
                    yield lambda done, n=cc["durable_name"]: sess.manager.jsa.delete_consumer(
                        S.MSGS_STREAM, n, lambda *_: done(None, None))
                s = m.subs.pop(sid, None)
                if s is not None:
                    self._remove(c, s)
            if sess.subs.pop(subject, None) is not None:
                changed = True
        if changed:
            yield sess.save()
        c.send_bytes(P.pi_packet(P.UNSUBACK, pi))

    # ---- PUBLISH out ----

    def _deliver_qos0(self, sub, subject, reply, hdr, payload, origin=None):
        c, sub_qos, reserved = sub.data
        if c.closed or sub.closed:
            return
        if reply and reply.startswith(b"$JS.ACK."):
            return
        if reserved and subject.startswith(b"$"):
            return
        msg_qos = S.published_qos(hdr)
        if sub_qos > 0 and msg_qos:
            return                          # its consumer delivers it
        payload = bytes(payload)
        if not self.mqtt.can_deliver(c, subject):
            return
        self._write_live(c, 0, 0, False, subject_to_topic(bytes(subject)), payload)

    def _deliver_qos12(self, sub, subject, reply, hdr, payload, origin=None):
        c, sub_qos, reserved, durable = sub.data
        if c.closed or sub.closed or not reply:
            return
        m = c.state.mqtt
        sess = m.session
        if sess is None or sess.conn is not c:
            return
        qos = min(S.published_qos(hdr) or 0, sub_qos)
        if qos == 0:
            return
        stripped = bytes(subject)[len(S.MSGS_PREFIX):]
        if (reserved and stripped.startswith(b"$")) or not self.mqtt.can_deliver(c, stripped):
            sess.manager.jsa.send(reply.decode())
            return
        pi, dup = sess.track(durable, reply.decode(), self.mqtt.settings.max_ack_pending
                             or S.DEFAULT_MAX_ACK_PENDING)
        if not pi:
            return
        self._write_live(c, pi, qos, dup, subject_to_topic(stripped), bytes(payload))

    def _send_retained(self, c, sess, subject, sub_qos):
        for rm in sess.manager.retained_for(subject):
            if not self.mqtt.can_deliver(c, rm.subject.encode()):
                continue
            qos = min(rm.qos, sub_qos)
            pi = 0
            if qos:
                pi = sess.track_retained(subject)
                if not pi:
                    qos = 0
            self._write_publish(c, pi, qos, False, True, rm.topic, rm.msg)

    def _write_live(self, c, pi, qos, dup, topic, payload):
        """A delivery as it happens: a Sparkplug certificate of a BIRTH goes out retained (at
        QoS 0), a DEATH with the current time (nats-server's mqttEnqueuePublishMsgTo)."""
        retain = False
        birth, death, certificate = sparkplug.birth_death(topic)
        if birth and qos == 0:
            retain = certificate
        elif death and not certificate:
            payload = sparkplug.with_death_timestamp(payload)
        self._write_publish(c, pi, qos, dup, retain, topic, payload)

    def _write_publish(self, c, pi, qos, dup, retain, topic, payload):
        _, head = P.publish_header(pi, qos, dup, retain, topic, len(payload))
        c.send_bytes(head + payload)
        c.out_msgs += 1
        c.out_bytes += len(payload)

    def _puback(self, c, pi):
        sess = c.state.mqtt.session
        if sess is None or sess.conn is not c:
            raise P.PacketError("invalid MQTT session")
        ack = sess.untrack(pi)
        if ack:
            sess.manager.jsa.send(ack)

    # ---- the end of a connection ----

    def close(self, c):
        st = c.state
        m = st.mqtt
        if m.keepalive_timer is not None:
            m.keepalive_timer.cancel()
            m.keepalive_timer = None
        sess, manager = m.session, m.manager
        for s in m.subs.values():
            self._remove(c, s)
        m.subs.clear()
        if sess is not None and sess.conn is c:
            sess.conn = None
            manager.settled(sess.id)
            if sess.clean:
                manager.remove(sess)
                run(_clear(sess))
        if m.will is not None and manager is not None:
            w, m.will = m.will, None
            if self.mqtt.can_publish(c, w.subject):
                run(self._deliver(None, manager, w.topic, w.subject, w.message,
                                  (w.qos << 1) | (P.PUB_RETAIN if w.retain else 0),
                                  source=st.user))
        self.server.close_connection(c, self._prefix(c))


def _clear(sess):
    yield sess.clear()


class Closed(Exception):
    """The connection was closed by the step itself (nothing more to log)."""


def _valid_name(name: str) -> bool:
    """nats-server's isValidName: no spaces or control characters' kin, not empty."""
    return bool(name) and not any(ch in " \t\r\n" for ch in name)


_PLAIN_QOS0 = P.PUBLISH                 # the first byte of a QoS 0 PUBLISH without DUP or RETAIN
_PLAIN_RUNS = (P.PUBLISH, P.PUBLISH | 0x02)     # ... and of a QoS 1 one: the core's runs
_QOS0_HEADER = S.publish_header(0)
_QOS1_HEADER = S.publish_header(1)
_MSGS_PREFIX = S.MSGS_PREFIX.encode()


def _pipelined(first: int) -> bool:
    """Packets that may pass PUBACKs still owed: PUBLISH at QoS 0 or 1, and PUBACK (it
    answers nothing)."""
    ptype = first & 0xF0
    return ptype == P.PUBACK or (ptype == P.PUBLISH and (first & P.PUB_QOS) >> 1 < 2)
