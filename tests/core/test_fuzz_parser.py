"""Fuzz the client protocol parser over real sockets (one natsd for the whole module).

Properties: the server never crashes (a fresh connection still gets PONG), each fuzzed
connection either stays open answering with well-formed protocol or gets `-ERR '...'` and is
closed, and the server's memory stays bounded.
"""
import re

import psutil
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from tests.support.rawclient import RawClient
from tests.support.servers import natsd_cmd, start_server

RSS_LIMIT = 200 * 1024 * 1024


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    conf = tmp_path_factory.mktemp("fuzz") / "fuzz.conf"
    conf.write_text("max_payload: 65536\nmax_control_line: 1024\n")
    srv = start_server(natsd_cmd(), "-c", str(conf))
    yield srv
    srv.kill()


# One frame of server output: what the server may legitimately send a client.
FRAME = re.compile(
    rb"(?:\+OK|PONG|PING|-ERR '[^'\r\n]*'|INFO \{[^\r\n]*\} ?"
    rb"|MSG \S+ \S+ (?:\S+ )?(?P<msize>\d+)"
    rb"|HMSG \S+ \S+ (?:\S+ )?\d+ (?P<hsize>\d+))\r\n")


def check_output(data, closed):
    """Every byte must be a well-formed frame; a -ERR must come last when the server closed
    because of it. Returns the list of -ERR lines."""
    i, errs = 0, []
    while i < len(data):
        m = FRAME.match(data, i)
        assert m, "malformed server output at %d: %r" % (i, data[i:i + 200])
        i = m.end()
        size = m.group("msize") or m.group("hsize")
        if size is not None:
            n = int(size)
            assert data[i + n:i + n + 2] == b"\r\n", "bad payload framing: %r" % data[i - 80:i + n + 2]
            i += n + 2
        if m.group(0).startswith(b"-ERR"):
            errs.append(m.group(0))
    return errs


def frames_complete(data):
    """Does data end exactly at a frame boundary? (a quiet gap can fall inside a frame
    when the machine is busy: then read on instead of judging half a frame)"""
    i = 0
    while i < len(data):
        m = FRAME.match(data, i)
        if not m:
            return False
        i = m.end()
        size = m.group("msize") or m.group("hsize")
        if size is not None:
            i += int(size) + 2
    return i == len(data)


def exchange(port, data):
    c = RawClient(port, timeout=5)
    try:
        c.try_send(data)
        c.try_send(b"\r\nPING\r\n")
        out = c.read_available(quiet=0.05, timeout=3)
        for _ in range(20):
            if c.eof or frames_complete(out):
                break
            out += c.read_available(quiet=0.1, timeout=1)
        return out, c.eof
    finally:
        c.close()


def assert_alive(srv):
    assert srv.proc.poll() is None, "natsd died:\n" + srv.log[-3000:]
    with RawClient(srv.port).connect() as c:
        c.send(b"SUB alive 1\r\nPUB alive 2\r\nok\r\n")
        assert c.sync() == b"MSG alive 1 2\r\nok\r\n"
    rss = psutil.Process(srv.proc.pid).memory_info().rss
    assert rss < RSS_LIMIT, rss


VALID = [
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n',
    b'CONNECT {"verbose":true,"pedantic":true,"headers":true,"no_responders":true}\r\n',
    b"SUB foo 1\r\n", b"SUB foo.* q 2\r\n", b"SUB > 3\r\n", b"SUB _INBOX.> 4\r\n",
    b"UNSUB 1\r\n", b"UNSUB 2 5\r\n",
    b"PUB foo 5\r\nhello\r\n", b"PUB foo.bar reply 3\r\nabc\r\n", b"PUB nobody _INBOX.x 0\r\n\r\n",
    b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"HPUB foo.x r 22 27\r\nNATS/1.0\r\nA: b\r\nA: c\r\n\r\nhello\r\n",
    b"PING\r\n", b"PONG\r\n",
]

valid_stream = st.lists(st.sampled_from(VALID), min_size=1, max_size=12).map(b"".join)


@st.composite
def mutated_stream(draw):
    data = bytearray(draw(valid_stream))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup", "digits"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "dup":
            data[pos:pos] = data[pos:pos + draw(st.integers(1, 32))]
        elif op == "digits":
            data[pos:pos] = str(draw(st.integers(0, 10 ** 12))).encode()
    return bytes(data)


FUZZ_SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])


# Errors after which nats-server closes the connection; the others leave it open.
FATAL = (b"Unknown Protocol Operation", b"Maximum Payload Violation", b"maximum control line exceeded",
         b"Authorization Violation", b"no responders requires headers support")


def check_exchange(port, data):
    out, closed = exchange(port, data)
    event("closed" if closed else "open")
    errs = check_output(out, closed)
    fatal = [e for e in errs if any(f in e for f in FATAL)]
    if fatal:
        assert closed, "still open after %r" % fatal[0]
        assert len(fatal) == 1 and out.endswith(fatal[0]), out[-300:]
    # (an open connection may legitimately be waiting for the rest of a payload, so it need
    # not have answered the trailing PING)


@FUZZ_SETTINGS
@given(data=st.one_of(st.binary(max_size=512),
                      st.binary(max_size=512).map(lambda b: VALID[0] + b)))
def test_random_bytes(fuzz_server, data):
    check_exchange(fuzz_server.port, data)


@FUZZ_SETTINGS
@given(data=mutated_stream())
def test_mutated_valid_streams(fuzz_server, data):
    check_exchange(fuzz_server.port, data)


def test_server_survived_fuzzing(fuzz_server):
    """Runs after the fuzz tests of this module (file order): the server is alive and small."""
    assert_alive(fuzz_server)
