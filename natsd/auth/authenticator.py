"""Client authentication (CONNECT credentials -> user, account, permissions).

Owns ``Authenticator`` (built once from ``natsd.options.Options``),
``AuthResult`` (what a connection is bound to), and the exact -ERR texts
nats-server sends for authentication and permission violations.

Rules follow nats-server's ``processClientOrLeafAuthentication`` (auth.go),
in its order:

1. nkey users (``users: [{nkey: U...}]``): CONNECT ``nkey`` selects the user,
   ``sig`` must be the Ed25519 signature of the INFO nonce (base64url raw,
   or standard padded base64).  An unknown ``nkey`` fails outright.
2. user/password users (``authorization.users`` and every
   ``accounts.X.users``): CONNECT ``user`` selects the user, an unknown name
   fails outright, then the password is compared.
3. otherwise the single ``authorization.token`` / ``--auth``, or the single
   ``authorization.user/password`` / ``--user/--pass``.

``no_auth_user`` stands in for a client that sent none of user, pass,
auth_token, nkey.  Passwords and tokens that look like bcrypt hashes
(``$2a$``/``$2b$``/``$2x$``/``$2y$`` + cost) are checked with bcrypt.
Users without their own permissions get their account's
``default_permissions``, or for ``authorization.users`` the
``authorization.default_permissions`` (as nats-server: the latter does not
reach account users -- verified against nats-server 2.15.1).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from natsd.auth import nkey
from natsd.auth.offloop import OffLoop, compare_hash
from natsd.auth.jwt import claims
from natsd.auth.jwt.login import JwtAuthenticator
from natsd.gofmt import go_quote
from natsd.auth.permissions import Permissions
from natsd.digest import compare_digest
from natsd.accounts.clientinfo import REDACTED, raw_auth_user

# -ERR texts, exactly as nats-server sends them (verified in
# tests/auth/test_reference_texts.py); subjects are quoted as Go's %q quotes them.
ERR_AUTH_VIOLATION = "Authorization Violation"
ERR_AUTH_TIMEOUT = "Authentication Timeout"


def pub_violation(subject) -> str:
    return f'Permissions Violation for Publish to {go_quote(subject)}'


def sub_violation(subject, queue=None) -> str:
    if queue:
        return f'Permissions Violation for Subscription to {go_quote(subject)} using queue {go_quote(queue)}'
    return f'Permissions Violation for Subscription to {go_quote(subject)}'


def reply_violation(reply) -> str:
    return f'Permissions Violation for Publish with Reply of {go_quote(reply)}'


def auth_user_label(connect: dict) -> str:
    """How nats-server's log lines name a connection's credentials (client.go getAuthUser);
    '' when it sent none."""
    for key, label in (("nkey", "Nkey"), ("user", "User")):
        v = connect.get(key)
        if v:
            return "%s %s" % (label, go_quote(str(v)))
    if connect.get("auth_token"):
        return 'Token "[REDACTED]"'
    return ""


def log_label(connect: dict, account: str) -> str:
    """What nats-server adds to a client's log prefix once it is connected:
    `"v<version>:<lang>:<name>" - "<account>/<user:u|nkey:k|token>"`, each part when known."""
    parts = [str(connect.get(k) or "") for k in ("version", "lang", "name")]
    if parts[0]:
        parts[0] = "v" + parts[0]
    ncs = ":".join(p for p in parts if p)
    if connect.get("nkey"):
        user = "nkey:%s" % connect["nkey"]
    elif connect.get("user"):
        user = "user:%s" % connect["user"]
    elif connect.get("auth_token"):
        user = "token"
    else:
        user = ""
    acs = "%s/%s" % (account, user) if user else ""
    return " - ".join(go_quote(x) for x in (ncs, acs) if x)


# Reply prefixes the server uses internally (service imports, JetStream acks,
# gateways); a client PUB with such a reply gets reply_violation, whatever
# its permissions (client.go isReservedReply). The server registers them with the parser.
RESERVED_REPLY_PREFIXES = (b"_R_.", b"$JS.ACK.", b"_GR_.")


_BCRYPT_RE = re.compile(r"^\$2[abxy]\$\d{2}\$")
_BCRYPT_MEMO_MAX = 256


def is_bcrypt(secret: str) -> bool:
    return bool(secret) and _BCRYPT_RE.match(secret) is not None


class SlowCheck(OffLoop):
    """Authentication needs a bcrypt comparison: run it off the loop (natsd/auth/offloop.py),
    record the verdict, and authenticate again."""

    def __init__(self, configured: str, given: str, memo=None):
        super().__init__("bcrypt comparison needed")
        self.configured = configured
        self.given = given
        self.memo = memo                # the Authenticator that records the verdict

    def work(self):
        return compare_hash(self.configured, self.given)

    def settle(self, ok):
        if self.memo is not None:
            self.memo.record_verdict(self, bool(ok))


@dataclass(frozen=True)
class AuthResult:
    """What an authenticated connection is bound to."""

    user: str | None          # /connz authorized_user
    account: str | None       # None = the global account $G
    permissions: Permissions | None
    nkey: str | None = None
    expires: int = 0          # a user JWT's `exp` (unix seconds), 0 for none
    jwt_user: object = None   # natsd.auth.jwt.login.JwtUser in operator mode


@dataclass(frozen=True)
class _Principal:
    """A configured user, with its permissions compiled once and shared."""

    name: str                 # username, or the nkey for nkey users
    secret: str | None        # password (None for nkey users)
    account: str | None
    permissions: Permissions | None
    conn_types: frozenset     # upper-cased; empty = every type allowed
    is_nkey: bool


def _str_field(connect: dict, key: str) -> str | None:
    """CONNECT string field; '' when absent, None when not a string (reject)."""
    v = connect.get(key)
    if v is None:
        return ""
    return v if isinstance(v, str) else None


class Authenticator:
    def __init__(self, opts, jwt_accounts=None):
        """`jwt_accounts` (natsd.auth.jwt.accounts.JwtAccounts) in operator mode."""
        self.username: str = getattr(opts, "username", None) or ""
        self.password: str = getattr(opts, "password", None) or ""
        self.token: str = getattr(opts, "authorization", None) or ""
        self.no_auth_user: str = getattr(opts, "no_auth_user", None) or ""
        self.default_sentinel: str = getattr(opts, "default_sentinel", None) or ""
        self.users: dict[str, _Principal] = {}
        self.nkeys: dict[str, _Principal] = {}
        self._bcrypt_ok: dict[tuple[str, str], bool] = {}
        self._verdicts: dict[tuple[str, str], bool] = {}    # one-shot results from a worker
        self._defer = False

        accounts = getattr(opts, "accounts", None) or {}
        account_users = set()
        for acc_name, acc in accounts.items():
            acc_default = getattr(acc, "default_permissions", None)
            for u in getattr(acc, "users", None) or ():
                account_users.add(id(u))
                self._add(u, getattr(u, "account", None) or getattr(acc, "name", None) or acc_name,
                          acc_default)
        # authorization.default_permissions reaches only authorization users.
        global_default = getattr(opts, "default_permissions", None)
        for u in list(getattr(opts, "users", None) or ()) + list(getattr(opts, "nkeys", None) or ()):
            if id(u) not in account_users:  # the options may list account users here too
                self._add(u, getattr(u, "account", None), global_default)

        # operator mode: user JWTs against the resolver's accounts (natsd/auth/jwt/login.py)
        pinned = getattr(opts, "resolver_pinned_accounts", None)
        if pinned and getattr(opts, "system_account", ""):
            pinned = pinned | {opts.system_account}   # the operator's system account always may
        self.jwt = JwtAuthenticator(jwt_accounts, pinned) if jwt_accounts is not None else None
        self.auth_required: bool = bool(self.users or self.nkeys or self.username or self.token
                                        or self.jwt)
        self.nonce_required: bool = bool(self.nkeys or self.jwt)

    def _add(self, u, account, default_perms) -> None:
        account = getattr(account, "name", account)  # tolerate an account object
        perms_cfg = getattr(u, "permissions", None) or default_perms
        conn_types = frozenset(str(t).upper() for t in (getattr(u, "allowed_connection_types", None) or ()))
        nkey = getattr(u, "nkey", None)
        if nkey:
            table, name, secret = self.nkeys, nkey, None
        else:
            table, name, secret = self.users, getattr(u, "username", None) or "", getattr(u, "password", None) or ""
        if name in table:
            return  # first definition wins; nats-server refuses duplicates at load time
        table[name] = _Principal(name, secret, account, Permissions.from_config(perms_cfg),
                                 conn_types, bool(nkey))

    def knows_user(self, connect: dict) -> bool:
        """False when the CONNECT names a user or nkey this configuration does not have
        (nats-server treats such a client on reload as moved to another account)."""
        user, nkey = connect.get("user"), connect.get("nkey")
        if nkey and isinstance(nkey, str):
            return nkey in self.nkeys
        if user and isinstance(user, str) and self.users:
            return user in self.users
        return True

    # -- authentication -----------------------------------------------------

    def authenticate(self, connect: dict, nonce: str | None, kind: str = "STANDARD",
                     defer: bool = False, cert=None, host: str = "") -> AuthResult | None:
        """Check a CONNECT.  Returns the binding, or None -> the server sends
        ``-ERR 'Authorization Violation'`` and closes.  With ``defer``, a bcrypt comparison
        whose verdict is not known yet raises SlowCheck instead of running here.  ``cert`` is
        the client certificate's identity (natsd.net.tls.cert_identity) when the port maps
        certificates to users (verify_and_map)."""
        self._defer = defer
        try:
            return self._authenticate(connect, nonce, kind, cert, host)
        finally:
            self._defer = False

    def check_secret(self, configured: str, given: str, defer: bool = False) -> bool:
        """A configured password/token against the given one (bcrypt aware, see authenticate)."""
        self._defer = defer
        try:
            return self._check_secret(configured, given)
        finally:
            self._defer = False

    def record_verdict(self, slow: SlowCheck, ok: bool) -> None:
        key = (slow.configured, slow.given)
        if ok:
            self._remember(key)
        else:
            if len(self._verdicts) >= _BCRYPT_MEMO_MAX:
                self._verdicts.clear()
            self._verdicts[key] = False

    def _authenticate(self, connect: dict, nonce: str | None, kind: str, cert,
                      host: str) -> AuthResult | None:
        user = _str_field(connect, "user")
        password = _str_field(connect, "pass")
        token = _str_field(connect, "auth_token")
        nkey = _str_field(connect, "nkey")
        sig = _str_field(connect, "sig")
        if None in (user, password, token, nkey, sig):
            return None
        if self.jwt is not None:
            jwt = _str_field(connect, "jwt")
            if self.default_sentinel and not is_user_jwt(jwt):
                # nats-server: a CONNECT without a user JWT logs in as the default sentinel
                jwt = connect["jwt"] = self.default_sentinel
            u = (self.jwt.authenticate(jwt, nonce, sig, kind, verify_nonce_signature, host, self._defer)
                 if jwt else None)
            if u is None:
                return None
            return AuthResult(u.public, u.account, u.permissions, u.public, u.expires, u)

        if not self.auth_required:
            return AuthResult(raw_auth_user(connect), None, None, nkey or None)

        # "Sent no credentials", as nats-server judges it (a jwt is not looked at).
        anonymous = not (user or password or token)
        kind = kind.upper()

        if self.nkeys:
            if anonymous and not nkey and self.no_auth_user in self.nkeys:
                nkey = self.no_auth_user
            if nkey:
                p = self.nkeys.get(nkey)
                if p is None or not _type_allowed(p, kind):
                    return None
                # The no_auth_user stand-in has no signature to check.
                if nkey != self.no_auth_user and not verify_nonce_signature(nkey, nonce, sig):
                    return None
                return AuthResult(nkey, p.account, p.permissions, nkey)

        if self.users and cert is not None:
            p = self._cert_user(cert, kind)
            return self._bind(p, kind) if p is not None else None

        if self.users:
            if anonymous and self.no_auth_user in self.users:
                p = self.users[self.no_auth_user]
                return self._bind(p, kind)
            if user:
                p = self.users.get(user)
                if p is None or not self._check_secret(p.secret, password):
                    return None
                return self._bind(p, kind)

        if self.token:
            if self._check_secret(self.token, token):
                return AuthResult(REDACTED, None, None)
            return None
        if self.username:
            if user == self.username and self._check_secret(self.password, password):
                return AuthResult(user, None, None)
        return None

    def _cert_user(self, cert, kind: str) -> _Principal | None:
        """verify_and_map (auth.go checkClientTLSCertSubject): the first of the certificate's
        names (e-mails, DNS names, URIs, the RFC 2253 subject) that is a user's name, else a
        user whose name is a DN equal to the subject, in order or reordered."""
        names, subject = cert
        for name in names:
            p = self.users.get(name)
            if p is not None:
                return p if _type_allowed(p, kind) else None
        reordered = None
        for p in self.users.values():
            if not _type_allowed(p, kind):
                continue
            dn = parse_dn(p.name)
            if dn is None:
                continue
            if dn == subject:
                return p
            if reordered is None and sorted(dn) == sorted(subject):
                reordered = p
        return reordered

    @staticmethod
    def _bind(p: _Principal, kind: str) -> AuthResult | None:
        if not _type_allowed(p, kind):
            return None
        return AuthResult(p.name, p.account, p.permissions)

    def _check_secret(self, configured: str, given: str) -> bool:
        if not is_bcrypt(configured):
            return compare_digest(configured.encode(), given.encode())
        key = (configured, given)
        if key in self._bcrypt_ok:
            return True
        verdict = self._verdicts.pop(key, None)
        if verdict is not None:
            return verdict
        if self._defer:
            raise SlowCheck(configured, given, self)
        ok = compare_hash(configured, given)
        if ok:
            self._remember(key)
        return ok

    def _remember(self, key) -> None:
        # bcrypt costs ~0.1-0.3 s per check; remember successes only, so wrong guesses always
        # pay the full price.
        if len(self._bcrypt_ok) >= _BCRYPT_MEMO_MAX:
            self._bcrypt_ok.clear()
        self._bcrypt_ok[key] = True


def parse_dn(text: str):
    """An RFC 4514 DN as a list of (TYPE, value) pairs, or None if it is not one."""
    parts, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append(ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch in ",+":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    out = []
    for part in parts:
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            return None
        out.append((k.strip().upper(), v.strip()))
    return out


def _type_allowed(p: _Principal, kind: str) -> bool:
    return not p.conn_types or kind in p.conn_types



def _decode_sig(sig: str) -> bytes | None:
    # nats-server takes base64url without padding, or standard padded base64;
    # accepting either alphabet with or without padding is a harmless superset.
    s = sig.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def verify_nonce_signature(public_nkey: str, nonce: str | None, sig: str) -> bool:
    """Is ``sig`` (as sent in CONNECT) the signature of ``nonce`` by ``public_nkey``?"""
    if not nonce or not sig:
        return False
    raw_sig = _decode_sig(sig)
    return raw_sig is not None and nkey.verify(public_nkey, nonce.encode(), raw_sig)


def is_user_jwt(token: str | None) -> bool:
    try:
        claims.decode_kind(token or "", "user")
        return True
    except claims.JwtError:
        return False
