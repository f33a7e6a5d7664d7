"""Authentication and permissions end to end (nats-py and raw sockets) against natsd."""
import bcrypt
import nats
import nats.errors
import nkeys
import pytest

from tests.support.rawclient import RawClient
from tests.support.waiting import run, until


def make_nkey_user():
    kp = nkeys.from_seed(nkeys.encode_seed(__import__("os").urandom(32), nkeys.PREFIX_BYTE_USER))
    return kp.public_key.decode(), kp.seed.decode()


@pytest.fixture
def users_server(natsd, tmp_path):
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    pub, seed = make_nkey_user()
    conf = tmp_path / "auth.conf"
    conf.write_text("""
authorization {
  timeout: 0.5
  users: [
    {user: hashed, password: "%s"}
    {nkey: %s}
    {user: anon, password: whatever, permissions: {publish: "anon.>", subscribe: "anon.>"}}
    {user: limited, password: pw, permissions: {
        publish: {allow: ["pub.>", "_INBOX.>"], deny: ["pub.secret"]},
        subscribe: {allow: ["sub.>", "_INBOX.>"], deny: ["sub.secret"]}}}
    {user: svc, password: pw, permissions: {publish: {deny: ">"}, subscribe: "svc.req",
                                            allow_responses: true}}
  ]
}
no_auth_user: anon
""" % (hashed, pub))
    srv = natsd("-c", str(conf))
    srv.nkey_seed = seed
    return srv


def url(srv, user=None, password=None):
    if user is None:
        return srv.url
    return "nats://%s:%s@127.0.0.1:%d" % (user, password, srv.port)


async def auth_fails(u, **kw):
    with pytest.raises(Exception) as ei:
        nc = await nats.connect(u, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=5, **kw)
        await nc.close()
    assert "authorization violation" in str(ei.value).lower(), repr(ei.value)


@run
async def test_user_pass_flags(natsd):
    srv = natsd("--user", "alice", "--pass", "pw")
    nc = await nats.connect(url(srv, "alice", "pw"), allow_reconnect=False)
    sub = await nc.subscribe("x")
    await nc.publish("x", b"1")
    assert (await sub.next_msg(timeout=5)).data == b"1"
    await nc.close()
    await auth_fails(url(srv, "alice", "wrong"))
    await auth_fails(srv.url)


def test_wrong_password_raw(natsd):
    srv = natsd("--user", "alice", "--pass", "pw")
    with RawClient(srv.port) as c:
        assert c.info["auth_required"] is True
        c.send(b'CONNECT {"verbose":false,"user":"alice","pass":"nope"}\r\nPING\r\n')
        assert c.read_until_eof() == b"-ERR 'Authorization Violation'\r\n"
    srv.wait_log(r"authentication error")


@run
async def test_token_flag(natsd):
    srv = natsd("--auth", "s3kr1t")
    nc = await nats.connect("nats://s3kr1t@127.0.0.1:%d" % srv.port, allow_reconnect=False)
    await nc.flush()
    await nc.close()
    nc = await nats.connect(srv.url, token="s3kr1t", allow_reconnect=False)
    await nc.flush()
    await nc.close()
    await auth_fails(srv.url, token="nope")


@run
async def test_bcrypt_user(users_server):
    nc = await nats.connect(url(users_server, "hashed", "s3cret"), allow_reconnect=False)
    await nc.flush()
    await nc.close()
    await auth_fails(url(users_server, "hashed", "s3cretX"))


@run
async def test_nkey_user(users_server, tmp_path):
    with RawClient(users_server.port) as c:
        assert c.info.get("nonce")
    nc = await nats.connect(users_server.url, nkeys_seed_str=users_server.nkey_seed, allow_reconnect=False)
    sub = await nc.subscribe("nk")
    await nc.publish("nk", b"signed")
    assert (await sub.next_msg(timeout=5)).data == b"signed"
    await nc.close()
    _, other_seed = make_nkey_user()
    await auth_fails(users_server.url, nkeys_seed_str=other_seed)


def test_nkey_bad_signature_raw(users_server):
    kp = nkeys.from_seed(users_server.nkey_seed.encode())
    with RawClient(users_server.port) as c:
        sig = __import__("base64").urlsafe_b64encode(kp.sign(b"not the nonce")).decode().rstrip("=")
        c.send(('CONNECT {"verbose":false,"nkey":"%s","sig":"%s"}\r\nPING\r\n'
                % (kp.public_key.decode(), sig)).encode())
        assert c.read_until_eof() == b"-ERR 'Authorization Violation'\r\n"


