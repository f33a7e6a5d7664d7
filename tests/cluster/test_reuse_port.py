"""NATSD_REUSE_PORT=1 (docs/multicore.md, way B): natsd processes joined by routes share one
client port, the kernel spreading the connections over them, and a message crosses from a
publisher on one to a subscriber on the other. Without it a second server on the port fails
to start, as nats-server does; a bad value is refused."""
import os
import subprocess
import sys

import pytest

from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.rawclient import RawClient, parse_msgs
from tests.support.servers import ROOT

SHARE = {"NATSD_REUSE_PORT": "1"}


def clients_on_each(port, members, most=200):
    """A connected client on each member: connect until the kernel placed one on each."""
    by_id = {}
    others = []
    for _ in range(most):
        c = RawClient(port)
        if c.info["server_id"] in by_id:
            others.append(c)
        else:
            by_id[c.info["server_id"]] = c.connect()
        if len(by_id) == len(members):
            break
    for c in others:
        c.close()
    assert len(by_id) == len(members), "the kernel placed %d clients on one server" % most
    return by_id


def test_two_processes_share_the_client_port_and_route_between_them(tmp_path):
    a = start_member("natsd", tmp_path, "A", env=SHARE)
    members = [a]
    try:
        members.append(start_member("natsd", tmp_path, "B", routes=["nats://127.0.0.1:%d" % a.route_port],
                                    args=["-p", str(a.proc.port)], env=SHARE))
        b = members[1]
        assert b.proc.port == a.proc.port
        wait_mesh(members)
        ids = {m.get("/varz")["server_id"]: m for m in members}
        clients = clients_on_each(a.proc.port, members)
        (id_a, sub), (id_b, pub) = sorted(clients.items(), key=lambda kv: ids[kv[0]].name)
        assert ids[id_a] is a and ids[id_b] is b
        sub.send(b"SUB shared.port 7\r\nPING\r\n")
        sub.read_until(b"PONG\r\n")
        wait_interest([b], "shared.port")
        pub.send(b"PUB shared.port 5\r\nhello\r\nPING\r\n")
        pub.read_until(b"PONG\r\n")
        got = sub.read_until(b"hello\r\n")
        assert parse_msgs(got) == [(b"shared.port", b"7", None, b"hello")]
        for c in clients.values():
            c.close()
    finally:
        for m in members:
            m.proc.kill()


def test_without_it_a_second_server_on_the_port_fails(natsd):
    first = natsd("-p", "-1", env=dict(os.environ, **SHARE))
    env = {k: v for k, v in os.environ.items() if k != "NATSD_REUSE_PORT"}
    r = subprocess.run([sys.executable, "-m", "natsd", "-a", "127.0.0.1", "-p", str(first.port)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "address already in use" in (r.stdout + r.stderr)


@pytest.mark.parametrize("bad", ["yes", "2", ""])
def test_a_bad_value_stops_natsd(bad):
    env = dict(os.environ, NATSD_REUSE_PORT=bad)
    r = subprocess.run([sys.executable, "-m", "natsd", "-p", "-1"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == "natsd: NATSD_REUSE_PORT=%r: want 1 (share the client port) or 0\n" % bad
