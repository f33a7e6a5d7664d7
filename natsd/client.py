"""The client protocol's control side: CONNECT, SUB, UNSUB, auth, permissions, pings, errors.

The Cython parser handles PUB/HPUB/PING/PONG itself and calls this handler for everything
else. One ClientProtocol serves every client connection; per-connection Python state lives in
`conn.state` (a ClientState).
"""
import dataclasses
import logging
import time

from natsd.auth import authenticator as auth_mod
from natsd.auth.offloop import OffLoop
from natsd import msgtrace
from natsd._core.router import current_trace, deliver_to
from natsd._core.sublist import Subscription
from natsd.gofmt import go_quote
from natsd.net import proxyproto
from natsd.net.listener import host_port
from natsd.net.tls import cert_identity
from natsd.protocol import ProtocolHandler, info_line
from natsd.auth.permissions import SYS_QUEUE_GROUP
from natsd.subject import is_valid_subject, is_valid_queue, subject_matches

log = logging.getLogger("natsd")

NO_RESPONDERS_HDR = b"NATS/1.0 503\r\nNats-Subject: %s\r\n\r\n"

# nats-server's ClientOpts: the Go type of each CONNECT field (a wrong type closes the client)
CLIENT_OPTS = {
    "echo": "bool", "verbose": "bool", "pedantic": "bool", "tls_required": "bool",
    "nkey": "string", "jwt": "string", "sig": "string", "auth_token": "string", "user": "string",
    "pass": "string", "name": "string", "lang": "string", "version": "string", "protocol": "int",
    "account": "string", "new_account": "bool", "headers": "bool", "no_responders": "bool",
    "remote_account": "string", "proxy_sig": "string"}


def _flag(info, key, current):
    v = info.get(key)
    return current if v is None else v


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


class ClientState:
    """What the Python side knows about one client connection."""
    __slots__ = ("host", "port", "start", "name", "lang", "version", "user", "account",
                 "perms", "nonce", "auth_timer", "ping_timer", "replies", "connect",
                 "stop", "reason", "kind", "nkey", "tls", "label", "tls_timer",
                 "info_due", "cert", "ws", "ws_upgraded", "ws_cookies", "expiry_timer", "jwt_user",
                 "ocsp_checked", "mqtt", "proxy", "proxy_timer")

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.start = time.time()
        self.name = self.lang = self.version = ""
        self.user = ""
        self.account = None
        self.perms = None
        self.nonce = None
        self.auth_timer = self.ping_timer = None
        self.expiry_timer = None       # a user JWT's expiry: closes the connection then
        self.replies = None            # reply subject -> [remaining, expires] (allow_responses)
        self.connect = None
        self.stop = None
        self.reason = ""
        self.kind = "Client"
        self.nkey = None
        self.jwt_user = None           # operator mode: the natsd.auth.jwt.login.JwtUser logged in
        self.label = ""
        self.tls = None                # what the TLS handshake established (/connz)
        self.tls_timer = None
        self.info_due = False          # handshake first: INFO goes out after the handshake
        self.cert = None               # verify_and_map: the certificate's identity
        self.ws = False                # a WebSocket client (natsd/net/websocket.py)
        self.ws_upgraded = False
        self.ws_cookies = None
        self.ocsp_checked = False      # ocsp_peer: the certificate passed its OCSP check
        self.mqtt = None               # an MQTT client: natsd.mqtt.connection.MqttState
        self.proxy = None              # proxy_protocol: what arrived while a header may still come
        self.proxy_timer = None


