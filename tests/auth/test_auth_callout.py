"""Auth callout in config mode, natsd against nats-server: the same config, the same callout
service (written here on nats-py, signing its answers with tests/support/jwtmint keys), the same
clients, with and without xkey encryption.

The service authorizes one user into account APP with publish permissions, refuses one with
an error, and for the other users answers wrongly: garbage, an empty message, an answer for
another user key or for another server, a user JWT from the wrong issuer or for an unknown
account, or nothing at all (the auth timeout). The test compares what the clients see and the
shape of the requests both servers send (their claims and fields).
"""
import asyncio

import nats
import pytest

from natsd.auth.jwt import claims
from natsd.auth import nkey
from tests.support.jwtmint import Mint

USERS = ["alice", "bob", "garbage", "empty", "wronguser", "wrongserver", "wrongissuer",
         "noaccount", "silent"]


class Service:
    def __init__(self, m, issuer, xkey=None):
        self.m, self.issuer, self.xkey = m, issuer, xkey
        self.requests = []

    def answer(self, msg):
        """The reply bytes for one request, or None to stay silent."""
        data = msg.data
        if self.xkey is not None:
            data = self.xkey.open(data, msg.headers["Nats-Server-Xkey"])
        req = claims.decode_kind(data.decode(), "authorization_request")
        self.requests.append(req)
        nats_ = req.nats
        user, key, server = nats_["connect_opts"].get("user"), nats_["user_nkey"], nats_["server_id"]["id"]
        if user == "silent":
            return None
        if user == "garbage":
            return b"garbage"
        if user == "empty":
            return b""
        signer, audience = self.issuer, "APP"
        if user == "wrongissuer":
            signer = self.m.key("account")
        if user == "noaccount":
            audience = "NOPE"
        ujwt = self.m.token(signer, key, "user", {"pub": {"allow": ["app.>", "_INBOX.>"]}, "sub": {},
                                                   "subs": -1, "data": -1, "payload": -1},
                            name=user, aud=audience)
        body = {"jwt": ujwt}
        if user == "bob" or nats_["connect_opts"].get("pass") != "secret":
            body = {"error": "bad password for %s" % user}
        if user == "wronguser":
            key = self.m.key("user").public
        if user == "wrongserver":
            server = self.m.key("server").public
        out = self.m.token(self.issuer, key, "authorization_response", body, aud=server).encode()
        if self.xkey is not None:
            out = self.xkey.seal(out, msg.headers["Nats-Server-Xkey"])
        return out


async def scenario(url, service):
    async def on_error(e):
        pass
    svc = await nats.connect(url, user="auth", password="pwd", error_cb=on_error)

    async def handle(msg):
        out = service.answer(msg)
        if out is not None:
            await svc.publish(msg.reply, out)
    await svc.subscribe("$SYS.REQ.USER.AUTH", cb=handle)
    await svc.flush()
    out = {}
    for user in USERS:
        out[user] = await login_outcome(url, user=user, password="secret", error_cb=on_error)
    # the auth user may not send callout requests itself
    out["auth user publishing requests"] = await error_after_publish(svc, "$SYS.REQ.USER.AUTH")
    await svc.close()
    return out


async def login_outcome(url, **connect):
    """What a client logging in sees: the error, or that it may use app.x but not other.x."""
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=4, **connect)
    except Exception as e:
        return str(e).lower()
    sub = await nc.subscribe("app.x")
    await nc.publish("app.x", b"ok")
    got = await sub.next_msg(timeout=2)
    out = ("connected", got.data, await error_after_publish(nc, "other.x"))
    await nc.close()
    return out


async def error_after_publish(nc, subject):
    """The client's last error once a publish to `subject` has been answered (or not)."""
    await nc.publish(subject, b"x")
    await nc.flush()
    await asyncio.sleep(0.1)
    return str(nc.last_error).lower()


def _shape(req):
    n = req.nats
    return {"claims": sorted(req.raw), "nats": sorted(n), "aud": req.audience, "type": req.kind,
            "server_id": sorted(n["server_id"]), "client_info": sorted(n["client_info"]),
            "connect_opts": sorted(n["connect_opts"]), "issuer_is_server": req.issuer == n["server_id"]["id"],
            "kind": n["client_info"].get("kind"), "type_": n["client_info"].get("type"),
            "user": n["client_info"].get("user"), "exp_set": req.expires > 0}


