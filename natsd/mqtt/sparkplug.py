"""Sparkplug B over MQTT, as nats-server treats it: a node's or device's BIRTH message
(`spBv1.0/<group>/NBIRTH|DBIRTH/<node>[/<device>]`) is kept as a retained "certificate" on
`$sparkplug/certificates/<its topic>`, and a DEATH message gets the current time as its
protobuf timestamp (field 1) when it is delivered."""
from __future__ import annotations

import time

from natsd.mqtt.packets import varint      # MQTT's variable byte integer is protobuf's varint
from natsd.gofmt import uvarint

NAMESPACE = b"spBv1.0/"
CERTIFICATES = b"$sparkplug/certificates/"
_BIRTH = (b"NBIRTH", b"DBIRTH")
_DEATH = (b"NDEATH", b"DDEATH")


def birth_death(topic: bytes) -> tuple[bool, bool, bool]:
    """(is a birth, is a death, is on the certificates prefix) of a topic."""
    certificate = topic.startswith(CERTIFICATES)
    if certificate:
        topic = topic[len(CERTIFICATES):]
    if not topic.startswith(NAMESPACE):
        return False, False, False
    parts = topic[len(NAMESPACE):].split(b"/")
    if not 3 <= len(parts) <= 4:
        return False, False, False
    if parts[1] in _BIRTH:
        return True, False, certificate
    if parts[1] in _DEATH:
        return False, True, certificate
    return False, False, False


def certificate_topic(topic: bytes) -> bytes:
    return CERTIFICATES + topic


def _field_end(b: bytes, i: int) -> tuple[int, int, int]:
    """(field number, wire type, end) of the protobuf field starting at i."""
    tag, j = uvarint(b, i)
    num, typ = tag >> 3, tag & 7
    if num < 1:
        raise ValueError("invalid field number")
    if typ == 0:
        _, j = uvarint(b, j)
    elif typ == 1:
        j += 8
    elif typ == 5:
        j += 4
    elif typ == 2:
        n, j = uvarint(b, j)
        j += n
    else:
        raise ValueError("unsupported type: %d" % typ)
    if j > len(b):
        raise ValueError("insufficient data to read a value")
    return num, typ, j


def with_death_timestamp(msg: bytes) -> bytes:
    """The payload with its timestamp (field 1, a varint) set to now in milliseconds, added
    at the end when it has none; a payload that is not protobuf is left as it is."""
    stamp = varint(1 << 3) + varint(int(time.time() * 1000))
    i = 0
    try:
        while i < len(msg):
            num, typ, end = _field_end(msg, i)
            if num == 1 and typ == 0:
                return msg[:i] + stamp + msg[end:]
            i = end
    except ValueError:
        return msg
    return msg + stamp