@run
async def test_no_auth_user(users_server):
    nc = await nats.connect(users_server.url, allow_reconnect=False)
    sub = await nc.subscribe("anon.x")
    await nc.publish("anon.x", b"hi")
    assert (await sub.next_msg(timeout=5)).data == b"hi"
    await nc.close()
    # the anonymous binding carries anon's permissions
    with RawClient(users_server.port) as c:
        c.connect()
        c.send(b"PUB other 1\r\nx\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Publish to \"other\"'\r\n"


def test_auth_timeout(users_server):
    with RawClient(users_server.port) as c:
        assert c.read_until_eof(timeout=10) == b"-ERR 'Authentication Timeout'\r\n"


def test_publish_permissions(users_server):
    with RawClient(users_server.port) as c:
        c.connect(user="limited", **{"pass": "pw"})
        c.send(b"SUB sub.x 1\r\nPUB x 1\r\n1\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n"
        c.send(b"PUB pub.secret 1\r\n2\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Publish to \"pub.secret\"'\r\n"
        # the connection stays open and usable
        with RawClient(users_server.port) as s:
            s.connect(user="hashed", **{"pass": "s3cret"})
            s.send(b"SUB pub.ok 5\r\n")
            s.sync()
            c.send(b"PUB pub.ok 2\r\nok\r\n")
            assert c.sync() == b""
            assert s.sync() == b"MSG pub.ok 5 2\r\nok\r\n"


def test_subscribe_permissions(users_server):
    with RawClient(users_server.port) as c:
        c.connect(user="limited", **{"pass": "pw"})
        c.send(b"SUB other 1\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Subscription to \"other\"'\r\n"
        c.send(b"SUB sub.secret 2\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Subscription to \"sub.secret\"'\r\n"
        c.send(b"SUB other q 3\r\n")
        assert c.sync() == (b"-ERR 'Permissions Violation for Subscription to \"other\" "
                            b"using queue \"q\"'\r\n")
        # a wildcard subscription does not deliver a denied subject
        c.send(b"SUB sub.> 4\r\n")
        assert c.sync() == b""
        with RawClient(users_server.port) as p:
            p.connect(user="hashed", **{"pass": "s3cret"})
            p.send(b"PUB sub.secret 1\r\nS\r\nPUB sub.public 1\r\nP\r\n")
            p.sync()
        assert c.sync() == b"MSG sub.public 4 1\r\nP\r\n"


def test_allow_responses(users_server):
    with RawClient(users_server.port) as svc, RawClient(users_server.port) as req:
        svc.connect(user="svc", **{"pass": "pw"})
        svc.send(b"SUB svc.req 1\r\n")
        svc.sync()
        req.connect(user="hashed", **{"pass": "s3cret"})
        req.send(b"SUB inbox.1 7\r\nPUB svc.req inbox.1 1\r\nq\r\n")
        req.sync()
        assert svc.sync() == b"MSG svc.req 1 inbox.1 1\r\nq\r\n"
        svc.send(b"PUB inbox.1 1\r\na\r\n")
        assert svc.sync() == b""
        # one response only (max 1), and no other subject
        svc.send(b"PUB inbox.1 1\r\nb\r\n")
        assert svc.sync() == b"-ERR 'Permissions Violation for Publish to \"inbox.1\"'\r\n"
        svc.send(b"PUB elsewhere 1\r\nc\r\n")
        assert svc.sync() == b"-ERR 'Permissions Violation for Publish to \"elsewhere\"'\r\n"
        assert req.sync() == b"MSG inbox.1 7 1\r\na\r\n"


@run
async def test_permissions_with_nats_py(users_server):
    errors = []

    async def err_cb(e):
        errors.append(str(e))
    nc = await nats.connect(url(users_server, "limited", "pw"), error_cb=err_cb, allow_reconnect=False)
    await nc.publish("forbidden", b"x")
    await nc.flush()
    assert await until(lambda: any("permissions violation" in e.lower() for e in errors)), errors
    assert nc.is_connected
    await nc.close()