def _conf(tmp_path, issuer, xkey=None):
    path = tmp_path / ("callout%s.conf" % ("-x" if xkey else ""))
    path.write_text("""accounts {
  AUTH { users: [ { user: auth, password: pwd } ] }
  APP {}
}
authorization {
  timeout: 1
  auth_callout {
    issuer: %s
    account: AUTH
    auth_users: [ auth ]
    %s
  }
}
""" % (issuer, "xkey: %s" % xkey if xkey else ""))
    return str(path)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "xkey"])
def test_auth_callout_matches_nats_server(natsd, reference, tmp_path, encrypted):
    m = Mint(seed=31)
    issuer = m.key("account")
    xkey = nkey.XKey() if encrypted else None
    conf = _conf(tmp_path, issuer.public, xkey.public if xkey else None)
    results, shapes = [], []
    for start in (reference, natsd):
        service = Service(m, issuer, xkey)
        results.append(asyncio.run(scenario(start("-c", conf).url, service)))
        shapes.append([_shape(r) for r in service.requests])
    theirs, ours = results
    assert ours == theirs
    assert shapes[1] == shapes[0]
    assert theirs["alice"][0] == "connected" and theirs["alice"][1] == b"ok"
    assert "permissions violation" in theirs["alice"][2]
    assert all("authorization violation" in theirs[u] for u in USERS if u != "alice")
    assert "permissions violation" in theirs["auth user publishing requests"]


def test_auth_callout_config_errors():
    from natsd.conf import ConfigError, load_string
    m = Mint(seed=3)
    issuer = m.key("account").public
    cases = {
        "auth_callout { auth_users: [a] }": "Authorization callouts require an issuer to be specified",
        "auth_callout { issuer: %s }" % issuer: "Authorization callouts require authorized users to be specified",
        "auth_callout { issuer: nope, auth_users: [a] }":
            'Expected callout user to be a valid public account nkey, got "nope"',
        "auth_callout { issuer: %s, auth_users: [a], xkey: nope }" % issuer:
            'Expected callout xkey to be a valid public xkey, got "nope"',
        "auth_callout { issuer: %s, auth_users: [a], bogus: 1 }" % issuer:
            'Unknown field "bogus" parsing authorization callout',
        "auth_callout { issuer: %s, auth_users: [a], allowed_accounts: [NOPE] }" % issuer:
            'auth_callout allowed account "NOPE" not found in configured accounts',
    }
    for block, message in cases.items():
        with pytest.raises(ConfigError) as e:
            load_string("authorization { users: [{user: a, password: b}]\n %s }\n" % block)
        assert message in str(e.value), block
    o = load_string("authorization { users: [{user: a, password: b}]\n auth_callout { issuer: %s, "
                    "auth_users: [a], account: A2 } }\naccounts { A2: {} }\n" % issuer)
    assert (o.auth_callout.issuer, o.auth_callout.account, o.auth_callout.auth_users) == (issuer, "A2", ["a"])
    assert o.unsupported == []


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_auth_callout_request_has_the_client_tls_as_nats_server(natsd, reference, tmp_path, verify):
    """A TLS client's request carries `client_tls`: version and cipher, and the chain that
    verified its certificate (`verify: true`) or else the certificates it sent, in PEM."""
    import ssl
    from tests.support.certs import CA
    m = Mint(seed=37)
    issuer = m.key("account")
    ca = CA(str(tmp_path / "pki"))
    cert, key = ca.server_cert()
    ccert, ckey = ca.issue("client", "client", server=False)
    conf = tmp_path / "tls-callout.conf"
    conf.write_text(open(_conf(tmp_path, issuer.public)).read() +
                    'tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: %s }\n'
                    % (cert, key, ca.ca_file, "true" if verify else "false"))
    ctx = ssl.create_default_context(cafile=ca.ca_file)
    ctx.load_cert_chain(ccert, ckey)

    async def login(url, service):
        svc = await nats.connect(url, user="auth", password="pwd", tls=ctx)

        async def handle(msg):
            await svc.publish(msg.reply, service.answer(msg))
        await svc.subscribe("$SYS.REQ.USER.AUTH", cb=handle)
        await svc.flush()
        outcome = await login_outcome(url, user="alice", password="secret", tls=ctx)
        await svc.close()
        return outcome
    seen = []
    for start in (reference, natsd):
        service = Service(m, issuer)
        assert asyncio.run(login(start("-c", str(conf)).url.replace("nats://", "tls://"), service))[0] == "connected"
        seen.append(service.requests[-1].nats["client_tls"])
    theirs, ours = seen
    assert ours == theirs
    assert sorted(theirs) == (["cipher", "verified_chains", "version"] if verify else ["cipher", "version"])
    if verify:
        assert [c.count("BEGIN CERTIFICATE") for c in theirs["verified_chains"][0]] == [1, 1]
