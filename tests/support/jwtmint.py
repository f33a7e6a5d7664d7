"""JWT minting: operators, accounts and users as nats-io/jwt v2 issues them (nsc's tokens),
and the .creds files that carry a user's token and seed.

Keys come from a seeded random source, so a test's tokens are reproducible. Tokens are written
by natsd.auth.jwt.claims.encode (the encoder the server signs auth callout requests with); the same
tokens are loaded into nats-server by the tests, which is what shows that the format is the
real one.
"""
import random

import nkeys

from natsd.auth.jwt import claims


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
        return claims.encode(issuer.kp, subject, kind, nats, name=name, version=version,
                             header=header, **registered)

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
