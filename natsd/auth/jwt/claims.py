"""NATS JWTs (the claim format of nats-io/jwt v2): decoding a token and verifying its signature.

A token is three base64url chunks without padding, `header.claims.signature`. The header is
`{"typ":"JWT","alg":"ed25519-nkey"}` (`typ` in any case; `alg` `ed25519-nkey` or the v1
`ed25519`, in any case). The claims hold the registered fields (`jti`, `iat`, `iss`, `sub`,
`name`, `exp`, `nbf`, `aud`) and the NATS ones under `nats`, with `nats.type` (`operator`,
`account`, `user`, `activation`, `authorization_request`, `authorization_response`) and
`nats.version` 2; a v1 token has `type` at the top level. A v2 signature is the issuer's
Ed25519 signature of `header.claims` as written; a v1 signature covers the claims chunk only.
A v1 token's claims are read as nats-io/jwt v2 migrates them (`migrate_v1`), so the rest of
natsd sees one layout: its `type`, `tags` and `issuer_account` move under `nats`, a user's
missing limits mean none (v1 decoding presets them to -1), an account has no JetStream.
The issuer's key kind must fit the claim type (an operator issues operator and account
claims, an account or its signing key issues user claims, ...).

decode() checks the format, the signature and the issuer's kind, nothing else: whether the
issuer is trusted, whether the claim has expired (Claims.time_check) and what the claim
allows are the caller's to decide, as in nats-server. encode() issues a token as nats-io/jwt's
ClaimsData.encode does (`jti` the base32 SHA-512/256 of the claims written with an empty jti):
the server signs auth callout requests with it.
"""
import base64
import binascii
import json
import time
from dataclasses import dataclass, field

from natsd.auth import nkey
from natsd.auth.jwt import gotypes
from natsd.options import Permissions, ResponsePermission, SubjectPermission

MAX_TOKEN_SIZE = 1024 * 1024
LIB_VERSION = 2

# claim type -> the key kinds that may issue it (nats-io/jwt ExpectedPrefixes)
ISSUERS = {
    "operator": (nkey.OPERATOR,),
    "account": (nkey.ACCOUNT, nkey.OPERATOR),
    "user": (nkey.ACCOUNT,),
    "activation": (nkey.ACCOUNT, nkey.OPERATOR),
    "authorization_request": (nkey.SERVER,),
    "authorization_response": (nkey.ACCOUNT,),
}
UNSUPPORTED = {"cluster": "ClusterClaims are not supported", "server": "ServerClaims are not supported"}


class JwtError(ValueError):
    """A token that is not a valid NATS JWT; str() says why."""


@dataclass
class Claims:
    kind: str                       # operator, account, user, ... ("" for generic claims)
    version: int
    issuer: str
    subject: str
    name: str = ""
    issued_at: int = 0
    expires: int = 0
    not_before: int = 0
    jti: str = ""
    audience: str = ""
    nats: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)
    token: str = ""

    def time_check(self, now=None):
        """None while valid, else nats-server's reason ("claim is expired" / "claim is not yet
        valid")."""
        now = int(time.time()) if now is None else now
        if self.expires > 0 and now > self.expires:
            return "claim is expired"
        if self.not_before > 0 and self.not_before > now:
            return "claim is not yet valid"
        return None

    @property
    def issuer_account(self):
        """The account a signing key issued this (user) claim for, or ""."""
        return self.nats.get("issuer_account") or ""

    def is_self_signed(self):
        return self.issuer == self.subject


_URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64(chunk):
    """Go's base64.RawURLEncoding: the URL alphabet, no padding, nothing else."""
    if not chunk or not _URL_ALPHABET.issuperset(chunk) or len(chunk) % 4 == 1:
        raise JwtError("illegal base64 data")
    try:
        return base64.urlsafe_b64decode(chunk + "=" * (-len(chunk) % 4))
    except (binascii.Error, ValueError):
        raise JwtError("illegal base64 data") from None


def _check_header(chunk):
    try:
        h = json.loads(_b64(chunk))
    except ValueError as e:
        raise JwtError(str(e)) from None
    if not isinstance(h, dict):
        raise JwtError("header is not a JSON object")
    typ, alg = h.get("typ"), h.get("alg")
    if not isinstance(typ, str) or typ.upper() != "JWT":
        raise JwtError('not supported type "%s"' % (typ if isinstance(typ, str) else ""))
    if not isinstance(alg, str) or alg.lower() not in ("ed25519", "ed25519-nkey"):
        raise JwtError('unexpected "%s" algorithm' % (alg if isinstance(alg, str) else ""))


def _int(d, key):
    v = d.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise JwtError("json: cannot unmarshal %s into Go struct field of type int64" % type(v).__name__)
    return int(v)


def _str(d, key):
    v = d.get(key, "")
    if not isinstance(v, str):
        raise JwtError("json: cannot unmarshal %s into Go struct field of type string" % type(v).__name__)
    return v


