"""Owns the tests of leaf remote `credentials` / `nkey` (natsd/leafnodes/creds.py and the CONNECT built in
natsd/leafnodes/leafnode.py `send_connect`).

Unit tests: parsing a creds file, the nonce signature (verified with nkeys), the error texts.
End to end: the reference nats-server as the hub in operator mode (operator / system account /
account / user JWTs built here with nkeys, `resolver: MEMORY` + `resolver_preload`) and natsd as
the leaf soliciting with a creds file: the link binds to the account, messages flow both ways;
a user of an account the hub does not know is refused (Authorization Violation) and natsd keeps
retrying; a missing creds file is logged with its path and natsd keeps running. Plus an inline
`nkey` seed remote against a nats-server hub with an nkey user.
"""
import asyncio
import base64
import hashlib
import json
import os
import time

import nats
import nkeys
import pytest

from natsd.leafnodes.creds import (
    CredsError, check_creds, expand_path, leaf_connect_auth, parse_creds, read_creds, sign_nonce)
from tests.support.jwtmint import creds as creds_text
from tests.support.servers import ENV, http_json, nats_server_cmd, start_server
from tests.support.waiting import poll
from tools.serverproc import free_port

pytestmark = pytest.mark.timeout(90) if hasattr(pytest.mark, "timeout") else []


# ---- nkeys / JWT building (nats-io/jwt v2) ----

def new_seed(prefix):
    return nkeys.encode_seed(os.urandom(32), prefix)


def corrupt_seed(seed):
    """The seed with one base32 character in the middle of the key replaced: 5 data bits change
    (a seed is 58 characters for 36 bytes, so the last character carries 2 padding bits and
    changing it may change nothing), and CRC16 catches every error burst up to 16 bits, so the
    checksum can never match."""
    i = len(seed) // 2                                  # inside the 32 key bytes, not the prefix
    broken = seed[:i] + (b"B" if seed[i:i + 1] == b"A" else b"A") + seed[i + 1:]
    pad = lambda s: base64.b32decode(s + b"=" * (-len(s) % 8))
    assert pad(broken)[:-2] != pad(seed)[:-2] and pad(broken)[-2:] == pad(seed)[-2:]
    return broken


def pub_of(seed):
    return nkeys.from_seed(bytearray(seed)).public_key.decode()


