"""The raw protocol client, a NATS client on a plain socket for the tests that need the exact
bytes: connect, read INFO, send bytes, read with deadlines (the protocol tests), and requests
whose replies are matched by their reply subject and returned as bytes, None when none came
(the JetStream API tests: subjects that are not UTF-8, NUL, any header block); parse_msgs
splits MSG frames."""
import json
import re
import socket
import time

REPLY_PREFIX = b"_R."
FRAME_RE = re.compile(rb"([^\r\n]*)\r\n")


class RawClient:
    def __init__(self, port, host="127.0.0.1", timeout=5.0, read_info=True):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.info = None
        self.info_line = None
        self.replies = None             # reply subject -> reply bytes, once requests are made
        self.n = 0
        if read_info:
            self.info_line = self.read_line()
            assert self.info_line.startswith(b"INFO "), self.info_line
            self.info = json.loads(self.info_line[5:])

    # ---- sending ----

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def try_send(self, data):
        """Send, ignoring a connection the server already closed."""
        try:
            self.send(data)
            return True
        except OSError:
            return False

    def connect(self, opts=None, ping=True, **kw):
        o = {"verbose": False, "pedantic": False, "headers": True}
        o.update(opts or {})
        o.update(kw)
        self.send(b"CONNECT " + json.dumps(o).encode() + b"\r\n")
        if ping:
            self.send(b"PING\r\n")
            self.read_until(b"PONG\r\n")
        return self

    # ---- receiving ----

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_line(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while b"\r\n" not in self.buf:
            if self.eof or not self._fill(deadline):
                raise AssertionError("no line within %ss; got %r" % (timeout, self.buf))
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read_until(self, pattern, timeout=5.0):
        """Read until `pattern` (bytes or compiled regex) appears; returns everything up to its end
        and keeps the rest buffered."""
        deadline = time.monotonic() + timeout
        while True:
            if isinstance(pattern, bytes):
                idx = self.buf.find(pattern)
                end = idx + len(pattern) if idx >= 0 else -1
            else:
                m = pattern.search(self.buf)
                end = m.end() if m else -1
            if end >= 0:
                out, self.buf = self.buf[:end], self.buf[end:]
                return out
            if self.eof or not self._fill(deadline):
                raise AssertionError("pattern %r not seen within %ss; got %r"
                                     % (pattern, timeout, self.buf))

    def read_until_eof(self, timeout=5.0):
        """Everything until the server closes; raises if it stays open past the deadline."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if not self._fill(deadline) and not self.eof:
                raise AssertionError("connection still open after %ss; got %r" % (timeout, self.buf))
        out, self.buf = self.buf, b""
        return out

    def read_available(self, quiet=0.3, timeout=5.0):
        """Read until the server has been quiet for `quiet` seconds (or EOF); returns the bytes."""
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            if not self._fill(min(deadline, time.monotonic() + quiet)):
                break
        out, self.buf = self.buf, b""
        return out

    def sync(self, timeout=5.0):
        """PING and read up to the PONG; returns what came before it."""
        self.send(b"PING\r\n")
        out = self.read_until(b"PONG\r\n", timeout)
        return out[: -len(b"PONG\r\n")]

    # ---- requests: replies matched by their reply subject ----

    def send_request(self, subject, payload, hdr=None):
        """PUB (HPUB with a header block) with a reply subject of its own, not waited for ->
        that reply subject, for reply(). The first request subscribes to the replies."""
        if self.replies is None:
            self.replies = {}
            self.try_send(b"SUB " + REPLY_PREFIX + b"> 1\r\n")
        self.n += 1
        rep = REPLY_PREFIX + b"%d" % self.n
        if hdr:
            frame = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, rep, len(hdr), len(hdr) + len(payload),
                                                       hdr, payload)
        else:
            frame = b"PUB %s %s %d\r\n%s\r\n" % (subject, rep, len(payload), payload)
        if not self.try_send(frame):
            self.eof = True
        return rep

    def request(self, subject, payload, hdr=None, timeout=2.0):
        """A request and its reply: the reply's bytes (header block and payload), None when none
        came within `timeout` or the server closed the connection."""
        return self.reply(self.send_request(subject, payload, hdr), timeout)

    def reply(self, rep, timeout=0.0):
        """The reply to send_request's `rep`, read for up to `timeout`; None if none came."""
        self.read_replies(timeout, until=rep)
        return self.replies.get(rep)

    def read_replies(self, timeout, until=None):
        """Take the frames that arrive for up to `timeout` (until the reply `until` is there),
        keeping the replies and answering the server's PINGs."""
        deadline = time.monotonic() + timeout
        while until is None or until not in self.replies:
            if not self._next_frame():
                if self.eof or not self._fill(deadline):
                    return

    def _next_frame(self):
        """Take one whole frame from the buffer; False when it holds none."""
        m = FRAME_RE.match(self.buf)
        if not m:
            return False
        parts = m.group(1).split(b" ")
        if parts[0] in (b"MSG", b"HMSG"):
            end = m.end() + int(parts[-1]) + 2
            if len(self.buf) < end:
                return False
            if parts[1].startswith(REPLY_PREFIX):
                self.replies.setdefault(parts[1], self.buf[m.end():end - 2])
            self.buf = self.buf[end:]
            return True
        self.buf = self.buf[m.end():]
        if parts[0] == b"PING":
            self.try_send(b"PONG\r\n")
        return True

    def is_closed(self, timeout=5.0):
        try:
            self.read_until_eof(timeout)
            return True
        except AssertionError:
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


MSG_RE = re.compile(rb"(?<![A-Z])MSG (\S+) (\S+) (?:(\S+) )?(\d+)\r\n")


def parse_msgs(data):
    """Parse MSG frames from a byte string -> list of (subject, sid, reply, payload)."""
    out = []
    i = 0
    while True:
        m = MSG_RE.search(data, i)
        if not m:
            return out
        size = int(m.group(4))
        start = m.end()
        out.append((m.group(1), m.group(2), m.group(3), data[start:start + size]))
        i = start + size + 2
