"""Test helper: operators, accounts and users as nats-io/jwt v2 issues them (nsc's tokens).

Keys come from a seeded random source, so a test's tokens are reproducible. A token is
`base64url(header).base64url(claims).base64url(sig)` without padding, the header
`{"typ":"JWT","alg":"ed25519-nkey"}`, `jti` the base32 (no padding) SHA-512/256 of the
registered claims with an empty jti, signed with the issuer's seed. The same tokens are loaded
into nats-server by the tests, which is what shows that this format is the real one.
"""
import base64
import hashlib
import json
import random
import time

import nkeys


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Key:
    def __init__(self, prefix, rnd):
        self.seed = nkeys.encode_seed(bytes(rnd.getrandbits(8) for _ in range(32)), prefix)
        self.kp = nkeys.from_seed(bytearray(self.seed))
        self.public = self.kp.public_key.decode()

    def sign(self, data):
        return self.kp.sign(data)


class Mint:
    def __init__(self, seed=1):
        self.rnd = random.Random(seed)

    def key(self, kind):
        prefix = {"operator": nkeys.PREFIX_BYTE_OPERATOR, "account": nkeys.PREFIX_BYTE_ACCOUNT,
                  "user": nkeys.PREFIX_BYTE_USER, "server": nkeys.PREFIX_BYTE_SERVER}[kind]
        return Key(prefix, self.rnd)

    @staticmethod
    def token(issuer, subject, kind, nats=None, name="", header=None, version=2, **registered):
        """A signed token: `registered` holds exp, nbf, aud, iat (default now)."""
        std = {"aud": registered.get("aud", ""), "exp": registered.get("exp", 0), "jti": "",
               "iat": registered.get("iat", int(time.time())), "iss": issuer.public, "name": name,
               "nbf": registered.get("nbf", 0), "sub": subject}
        std = {k: v for k, v in std.items() if v}           # Go's omitempty
        digest = hashlib.new("sha512_256", json.dumps(std, separators=(",", ":")).encode()).digest()
        std["jti"] = base64.b32encode(digest).decode().rstrip("=")
        body = dict(std)
        nats = dict(nats or {})
        if version >= 2:
            nats.update(type=kind, version=version)
        else:
            body["type"] = kind
        body["nats"] = nats
        head = _b64(json.dumps(header or {"typ": "JWT", "alg": "ed25519-nkey"},
                               separators=(",", ":")).encode())
        signed = head + "." + _b64(json.dumps(body, separators=(",", ":")).encode())
        sig = issuer.sign((signed if version >= 2 else signed.split(".")[1]).encode())
        return signed + "." + _b64(sig)

    def operator(self, name="O", **nats):
        op = self.key("operator")
        return op, self.token(op, op.public, "operator", nats, name=name)

    def account(self, operator, name="A", limits=None, **nats):
        acc = self.key("account")
        claims = {"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                             "wildcards": True, "conn": -1, "leaf": -1, **(limits or {})},
                  "default_permissions": {"pub": {}, "sub": {}}}
        claims.update(nats)
        return acc, self.token(operator, acc.public, "account", claims, name=name)

    def user(self, account, name="U", signer=None, registered=None, **nats):
        """A user of `account`, issued by the account or by `signer` (one of its signing keys,
        then `issuer_account` names the account)."""
        u = self.key("user")
        claims = {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
        if signer is not None:
            claims["issuer_account"] = account.public
        claims.update(nats)
        return u, self.token(signer or account, u.public, "user", claims, name=name, **(registered or {}))


def creds(jwt, user):
    """A .creds file's text, as nsc writes it (`user` a Key or its seed)."""
    seed = user.seed if isinstance(user, Key) else user
    seed = seed.decode() if isinstance(seed, bytes) else seed
    return ("-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n\n"
            "*************************************************************\n"
            % (jwt, seed))