def b64url(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def encode_jwt(signer_seed, sub, name, nats_claims):
    """A jwt v2 token as ClaimsData.doEncode makes it: jti = base32(sha512/256) of the
    ClaimsData JSON without jti, signed with the issuer's key."""
    iss = pub_of(signer_seed)
    data = {"iat": int(time.time()), "iss": iss, "name": name, "sub": sub}
    digest = hashlib.new("sha512_256", json.dumps(data, separators=(",", ":")).encode()).digest()
    jti = base64.b32encode(digest).decode().rstrip("=")
    claims = {"jti": jti, "iat": data["iat"], "iss": iss, "name": name, "sub": sub,
              "nats": nats_claims}
    header = b64url(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    to_sign = ("%s.%s" % (header, payload)).encode()
    sig = nkeys.from_seed(bytearray(signer_seed)).sign(to_sign)
    return "%s.%s.%s" % (header, payload, b64url(sig))


def operator_jwt(op_seed, sys_pub):
    op = pub_of(op_seed)
    return encode_jwt(op_seed, op, "OP", {"system_account": sys_pub, "type": "operator", "version": 2})


ACCOUNT_LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                  "wildcards": True, "conn": -1, "leaf": -1}


def account_jwt(op_seed, acc_seed, name):
    return encode_jwt(op_seed, pub_of(acc_seed), name, {
        "limits": ACCOUNT_LIMITS, "default_permissions": {"pub": {}, "sub": {}},
        "type": "account", "version": 2})


def user_jwt(acc_seed, user_seed, name):
    return encode_jwt(acc_seed, pub_of(user_seed), name, {
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2})


def verify(pub, nonce, sig):
    """Check an nkey nonce signature the way the hub does (natsd.auth.authenticator.verify_nonce_signature)."""
    from natsd.auth.authenticator import verify_nonce_signature
    return verify_nonce_signature(pub, nonce, sig)


# ---- unit tests ----

def test_parse_and_sign(tmp_path):
    acc = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
    user = new_seed(nkeys.PREFIX_BYTE_USER)
    jwt = user_jwt(acc, user, "u")
    path = tmp_path / "u.creds"
    path.write_text(creds_text(jwt, user))
    got_jwt, got_seed = read_creds(str(path))
    assert got_jwt == jwt and got_seed == user
    # CRLF line endings are accepted too (credsRe has \r?\n)
    assert parse_creds(creds_text(jwt, user).replace("\n", "\r\n").encode())[1] == user

    auth = leaf_connect_auth(str(path), "", "nonce-abc")
    assert set(auth) == {"jwt", "sig"} and auth["jwt"] == jwt
    assert "=" not in auth["sig"] and "+" not in auth["sig"] and "/" not in auth["sig"]
    raw = base64.urlsafe_b64decode(auth["sig"] + "==")
    assert len(raw) == 64
    assert nkeys.from_seed(bytearray(user)).verify(b"nonce-abc", raw)
    assert verify(pub_of(user), "nonce-abc", auth["sig"])
    assert not verify(pub_of(user), "other-nonce", auth["sig"])

    nk = leaf_connect_auth("", user.decode(), "xyz")
    assert nk["nkey"] == pub_of(user) and verify(pub_of(user), "xyz", nk["sig"])
    assert leaf_connect_auth("", "", "xyz") == {}
    assert sign_nonce(user, None) == sign_nonce(user, "")
    assert check_creds(str(path)) is None


def test_creds_errors(tmp_path, monkeypatch):
    missing = str(tmp_path / "nope.creds")
    with pytest.raises(CredsError, match="open .*nope.creds: no such file or directory"):
        leaf_connect_auth(missing, "", "n")
    assert check_creds(missing) == ('Error reading LeafNode Remote Credentials file "%s": '
                                    'open %s: no such file or directory' % (missing, missing))
    bad = tmp_path / "bad.creds"
    bad.write_text("just some text\n")
    with pytest.raises(CredsError, match="^Credentials file malformed$"):
        leaf_connect_auth(str(bad), "", "n")
    assert check_creds(str(bad)) == 'LeafNode Remote Credentials file "%s" malformed' % bad
    user = nkeys.encode_seed(bytes(range(32)), nkeys.PREFIX_BYTE_USER)  # fixed: reproducible
    broken = corrupt_seed(user)                                          # CRC mismatch
    bad.write_text(creds_text(user_jwt(new_seed(nkeys.PREFIX_BYTE_ACCOUNT), user, "u"), broken))
    with pytest.raises(CredsError, match="malformed seed"):
        leaf_connect_auth(str(bad), "", "n")
    assert "has malformed seed" in check_creds(str(bad))
    bad.write_text(creds_text("not.a.jwt", user))
    assert "has malformed user jwt" in check_creds(str(bad))
    with pytest.raises(CredsError, match="Remote nkey has malformed seed"):
        leaf_connect_auth("", "SUnotaseed", "n")
    monkeypatch.setenv("CREDS_DIR", str(tmp_path))
    assert expand_path("$CREDS_DIR/x.creds") == str(tmp_path / "x.creds")
    assert expand_path("${CREDS_DIR}/x.creds") == str(tmp_path / "x.creds")
    assert expand_path("$NO_SUCH_VAR_HOPEFULLY/x") == "/x"
    assert expand_path("~/a").startswith(os.path.expanduser("~"))


# ---- end to end: nats-server hub in operator mode, natsd leaf ----

class Operator:
    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.op = new_seed(nkeys.PREFIX_BYTE_OPERATOR)
        self.sys = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
        self.acc = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
        self.sys_pub, self.acc_pub = pub_of(self.sys), pub_of(self.acc)
        (tmp_path / "op.jwt").write_text(operator_jwt(self.op, self.sys_pub))
        self.leaf_port = free_port()
        (tmp_path / "hub.conf").write_text(
            'server_name: hub\noperator: "./op.jwt"\nsystem_account: %s\nresolver: MEMORY\n'
            'resolver_preload: {\n  %s: "%s"\n  %s: "%s"\n}\n'
            'leafnodes { port: %d }\n' % (
                self.sys_pub, self.acc_pub, account_jwt(self.op, self.acc, "ACC"),
                self.sys_pub, account_jwt(self.op, self.sys, "SYS"), self.leaf_port))

    def user_creds(self, name, acc_seed=None):
        acc_seed = acc_seed or self.acc
        seed = new_seed(nkeys.PREFIX_BYTE_USER)
        path = self.dir / ("%s.creds" % name)
        path.write_text(creds_text(user_jwt(acc_seed, seed, name), seed))
        return str(path)


def leaf_conf(tmp_path, port, creds, extra=""):
    conf = tmp_path / "leaf.conf"
    conf.write_text('server_name: leaf\nleafnodes {\n  reconnect: "250ms"\n  remotes: [ {\n'
                    '    url: "nats-leaf://127.0.0.1:%d"\n    %s\n  } ]\n}\n%s'
                    % (port, creds, extra))
    return "leaf.conf"


@pytest.fixture
def ref_hub(tmp_path):
    if nats_server_cmd() is None:
        pytest.skip("nats-server is not installed")
    started = []

    def factory(conf="hub.conf"):
        p = start_server(nats_server_cmd(), "-c", conf, "-m", str(free_port()), cwd=str(tmp_path), env=ENV)
        started.append(p)
        return p
    yield factory
    for p in started:
        p.kill()


async def roundtrip(hub_url, hub_creds, leaf_url):
    hub = await nats.connect(hub_url, user_credentials=hub_creds)
    leaf = await nats.connect(leaf_url)
    got_hub, got_leaf = [], []

    async def on_hub(m):
        got_hub.append(m.data)

    async def on_leaf(m):
        got_leaf.append(m.data)
    await hub.subscribe("to.hub", cb=on_hub)
    await leaf.subscribe("to.leaf", cb=on_leaf)
    await hub.flush()
    await leaf.flush()
    deadline = time.monotonic() + 10
    while (not got_hub or not got_leaf) and time.monotonic() < deadline:
        await leaf.publish("to.hub", b"probe")
        await hub.publish("to.leaf", b"probe")
        await asyncio.sleep(0.1)
    assert got_hub and got_leaf, "no traffic across the link"
    for i in range(10):
        await leaf.publish("to.hub", b"h%d" % i)
        await hub.publish("to.leaf", b"l%d" % i)
    await leaf.flush()
    await hub.flush()
    # probes still in flight may land after this point: they are left out, not raced with a sleep
    real = lambda got: [d for d in got if d != b"probe"]
    deadline = time.monotonic() + 5
    while (len(real(got_hub)) < 10 or len(real(got_leaf)) < 10) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    # request/reply from the hub side answered on the leaf, once the hub has the svc interest
    async def svc(m):
        await m.respond(b"pong:" + m.data)
    await leaf.subscribe("svc", cb=svc)
    await leaf.flush()
    deadline = time.monotonic() + 10
    while True:
        try:
            reply = await hub.request("svc", b"x", timeout=1)
            break
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    await hub.close()
    await leaf.close()
    return real(got_hub), real(got_leaf), reply.data


def test_operator_hub_creds_leaf(tmp_path, natsd, ref_hub):
    op = Operator(tmp_path)
    hub = ref_hub()
    creds = op.user_creds("leafuser")
    client_creds = op.user_creds("client")
    leaf = natsd("-c", leaf_conf(tmp_path, op.leaf_port, 'credentials: "%s"' % creds),
                 "-m", str(free_port()), cwd=str(tmp_path), env=ENV)

    def bound():
        lz = http_json(hub.http_port, "/leafz")
        return lz if lz.get("leafnodes") == 1 else None
    lz = poll(bound, 10)
    assert lz, "link never came up:\nhub:\n%s\nleaf:\n%s" % (hub.log, leaf.log)
    assert [lf["account"] for lf in lz["leafs"]] == [op.acc_pub]
    assert poll(lambda: http_json(leaf.http_port, "/varz").get("leafnodes") == 1, 5)

    got_hub, got_leaf, reply = asyncio.run(roundtrip(hub.url, client_creds, leaf.url))
    assert got_hub == [b"h%d" % i for i in range(10)]
    assert got_leaf == [b"l%d" % i for i in range(10)]
    assert reply == b"pong:x"
    assert "Authorization Violation" not in leaf.log


def test_operator_hub_relative_creds_path(tmp_path, natsd, ref_hub):
    """A relative creds path is resolved against the working directory (nats-server's
    expandPath does no config-relative resolution), and $VAR is expanded."""
    op = Operator(tmp_path)
    hub = ref_hub()
    os.makedirs(tmp_path / "conf")
    creds = op.user_creds("leafuser")
    os.rename(creds, tmp_path / "conf" / "leafuser.creds")
    (tmp_path / "conf" / "leaf.conf").write_text(
        'leafnodes {\n  remotes: [ { url: "nats-leaf://127.0.0.1:%d"\n'
        '    credentials: "${CREDS_SUBDIR}/leafuser.creds" } ]\n}\n' % op.leaf_port)
    env = dict(ENV, CREDS_SUBDIR="conf")
    natsd("-c", "conf/leaf.conf", cwd=str(tmp_path), env=env)
    assert poll(lambda: http_json(hub.http_port, "/leafz").get("leafnodes") == 1, 10), hub.log


def test_operator_hub_refuses_unknown_account(tmp_path, natsd, ref_hub):
    op = Operator(tmp_path)
    hub = ref_hub()
    stranger = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)          # signed by nobody the hub knows
    creds = op.user_creds("stranger", acc_seed=stranger)
    leaf = natsd("-c", leaf_conf(tmp_path, op.leaf_port, 'credentials: "%s"' % creds),
                 cwd=str(tmp_path), env=ENV)
    # refused, then retried: at least two refusals, the server still up and serving clients
    assert poll(lambda: leaf.log.count("Authorization Violation") >= 2, 15), leaf.log
    assert leaf.proc.poll() is None
    assert http_json(hub.http_port, "/leafz").get("leafnodes") == 0

    async def alive():
        nc = await nats.connect(leaf.url)
        await nc.flush()
        await nc.close()
    asyncio.run(alive())

    # a valid creds file written in place is picked up by the next attempt
    good = op.user_creds("good")
    os.replace(good, creds)
    assert poll(lambda: http_json(hub.http_port, "/leafz").get("leafnodes") == 1, 10), leaf.log


