"""The write deadline and its policy (`write_timeout: default|close|retry`), on natsd and
nats-server alike: past `write_deadline` a client is a slow consumer; by default (and with
`close`) it is closed, with `retry` it stays as long as it reads, and is closed when it read
nothing at all in the deadline."""
import re
import socket
import threading
import time

import pytest

from tests.support.rawclient import RawClient
from tests.support.servers import http_json
from tests.support.waiting import poll

SIZE = 1024


def _conf(tmp_path, policy):
    p = tmp_path / "wt.conf"
    p.write_text('write_deadline: "500ms"\n' + (f"write_timeout: {policy}\n" if policy else ""))
    return str(p)


class Subscriber:
    """A subscriber to `flood` with a small receive buffer that reads `rate` bytes every
    0.2 s (0: never) until told to read at full speed; counts the messages it got."""

    def __init__(self, port, rate):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')
        self.data = b""
        while b"PONG\r\n" not in self.data:
            self.data += self.sock.recv(4096)
        self.rate = rate
        self.fast = threading.Event()
        self.closed = threading.Event()
        if rate:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                got = 0
                while got < self.rate or self.fast.is_set():
                    chunk = self.sock.recv(65536)
                    if not chunk:
                        self.closed.set()
                        return
                    self.data += chunk
                    got += len(chunk)
                time.sleep(0.2)
        except OSError:
            self.closed.set()

    def messages(self):
        return self.data.count(b"MSG flood 1 ")


def _flood(port, msgs):
    """`msgs` messages of SIZE bytes to `flood`: more than the kernel's socket buffers hold."""
    with RawClient(port).connect() as p:
        for _ in range(msgs // 100):
            p.send(b"".join(b"PUB flood %d\r\n%s\r\n" % (SIZE, b"x" * SIZE) for _ in range(100)))
        p.sync()


def _closed_reason(srv, sub, wait=True):
    """Why the server closed the subscriber's connection (/connz?state=closed), or None."""
    port = sub.sock.getsockname()[1]

    def reason():
        closed = http_json(srv.http_port, "/connz?state=closed")["connections"]
        return next((c["reason"] for c in closed if c["port"] == port), None)
    return poll(reason, timeout=10) if wait else reason()


SC_LINE = r"cid:\d+ - Slow Consumer (Detected|State): WriteDeadline of 500ms exceeded with \d+ chunks of \d+ total bytes\."


@pytest.mark.parametrize("policy", [None, "retry"])
def test_a_client_that_reads_nothing_is_closed_at_the_deadline(any_server, tmp_path, policy):
    srv = any_server("-c", _conf(tmp_path, policy), "-m", "-1")
    sub = Subscriber(srv.port, 0)
    _flood(srv.port, 8000)
    srv.wait_log(SC_LINE)
    assert _closed_reason(srv, sub) == "Slow Consumer (Write Deadline)"
    assert http_json(srv.http_port, "/varz")["slow_consumer_stats"]["clients"] >= 1
    sub.sock.close()


@pytest.mark.parametrize("policy", ["close", "retry"])
def test_a_slow_reader_stays_only_with_retry(any_server, tmp_path, policy):
    """A reader that takes a little in every deadline: closed with `close`; with `retry`
    logged as slow again and again (Detected, then State) and kept, and once it reads at
    full speed it has every message."""
    srv = any_server("-c", _conf(tmp_path, policy), "-m", "-1")
    sub = Subscriber(srv.port, 32768)               # 160 KB/s: 5 MB would take 30 s
    _flood(srv.port, 5000)
    srv.wait_log(SC_LINE, timeout=15)
    if policy == "retry":
        srv.wait_log(SC_LINE.replace("(Detected|State)", "State"), timeout=15)
        assert not sub.closed.is_set()
        sub.fast.set()
        assert poll(lambda: sub.messages() == 5000, timeout=30), sub.messages()
        assert _closed_reason(srv, sub, wait=False) is None
    else:
        assert _closed_reason(srv, sub) == "Slow Consumer (Write Deadline)"
    sub.sock.close()
