"""Auth callout: users are decided by a service instead of the configuration.

Config mode (`authorization { auth_callout {...} }`): every client but the `auth_users` (and,
with `allowed_accounts`, but a user the config logged in to another account) goes through it.
Operator mode: a user JWT of an account whose JWT has `authorization.auth_users` goes through
it unless it is one of them; the answer may place the user in that account or one of its
`allowed_accounts`, issued by that account's keys (scoped keys' templates apply).

The client is held while the server asks `$SYS.REQ.USER.AUTH` in the callout account: an
authorization-request JWT signed with the server's key (natsd.auth.jwt.claims.encode), with a one-off
user key the answer must name, the server, the client and its CONNECT, encrypted to the
service's `xkey` when one is configured (the server's own xkey in a `Nats-Server-Xkey`
header). The answer is an authorization-response JWT for that user key and this server,
possibly encrypted back, holding either an `error` or a user JWT; its permissions, time
windows and expiry apply, and `name` becomes the user's name. Anything else, or no answer
within the auth timeout, is an Authorization Violation, with nats-server's reason in the log.
Users bound to a callout account may never publish to `$SYS.REQ.USER.AUTH` themselves.
"""
from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field

from natsd import VERSION
from natsd.auth.jwt import claims
from natsd.auth import nkey
from natsd.accounts.clientinfo import raw_auth_user
from natsd.auth.authenticator import AuthResult
from natsd.auth.jwt.login import ScopeError, connect_window, scoped_user
from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.auth.jwt.claims import jwt_permissions
from natsd.gofmt import go_quote
from natsd.ids import random_token
from natsd.auth.permissions import Permissions

log = logging.getLogger("natsd")

SUBJECT = "$SYS.REQ.USER.AUTH"
AUDIENCE = "nats-authorization-request"
XKEY_HEADER = "Nats-Server-Xkey"


class CalloutFailed(Exception):
    """Why a callout did not authorize the client (nats-server's text, title-cased)."""

    def __init__(self, text):
        super().__init__(text[:1].upper() + text[1:])


class Callout:
    """What one client's pending callout waits for."""
    __slots__ = ("c", "then", "user_key", "account", "spec", "sub", "timer")


@dataclass
class Spec:
    """Where and how to call out: the config's auth_callout, or an account JWT's
    `authorization` (operator mode: `issuer` is the account itself or its signing keys)."""
    account: str                    # where requests go, and what the config calls the issuer's
    issuer: str                     # the request's subject; the key answers must be signed by
    auth_users: list
    xkey: str = ""
    allowed_accounts: list = field(default_factory=list)
    operator: bool = False


