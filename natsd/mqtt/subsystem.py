"""The MQTT subsystem of one Server: the `mqtt {}` block, the listener, who an MQTT client is
(the block's own authorization or the server's), the account session managers, and what
/varz shows."""
from __future__ import annotations

import dataclasses

import logging
import time

from natsd.gofmt import go_float
from natsd.net.listener import ListenerBlock, block_get
from natsd.net.tls import _seconds

log = logging.getLogger("natsd")


class MqttSettings(ListenerBlock):
    """An `mqtt {}` block as nats-server reads it (parseMQTT)."""

    def __init__(self, raw):
        super().__init__(raw)
        self.ack_wait = _seconds(block_get(raw, "ack_wait", "ackwait"), 0.0)
        self.api_timeout = _seconds(block_get(raw, "js_api_timeout", "api_timeout"), 0.0)
        self.max_ack_pending = int(block_get(raw, "max_ack_pending", "max_pending", "max_inflight", default=0) or 0)
        self.js_domain = str(block_get(raw, "js_domain", default="") or "")
        self.stream_replicas = int(block_get(raw, "stream_replicas", default=0) or 0)
        self.consumer_replicas = 0      # nats-server ignores consumer_replicas (a warning)
        self.consumer_memory_storage = bool(block_get(raw, "consumer_memory_storage", default=False))
        self.consumer_inactive_threshold = _seconds(
            block_get(raw, "consumer_inactive_threshold", "consumer_auto_cleanup"), 0.0)
        self.reject_qos2_publish = bool(block_get(raw, "reject_qos2_publish", default=False))
        self.downgrade_qos2_subscribe = bool(block_get(raw, "downgrade_qos2_subscribe", default=False))

    @property
    def auth_override(self):
        return bool(self.username or self.token or self.no_auth_user)


