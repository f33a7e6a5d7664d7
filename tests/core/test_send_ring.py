"""Flushing many connections with one io_uring submission (natsd/_core/sendring.h, used by
conn.flush_dirty from RING_MIN connections on), against one send() each: every peer gets
exactly its bytes in order; a full socket keeps the rest queued and asks for write readiness
until it drains; a peer that is gone closes its connection alone. Real socketpairs, each case
with the ring on and off. Then end to end: a fan-out through natsd delivers to every
subscriber the bytes nats-server delivers, ring on and off; NATSD_SEND_RING=0 leaves natsd
without a ring, and a bad value stops it with a clear refusal."""
import os
import random
import socket
import subprocess
import sys

import pytest

from natsd._core import conn
from natsd._core.conn import Connection
from tests.support.rawclient import RawClient

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RING_WHY = conn.use_send_ring(True)     # None when this kernel gives natsd a ring


class Handler:
    def __init__(self):
        self.want = {}
        self.slow = []

    def want_write(self, c, on):
        self.want[c.fd] = on

    def slow_consumer(self, c):
        self.slow.append(c)


@pytest.fixture(params=["ring", "one-by-one"])
def mode(request):
    if request.param == "ring":
        if RING_WHY is not None:
            pytest.skip("no io_uring here: %s" % RING_WHY)
        assert conn.use_send_ring(True) is None
        assert conn.send_ring_active()
    else:
        conn.use_send_ring(False)
        assert not conn.send_ring_active()
    yield request.param
    conn.use_send_ring(True)


@pytest.fixture
def pairs():
    made = []

    def make(n, sndbuf=None):
        h = Handler()
        out = []
        for _ in range(n):
            ours, peer = socket.socketpair()
            ours.setblocking(False)
            if sndbuf:
                ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
                peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, sndbuf)
            c = Connection(ours.fileno())
            c.handler = h
            c.max_pending = 1 << 30
            made.append((ours, peer))
            out.append((c, peer))
        return h, out
    yield make
    for ours, peer in made:
        ours.close()
        peer.close()


def read_all(peer, want):
    peer.settimeout(5)
    got = b""
    while len(got) < want:
        chunk = peer.recv(1 << 20)
        assert chunk, "peer closed after %d of %d bytes" % (len(got), want)
        got += chunk
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(1)                    # nothing more than what was queued
    return got


def test_every_peer_gets_exactly_its_bytes(mode, pairs):
    rnd = random.Random(7)
    h, conns = pairs(12)
    sent = []
    for i, (c, _) in enumerate(conns):
        data = b"".join(b"%02d:%s\r\n" % (i, rnd.randbytes(rnd.randint(1, 4000)).hex().encode())
                        for _ in range(rnd.randint(1, 5)))
        for k in range(0, len(data), 1000):
            c.send_bytes(data[k:k + 1000])
        sent.append(data)
    conn.flush_all()
    for (c, peer), data in zip(conns, sent):
        assert c.pending_bytes() == 0
        assert read_all(peer, len(data)) == data
        assert not c.dirty and not c.closing
    assert not any(h.want.values()) and h.slow == []


def test_a_full_socket_keeps_the_rest_until_it_drains(mode, pairs):
    rnd = random.Random(11)
    h, conns = pairs(6, sndbuf=4096)
    sent = [rnd.randbytes(300_000) for _ in conns]
    full = conns[::2]                   # these take nothing now (EAGAIN), the others a part
    prefill = {}
    for c, _ in full:
        ours = socket.socket(fileno=os.dup(c.fd))
        ours.setblocking(False)
        prefill[c.fd] = 0
        while True:
            try:
                prefill[c.fd] += ours.send(b"\0" * 4096)
            except BlockingIOError:
                break
        ours.close()
    for (c, _), data in zip(conns, sent):
        c.send_bytes(data)
    conn.flush_all()
    got = [b""] * len(conns)
    for i, (c, peer) in enumerate(conns):
        if (c, peer) in full:
            assert c.pending_bytes() == len(sent[i])
        else:
            assert 0 < c.pending_bytes() < len(sent[i])     # part went, the rest waits
        assert h.want[c.fd] is True                         # for write readiness
    for c, peer in full:
        assert read_all(peer, prefill[c.fd]) == b"\0" * prefill[c.fd]
    peer_chunks = 0
    while any(c.pending_bytes() for c, _ in conns):
        for i, (c, peer) in enumerate(conns):
            peer.setblocking(False)
            try:
                got[i] += peer.recv(1 << 20)
                peer_chunks += 1
            except BlockingIOError:
                pass
        for c, _ in conns:
            c.flush_now()
    for i, (c, peer) in enumerate(conns):
        got[i] += read_all(peer, len(sent[i]) - len(got[i]))
        assert got[i] == sent[i]
        assert h.want[c.fd] is False
    assert peer_chunks > len(conns)


def test_a_peer_gone_closes_that_connection_only(mode, pairs):
    h, conns = pairs(6)
    gone_c, gone_peer = conns[2]
    gone_peer.close()
    for i, (c, _) in enumerate(conns):
        c.send_bytes(b"PING %d\r\n" % i)
    conn.flush_all()
    assert gone_c.closing and gone_c.close_reason == "Write Error"
    assert gone_c.pending_bytes() == 0
    for i, (c, peer) in enumerate(conns):
        if c is gone_c:
            continue
        assert not c.closing
        assert read_all(peer, len(b"PING %d\r\n" % i)) == b"PING %d\r\n" % i


# ---- end to end ----

def server_env(ring=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NATSD_SEND_RING", None)
    if ring is not None:
        env["NATSD_SEND_RING"] = ring
    return env


def has_ring_fd(pid):
    fd_dir = "/proc/%d/fd" % pid
    for name in os.listdir(fd_dir):
        try:
            if "io_uring" in os.readlink(os.path.join(fd_dir, name)):
                return True
        except OSError:
            pass
    return False


def fan_out(port, subscribers=10, messages=300):
    """Every subscriber's bytes for `messages` publishes to a subject all of them hold."""
    subs = [RawClient(port).connect() for _ in range(subscribers)]
    for s in subs:
        s.send(b"SUB fan 1\r\nPING\r\n")
        s.read_until(b"PONG\r\n")
    pub = RawClient(port).connect()
    rnd = random.Random(3)
    pub.send(b"".join(b"PUB fan %d\r\n%s\r\n" % (len(p), p)
                      for p in (rnd.randbytes(rnd.randint(0, 200)).hex().encode()
                                for _ in range(messages))) + b"PING\r\n")
    pub.read_until(b"PONG\r\n")
    got = []
    for s in subs:
        s.send(b"PING\r\n")
        got.append(s.read_until(b"PONG\r\n", timeout=10))
        s.close()
    pub.close()
    return got


@pytest.mark.parametrize("ring", [None, "0"])
def test_a_fan_out_delivers_what_nats_server_delivers(natsd, reference, ring):
    srv = natsd(env=server_env(ring))
    if ring == "0" or RING_WHY is not None:
        assert not has_ring_fd(srv.proc.pid)
    else:
        assert has_ring_fd(srv.proc.pid)
    ours = fan_out(srv.port)
    theirs = fan_out(reference().port)
    assert ours == theirs
    assert all(g.count(b"MSG fan 1 ") == 300 for g in ours)


@pytest.mark.parametrize("bad", ["yes", "2", ""])
def test_a_bad_environment_value_stops_natsd(bad):
    r = subprocess.run([sys.executable, "-m", "natsd", "-p", "-1"], env=server_env(bad),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == "natsd: NATSD_SEND_RING=%r: want 1 (on) or 0 (off)\n" % bad
