"""Slow consumers slow their publishers down but never stop them (nats-server's fast-producer
stall is a few milliseconds per read): subscribers that stop reading, one after the other, are
cut as slow consumers while a fast subscriber of the same publisher gets every message, in
order. Runs on natsd and nats-server. (The rates are measured by tools/slow_consumer_bench.py,
not asserted here.)"""
import re
import socket
import threading

from tests.support.rawclient import RawClient
from tests.support.waiting import poll
from tests.support.servers import http_json

N = 60000
PAYLOAD = 100
SLOW = 5
MSG_RE = re.compile(rb"MSG flood 1 (\d+)\r\n")


def config(tmp_path):
    p = tmp_path / "sc.conf"
    p.write_text('max_pending: 512KB\nmax_payload: 64KB\nwrite_deadline: "10s"\n')
    return str(p)


def varz(srv):
    return http_json(srv.http_port, "/varz")


class Reader(threading.Thread):
    """Reads MSG frames of `flood`; stops reading (without closing) after `stop_after` of
    them, so the server's queue for it fills up."""

    def __init__(self, port, stop_after=None):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        if stop_after is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB flood 1\r\nPING\r\n')
        self.stop_after = stop_after
        self.seqs = []
        self.ready = threading.Event()
        self.buf = b""

    def run(self):
        self.sock.settimeout(30)
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    break
                self.buf += chunk
                if not self.ready.is_set() and b"PONG\r\n" in self.buf:
                    self.ready.set()
                self._frames()
                if self.stop_after is not None and len(self.seqs) >= self.stop_after:
                    return              # stop reading, socket left open: now we are slow
        except OSError:
            pass

    def _frames(self):
        i = 0
        while True:
            m = MSG_RE.search(self.buf, i)
            if not m:
                break
            end = m.end() + int(m.group(1)) + 2
            if end > len(self.buf):
                break
            self.seqs.append(int(self.buf[m.end():m.end() + 10]))
            i = end
        self.buf = self.buf[i:]


def test_slow_consumers_are_cut_and_the_fast_one_gets_everything(any_server, tmp_path):
    srv = any_server("-m", "-1", "-c", config(tmp_path))
    fast = Reader(srv.port)
    fast.start()
    slow = [Reader(srv.port, stop_after=(k + 1) * N // (SLOW + 2)) for k in range(SLOW)]
    for r in slow:
        r.start()
    for r in [fast] + slow:
        assert r.ready.wait(10)
    pub = RawClient(srv.port, timeout=60).connect()
    body = b"x" * (PAYLOAD - 10)
    frames = b"".join(b"PUB flood %d\r\n%010d%s\r\n" % (PAYLOAD, i, body) for i in range(N))
    pub.send(frames)
    pub.sync(timeout=60)
    assert poll(lambda: len(fast.seqs) >= N, 30), (len(fast.seqs), N)
    assert fast.seqs == list(range(N))
    assert poll(lambda: varz(srv)["slow_consumers"] >= SLOW, 20), varz(srv)
    pub.close()
    for r in [fast] + slow:
        r.sock.close()


def test_no_fast_producer_stall(any_server, tmp_path):
    """By default a publisher to a subscriber that does not read is paused now and then
    (/varz stalled_clients counts it); with `no_fast_producer_stall` it never is, and the
    subscriber is cut as a slow consumer instead."""
    counts = {}
    for name, extra in (("default", ""), ("off", "no_fast_producer_stall: true\n")):
        p = tmp_path / ("%s.conf" % name)
        p.write_text("max_pending: 1MB\nmax_payload: 64KB\n" + extra)
        srv = any_server("-c", str(p), "-m", "-1")
        sub = Reader(srv.port, stop_after=1)
        sub.start()
        assert sub.ready.wait(5)
        with RawClient(srv.port).connect() as pub:
            chunk = b"".join(b"PUB flood 1000\r\n%s\r\n" % (b"%010d" % i + b"x" * 990) for i in range(100))
            for _ in range(200):                         # 20 MB to a subscriber that stopped reading
                pub.send(chunk)
            pub.sync(timeout=60)
        # (nats-server once, under load, had not counted it within 15 s of 10 MB)
        assert poll(lambda: varz(srv)["slow_consumers"] >= 1, timeout=30), varz(srv)
        counts[name] = varz(srv)["stalled_clients"]
        sub.sock.close()
        srv.kill()
    assert counts["default"] > 0 and counts["off"] == 0, counts
