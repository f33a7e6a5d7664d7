"""A byte-level MQTT 3.1.1 client for tests: packets built by hand and the packets a server
sends read back whole, so that natsd's and nats-server's answers can be compared byte for byte."""
from __future__ import annotations

import socket
import struct
import time


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(b) -> bytes:
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">H", len(b)) + b


def packet(first: int, body: bytes) -> bytes:
    return bytes((first,)) + _varint(len(body)) + body


def connect(client_id="", clean=True, keepalive=0, user=None, password=None, will=None,
            level=4, proto=b"MQTT", flags_extra=0) -> bytes:
    """will: (topic, message, qos, retain)."""
    flags = (0x02 if clean else 0) | flags_extra
    payload = _str(client_id)
    if will is not None:
        topic, message, qos, retain = will
        flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
        payload += _str(topic) + _str(message)
    if user is not None:
        flags |= 0x80
        payload += _str(user)
    if password is not None:
        flags |= 0x40
        payload += _str(password)
    body = _str(proto) + bytes((level, flags)) + struct.pack(">H", keepalive) + payload
    return packet(0x10, body)


def publish(topic, payload=b"", qos=0, pi=0, retain=False, dup=False) -> bytes:
    first = 0x30 | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    body = _str(topic) + (struct.pack(">H", pi) if qos else b"") + payload
    return packet(first, body)


def subscribe(pi, filters) -> bytes:
    body = struct.pack(">H", pi) + b"".join(_str(f) + bytes((q,)) for f, q in filters)
    return packet(0x82, body)


def unsubscribe(pi, filters) -> bytes:
    return packet(0xA2, struct.pack(">H", pi) + b"".join(_str(f) for f in filters))


def puback(pi) -> bytes:
    return packet(0x40, struct.pack(">H", pi))


PINGREQ = bytes((0xC0, 0))
DISCONNECT = bytes((0xE0, 0))


class MqttRaw:
    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes):
        self.sock.sendall(data)
        return self

    def _fill(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def read_packet(self, timeout=5.0) -> bytes:
        """The next whole packet the server sent (fixed header included)."""
        deadline = time.monotonic() + timeout
        while True:
            got = _split(self.buf)
            if got is not None:
                n = got
                pkt, self.buf = self.buf[:n], self.buf[n:]
                return pkt
            self._fill(deadline)

    def read_packets(self, n, timeout=5.0) -> list[bytes]:
        return [self.read_packet(timeout) for _ in range(n)]

    def closed(self, timeout=5.0) -> bool:
        """Whether the server closes the connection (anything it sent first is skipped)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._fill(deadline)
        except ConnectionError:
            return True
        except OSError:
            return time.monotonic() < deadline
        return False

    def quiet(self, seconds=0.3) -> bytes:
        """What arrives within `seconds` (b"" when nothing)."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self._fill(deadline)
        except (socket.timeout, TimeoutError):
            pass
        except ConnectionError:
            pass
        out, self.buf = self.buf, b""
        return out


def _split(buf: bytes):
    if len(buf) < 2:
        return None
    i, mult, value = 1, 1, 0
    while i < len(buf):
        b = buf[i]
        i += 1
        value += (b & 0x7F) * mult
        if not b & 0x80:
            return i + value if i + value <= len(buf) else None
        mult *= 0x80
    return None


def connected(port, client_id, clean=True, **kw) -> tuple[MqttRaw, bytes]:
    """A connection after CONNECT: (client, the CONNACK)."""
    c = MqttRaw(port)
    c.send(connect(client_id, clean, **kw))
    return c, c.read_packet()


def pi_packet(first: int, pi: int) -> bytes:
    """PUBREC (0x50), PUBREL (0x62), PUBCOMP (0x70): a packet identifier only."""
    return packet(first, struct.pack(">H", pi))
