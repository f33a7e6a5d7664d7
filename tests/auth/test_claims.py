"""NATS JWTs: natsd.auth.jwt.claims decodes and verifies the tokens nsc and nats-io/jwt issue.

The tokens come from tests/support/jwtmint.py; test_minted_tokens_work_on_nats_server loads the same
kind of tokens into the reference nats-server (operator mode, MEMORY resolver) and connects
nats-py with a .creds file, which shows the helper writes the real format. The refusals are
nats-io/jwt's (Decode) texts."""
import asyncio
import base64
import json
import time

import nats
import pytest

from natsd.auth.jwt import claims
from natsd.auth import nkey
from tests.support.jwtmint import Mint, creds


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.fixture
def world():
    m = Mint(seed=42)
    op, op_jwt = m.operator("OP")
    acc, acc_jwt = m.account(op, "ACC")
    user, user_jwt = m.user(acc, "alice")
    return m, op, op_jwt, acc, acc_jwt, user, user_jwt


def test_minted_tokens_work_on_nats_server(reference, tmp_path, world):
    m, op, op_jwt, acc, acc_jwt, user, user_jwt = world
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n}\n"
                    % (op_jwt, acc.public, acc_jwt))
    srv = reference("-c", str(conf))
    good = tmp_path / "alice.creds"
    good.write_text(creds(user_jwt, user))
    expired_user, expired_jwt = m.user(acc, "old", registered={"exp": int(time.time()) - 10})
    expired = tmp_path / "old.creds"
    expired.write_text(creds(expired_jwt, expired_user))
    stranger = m.key("user")              # right token, wrong seed: the nonce signature fails
    wrong = tmp_path / "wrong.creds"
    wrong.write_text(creds(user_jwt, stranger))

    async def main():
        nc = await nats.connect(srv.url, user_credentials=str(good))
        sub = await nc.subscribe("hello")
        await nc.publish("hello", b"world")
        msg = await sub.next_msg(timeout=2)
        await nc.close()
        refused = []
        for path in (expired, wrong):
            errors = []

            async def on_error(e):
                errors.append(str(e))
            with pytest.raises(Exception):
                await nats.connect(srv.url, user_credentials=str(path), allow_reconnect=False,
                                   error_cb=on_error, connect_timeout=2)
            refused.append(any("authorization violation" in e.lower() for e in errors))
        return msg.data, refused
    data, refused = asyncio.run(main())
    assert data == b"world" and refused == [True, True]


def test_decode_reads_every_kind(world):
    m, op, op_jwt, acc, acc_jwt, user, user_jwt = world
    c = claims.decode(op_jwt)
    assert (c.kind, c.version, c.issuer, c.subject, c.name) == ("operator", 2, op.public, op.public, "OP")
    assert c.is_self_signed() and c.time_check() is None and len(c.jti) == 52
    a = claims.decode_kind(acc_jwt, "account")
    assert (a.issuer, a.subject, a.nats["limits"]["conn"]) == (op.public, acc.public, -1)
    u = claims.decode_kind(user_jwt, "user")
    assert (u.issuer, u.subject, u.name, u.issuer_account) == (acc.public, user.public, "alice", "")
    signer = m.key("account")
    su, su_jwt = m.user(acc, "bob", signer=signer, pub={"allow": ["a.>"]})
    s = claims.decode(su_jwt)
    assert (s.issuer, s.issuer_account, s.nats["pub"]) == (signer.public, acc.public, {"allow": ["a.>"]})
    with pytest.raises(claims.JwtError, match="^not user claim$"):
        claims.decode_kind(acc_jwt, "user")
    with pytest.raises(claims.JwtError, match="^not account claim$"):
        claims.decode_kind(user_jwt, "account")


def test_time_checks(world):
    m, op, op_jwt, acc, *_ = world
    now = int(time.time())
    _, old = m.user(acc, registered={"exp": now - 1})
    _, early = m.user(acc, registered={"nbf": now + 3600})
    _, fine = m.user(acc, registered={"exp": now + 3600, "nbf": now - 5})
    assert claims.decode(old).time_check(now) == "claim is expired"
    assert claims.decode(early).time_check(now) == "claim is not yet valid"
    assert claims.decode(fine).time_check(now) is None