class ClientProtocol(ProtocolHandler):
    """Control operations of client connections, called from the Cython parser and router."""

    def __init__(self, server):
        super().__init__(server)
        self.opts = server.opts

    # ---- helpers ----

    def _prefix(self, c):
        st = c.state
        kind = "wid" if st.ws else "cid"        # nats-server's prefix for WebSocket clients
        if st.label:
            return "%s:%d - %s:%d - %s - " % (st.host, st.port, kind, c.cid, st.label)
        return "%s:%d - %s:%d - " % (st.host, st.port, kind, c.cid)

    def _ok(self, c):
        if c.verbose:
            c.send_bytes(b"+OK\r\n")

    # ---- calls from the parser ----

    def auth_pending(self, c):
        """An op other than CONNECT arrived first: allowed only when no auth is required."""
        if not self.server.authenticator.auth_required:
            return False
        log.error("%sAuthorization Error", self._prefix(c))
        self.fail(c, auth_mod.ERR_AUTH_VIOLATION, "Authentication Failure")
        return True

    def connect(self, c, payload):
        st = c.state
        # as nats-server: the time since accept stands for the RTT until the first PING's
        # PONG, which goes out within about 2 s of CONNECT
        c.rtt = max(time.time() - st.start, 1e-6)
        self.server.first_ping(c)
        info = self.parse_json_op(c, payload, "ClientOpts", CLIENT_OPTS)
        if info is None:
            return
        # As Go unmarshals into the connection's options: a field left out (or null) keeps
        # its value, which before the first CONNECT is nats-server's default (verbose,
        # pedantic and echo on).
        first = st.connect is None
        st.connect = info if first else dict(st.connect, **{k: v for k, v in info.items()
                                                             if v is not None})
        c.verbose = _flag(info, "verbose", True if first else c.verbose)
        c.pedantic = _flag(info, "pedantic", True if first else c.pedantic)
        c.echo = _flag(info, "echo", True if first else c.echo)
        c.headers = _flag(info, "headers", c.headers) and not self.opts.no_header_support
        c.no_responders = _flag(info, "no_responders", c.no_responders)
        info = st.connect
        st.name = str(info.get("name") or "")
        st.lang = str(info.get("lang") or "")
        st.version = str(info.get("version") or "")
        if c.no_responders and not c.headers:
            self.fail(c, "no responders requires headers support", "Protocol Violation")
            return
        if c.connected:
            self._ok(c)
            return
        self._authenticate(c, info)

    def _authenticate(self, c, info):
        """Check the credentials, then bind; a bcrypt comparison runs off the loop first
        (natsd/auth/offloop.py) and this runs again with its verdict."""
        st = c.state
        if st.auth_timer is not None:       # nats-server stops it once a CONNECT is read
            st.auth_timer.cancel()
            st.auth_timer = None
        ocsp = self.server.websocket.ocsp_peer if st.ws else self.server.ocsp_peer
        if ocsp is not None and not ocsp.admit(
                c, self.server.auth_workers, lambda: self._authenticate(c, info), self._prefix(c)):
            return
        auth = self.server.authenticator
        required = auth.auth_required
        try:
            if st.ws:
                ws = self.server.websocket
                info = ws.connect_credentials(c, info)
                result, required = ws.authenticate(auth, info, st)
            else:
                result = auth.authenticate(info, st.nonce, defer=True, cert=st.cert, host=st.host)
        except OffLoop as slow:             # bcrypt, or an account JWT fetched from a URL
            self.server.auth_workers.check(c, st.host, slow, lambda: self._authenticate(c, info))
            return
        callout = self.server.callout
        if callout is not None:
            spec = callout.spec_for(info, result)
            if spec is not None:
                callout.ask(c, info, spec, lambda answer: self._admit(c, info, answer, True))
                return
            if result is not None:
                result = dataclasses.replace(
                    result, permissions=callout.guard(result.account, result.permissions))
        self._admit(c, info, result, required)

    def _admit(self, c, info, result, required):
        """Bind an authenticated client (`result`, None when nobody vouched for it) to its
        account, or refuse it."""
        st = c.state
        if result is None and required:
            self._auth_failed(c, info)
            return
        account_name = result.account if result is not None else None
        account = self.server.accounts.get(account_name)
        if account is None:
            self._auth_failed(c, info)
            return
        if 0 <= account.max_connections <= len(account.clients) + account.remote_clients():
            log.error("%sMaximum account active connections exceeded", self._prefix(c))
            self.fail(c, "maximum account active connections exceeded",
                      "Maximum Account Connections Exceeded")
            return
        self.server.bind_account(c, account)
        if result is not None:
            st.user = result.user or ""
            st.nkey = result.nkey
            st.jwt_user = result.jwt_user
            self._set_permissions(c, result.permissions)
            if result.expires:
                self._expire_at(c, result.expires)
        c.connected = True
        st.label = auth_mod.log_label(info, account.name)
        c.connect_info_due = _int(info.get("protocol")) >= 1
        if account.jwt is not None:
            self.server.jwt_accounts.apply_client_limits(c, account)
        elif account.max_payload > 0:
            c.max_payload = min(c.max_payload, account.max_payload)
        self._ok(c)
        self.server.client_connected(c)

    def _expire_at(self, c, expires):
        """nats-server's authExpired: at the user JWT's `exp`, -ERR and close."""
        st = c.state
        if st.expiry_timer is not None:
            st.expiry_timer.cancel()

        def expired():
            st.expiry_timer = None
            if not c.closed:
                log.debug("%sUser Authentication Expired", self._prefix(c))
                self.fail(c, "User Authentication Expired", "Authentication Expired")
        st.expiry_timer = self.server.loop.call_later(max(0.0, expires - time.time()), expired)

    def send_connect_info(self, c):
        """After the first PONG, protocol-1 clients learn their account (as nats-server does)."""
        info = self.server.info_dict(c, with_nonce=False)
        info["max_payload"] = c.max_payload         # what this connection may send
        acc = c.state.account
        info["remote_account"] = acc.name if acc is not None else ""
        if acc is not None and acc.is_system:
            info["acc_is_sys"] = True
        info["connect_info"] = True
        c.send_bytes(info_line(info))

    def _auth_failed(self, c, info):
        """nats-server authViolation: the log line names the user, the client gets -ERR."""
        user = auth_mod.auth_user_label(info)
        if user:
            log.error("%sauthentication error - %s", self._prefix(c), user)
        else:
            log.error("%sauthentication error", self._prefix(c))
        self.fail(c, auth_mod.ERR_AUTH_VIOLATION, "Authentication Failure")
        if self.server.system is not None:
            st = c.state
            self.server.system.auth_error(st.host, st.port, c.cid, "Authentication Failure")

    def _set_permissions(self, c, perms):
        st = c.state
        st.perms = perms
        has_pub = perms is not None and (perms.pub_allow is not None or bool(perms.pub_deny))
        c.pub_allowed = {} if has_pub else None
        c.track_replies = perms is not None and perms.response is not None
        c.forget_lookup()

    def sub(self, c, subject, queue, sid):
        st = c.state
        subj = subject.decode("utf-8", "surrogateescape")
        q = queue.decode("utf-8", "surrogateescape") if queue is not None else None
        if not is_valid_subject(subj) or (q is not None and not is_valid_queue(q)):
            self.send_err(c, "Invalid Subject")
            return
        if (q == SYS_QUEUE_GROUP or
                st.perms is not None and not st.perms.can_subscribe(subj, q)):
            text = auth_mod.sub_violation(subj, q)
            log.error("%sSubscription Violation - %s", self._prefix(c), text)
            self.send_err(c, text)
            return
        max_tokens = self.opts.max_sub_tokens
        if max_tokens > 0 and subj.count(".") >= max_tokens:
            log.error("%sSubscription Violation Too Many Tokens - Subject %s, SID %s",
                      self._prefix(c), go_quote(subj), sid.decode("utf-8", "surrogateescape"))
            self.send_err(c, f"Permissions Violation for Subscription to {go_quote(subj)}, too many tokens")
            return
        limit = self.opts.max_subscriptions
        acc = st.account
        if acc is not None and acc.max_subscriptions > 0:
            limit = acc.max_subscriptions if limit <= 0 else min(limit, acc.max_subscriptions)
        user = st.jwt_user
        if (limit > 0 and len(c.subs) >= limit
                or user is not None and 0 <= user.max_subs <= len(c.subs)):
            log.error("%sMaximum Subscriptions Exceeded", self._prefix(c))
            self.send_err(c, "maximum subscriptions exceeded")
            return
        if sid in c.subs:
            self._ok(c)
            return
        s = Subscription(c, subject, sid, queue)
        if st.perms is not None and st.perms.needs_delivery_filter(subj, q):
            s.deny_filter = True
        c.subs[sid] = s
        c.sublist.insert(s)
        self.server.interest_added(st.account, s)
        self._ok(c)

    def unsub(self, c, sid, max_msgs):
        s = c.subs.get(sid)
        if s is not None:
            if max_msgs > 0 and s.delivered < max_msgs:
                s.max_msgs = max_msgs
            else:
                self._remove_sub(c, s)
        self._ok(c)

    def auto_unsubscribed(self, c, sub):
        self._remove_sub(c, sub)

    def _remove_sub(self, c, s):
        s.closed = True
        if c.subs.get(s.sid) is s:
            del c.subs[s.sid]
        if c.sublist.remove(s):
            self.server.interest_removed(c.state.account, s)

    def reauthorize(self, c):
        """After a config reload (nats-server reloadAuthorization): a client whose credentials
        no longer pass is cut with 'Authorization Violation', one bound to another account now
        is closed, and subscriptions its new permissions forbid are removed with an -ERR each."""
        st = c.state
        auth = self.server.authenticator
        connect = st.connect or {}
        if not auth.knows_user(connect):
            c.schedule_close("Client Closed")       # the user is gone: as if it moved away
            return
        result = auth.authenticate(connect, st.nonce, cert=st.cert, host=st.host)
        if result is None and auth.auth_required:
            self._auth_failed(c, connect)
            return
        account = self.server.accounts.get(result.account if result is not None else None)
        if account is None or account is not st.account:
            c.schedule_close("Client Closed")
            return
        self._set_permissions(c, result.permissions if result is not None else None)
        perms = st.perms
        if perms is None:
            for s in c.subs.values():
                s.deny_filter = False
            return
        for s in list(c.subs.values()):
            subj = s.subject.decode("utf-8", "surrogateescape")
            q = s.queue.decode("utf-8", "surrogateescape") if s.queue is not None else None
            if perms.can_subscribe(subj, q):
                s.deny_filter = perms.needs_delivery_filter(subj, q)
                continue
            self._remove_sub(c, s)
            who = auth_mod.auth_user_label(st.connect or {}) or 'User "N/A"'
            if q is not None:
                self.send_err(c, "Permissions Violation for Subscription to %s using queue %s (sid %s)"
                              % (go_quote(s.subject), go_quote(s.queue), go_quote(s.sid)))
                log.info("Removed sub %s using queue %s (sid %s) for %s - not authorized",
                         go_quote(s.subject), go_quote(s.queue), go_quote(s.sid), who)
            else:
                self.send_err(c, "Permissions Violation for Subscription to %s (sid %s)"
                              % (go_quote(s.subject), go_quote(s.sid)))
                log.info("Removed sub %s (sid %s) for %s - not authorized", go_quote(s.subject),
                         go_quote(s.sid), who)

    # ---- TLS: the shared steps are in ProtocolHandler; these are the client's ----

    def tls_server(self, c):
        return self.server.websocket.settings.tls if c.state.ws else self.server.tls

    def tls_plaintext_ok(self, c):
        """A plaintext client: allowed by allow_non_tls, unless the INFO waits for TLS."""
        if self.server.tls.allow_non_tls and not c.state.info_due:
            self.server.start_auth_timer(c)
            return True
        return False

    def codec_head(self, c):
        """A WebSocket client's upgrade request is complete."""
        self.server.websocket.upgrade(c)

    def codec_error(self, c, error):
        log.error("%sread error: %s", self._prefix(c), error)
        c.schedule_close("Read Error")

    # ---- proxy_protocol: a PROXY protocol header before the client's first byte ----

    def expect_proxy_header(self, c):
        """Read the connection's first bytes here (not in the parser) until they are a PROXY
        protocol header or plainly not one."""
        st = c.state
        st.proxy = b""
        c.raw_reader = True
        # nats-server waits twice its read timeout for the 6 bytes that tell (a pre-read, then
        # the header's own read)
        st.proxy_timer = self.server.loop.call_later(2 * proxyproto.READ_TIMEOUT, self._proxy_timeout, c)

    def raw_data(self, c, data):
        """The first bytes of a proxy_protocol connection (natsd/net/proxyproto.py): a header's
        source becomes the connection's address; what follows, or a client's own bytes when
        there is no header, goes to the parser."""
        st = c.state
        buf = st.proxy + data
        try:
            header = proxyproto.read_header(buf)
        except proxyproto.ProxyHeaderError as e:
            self._proxy_refused(c, str(e))
            return
        if header is None:
            st.proxy = buf
            return
        self._proxy_read(c)
        if header.addr is not None:
            st.host, st.port = header.addr
        c.replay(header.rest)

    def _proxy_read(self, c):
        st = c.state
        st.proxy = None
        c.raw_reader = False
        if st.proxy_timer is not None:
            st.proxy_timer.cancel()
            st.proxy_timer = None

    def _proxy_refused(self, c, why):
        st = c.state
        self._proxy_read(c)
        log.warning("Error reading PROXY protocol header from %s: %s", host_port(st.host, st.port), why)
        c.schedule_close("Protocol Violation")

    def _proxy_timeout(self, c):
        st = c.state
        st.proxy_timer = None
        if st.proxy is not None and not c.closed and not c.closing:
            here = host_port(self.server.opts.host or "0.0.0.0", self.server.port)
            self._proxy_refused(c, "failed to read protocol version: read tcp %s->%s: i/o timeout"
                                % (here, host_port(st.host, st.port)))

    def tls_ready(self, c):
        st = c.state
        if st.ws:
            self.server.websocket.tls_ready(c)       # the HTTP upgrade comes next
            return
        if self.server.tls.settings.verify_and_map:
            der = c.tls.peer_certificate()
            st.cert = cert_identity(der) if der is not None else ([], [])
        self.server.send_due_info(c, first=True)
        self.server.start_auth_timer(c)

    def info(self, c, payload):
        pass                            # clients may echo INFO; nats-server ignores it

    def client_error(self, c, text):
        log.error("%sClient Error %s", self._prefix(c), text.decode("utf-8", "replace"))
        c.schedule_close("Parse Error")

    def check_publish(self, c, subject):
        """Slow path of a publish permission check; allowed subjects are cached in C."""
        st = c.state
        subj = subject.decode("utf-8", "surrogateescape")
        if st.perms.can_publish(subj):
            if len(c.pub_allowed) > 4096:
                c.pub_allowed.clear()
            c.pub_allowed[subject] = True
            return True
        if st.replies and self.use_reply(st, subject):
            return True
        return self.publish_denied(c, subject)

    def publish_denied(self, c, subject):
        """nats-server's publish violation: -ERR, the log line, and the ingress error of the
        message being traced. -> False"""
        text = auth_mod.pub_violation(subject.decode("utf-8", "surrogateescape"))
        trace = current_trace()
        if trace is not None:
            trace.ingress_error(text)
        log.error("%sPublish Violation - %s", self._prefix(c), text)
        self.send_err(c, text)
        return False

    def message_trace(self, c, subject, hdr, size):
        """A message with a `Nats-Trace-Dest` header: its trace (natsd/msgtrace.py)."""
        return msgtrace.start(self.server, c, subject, hdr, size)

    def delivery_denied(self, c, sub, subject):
        q = sub.queue.decode() if sub.queue is not None else None
        return c.state.perms.delivery_denied(subject.decode("utf-8", "replace"), q)

    def no_responders(self, c, subject, reply):
        """A request found nobody: send the requester a 503 status on its reply subscription."""
        hdr = NO_RESPONDERS_HDR % subject
        r = reply.decode("utf-8", "replace")
        for s in list(c.subs.values()):
            if subject_matches(s.subject.decode("utf-8", "replace"), r):
                deliver_to(s, reply, None, hdr, b"")
                return

    def reserved_reply(self, c, reply):
        """Clients may not publish with the server's own reply prefixes (_R_., $JS.ACK., _GR_.)."""
        text = auth_mod.reply_violation(reply)
        log.error("%sPublish Violation - %s", self._prefix(c), text)
        self.send_err(c, text)

    def publish_mapped(self, c, subject, reply, hdr, payload):
        self.server.publish_mapped(c, subject, reply, hdr, payload)

    def close(self, c):
        self.server.close_connection(c)

    def forward(self, c, sub, subject, reply, hdr, payload):
        raise NotImplementedError("client connections frame messages in C")
