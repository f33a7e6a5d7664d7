"""Auth callout (config mode): users the config does not vouch for are decided by a service.

A client that is not one of `auth_users` (and, with `allowed_accounts`, did not log in to an
account outside them) is held while the server asks `$SYS.REQ.USER.AUTH` in the callout
account: an authorization-request JWT signed with the server's key (natsd.claims.encode), with
a one-off user key the answer must name, the server, the client and its CONNECT, encrypted to
the service's `xkey` when one is configured (the server's own xkey in a `Nats-Server-Xkey`
header). The answer is an authorization-response JWT for that user key and this server,
possibly encrypted back, holding either an `error` or a user JWT issued by `issuer` whose
audience names the account to bind; its permissions and expiry apply, and `name` becomes the
user's name. Anything else, or no answer within the auth timeout, is an Authorization
Violation, with nats-server's reason in the log. Users bound to the callout account may never
publish to `$SYS.REQ.USER.AUTH` themselves.
"""
from __future__ import annotations

import logging
import time

from natsd import VERSION, claims, nkey
from natsd.auth import AuthResult, connect_auth_user
from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.claims import jwt_permissions
from natsd.gofmt import go_quote
from natsd.ids import random_token
from natsd.permissions import Permissions

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
    __slots__ = ("c", "then", "user_key", "account", "sub", "timer")


class AuthCallout:
    def __init__(self, server, copts):
        self.server = server
        self.opts = copts
        self.inbox = "$SYS._INBOX.%s." % random_token(8)

    # -- who goes through the callout --

    def applies(self, connect: dict, bound_account: str | None) -> bool:
        """nats-server's rule: everyone but the auth_users; with allowed_accounts, a user the
        config logged in to another account (not $G) keeps that login."""
        allowed = self.opts.allowed_accounts
        if allowed and bound_account not in (None, "$G") and bound_account not in allowed:
            return False
        return raw_auth_user(connect) not in self.opts.auth_users

    def guard(self, account_name: str | None, perms: Permissions | None) -> Permissions | None:
        """Users of the callout account may not publish callout requests themselves."""
        if (account_name or "$G") == self.opts.account:
            return Permissions.with_pub_deny(perms, SUBJECT)
        return perms

    # -- asking --

    def ask(self, c, connect: dict, then) -> None:
        """Send the request; then(AuthResult or None) runs on the loop when it is decided. The
        connection is not read meanwhile."""
        server = self.server
        acc = server.accounts.get(self.opts.account) if self.opts.account in server.accounts.accounts \
            else None
        if acc is None:
            log.warning("No valid account %s for auth callout request: account missing",
                        go_quote(self.opts.account))
            then(None)
            return
        p = Callout()
        p.c, p.then, p.account = c, then, acc
        p.user_key = nkey.public_of(nkey.new_key(nkey.USER))
        reply = self.inbox + random_token(22)
        p.sub = Subscription(None, reply.encode(), b"", None,
                             lambda sub, subject, rep, hdr, payload, origin: self._answered(p, payload))
        acc.sublist.insert(p.sub)
        timeout = server._auth_timeout()
        p.timer = server.loop.call_later(timeout, self._timed_out, p)
        token = claims.encode(server.key, self.opts.issuer, "authorization_request",
                              self._request(c, connect, p.user_key), aud=AUDIENCE,
                              exp=int(time.time() + timeout))
        payload, hdr = token.encode(), None
        if self.opts.xkey:
            payload = server.xkey.seal(payload, self.opts.xkey)
            hdr = ("NATS/1.0\r\n%s: %s\r\n\r\n" % (XKEY_HEADER, server.xkey.public)).encode()
        c.stalled = True
        publish(acc.sublist, SUBJECT.encode(), reply.encode(), hdr, payload)

    def _request(self, c, connect, user_key):
        s, st = self.server, c.state
        server_id = {"name": s.name, "host": s.opts.host, "id": s.id, "version": VERSION}
        cluster = s.cluster_name()
        if cluster:
            server_id["cluster"] = cluster
        if s.opts.server_tags:
            server_id["tags"] = list(s.opts.server_tags)
        if self.opts.xkey:
            server_id["xkey"] = s.xkey.public
        info = {"host": st.host, "id": c.cid, "user": raw_auth_user(connect), "name": st.name,
                "kind": "Client", "type": "websocket" if st.ws else "nats"}
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
            req["client_tls"] = {"version": st.tls.get("tls_version", ""),
                                 "cipher": st.tls.get("tls_cipher_suite", "")}
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
        account = p.account.name
        if not msg:
            raise CalloutFailed("auth callout violation: %s on account %s"
                                % (go_quote("no reason supplied"), go_quote(account)))
        if self.opts.xkey and not msg.startswith(b"eyJ"):
            try:
                msg = self.server.xkey.open(msg, self.opts.xkey)
            except ValueError as e:
                raise CalloutFailed("error decrypting auth callout response on account %s: %s"
                                    % (go_quote(account), e)) from None
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
        nats = uc.nats
        for key in ("times", "locale", "src"):
            if nats.get(key):
                raise CalloutFailed("authorized user on account %s asks for %s, which natsd does not "
                                    "enforce yet" % (go_quote(account), key))
        types = {str(t).upper() for t in nats.get("allowed_connection_types") or []}
        kind = "WEBSOCKET" if p.c.state.ws else "STANDARD"
        if types and kind not in types:
            raise CalloutFailed("authorized user on account %s using invalid connection type"
                                % go_quote(account))
        if uc.issuer_account:
            raise CalloutFailed("error non operator mode account %s: attempted to use issuer_account"
                                % go_quote(account))
        if uc.issuer != self.opts.issuer:
            raise CalloutFailed("wrong issuer for auth callout response on account %s, expected %s got %s"
                                % (go_quote(account), go_quote(self.opts.issuer), go_quote(uc.issuer)))
        target = uc.audience
        if target not in self.server.accounts.accounts:
            raise CalloutFailed("no valid account %s for auth callout response on account %s: account missing"
                                % (go_quote(target), go_quote(account)))
        cfg = jwt_permissions(nats)
        perms = Permissions.from_config(cfg) if cfg is not None else None
        return AuthResult(uc.name or uc.subject, target, self.guard(target, perms), None, uc.expires)


def raw_auth_user(connect: dict) -> str:
    return connect_auth_user(connect.get("user") or "", connect.get("auth_token") or "",
                             connect.get("nkey") or "")