def test_version_1_tokens_verify_over_the_claims_chunk(world):
    m, op, *_ = world
    acc = m.key("account")
    token = m.token(op, acc.public, "account", {}, version=1)
    c = claims.decode(token)
    assert (c.kind, c.version) == ("account", 1)


def _tamper(token, fn):
    h, c, s = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(c + "=" * (-len(c) % 4)))
    fn(body)
    return ".".join([h, _b64(json.dumps(body).encode()), s])


REFUSALS = [
    ("two chunks", lambda w: w["user"].rsplit(".", 1)[0], "^expected 3 chunks$"),
    ("four chunks", lambda w: w["user"] + ".x", "^expected 3 chunks$"),
    ("padded base64", lambda w: w["user"] + "==", "illegal base64 data"),
    ("not base64", lambda w: "!!!." + w["user"].split(".", 1)[1], "illegal base64 data"),
    ("typ", lambda w: w["mint"].token(w["acc"], "U" * 56, "user", {}, header={"typ": "JWS", "alg": "ed25519-nkey"}),
     '^not supported type "JWS"$'),
    ("alg", lambda w: w["mint"].token(w["acc"], "U" * 56, "user", {}, header={"typ": "JWT", "alg": "HS256"}),
     '^unexpected "HS256" algorithm$'),
    ("alg prefix", lambda w: w["mint"].token(w["acc"], "U" * 56, "user", {}, header={"typ": "JWT", "alg": "ed25519x"}),
     '^unexpected "ed25519x" algorithm$'),
    ("claims changed after signing", lambda w: _tamper(w["user"], lambda b: b.update(name="mallory")),
     "^claim failed V2 signature verification$"),
    ("issuer swapped", lambda w: _tamper(w["user"], lambda b: b.update(iss=w["other"].public)),
     "^claim failed V2 signature verification$"),
    ("user issued by the operator", lambda w: w["mint"].token(w["op"], "U" * 56, "user", {}),
     r"^unable to validate expected prefixes"),
    ("operator issued by an account", lambda w: w["mint"].token(w["acc"], w["acc"].public, "operator", {}),
     r"^unable to validate expected prefixes"),
    ("newer version", lambda w: w["mint"].token(w["acc"], "U" * 56, "user", {}, version=3),
     "^JWT was generated by a newer version $"),
    ("server claims", lambda w: w["mint"].token(w["op"], w["op"].public, "server", {}),
     "^ServerClaims are not supported$"),
    ("too large", lambda w: "a" * (1024 * 1024 + 1), "token too large"),
]


@pytest.mark.parametrize("name,make,text", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_decode_refusals(world, name, make, text):
    m, op, op_jwt, acc, acc_jwt, user, user_jwt = world
    w = {"mint": m, "op": op, "acc": acc, "user": user_jwt, "other": m.key("account")}
    with pytest.raises(claims.JwtError, match=text):
        claims.decode(make(w))


def test_alg_case_and_v1_name_accepted(world):
    m, op, op_jwt, acc, *_ = world
    for alg in ("ED25519-NKEY", "ed25519"):
        t = m.token(acc, "U" * 56, "user", {}, header={"typ": "jwt", "alg": alg})
        assert claims.decode(t).kind == "user"


def test_public_nkeys():
    m = Mint(seed=3)
    op, acc = m.key("operator"), m.key("account")
    assert nkey.is_valid_public(op.public, nkey.OPERATOR) and not nkey.is_valid_public(op.public, nkey.ACCOUNT)
    assert nkey.is_valid_public(acc.public) and not nkey.is_valid_public(
        acc.public[:-1] + ("B" if acc.public.endswith("A") else "A"))
    assert not nkey.is_valid_public(op.seed.decode()) and not nkey.is_valid_public("")
    sig = acc.sign(b"nonce")
    assert nkey.verify(acc.public, b"nonce", sig) and not nkey.verify(op.public, b"nonce", sig)
    assert not nkey.verify(acc.public, b"nonce!", sig)
