"""Shared fixtures for bench/: a test-only driver that feeds raw protocol bytes through the real
C parser (natsd._core.parser.parse) without a TCP listener or a Server.

How it works: a socketpair; one end is wrapped in natsd._core.conn.Connection with a minimal
Python handler (NullHandler) and registered with a natsd._core.loop.Loop; the test writes bytes
into the other end and runs loop iterations (Loop.run() with a call_soon step that stops the
loop once every PUB was counted) so each recv() goes through Loop.read_conn -> parse -> route.
Only public pieces of natsd._core are used; nothing in natsd/ is modified.
"""
import socket

import pytest

from natsd._core.conn import Connection
from natsd._core.loop import Loop
from natsd._core.sublist import Sublist, Subscription

SOCK_BUF = 4 * 1024 * 1024
CHUNK = 256 * 1024


class NullHandler:
    """The control-side callbacks the C core may call on a connection's handler.

    Benchmarks only send PUB/PING, so everything else is counted or raises."""

    def __init__(self):
        self.errors = []
        self.closed = False

    # control operations (not expected in the benchmark buffers)
    def connect(self, c, arg): c.connected = True
    def info(self, c, arg): pass
    def sub(self, c, subject, queue, sid): raise AssertionError("SUB in bench buffer")
    def unsub(self, c, sid, max_msgs): raise AssertionError("UNSUB in bench buffer")
    def auth_pending(self, c): return False
    def client_error(self, c, text): self.errors.append(("client_error", text))

    # errors
    def protocol_error(self, c, text, send_err): self.errors.append(("protocol_error", text)); c.schedule_close(text)
    def control_line_exceeded(self, c): self.errors.append(("control_line_exceeded",)); c.schedule_close("cl")
    def max_payload_exceeded(self, c, size): self.errors.append(("max_payload", size)); c.schedule_close("mp")
    def send_err(self, c, text): self.errors.append(("send_err", text))
    def reserved_reply(self, c, reply): self.errors.append(("reserved_reply", reply))

    # publish side
    def check_publish(self, c, subject): return True
    def publish_mapped(self, c, subject, reply, hdr, payload): raise AssertionError("mappings")
    def no_responders(self, c, subject, reply): pass

    # delivery side
    def delivery_denied(self, c, sub, subject): return False
    def forward(self, c, sub, subject, reply, hdr, payload): raise AssertionError("forward")
    def allow_reply(self, c, reply): pass
    def auto_unsubscribed(self, c, sub): pass
    def trace_in(self, c, line): pass
    def trace_payload(self, c, payload): pass
    def trace_out(self, c, line): pass

    # socket side
    def want_write(self, c, on): pass
    def slow_consumer(self, c): self.errors.append(("slow_consumer",)); c.schedule_close("Slow Consumer")
    def close(self, c):
        self.closed = True
        c.mark_closed()


def _pair():
    a, b = socket.socketpair()
    for s in (a, b):
        s.setblocking(False)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, SOCK_BUF)
            except OSError:
                pass
    return a, b


class ParserDriver:
    """One publisher connection on a socketpair, parsed by the real loop + C parser.

    `feed(data, n_msgs)` writes `data` (complete commands, containing n_msgs PUB/HPUB) into the
    peer socket and runs the loop until the connection has counted n_msgs more inbound messages.
    `add_subscriber(subject)` adds a client subscription whose Connection sits on its own
    socketpair; its output is drained (and counted) while the loop runs."""

    def __init__(self):
        self.loop = Loop()
        self.sublist = Sublist()
        self._srv, self._peer = _pair()
        self.handler = NullHandler()
        self.conn = self._make_conn(self._srv)
        self.loop.add_handler(self._srv.fileno(), self.conn)
        self.sinks = []          # (Connection, peer socket, [bytes received])
        self._sid = 0

    def _make_conn(self, sock):
        c = Connection(sock.fileno())
        c.handler = self.handler
        c.sublist = self.sublist
        c.connected = True
        c.verbose = False
        c.pedantic = False
        c.headers = True
        c.echo = True
        c.state = sock            # keep the socket object alive with the connection
        return c

    def add_subscriber(self, subject, queue=None):
        srv, peer = _pair()
        c = self._make_conn(srv)
        self._sid += 1
        sub = Subscription(c, subject, str(self._sid).encode(), queue)
        c.subs[sub.sid] = sub
        self.sublist.insert(sub)
        self.sinks.append((c, peer, [0]))
        return sub

    def _drain_sinks(self):
        for _c, peer, got in self.sinks:
            while True:
                try:
                    d = peer.recv(CHUNK)
                except BlockingIOError:
                    break
                if not d:
                    break
                got[0] += len(d)

    def received_bytes(self):
        return [got[0] for _c, _p, got in self.sinks]

    def feed(self, data, n_msgs):
        conn, peer, loop = self.conn, self._peer, self.loop
        target = conn.in_msgs + n_msgs
        view = memoryview(data)
        total = len(data)
        off = 0
        sinks = self.sinks
        drain = self._drain_sinks

        def step():
            nonlocal off
            while off < total:
                try:
                    off += peer.send(view[off:off + CHUNK])
                except BlockingIOError:
                    break
            if sinks:
                drain()
            if conn.in_msgs >= target or conn.closing or conn.closed:
                loop.stop()
            else:
                loop.call_soon(step)

        loop.call_soon(step)
        loop.run()
        if sinks:
            drain()
        if self.handler.errors:
            raise AssertionError("parser reported errors: %r" % self.handler.errors[:5])
        assert conn.in_msgs == target, (conn.in_msgs, target)
        return n_msgs

    def close(self):
        self.loop.remove_handler(self._srv.fileno())
        self.conn.mark_closed()
        for c, peer, _ in self.sinks:
            c.mark_closed()
            c.state.close()
            peer.close()
        self._srv.close()
        self._peer.close()
        self.loop.close()


def pub_buffer(n, subject=b"bench.sub", size=16, reply=None, hdr=None):
    """n PUB (or HPUB when hdr is given) commands as one bytes object."""
    payload = b"x" * size
    if hdr is None:
        if reply:
            line = b"PUB %s %s %d\r\n" % (subject, reply, size)
        else:
            line = b"PUB %s %d\r\n" % (subject, size)
        one = line + payload + b"\r\n"
    else:
        total = len(hdr) + size
        if reply:
            line = b"HPUB %s %s %d %d\r\n" % (subject, reply, len(hdr), total)
        else:
            line = b"HPUB %s %d %d\r\n" % (subject, len(hdr), total)
        one = line + hdr + payload + b"\r\n"
    return one * n


@pytest.fixture
def parser_driver():
    d = ParserDriver()
    yield d
    d.close()