class AuthCallout:
    def __init__(self, server, copts=None):
        self.server = server
        self.config = (Spec(copts.account, copts.issuer, list(copts.auth_users), copts.xkey,
                            list(copts.allowed_accounts)) if copts is not None else None)
        self.inbox = "$SYS._INBOX.%s." % random_token(8)

    # -- who goes through the callout --

    def spec_for(self, connect: dict, result) -> Spec | None:
        """The callout a client goes through, or None. Config mode (nats-server's rule):
        everyone but the auth_users, unless allowed_accounts is given and the config logged the
        user in to another account (not $G). Operator mode: a user JWT of an account whose JWT
        names `authorization.auth_users`, unless the user is one of them."""
        user = getattr(result, "jwt_user", None)
        if user is not None:
            ac = self.server.jwt_accounts.claims.get(user.account)
            auth = ac.nats.get("authorization") if ac is not None else None
            if not isinstance(auth, dict) or not auth.get("auth_users") or user.public in auth["auth_users"]:
                return None
            return Spec(user.account, user.account, list(auth["auth_users"]), str(auth.get("xkey") or ""),
                        list(auth.get("allowed_accounts") or []), operator=True)
        spec = self.config
        if spec is None:
            return None
        bound = result.account if result is not None else None
        if spec.allowed_accounts and bound not in (None, "$G") and bound not in spec.allowed_accounts:
            return None
        return None if raw_auth_user(connect) in spec.auth_users else spec

    def guard(self, account_name: str | None, perms: Permissions | None) -> Permissions | None:
        """Users of a callout account may not publish callout requests themselves."""
        name = account_name or "$G"
        ac = self.server.jwt_accounts.claims.get(name) if self.server.jwt_accounts else None
        auth = ac.nats.get("authorization") if ac is not None else None
        if (self.config is not None and name == self.config.account
                or isinstance(auth, dict) and auth.get("auth_users")):
            return Permissions.with_pub_deny(perms, SUBJECT)
        return perms

    # -- asking --

    def ask(self, c, connect: dict, spec: Spec, then, client_type: str = "",
            mqtt_id: str = "") -> None:
        """Send the request; then(AuthResult or None) runs on the loop when it is decided. The
        connection is not read meanwhile. `client_type`: the request's client_info type when
        not the connection's own (nats or websocket), with `mqtt_id` for an MQTT client."""
        server = self.server
        acc = server.accounts.get(spec.account) if spec.account in server.accounts.accounts else None
        if acc is None:
            log.warning("No valid account %s for auth callout request: account missing",
                        go_quote(spec.account))
            then(None)
            return
        p = Callout()
        p.c, p.then, p.account, p.spec = c, then, acc, spec
        p.user_key = nkey.public_of(nkey.new_key(nkey.USER))
        reply = self.inbox + random_token(22)
        p.sub = Subscription(None, reply.encode(), b"", None,
                             lambda sub, subject, rep, hdr, payload, origin: self._answered(p, payload))
        acc.sublist.insert(p.sub)
        timeout = server._auth_timeout()
        p.timer = server.loop.call_later(timeout, self._timed_out, p)
        token = claims.encode(server.key, spec.issuer, "authorization_request",
                              self._request(c, connect, p.user_key, spec, client_type, mqtt_id),
                              aud=AUDIENCE,
                              exp=int(time.time() + timeout))
        payload, hdr = token.encode(), None
        if spec.xkey:
            payload = server.xkey.seal(payload, spec.xkey)
            hdr = ("NATS/1.0\r\n%s: %s\r\n\r\n" % (XKEY_HEADER, server.xkey.public)).encode()
        c.stalled = True
        publish(acc.sublist, SUBJECT.encode(), reply.encode(), hdr, payload)

    def _request(self, c, connect, user_key, spec, client_type="", mqtt_id=""):
        s, st = self.server, c.state
        server_id = {"name": s.name, "host": s.opts.host, "id": s.id, "version": VERSION}
        cluster = s.cluster_name()
        if cluster:
            server_id["cluster"] = cluster
        if s.opts.server_tags:
            server_id["tags"] = list(s.opts.server_tags)
        if spec.xkey:
            server_id["xkey"] = s.xkey.public
        info = {"host": st.host, "id": c.cid, "user": raw_auth_user(connect), "name": st.name,
                "kind": "Client", "type": client_type or ("websocket" if st.ws else "nats"),
                "mqtt_id": mqtt_id}
        if connect.get("sig"):
            info["nonce"] = st.nonce
        opts = {"jwt": connect.get("jwt"), "nkey": connect.get("nkey"), "sig": connect.get("sig"),
                "auth_token": connect.get("auth_token"), "user": connect.get("user"),
                "pass": connect.get("pass"), "name": connect.get("name"), "lang": connect.get("lang"),
                "version": connect.get("version")}
        opts = {k: v for k, v in opts.items() if isinstance(v, str) and v}
        opts["protocol"] = connect.get("protocol") if isinstance(connect.get("protocol"), int) else 0
        req = {"server_id": server_id, "user_nkey": user_key,
               "client_info": {k: v for k, v in info.items() if v not in ("", None, 0)},
               "connect_opts": opts}
        if st.tls:
            req["client_tls"] = client_tls(st.tls)
        return req

    # -- the answer --

    def _finish(self, p, answer):
        if p.timer is None:
            return                      # decided already
        p.timer.cancel()
        p.timer = None
        p.account.sublist.remove(p.sub)
        c = p.c
        if c.closed or c.closing:
            return
        try:
            p.then(answer)
        except Exception:
            log.exception("finishing the authentication of cid:%s failed", c.cid)
            c.schedule_close("Internal Error")
        if not c.closed and not c.closing:
            c.resume_reading()

    def _timed_out(self, p):
        log.debug("Authorization callout response not received in time on account %s",
                  go_quote(p.account.name))
        self._finish(p, None)

    def _answered(self, p, payload):
        if p.timer is None:
            return
        try:
            answer = self._decide(p, bytes(payload))
        except CalloutFailed as e:
            log.warning("%s", e)
            answer = None
        self._finish(p, answer)

    def _decide(self, p, msg):
        account, spec = p.account.name, p.spec
        if not msg:
            raise CalloutFailed("auth callout violation: %s on account %s"
                                % (go_quote("no reason supplied"), go_quote(account)))
        encrypted = False
        if spec.xkey and not msg.startswith(b"eyJ"):
            try:
                msg = self.server.xkey.open(msg, spec.xkey)
            except ValueError as e:
                raise CalloutFailed("error decrypting auth callout response on account %s: %s"
                                    % (go_quote(account), e)) from None
            encrypted = True
        try:
            cr = claims.decode_kind(msg.decode("utf-8", "replace"), "authorization_response")
        except claims.JwtError as e:
            raise CalloutFailed(str(e)) from None
        why = cr.time_check()
        if why:
            raise CalloutFailed("authorization response had validation errors: %s" % why)
        if cr.subject != p.user_key:
            raise CalloutFailed("auth callout violation: auth callout response is not for expected user")
        if cr.audience != self.server.id:
            raise CalloutFailed("auth callout violation: auth callout response is not for server")
        if cr.nats.get("error"):
            raise CalloutFailed("auth callout service returned an error: %s" % cr.nats["error"])
        signer = cr.issuer_account or cr.issuer
        if spec.operator and not encrypted and signer != account and \
                signer not in self.server.jwt_accounts.keys.get(account, {}):
            raise CalloutFailed("auth callout signing key is unknown")
        try:
            uc = claims.decode_kind(cr.nats.get("jwt") or "", "user")
        except claims.JwtError as e:
            raise CalloutFailed(str(e)) from None
        return self._user(p, uc, account)

    def _user(self, p, uc, account):
        why = uc.time_check()
        if why:
            raise CalloutFailed("Error validating user JWT: %s" % why)
        if uc.subject != p.user_key:
            raise CalloutFailed("Expected authorized user of %s but got %s on account %s"
                                % (go_quote(p.user_key), go_quote(uc.subject), go_quote(account)))
        nats, spec = uc.nats, p.spec
        allowed, window_end = connect_window(nats.get("times"), nats.get("times_location"))
        if not allowed:
            log.error("Outside connect times")
            raise CalloutFailed("authorized user on account %s outside of valid connect times"
                                % go_quote(account))
        expires = min(t for t in (uc.expires, window_end) if t) if (uc.expires or window_end) else 0
        types = {str(t).upper() for t in nats.get("allowed_connection_types") or []}
        kind = "WEBSOCKET" if p.c.state.ws else "STANDARD"
        if types and kind not in types:
            raise CalloutFailed("authorized user on account %s using invalid connection type"
                                % go_quote(account))
        if spec.operator:
            return self._operator_user(p, uc, nats, account, expires)
        if uc.issuer_account:
            raise CalloutFailed("error non operator mode account %s: attempted to use issuer_account"
                                % go_quote(account))
        if uc.issuer != spec.issuer:
            raise CalloutFailed("wrong issuer for auth callout response on account %s, expected %s got %s"
                                % (go_quote(account), go_quote(spec.issuer), go_quote(uc.issuer)))
        target = uc.audience
        if target not in self.server.accounts.accounts:
            raise CalloutFailed("no valid account %s for auth callout response on account %s: account missing"
                                % (go_quote(target), go_quote(account)))
        cfg = jwt_permissions(nats)
        if cfg is None:
            cfg = getattr(self.server.accounts.get(target).config, "default_permissions", None)
        perms = Permissions.from_config(cfg) if cfg is not None else None
        return AuthResult(uc.name or uc.subject, target, self.guard(target, perms), None, expires)

    def _operator_user(self, p, uc, nats, account, expires):
        """Operator mode: the user lands in its issuer's account, which must be the callout
        account or one of its allowed_accounts, and be issued by that account's keys."""
        target = uc.issuer_account or uc.issuer
        if target != account and target not in p.spec.allowed_accounts and "*" not in p.spec.allowed_accounts:
            raise CalloutFailed("account %s not permitted as valid account option for auth callout for account %s"
                                % (go_quote(uc.issuer), go_quote(account)))
        accounts = self.server.jwt_accounts
        ac = accounts.lookup(target)
        if ac is None:
            raise CalloutFailed("no valid account %s for auth callout response on account %s: account missing"
                                % (go_quote(target), go_quote(account)))
        keys = accounts.keys[target]
        if uc.issuer != target and uc.issuer not in keys:
            raise CalloutFailed("user JWT issuer %s is not known" % go_quote(uc.issuer))
        if keys.get(uc.issuer) is not None:
            try:
                nats = scoped_user(keys[uc.issuer], uc, ac)
            except ScopeError as e:
                raise CalloutFailed("user JWT is not valid: %s" % e) from None
        cfg = jwt_permissions(nats)
        perms = Permissions.from_config(cfg) if cfg is not None else accounts.default_permissions(target)
        return AuthResult(uc.name or uc.subject, target, self.guard(target, perms), None, expires)


def client_tls(tls):
    """The request's `client_tls` (jwt.ClientTLS), as nats-server fills it: the version and
    cipher, then the chain that verified the client's certificate (`verified_chains`) or,
    when it was not verified, the certificates it sent (`certs`), each in PEM."""
    out = {"version": tls.get("tls_version", ""), "cipher": tls.get("tls_cipher_suite", "")}
    if tls.get("verified_chain"):
        out["verified_chains"] = [[pem_certificate(d) for d in tls["verified_chain"]]]
    elif tls.get("peer_chain"):
        out["certs"] = [pem_certificate(d) for d in tls["peer_chain"]]
    return out


def pem_certificate(der):
    """A DER certificate as Go's pem.EncodeToMemory writes it (64-column base64 lines)."""
    b64 = base64.b64encode(der).decode()
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return "-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n" % "\n".join(lines)