class Mqtt:
    """MQTT clients of one Server."""

    def __init__(self, server, settings: MqttSettings):
        from natsd.mqtt.connection import MqttProtocol
        self.server = server
        self.settings = settings
        self.listener = None
        self.proto = MqttProtocol(self)
        self.managers: dict[str, object] = {}      # account name -> AccountSessions

    def start(self):
        from natsd.net.listener import Listener
        s = self.settings
        self.listener = Listener(self.server.loop, s.host, 0 if s.port < 0 else s.port, self._accept)
        log.info("Listening for MQTT clients on %s://%s:%d", "tls" if s.tls is not None else "mqtt",
                 s.host, self.listener.port)

    @property
    def port(self):
        return self.listener.port if self.listener is not None else 0

    def shutdown(self):
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for m in self.managers.values():
            m.close()
        self.managers.clear()

    def _accept(self, sock, addr):
        server = self.server
        if server.shutting_down or server.lame_duck:
            sock.close()
            return
        c = server.new_client(sock, addr, "mid")
        self._become_mqtt(c)
        if len(server.clients) > server.opts.max_connections:
            log.error("%s:%d - mid:%d - Maximum Connections Exceeded", c.state.host, c.state.port, c.cid)
            c.schedule_close("Maximum Connections Exceeded")
            return
        if self.settings.tls is not None:
            self.settings.tls.begin(c)
            c.tls_sniff = False
            c.tls_active = True
            c.state.tls_timer = server.loop.call_later(self.settings.tls.settings.timeout,
                                                       self.proto.tls_timeout, c)
        self._start_auth_timer(c)

    def accept_websocket(self, c):
        """A WebSocket upgrade on the `/mqtt` path: the connection speaks MQTT in its frames."""
        self._become_mqtt(c)
        self._start_auth_timer(c)

    def _become_mqtt(self, c):
        from natsd.mqtt.connection import MqttState
        c.handler = self.proto
        c.raw_reader = True
        c.headers = True
        c.echo = True
        c.state.mqtt = MqttState()

    def _start_auth_timer(self, c):
        server = self.server
        if server.authenticator.auth_required or self.settings.auth_override:
            timeout = self.settings.auth_timeout or server._auth_timeout()
            c.state.auth_timer = server.loop.call_later(timeout, self.proto.auth_timeout, c)

    # ---- who a client is ----

    def authenticate(self, c, user, password, done):
        """done(the account of an MQTT client's credentials, None when refused): nats-server's
        isClientAuthorized with the MQTT block's override, and an auth callout where one is
        configured (asked with CONNECT's user name and password, the password as the token
        too, and as the user JWT when it is one, as nats-server asks)."""
        from natsd.auth.authenticator import AuthResult, is_user_jwt
        from natsd.accounts.clientinfo import REDACTED
        auth = self.server.authenticator
        s = self.settings
        st = c.state
        result = None
        required = auth.auth_required
        jwt = is_user_jwt(password)
        if s.token:
            required = True
            if auth.check_secret(s.token, password):
                result = AuthResult(REDACTED, None, None)
        elif s.username:
            required = True
            if user == s.username and auth.check_secret(s.password, password):
                result = AuthResult(s.username, None, None)
        else:
            info = {"user": user, "pass": password}
            if not user and password:
                info = {"auth_token": password}
            if auth.jwt is not None and jwt:
                # operator mode: the password carries the user JWT (nats-server's
                # processClientOrLeafAuthentication); with no nonce signature to check, only a
                # bearer token logs in
                info = {"user": user, "jwt": password}
            no_auth = s.no_auth_user or self.server.opts.no_auth_user
            if no_auth and not user and not password and st.cert is None:
                p = auth.users.get(no_auth)
                if p is not None:
                    result = auth._bind(p, "MQTT")
            if result is None:
                result = auth.authenticate(info, None, kind="MQTT", cert=st.cert, host=st.host)
        callout = self.server.callout
        if callout is not None:
            connect = {"user": user, "pass": password, "auth_token": password}
            if jwt:
                connect["jwt"] = password
            spec = callout.spec_for(connect, result)
            if spec is not None:
                callout.ask(c, connect, spec, lambda answer: done(self._admit(c, answer, True), None),
                            client_type="mqtt", mqtt_id=st.mqtt.client_id)
                return
            if result is not None:
                result = dataclasses.replace(
                    result, permissions=callout.guard(result.account, result.permissions))
        done(self._admit(c, result, required), None)

    def _admit(self, c, result, required):
        """The account `result` (None: nobody vouched for the client) binds the client to,
        or None when it is refused."""
        st = c.state
        if result is None and required:
            return None
        account = self.server.accounts.get(result.account if result is not None else None)
        if account is None:
            return None
        self.server.bind_account(c, account)
        if result is not None:
            st.user = result.user or ""
            st.nkey = result.nkey
            st.perms = result.permissions
            st.jwt_user = result.jwt_user
            if result.expires:
                self._expire_at(c, result.expires)
        if account.jwt is not None:
            self.server.jwt_accounts.apply_client_limits(c, account)
        return account

    def _expire_at(self, c, expires):
        """At the user JWT's `exp` the MQTT client is closed, as nats-server's authExpired."""
        def expired():
            c.state.expiry_timer = None
            if not c.closed:
                log.debug("%sUser Authentication Expired", self.proto._prefix(c))
                c.schedule_close("Authentication Expired")
        c.state.expiry_timer = self.server.loop.call_later(max(0.0, expires - time.time()), expired)

    def can_publish(self, c, subject: bytes) -> bool:
        perms = c.state.perms
        return perms is None or perms.can_publish(subject.decode("utf-8", "surrogateescape"))

    def can_subscribe(self, c, subject: str) -> bool:
        perms = c.state.perms
        return perms is None or perms.can_subscribe(subject, None)

    def can_deliver(self, c, subject: bytes) -> bool:
        perms = c.state.perms
        return perms is None or not perms.delivery_denied(subject.decode("utf-8", "surrogateescape"))

    def user_label(self, c) -> str:
        user = c.state.user
        return "User %s" % _q(user) if user else "User \"\""

    def conn_label(self, c) -> str:
        st = c.state
        return "%s:%d - mid:%d" % (st.host, st.port, c.cid)

    def client_connected(self, c):
        self.server.client_connected(c)

    # ---- account session managers ----

    def manager_for(self, account):
        from natsd.mqtt.sessions import AccountSessions
        m = self.managers.get(account.name)
        if m is None:
            m = self.managers[account.name] = AccountSessions(self, account)
        return m

    def forget(self, manager):
        if self.managers.get(manager.account.name) is manager:
            del self.managers[manager.account.name]
            manager.close()

    def default_replicas(self) -> int:
        """nats-server's mqttDetermineReplicas: the cluster's size up to 3, 1 without one."""
        server = self.server
        if server.cluster is None or server.jetstream is None:
            return 1
        n = len(server.opts.cluster.routes)
        return max(1, min(3, n))

    # ---- monitoring ----

    def varz(self):
        """nats-server's MQTTOptsVarz, zero values left out."""
        s = self.settings
        tls = s.tls.settings if s.tls is not None else None
        v = {"host": s.host, "port": self.port, "no_auth_user": s.no_auth_user,
             "auth_timeout": go_float(s.auth_timeout), "tls_map": bool(tls and tls.verify_and_map),
             "tls_timeout": go_float(tls.timeout if tls is not None and tls.timeout else 2.0),
             "tls_pinned_certs": sorted(tls.pinned) if tls is not None else [],
             "js_domain": s.js_domain, "ack_wait": int(s.ack_wait * 1e9),
             "max_ack_pending": s.max_ack_pending}
        return {k: val for k, val in v.items() if val}


def _q(s):
    from natsd.gofmt import go_quote
    return go_quote(s)
