"""MQTT 3.1.1 packets: the fixed header, the reader of one packet's fields, and the packets the
server writes. Errors carry nats-server's texts (they appear in its log lines)."""
from __future__ import annotations

import struct

CONNECT = 0x10
CONNACK = 0x20
PUBLISH = 0x30
PUBACK = 0x40
PUBREC = 0x50
PUBREL = 0x60
PUBCOMP = 0x70
SUBSCRIBE = 0x80
SUBACK = 0x90
UNSUBSCRIBE = 0xA0
UNSUBACK = 0xB0
PINGREQ = 0xC0
PINGRESP = 0xD0
DISCONNECT = 0xE0

# CONNECT flags
FLAG_RESERVED = 0x01
FLAG_CLEAN = 0x02
FLAG_WILL = 0x04
FLAG_WILL_QOS = 0x18
FLAG_WILL_RETAIN = 0x20
FLAG_PASSWORD = 0x40
FLAG_USERNAME = 0x80

# PUBLISH flags (the fixed header's low nibble)
PUB_RETAIN = 0x01
PUB_QOS = 0x06
PUB_DUP = 0x08

# CONNACK return codes
RC_ACCEPTED = 0x00
RC_BAD_PROTOCOL = 0x01
RC_ID_REJECTED = 0x02
RC_UNAVAILABLE = 0x03
RC_BAD_CREDENTIALS = 0x04
RC_NOT_AUTHORIZED = 0x05
RC_QOS2_WILL_REJECTED = 0x10

SUBACK_FAILURE = 0x80
PROTOCOL_LEVEL = 4


class PacketError(ValueError):
    """A malformed packet: the connection is closed with this text in the log."""


_FIXED_FLAGS = {CONNECT: 0, PUBACK: 0, PUBREC: 0, PUBCOMP: 0, PINGREQ: 0, DISCONNECT: 0,
                PUBREL: 2, SUBSCRIBE: 2, UNSUBSCRIBE: 2}
_FIXED_LENGTH = {PUBACK: 2, PUBREC: 2, PUBREL: 2, PUBCOMP: 2, PINGREQ: 0, DISCONNECT: 0}


def check_fixed_header(ptype: int, flags: int, length: int) -> None:
    expected = _FIXED_FLAGS.get(ptype)
    if expected is not None and flags != expected:
        raise PacketError("invalid fixed header flags %x for packet type %x" % (flags, ptype))
    expected = _FIXED_LENGTH.get(ptype)
    if expected is not None and length != expected:
        raise PacketError("invalid remaining length %d for packet type %x" % (length, ptype))


def split_packet(buf: bytes | bytearray, pos: int):
    """The packet starting at `pos`: (first byte, body start, body end), or None when it has
    not all arrived. Raises PacketError for a malformed remaining length."""
    n = len(buf)
    if pos >= n:
        return None
    i = pos + 1
    mult, value = 1, 0
    while True:
        if i >= n:
            return None
        b = buf[i]
        i += 1
        value += (b & 0x7F) * mult
        if not b & 0x80:
            break
        mult *= 0x80
        if mult > 0x200000:
            raise PacketError("malformed variable int")
    if i + value > n:
        return None
    return buf[pos], i, i + value


def packet_total(buf, pos: int) -> int | None:
    """The whole size of the packet at pos as far as its header tells (for the size limit)."""
    i, mult, value = pos + 1, 1, 0
    while i < len(buf):
        b = buf[i]
        i += 1
        value += (b & 0x7F) * mult
        if not b & 0x80:
            return i - pos + value
        mult *= 0x80
        if mult > 0x200000:
            return None
    return None


class Reader:
    """The fields of one packet's body."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, start: int, end: int):
        self.buf = buf
        self.pos = start
        self.end = end

    def more(self) -> bool:
        return self.pos < self.end

    def byte(self, field: str) -> int:
        if self.pos >= self.end:
            raise PacketError("error reading %s: EOF" % field)
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def uint16(self, field: str) -> int:
        if self.end - self.pos < 2:
            raise PacketError("error reading %s: unexpected EOF" % field)
        v = (self.buf[self.pos] << 8) | self.buf[self.pos + 1]
        self.pos += 2
        return v

    def data(self, field: str) -> bytes:
        n = self.uint16(field)
        if self.pos + n > self.end:
            raise PacketError("error reading %s: unexpected EOF" % field)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def rest(self) -> bytes:
        b = bytes(self.buf[self.pos:self.end])
        self.pos = self.end
        return b


def valid_utf8(value: bytes, field: str) -> str:
    """A string field: valid UTF-8 with no NUL (nats-server's mqttValidateString)."""
    try:
        s = value.decode("utf-8")
    except UnicodeDecodeError:
        raise PacketError("invalid utf8 for %s %s" % (field, _q(value))) from None
    if "\x00" in s:
        raise PacketError("invalid null character in %s %s" % (field, _q(value)))
    return s


def _q(value: bytes) -> str:
    from natsd.gofmt import go_quote
    return go_quote(value.decode("utf-8", "surrogateescape"))


# ---- what the server writes ----

def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            b |= 0x80
        out.append(b)
        if not n:
            return bytes(out)


def connack(rc: int, session_present: bool) -> bytes:
    return bytes((CONNACK, 2, 1 if session_present and rc == 0 else 0, rc))


def pi_packet(ptype: int, pi: int) -> bytes:
    """PUBACK, PUBREC, PUBREL (flags 2), PUBCOMP, UNSUBACK: a packet identifier only."""
    first = ptype | (0x02 if ptype == PUBREL else 0)
    return struct.pack(">BBH", first, 2, pi)


def suback(pi: int, granted: list[int]) -> bytes:
    return bytes((SUBACK,)) + varint(2 + len(granted)) + struct.pack(">H", pi) + bytes(granted)


PINGRESP_PACKET = bytes((PINGRESP, 0))


def publish_header(pi: int, qos: int, dup: bool, retain: bool, topic: bytes, size: int) -> tuple[int, bytes]:
    """(flags, the PUBLISH packet up to its payload)."""
    flags = (PUB_DUP if dup else 0) | (PUB_RETAIN if retain else 0)
    length = 2 + len(topic) + size
    if qos:
        length += 2
        flags |= qos << 1
    head = bytes((PUBLISH | flags,)) + varint(length) + struct.pack(">H", len(topic)) + topic
    if qos:
        head += struct.pack(">H", pi)
    return flags, head