def test_missing_creds_file_is_logged_and_retried(tmp_path, natsd, ref_hub):
    op = Operator(tmp_path)
    hub = ref_hub()
    path = str(tmp_path / "later.creds")
    leaf = natsd("-c", leaf_conf(tmp_path, op.leaf_port, 'credentials: "%s"' % path),
                 cwd=str(tmp_path), env=ENV)
    leaf.wait_log(r'Error reading LeafNode Remote Credentials file "%s": open %s: no such file'
                  % (path, path))
    # each attempt re-reads the file and fails with the path named
    assert poll(lambda: leaf.log.count("open %s: no such file or directory" % path) >= 3, 10), leaf.log
    assert leaf.proc.poll() is None
    assert http_json(hub.http_port, "/leafz").get("leafnodes") == 0
    good = op.user_creds("good")
    os.replace(good, path)
    assert poll(lambda: http_json(hub.http_port, "/leafz").get("leafnodes") == 1, 10), leaf.log


def test_nkey_seed_remote(tmp_path, natsd, ref_hub):
    """`nkey: <user seed>` on a remote: CONNECT carries nkey + sig; a nats-server hub with an
    nkey user in an account binds the leaf to that account."""
    user = new_seed(nkeys.PREFIX_BYTE_USER)
    port = free_port()
    (tmp_path / "hub.conf").write_text(
        'accounts { A: { users: [ { nkey: %s } ] } }\nleafnodes { port: %d }\n' % (pub_of(user), port))
    hub = ref_hub()
    natsd("-c", leaf_conf(tmp_path, port, 'nkey: "%s"' % user.decode()), cwd=str(tmp_path), env=ENV)
    lz = poll(lambda: (lambda d: d if d.get("leafnodes") == 1 else None)(http_json(hub.http_port, "/leafz")), 10)
    assert lz, hub.log
    assert lz["leafs"][0]["account"] == "A"
