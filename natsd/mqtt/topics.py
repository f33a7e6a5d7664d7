"""MQTT topics and NATS subjects, converted both ways as nats-server converts them.

Levels: `/` is NATS's `.`; a `.` inside a topic level travels as `//`; an empty level (a
leading, trailing or doubled `/`) becomes `/` inside the subject so that no subject token is
empty. Wildcards: `+` is `*`, `#` is `>`, and a filter ending in `/#` also matches its parent
level (natsd subscribes to both, as nats-server does). Spaces and control characters have no
NATS form and are refused.
"""
from __future__ import annotations

import re

SEP = ord("/")
DOT = ord(".")
_REFUSED = {ord(" "), ord("\t"), ord("\n"), ord("\r"), ord("\f"), 0x7f}
# what makes a topic more than levels joined by `/` (then the character walk decides)
_PLAIN = re.compile(rb"[ \t\n\r\f\x7f.+#]|//|^/|/$")


class TopicError(ValueError):
    pass


def _convert(topic: bytes, wildcards_ok: bool) -> bytes:
    """nats-server's mqttToNATSSubjectConversion."""
    out = bytearray()
    end = len(topic) - 1
    for i, ch in enumerate(topic):
        if ch == SEP:
            if i == 0 or out[-1:] == b".":
                out += b"/."
            elif i == end or topic[i + 1] == SEP:
                out += b"./"
            else:
                out.append(DOT)
        elif ch in _REFUSED:
            raise TopicError("character not supported for MQTT topics")
        elif ch == DOT:
            out += b"//"
        elif ch in (ord("+"), ord("#")):
            if not wildcards_ok:
                raise TopicError("wildcards not allowed in publish's topic: %s" % _go_q(topic))
            out.append(ord("*") if ch == ord("+") else ord(">"))
        else:
            out.append(ch)
    if out[-1:] == b".":
        out.append(SEP)
    return bytes(out)


def topic_to_subject(topic: bytes) -> bytes:
    """A PUBLISH topic (no wildcards) as the subject NATS subscribers see."""
    if _PLAIN.search(topic) is None:
        return topic.replace(b"/", b".")        # the common case: levels only
    return _convert(topic, False)


def filter_to_subject(topic_filter: bytes) -> bytes:
    """A SUBSCRIBE filter as a NATS subscription subject."""
    return _convert(topic_filter, True)


def subject_to_topic(subject: bytes) -> bytes:
    """nats-server's natsSubjectToMQTTTopic: what an MQTT subscriber sees as the topic."""
    out = bytearray()
    end = len(subject) - 1
    i = 0
    while i <= end:
        ch = subject[i]
        if ch == SEP:
            if i < end and subject[i + 1] in (DOT, SEP):
                out.append(SEP if subject[i + 1] == DOT else DOT)
                i += 1
        elif ch == DOT:
            out.append(SEP)
        else:
            out.append(ch)
        i += 1
    return bytes(out)


def needs_parent_level(subject: str) -> bool:
    """A filter ending in `.>` (MQTT `/#`) also needs a subscription on its parent level."""
    return len(subject) >= 3 and subject.endswith(".>")


def is_reserved_filter(subject: str) -> bool:
    """Filters that start with a wildcard do not match topics starting with `$` (MQTT 4.7.2)."""
    return subject in (">", "*") or subject.startswith("*.")


def _go_q(b: bytes) -> str:
    from natsd.gofmt import go_quote
    return go_quote(b.decode("utf-8", "surrogateescape"))
