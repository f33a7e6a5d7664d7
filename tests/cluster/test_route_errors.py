"""Bad routes: wrong credentials, another cluster's name, a duplicate server name, malformed
route protocol from a peer, a client on the route port. natsd answers as nats-server does
(the same -ERR, the same log lines and close reasons), closes only that route, and its
clients carry on."""
import asyncio
import re
import socket
import time

import nats
import pytest

from tests.support.cluster import start_member
from tests.support.servers import nats_server_cmd, recv_until_quiet
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")
KINDS = ["natsd", "nats-server"]

FAKE_CONNECT = (b'CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,'
                b'"headers":true,"name":"NFAKE","cluster":"C1","lnoc":true}\r\n')
FAKE_INFO = (b'INFO {"server_id":"NFAKE","server_name":"F","version":"2.15.1","proto":1,'
             b'"host":"127.0.0.1","port":1,"headers":true,"cluster":"C1","lnoc":true,'
             b'"lnocu":true,"route_pool_size":3,"route_pool_idx":2}\r\n')


def _messages(lines, start):
    """(level, text after the connection prefix) of the log lines from `start`."""
    out = []
    for line in lines[start:]:
        m = re.search(r"\[(ERR|INF)\] (?:\S+ - rid:\d+ - )?(.*)$", line)
        if m and (m.group(1) == "ERR" or "connection closed" in m.group(2)):
            out.append((m.group(1), m.group(2)))
    return out


def _poke(port, data, as_route=True):
    """A raw peer on the route port: (optionally) a route's CONNECT and INFO, then `data`;
    returns the -ERR lines it got before the server closed."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(3)
    s.recv(65536)
    if as_route:
        s.sendall(FAKE_CONNECT + FAKE_INFO)
        time.sleep(0.05)
    s.sendall(data)
    got = recv_until_quiet(s, 3)
    s.close()
    return [x.decode() for x in got.split(b"\r\n") if x.startswith(b"-ERR")]


def _closed_since(member, start):
    """_messages from `start`, once the server logged the connection's close (up to 5 s)."""
    poll(lambda: any("connection closed" in t for _, t in _messages(member.proc.lines, start)), 5, 0.02)
    return _messages(member.proc.lines, start)


def _serves(member, subject, payload):
    """A client of `member` publishes `payload` to its own subscription -> what it got."""
    async def client():
        nc = await nats.connect(member.url)
        sub = await nc.subscribe(subject)
        await nc.publish(subject, payload)
        msg = await sub.next_msg(2)
        await nc.close()
        return msg.data
    return asyncio.run(client())


MALFORMED = [
    b"RS+ $G\r\n",
    b"RS+ $G foo bar\r\n",
    b"RS- $G foo bar baz\r\n",
    b"RMSG $G\r\n",
    b"RMSG $G foo bar baz qux 5\r\nhello\r\n",
    b"RMSG $G foo x\r\n",
    b"HMSG $G foo 10 5\r\nhello\r\n",
    b"LMSG c1 $G foo 3\r\nabc\r\n",
]


def _run_cases(tmp_path, kind):
    a = start_member(kind, tmp_path, "A")
    try:
        out = []
        for data in MALFORMED + [b"RMSG $G foo 5\r\nhelloXX", b"FOO\r\n"]:
            # the last case's route F is gone from the server's routes, not only logged as
            # closed: else (nats-server under load) this one is a "Duplicate Route"
            assert poll(lambda: "F" not in a.remote_names(), 5, 0.02), "route F never left"
            start = len(a.proc.lines)
            errs = _poke(a.route_port, data)
            a.proc.wait_log(r"rid:\d+ - Router connection closed", 5)
            out.append((data, errs, _closed_since(a, start)))
        start = len(a.proc.lines)
        errs = _poke(a.route_port, b'CONNECT {"lang":"go","verbose":false}\r\n', as_route=False)
        out.append(("client", errs, _closed_since(a, start)))
        # clients of the server did not notice any of it
        assert _serves(a, "still.ok", b"1") == b"1"
        return out
    finally:
        a.proc.kill()


@need_ref
def test_malformed_route_protocol_matches_nats_server(tmp_path):
    ref = _run_cases(tmp_path / "ref", "nats-server")
    mine = _run_cases(tmp_path / "natsd", "natsd")
    for (data, ref_errs, ref_log), (_, errs, log) in zip(ref, mine):
        assert errs == ref_errs, data
        # nats-server's byte parser words its own failures ("Router parser ERROR, state=..");
        # the rest is the same text
        ref_log = [x for x in ref_log if "parser ERROR" not in x[1]]
        log = [x for x in log if x[1] != "Unknown Protocol Operation"]
        assert sorted(log) == sorted(ref_log), data     # same lines (nats-server logs from
                                                        # two goroutines: order may differ)


@need_ref
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("peer", KINDS)
def test_refused_routes(tmp_path, kind, peer):
    """Wrong credentials, another cluster, the same server name: refused with nats-server's
    lines on both sides, retried, and the server keeps serving its clients."""
    a = start_member(kind, tmp_path, "A", cluster_extra="authorization { user: ru, password: rp }")
    others = []
    try:
        bad_pass = a.route_url.replace("nats://", "nats://ru:bad@")
        good = a.route_url.replace("nats://", "nats://ru:rp@")
        others.append(start_member(peer, tmp_path, "B", routes=[bad_pass]))
        others.append(start_member(peer, tmp_path, "C", cluster="C2", routes=[good]))
        others.append(start_member(peer, tmp_path, "A", routes=[good]))
        a.proc.wait_log(r"\[ERR\] \S+ - rid:\d+ - authentication error - User \"ru\"")
        a.proc.wait_log(r"rid:\d+ - Router connection closed: Authentication Failure")
        a.proc.wait_log(r"\[ERR\] \S+ - rid:\d+ - Rejecting connection, cluster name \"C2\" does not match \"C1\"")
        a.proc.wait_log(r"rid:\d+ - Router connection closed: Cluster Name Conflict")
        a.proc.wait_log(r"\[ERR\] \S+ - rid:\d+ - Remote server has a duplicate name: \"A\"")
        a.proc.wait_log(r"rid:\d+ - Router connection closed: Duplicate Server Name")
        others[0].proc.wait_log(r"\[ERR\] \S+ - rid:\d+ - Route Error 'Authorization Violation'")
        others[1].proc.wait_log(r"rid:\d+ - Router connection closed: Cluster Name Conflict")
        # retried (with its delay), and never admitted
        deadline = time.monotonic() + 10
        while sum("authentication error" in ln for ln in a.proc.lines) < 3:
            assert time.monotonic() < deadline, a.proc.log
            time.sleep(0.05)
        assert a.get("/routez")["num_routes"] == 0
        assert _serves(a, "fine", b"x") == b"x"
    finally:
        a.proc.kill()
        for m in others:
            m.proc.kill()
