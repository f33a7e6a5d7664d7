"""`trusted: <operator key>` / `trusted_keys: [...]` without an operator JWT, run against
nats-server 2.15.1 and natsd: users log in with the JWTs of accounts those keys signed (through
the configured resolver), an account of another operator, a client without a JWT and, with no
resolver, everyone are refused; messages stay inside the account; the same answers on both."""
import asyncio

import nats
import pytest

from tests.support.jwtmint import Mint, creds
from tests.support.servers import ServerProcess, nats_server_cmd, natsd_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    d = tmp_path_factory.mktemp("trusted")
    mint = Mint(seed=11)
    out = {"dir": d}
    for op_name in ("O1", "O2", "X"):
        op, _ = mint.operator(name=op_name)
        acc, acc_jwt = mint.account(op, name="A-" + op_name)
        user, user_jwt = mint.user(acc)
        (d / ("%s.creds" % op_name)).write_text(creds(user_jwt, user))
        out[op_name] = (op.public, acc.public, acc_jwt)
    return out


def _outcome(url, creds_file, peer_creds=None):
    """'ok' with a message published in the account received (and none from a client of
    another account), or the error text the server gave."""
    async def main():
        try:
            nc = await nats.connect(url, user_credentials=creds_file, allow_reconnect=False,
                                    max_reconnect_attempts=0) if creds_file else \
                await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
        except Exception as e:                  # the server's refusal is the outcome
            return str(e)
        sub = await nc.subscribe("t.>")
        await nc.flush()
        if peer_creds:
            other = await nats.connect(url, user_credentials=peer_creds)
            await other.publish("t.other", b"not for A")
            await other.flush()
            await other.close()
        await nc.publish("t.mine", b"x")
        m = await sub.next_msg(timeout=5)
        await nc.close()
        return "ok %s" % m.subject
    return asyncio.run(main())


def _run(kind, conf_path, tokens, cases):
    cmd = list(natsd_cmd() if kind == "natsd" else nats_server_cmd())
    srv = ServerProcess(cmd + ["-c", str(conf_path), "-p", "-1", "-a", "127.0.0.1"])
    srv.wait_ready()
    try:
        return [_outcome(srv.url, *[str(tokens["dir"] / ("%s.creds" % c)) if c else None for c in case])
                for case in cases]
    finally:
        srv.kill()


@pytest.mark.parametrize("form", ["trusted", "trusted_keys", "no resolver"])
def test_trusted_keys_alone_as_on_nats_server(tokens, tmp_path, form):
    o1, o2 = tokens["O1"], tokens["O2"]
    if form == "trusted":
        text = "trusted: %s\nresolver: MEMORY\nresolver_preload: { %s: %s, %s: %s }\n" % (
            o1[0], o1[1], o1[2], tokens["X"][1], tokens["X"][2])
    elif form == "trusted_keys":
        text = "trusted_keys: [ %s, %s ]\nresolver: MEMORY\nresolver_preload: { %s: %s, %s: %s }\n" % (
            o1[0], o2[0], o1[1], o1[2], o2[1], o2[2])
    else:
        text = "trusted: %s\n" % o1[0]
    conf = tmp_path / "t.conf"
    conf.write_text("port: -1\n" + text)
    # (a user, another user publishing meanwhile): O1's user, O2's, X's (its account signed by
    # an operator nobody trusts, preloaded all the same) and a client without a JWT
    cases = [("O1", "O2" if form == "trusted_keys" else None), ("O2", None), ("X", None), (None, None)]
    got = {kind: _run(kind, conf, tokens, cases) for kind in ("natsd", "nats-server")}
    assert got["natsd"] == got["nats-server"], got
    if form == "no resolver":
        assert not any(r.startswith("ok") for r in got["natsd"]), got
    else:
        assert got["natsd"][0] == "ok t.mine" and "Authorization Violation" in got["natsd"][3], got
        assert got["natsd"][1].startswith("ok") == (form == "trusted_keys"), got


def test_the_2019_operator_key_alone_as_on_nats_server(tmp_path):
    """Inputs from the field (tests/auth/fixtures/legacy_jwt: nats.py's 2019 operator, its two
    v1 accounts and their users' .creds): `trusted:` the operator's key, the accounts
    preloaded. foo's user logs in and bar's messages stay in bar, on both servers alike."""
    from tests.auth.test_legacy_jwts import FIXTURES, fixture, subject_of
    accounts = [fixture("account-foo-2019.jwt"), fixture("account-bar-2019.jwt")]
    conf = tmp_path / "t.conf"
    conf.write_text("port: -1\ntrusted: %s\nresolver: MEMORY\nresolver_preload: { %s }\n" % (
        subject_of(fixture("operator-2019.jwt")), ", ".join("%s: %s" % (subject_of(a), a) for a in accounts)))
    tokens = {"dir": tmp_path}
    for user in ("foo-user", "bar-user"):
        (tmp_path / ("%s.creds" % user)).write_text(open("%s/%s-2019.creds" % (FIXTURES, user)).read())
    cases = [("foo-user", "bar-user"), ("bar-user", None), (None, None)]
    got = {kind: _run(kind, conf, tokens, cases) for kind in ("natsd", "nats-server")}
    assert got["natsd"] == got["nats-server"], got
    assert got["natsd"][:2] == ["ok t.mine", "ok t.mine"] and "Authorization Violation" in got["natsd"][2], got
