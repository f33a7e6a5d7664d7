"""NATS credentials for solicited leaf node connections (`credentials` / `nkey` of a remote).

Owns reading a NATS creds file (the user JWT block and the user nkey seed block, matched with
nats-server's `credsRe`), signing the hub INFO's nonce with the seed (Ed25519, the raw signature
in base64url without padding: `base64.RawURLEncoding`) and the CONNECT fields that result, as
nats-server's `sendLeafConnect` builds them:

- `credentials`: `{"jwt": <user jwt>, "sig": <signed nonce>}`
- `nkey` (a user seed given inline): `{"nkey": <public key>, "sig": <signed nonce>}`

The file is read on every connect attempt (as nats-server does), so a fixed file is picked up
by the next reconnect. Paths are expanded like nats-server's `expandPath` ($VAR / ${VAR} and a
leading `~`) and are otherwise relative to the working directory, not to the config file.
"""
import base64
import json
import os
import re

import nkeys

# nats-server server/leafnode.go credsRe (Go's \z is Python's \Z; \w is ASCII on bytes).
CREDS_RE = re.compile(
    rb"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\Z)))")

_ENV_RE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z0-9_]+))")


class CredsError(Exception):
    """A creds file or seed that cannot be used; str() is the message nats-server logs."""


def expand_path(p):
    """nats-server's expandPath: os.ExpandEnv (unset variables expand to ""), then `~`."""
    p = _ENV_RE.sub(lambda m: os.environ.get(m.group(1) if m.group(1) is not None else m.group(2), ""), p)
    if p.startswith("~"):
        return os.path.join(os.path.expanduser("~"), p[1:].lstrip("/"))
    return p


def _go_open_error(path, e):
    """The text of Go's *PathError for a failed os.ReadFile."""
    msg = (e.strerror or str(e)).lower()
    return "open %s: %s" % (path, msg)


def _seed_keypair(seed):
    """nkeys.from_seed after the CRC16 check nats-server's nkeys.FromSeed makes (the Python
    package skips it)."""
    raw = base64.b32decode(bytes(seed) + b"=" * (-len(seed) % 8))
    if len(raw) != 36 or nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        raise ValueError("invalid checksum")
    return nkeys.from_seed(bytearray(seed))


def parse_creds(contents):
    """(jwt, seed) as bytes from a creds file's contents; CredsError when malformed."""
    items = CREDS_RE.findall(contents)
    if len(items) < 2:
        raise CredsError("Credentials file malformed")
    user_jwt, seed = items[0][0], items[1][0]
    try:
        _seed_keypair(seed)
    except Exception:
        raise CredsError("Credentials file has malformed seed") from None
    return user_jwt, seed


def read_creds(path):
    """(jwt str, seed bytes) read from the creds file at `path` (already expanded)."""
    try:
        with open(path, "rb") as f:
            contents = f.read()
    except OSError as e:
        raise CredsError(_go_open_error(path, e)) from None
    j, seed = parse_creds(contents)
    return j.decode(), seed


def decode_jwt_claims(token):
    """The claims of a JWT (no signature check); ValueError when it is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("expected 3 chunks")
    body = parts[1] + "=" * (-len(parts[1]) % 4)
    claims = json.loads(base64.urlsafe_b64decode(body))
    if not isinstance(claims, dict):
        raise ValueError("claims are not an object")
    return claims


def check_creds(path):
    """Startup check of a remote's creds file: None when usable, else the error nats-server logs
    in solicitLeafNodeRemotes (the remote is still solicited; each attempt re-reads the file)."""
    try:
        with open(path, "rb") as f:
            contents = f.read()
    except OSError as e:
        return 'Error reading LeafNode Remote Credentials file "%s": %s' % (path, _go_open_error(path, e))
    items = CREDS_RE.findall(contents)
    if len(items) < 2:
        return 'LeafNode Remote Credentials file "%s" malformed' % path
    try:
        _seed_keypair(items[1][0])
    except Exception:
        return 'LeafNode Remote Credentials file "%s" has malformed seed' % path
    try:
        claims = decode_jwt_claims(items[0][0].decode())
        if (claims.get("nats") or {}).get("type", "user") != "user":
            raise ValueError("not a user jwt")
    except (ValueError, UnicodeDecodeError):
        return 'LeafNode Remote Credentials file "%s" has malformed user jwt' % path
    return None


def sign_nonce(seed, nonce):
    """base64url (no padding) of the Ed25519 signature of `nonce` with the nkey `seed`."""
    if isinstance(seed, str):
        seed = seed.encode()
    kp = nkeys.from_seed(bytearray(seed))
    if nonce is None:
        nonce = b""
    elif isinstance(nonce, str):
        nonce = nonce.encode()
    sig = kp.sign(nonce)
    return base64.urlsafe_b64encode(sig).decode().rstrip("=")


def leaf_connect_auth(credentials, nkey, nonce):
    """The auth fields of a leaf CONNECT for a remote's `credentials` path or `nkey` seed
    (credentials take precedence); {} when neither is set. CredsError when unusable."""
    if credentials:
        user_jwt, seed = read_creds(expand_path(credentials))
        return {"jwt": user_jwt, "sig": sign_nonce(seed, nonce)}
    if nkey:
        try:
            kp = _seed_keypair(nkey.encode())
            pub = kp.public_key.decode()
        except Exception:
            raise CredsError("Remote nkey has malformed seed") from None
        return {"nkey": pub, "sig": sign_nonce(nkey, nonce)}
    return {}