def _b64enc(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode(signer, subject, kind, nats=None, name="", version=2, header=None, **registered):
    """A signed token. `signer` has sign() and public_key (an nkeys.KeyPair); `registered`
    may give aud, exp, nbf and iat (default now). Empty registered claims are left out, as
    Go's omitempty; `nats` gets its type and version."""
    issuer = signer.public_key.decode() if isinstance(signer.public_key, bytes) else signer.public_key
    std = {"aud": registered.get("aud", ""), "exp": registered.get("exp", 0), "jti": "",
           "iat": registered.get("iat", int(time.time())), "iss": issuer, "name": name,
           "nbf": registered.get("nbf", 0), "sub": subject}
    std = {k: v for k, v in std.items() if v}
    import hashlib                      # (OpenSSL's digests: loaded when a JWT is made)
    digest = hashlib.new("sha512_256", json.dumps(std, separators=(",", ":")).encode()).digest()
    std["jti"] = base64.b32encode(digest).decode().rstrip("=")
    body = dict(std)
    nats = dict(nats or {})
    if version >= 2:
        nats.update(type=kind, version=version)
    else:
        body["type"] = kind
    body["nats"] = nats
    head = _b64enc(json.dumps(header or {"typ": "JWT", "alg": "ed25519-nkey"},
                              separators=(",", ":")).encode())
    signed = head + "." + _b64enc(json.dumps(body, separators=(",", ":")).encode())
    sig = signer.sign((signed if version >= 2 else signed.split(".")[1]).encode())
    return signed + "." + _b64enc(sig)


def decode(token):
    """The verified Claims of `token`; JwtError when it is malformed, of an unknown or newer
    version, wrongly signed, or issued by the wrong kind of key."""
    if not isinstance(token, str):
        raise JwtError("token is not a string")
    if len(token) > MAX_TOKEN_SIZE:
        raise JwtError("token size %d exceeds maximum of %d bytes: token too large"
                       % (len(token), MAX_TOKEN_SIZE))
    chunks = token.split(".")
    if len(chunks) != 3:
        raise JwtError("expected 3 chunks")
    _check_header(chunks[0])
    try:
        data = json.loads(_b64(chunks[1]))
    except ValueError as e:
        raise JwtError(str(e)) from None
    if not isinstance(data, dict):
        raise JwtError("claims are not a JSON object")
    nats = data.get("nats") or {}
    if not isinstance(nats, dict):
        raise JwtError("nats claims are not a JSON object")
    if data.get("type"):
        kind, version = _str(data, "type"), 1
    else:
        kind, version = _str(nats, "type"), _int(nats, "version")
    if version > LIB_VERSION:
        raise JwtError("JWT was generated by a newer version ")
    if kind in UNSUPPORTED:
        raise JwtError(UNSUPPORTED[kind])
    if version == 1 and kind in V1_FIELDS:
        nats = migrate_v1(kind, data)
    try:
        gotypes.check(kind, nats)
    except ValueError as e:
        raise JwtError(str(e)) from None
    claims = Claims(kind=kind, version=version, issuer=_str(data, "iss"), subject=_str(data, "sub"),
                    name=_str(data, "name"), issued_at=_int(data, "iat"), expires=_int(data, "exp"),
                    not_before=_int(data, "nbf"), jti=_str(data, "jti"), audience=_str(data, "aud"),
                    nats=nats, raw=data, token=token)
    sig = _b64(chunks[2])
    signed = chunks[1] if version <= 1 else token[:len(chunks[0]) + len(chunks[1]) + 1]
    if not nkey.verify(claims.issuer, signed.encode(), sig):
        raise JwtError("claim failed V%d signature verification" % (1 if version <= 1 else 2))
    prefixes = ISSUERS.get(kind)
    if prefixes is not None and not any(nkey.is_valid_public(claims.issuer, p) for p in prefixes):
        raise JwtError("unable to validate expected prefixes - %s" % list(prefixes))
    return claims


# The `nats` fields nats-io/jwt's v1 claim structs know (anything else a v1 token carries is
# dropped by Go's decoding), and the values a v1 user claim starts from before its JSON is read.
V1_FIELDS = {
    "operator": ("signing_keys", "account_server_url", "operator_service_urls", "system_account"),
    "account": ("imports", "exports", "limits", "signing_keys", "revocations"),
    "user": ("pub", "sub", "resp", "src", "times", "times_location", "subs", "data", "payload",
             "bearer_token"),
    "activation": ("subject", "type"),
}
V1_USER_PRESETS = {"subs": -1, "data": -1, "payload": -1}
V1_ACCOUNT_LIMITS = ("subs", "data", "payload", "imports", "exports", "wildcards",
                     "disallow_bearer", "conn", "leaf")


def migrate_v1(kind, data):
    """A v1 claim's `nats` in nats-io/jwt v2's layout, as its migrateV1 leaves it: the known
    v1 fields (an activation's import `type` becomes `kind`; an account's limits keep only the
    NATS and account limits, so JetStream is off), a user's subs, data and payload -1 when the
    token has none, and the claim type, tags and issuer account moved in from the top level,
    with version 1."""
    n = data.get("nats") if isinstance(data.get("nats"), dict) else {}
    out = dict(V1_USER_PRESETS) if kind == "user" else {}
    for key in V1_FIELDS[kind]:
        if key in n and n[key] is not None:
            out["kind" if kind == "activation" and key == "type" else key] = n[key]
    if kind == "account" and isinstance(out.get("limits"), dict):
        out["limits"] = {k: v for k, v in out["limits"].items() if k in V1_ACCOUNT_LIMITS}
    if kind in ("user", "activation") and data.get("issuer_account"):
        out["issuer_account"] = data["issuer_account"]
    if data.get("tags"):
        out["tags"] = data["tags"]
    out["type"] = kind
    out["version"] = 1
    return out


def decode_kind(token, kind):
    """decode(), then insist on the claim type (nats-server's DecodeUserClaims & co.)."""
    claims = decode(token)
    if claims.kind != kind:
        raise JwtError("not %s claim" % kind)
    return claims


def jwt_permissions(perms):
    """A JWT's `{"pub": {"allow", "deny"}, "sub": {...}, "resp": {"max", "ttl"}}` as config
    Permissions (None when it restricts nothing)."""
    if not isinstance(perms, dict):
        return None
    out = Permissions()
    for key, attr in (("pub", "publish"), ("sub", "subscribe")):
        p = perms.get(key) or {}
        allow, deny = list(p.get("allow") or []), list(p.get("deny") or [])
        if allow or deny:
            setattr(out, attr, SubjectPermission(allow=allow, deny=deny))
    resp = perms.get("resp")
    if isinstance(resp, dict):
        out.response = ResponsePermission(max_msgs=int(resp.get("max") or 0) or 1,
                                          expires=(resp.get("ttl") or 0) / 1e9 or 0.0)
    if out.publish is None and out.subscribe is None and out.response is None:
        return None
    return out


def signing_keys(ac):
    """An account's (or operator's) signing keys -> {key: scope dict or None}."""
    out = {}
    for k in ac.nats.get("signing_keys") or []:
        if isinstance(k, str):
            out[k] = None
        elif isinstance(k, dict) and isinstance(k.get("key"), str):
            out[k["key"]] = k
    return out


def _perm_json(p):
    p = p if isinstance(p, dict) else {}
    return {k: list(p[k]) for k in ("allow", "deny") if p.get(k)}


def account_json(ac):
    """Account claims as nats-server shows them decoded (/accountz `decoded_jwt`): nats-io/jwt's
    AccountClaims written back by Go, its fields in struct order, empty ones left out where the
    struct says omitempty."""
    out = {k: ac.raw[k] for k in ("aud", "exp", "jti", "iat", "iss", "name", "nbf", "sub") if ac.raw.get(k)}
    n = ac.nats
    lim = n.get("limits") if isinstance(n.get("limits"), dict) else {}
    limits = {"subs": lim.get("subs", 0), "data": lim.get("data", 0), "payload": lim.get("payload", 0),
              "imports": lim.get("imports", 0), "exports": lim.get("exports", 0),
              "wildcards": bool(lim.get("wildcards", False))}
    if lim.get("disallow_bearer"):
        limits["disallow_bearer"] = True
    limits.update(conn=lim.get("conn", 0), leaf=lim.get("leaf", 0))
    for k in ("mem_storage", "disk_storage", "streams", "consumer", "max_ack_pending",
              "mem_max_stream_bytes", "disk_max_stream_bytes", "max_bytes_required", "tiered_limits"):
        if lim.get(k):
            limits[k] = lim[k]
    nats = {k: n[k] for k in ("imports", "exports") if n.get(k)}
    nats["limits"] = limits
    for k in ("signing_keys", "revocations"):
        if n.get(k):
            nats[k] = n[k]
    dp = n.get("default_permissions") if isinstance(n.get("default_permissions"), dict) else {}
    nats["default_permissions"] = {"pub": _perm_json(dp.get("pub")), "sub": _perm_json(dp.get("sub"))}
    if dp.get("resp"):
        nats["default_permissions"]["resp"] = dp["resp"]
    if n.get("mappings"):
        nats["mappings"] = n["mappings"]
    auth = n.get("authorization") if isinstance(n.get("authorization"), dict) else {}
    nats["authorization"] = {k: auth[k] for k in ("auth_users", "allowed_accounts", "xkey") if auth.get(k)}
    for k in ("trace", "cluster_traffic", "description", "info_url", "tags", "type", "version"):
        if n.get(k):
            nats[k] = n[k]
    out["nats"] = nats
    return out
