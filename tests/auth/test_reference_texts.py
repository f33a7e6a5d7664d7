"""Checks natsd.auth.authenticator's -ERR texts and the permission semantics in
natsd.auth.permissions against the real nats-server, over raw sockets.

Skipped when ``nats-server`` is not on PATH.  One server (module fixture)
carries every case, to keep the run light.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import time

import bcrypt
import nkeys
import pytest

from natsd.auth.authenticator import (
    ERR_AUTH_TIMEOUT, ERR_AUTH_VIOLATION, pub_violation, reply_violation, sub_violation)

pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server not on PATH")

SEED = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
KP = nkeys.from_seed(SEED)
NKEY = KP.public_key.decode()
HASH = bcrypt.hashpw(b"bpass", bcrypt.gensalt(rounds=4)).decode()  # $2b$, as natsd users write them

CONFIG = """
port: %(port)d
authorization {
  timeout: 0.5
  default_permissions: { publish: "dflt.>", subscribe: "dflt.>" }
  users: [
    { user: a, password: a, permissions: {
        publish: { allow: ["ok.>", "_INBOX.>"], deny: ["ok.secret"] }
        subscribe: { allow: ["ok.>", "foo.*", "q.* grp", "q.* v1.*"], deny: ["ok.secret"] } } }
    { user: d, password: d }
    { user: p, password: p, permissions: { publish: ">" } }
    { user: b, password: "%(hash)s" }
    { nkey: %(nkey)s }
  ]
}
accounts { Y { users: [ { user: y, password: y } ] } }
"""


from tools.serverproc import free_port  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    conf = tmp_path_factory.mktemp("ref") / "server.conf"
    conf.write_text(CONFIG % {"port": port, "hash": HASH, "nkey": NKEY})
    proc = subprocess.Popen(["nats-server", "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.skip("nats-server did not start")
            time.sleep(0.05)
    yield port
    proc.terminate()
    proc.wait(5)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.buf = b""
        self.info = json.loads(self.line()[len("INFO "):])

    def line(self) -> str:
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def send(self, *lines):
        self.sock.sendall("".join(l + "\r\n" for l in lines).encode())

    def connect(self, **fields):
        self.send("CONNECT " + json.dumps({"verbose": False, "pedantic": False, **fields}))

    def replies_until_pong(self, *lines):
        """Send lines then PING; return every protocol line seen before PONG."""
        self.send(*lines, "PING")
        out = []
        while (line := self.line()) != "PONG":
            out.append(line)
        return out

    def close(self):
        self.sock.close()


def err(text):
    return f"-ERR '{text}'"


def login(port, **creds):
    c = Conn(port)
    c.connect(**creds)
    return c


def test_violation_texts(server):
    c = login(server, user="a", **{"pass": "a"})
    assert c.replies_until_pong("PUB bad 0", "") == [err(pub_violation("bad"))]
    assert c.replies_until_pong("SUB bad 1") == [err(sub_violation("bad"))]
    assert c.replies_until_pong("SUB q.x other 2") == [err(sub_violation("q.x", "other"))]
    assert c.replies_until_pong("PUB ok.x _R_.abc 0", "") == [err(reply_violation("_R_.abc"))]
    assert c.replies_until_pong("PUB ok.secret 0", "") == [err(pub_violation("ok.secret"))]
    # The reserved queue name is refused even though the subject is allowed.
    assert c.replies_until_pong("SUB ok.x _sys_ 3") == [err(sub_violation("ok.x", "_sys_"))]
    # The connection stays open after violations.
    assert c.replies_until_pong("SUB ok.y 4") == []
    c.close()
    assert pub_violation("x") == 'Permissions Violation for Publish to "x"'
    assert sub_violation("x", "q") == 'Permissions Violation for Subscription to "x" using queue "q"'
    assert reply_violation("r") == 'Permissions Violation for Publish with Reply of "r"'


def test_subscribe_semantics_match_natsd(server):
    from natsd.auth.permissions import Permissions
    from .conftest import perms_cfg, subject_perm
    ours = Permissions.from_config(perms_cfg(
        publish=subject_perm(["ok.>", "_INBOX.>"], ["ok.secret"]),
        subscribe=subject_perm(["ok.>", "foo.*", "q.* grp", "q.* v1.*"], ["ok.secret"])))
    cases = [("ok.>", None), (">", None), ("foo.>", None), ("foo.*", None), ("foo", None),
             ("q.x", "grp"), ("q.x", "v1.a"), ("q.x", "v1"), ("q.x", None), ("ok.secret", None),
             ("ok.*", None), ("ok.x", "any")]
    c = login(server, user="a", **{"pass": "a"})
    for sid, (subject, queue) in enumerate(cases, 1):
        line = f"SUB {subject} {queue} {sid}" if queue else f"SUB {subject} {sid}"
        refused = c.replies_until_pong(line) == [err(sub_violation(subject, queue))]
        assert refused == (not ours.can_subscribe(subject, queue)), (subject, queue)
    c.close()


def test_deny_filters_delivery_to_wildcard_sub(server):
    c = login(server, user="a", **{"pass": "a"})
    assert c.replies_until_pong("SUB ok.* 1") == []   # broader than deny ok.secret: allowed
    pub = login(server, user="p", **{"pass": "p"})    # may publish anywhere
    assert pub.replies_until_pong("PUB ok.secret 1", "s", "PUB ok.public 1", "p") == []
    # Only the non-denied message reaches the wildcard subscription.
    assert c.replies_until_pong() == ["MSG ok.public 1 1", "p"]
    c.close()
    pub.close()


def test_default_permissions_scope(server):
    d = login(server, user="d", **{"pass": "d"})   # authorization user without perms
    assert d.replies_until_pong("PUB foo 0", "") == [err(pub_violation("foo"))]
    assert d.replies_until_pong("PUB dflt.x 0", "") == []
    y = login(server, user="y", **{"pass": "y"})   # account user: authorization defaults do not apply
    assert y.replies_until_pong("PUB foo 0", "", "SUB foo 1") == []
    d.close()
    y.close()


def test_auth_violation_and_bcrypt(server):
    for creds in ({"user": "a", "pass": "wrong"}, {}, {"user": "nobody", "pass": "a"},
                  {"user": "b", "pass": HASH}):
        c = login(server, **creds)
        c.send("PING")
        assert c.line() == err(ERR_AUTH_VIOLATION)
        c.close()
    c = login(server, user="b", **{"pass": "bpass"})
    assert c.replies_until_pong() == []
    c.close()


def test_nkey_signature_format(server):
    c = Conn(server)
    nonce = c.info["nonce"]
    sig = base64.urlsafe_b64encode(KP.sign(nonce.encode())).decode().rstrip("=")
    c.connect(nkey=NKEY, sig=sig)
    assert c.replies_until_pong() == []
    c.close()
    c = Conn(server)
    c.connect(nkey=NKEY, sig=sig)  # signature of another connection's nonce
    c.send("PING")
    assert c.line() == err(ERR_AUTH_VIOLATION)
    c.close()


def test_auth_timeout(server):
    c = Conn(server)  # never sends CONNECT
    assert c.line() == err(ERR_AUTH_TIMEOUT)
    c.close()
