"""Counter streams (`allow_msg_counter`, nats-server 2.12+): a publish carrying `Nats-Incr: <n>`
and no payload adds n to the subject's last value; the stored message is `{"val":"<sum>"}`
with the publish's headers, and the PubAck carries `"val"`. A counter stream that sources other
counter streams adds each origin's change since the last value it saw from that origin
(kept per origin stream and subject in the `Nats-Counter-Sources` header).

Owns: the Nats-Incr checks (nats-server's errors 10168, 10170, 10171, 10172) and the
arithmetic. Values are arbitrary-precision integers, as nats-server's big.Int.

Each subject's value as of the last increment stored here is remembered (`LastValues`), so
an increment need not read the subject's last message back from the store.
"""
import json
import re

from natsd.jetstream.engine import errors as E
from natsd.headers import set_header

INCR = "Nats-Incr"
SOURCES = "Nats-Counter-Sources"
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_PLAIN = b"NATS/1.0\r\nNats-Incr:"     # a header block of nothing but the increment, up to it
_PLAIN_INTEGER = re.compile(rb" *[+-]?[0-9]+ *\Z")
MEMO_MAX = 65536                        # subjects LastValues remembers before it starts over
# headers a counter increment may not carry (they would make its result depend on state)
_INCOMPATIBLE = ("Nats-Rollup", "Nats-Expected-Stream", "Nats-Expected-Last-Msg-Id",
                 "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Expected-Last-Sequence",
                 "Nats-Expected-Last-Subject-Sequence")


def increment(headers, payload, allowed, sourced):
    """The increment a publish asks for (None: not a counter publish), or raise the ApiError
    nats-server answers. `headers` is the parsed header dict."""
    value = headers.get(INCR)
    if not value:
        return None
    if not _INTEGER.match(value):
        raise E.error("JSMessageIncrInvalidErr")
    if sourced:                         # stored as the origin had it
        return int(value)
    if not allowed:
        raise E.error("JSMessageIncrDisabledErr")
    if payload:
        raise E.error("JSMessageIncrPayloadErr")
    if len(headers) > 1:
        for k in _INCOMPATIBLE:
            if headers.get(k):
                raise E.error("JSMessageIncrInvalidErr")
    return int(value)


def plain_increment(hdr):
    """The increment of a header block that is exactly `NATS/1.0`, `Nats-Incr: <integer>` and
    the blank line -> int; None for anything else (parsed and judged by increment()). Such a
    publish meets no other header rule: the stream only adds it up."""
    if not hdr.startswith(_PLAIN) or not hdr.endswith(b"\r\n\r\n"):
        return None
    value = hdr[len(_PLAIN):-4]
    if b"\r" in value or not _PLAIN_INTEGER.match(value):
        return None
    return int(value)


def apply(last, subject, hdr, headers, payload, incr):
    """-> (headers bytes, payload, new value as text). `last` is the subject's last stored
    (hdr, payload) or None; `headers` the parsed headers of this message, `payload` its body
    (a sourced counter's value)."""
    total = 0
    sources = None
    if last is not None:
        last_hdr, last_payload = last
        total = _value_of(last_payload)
        raw = _header(last_hdr, SOURCES)
        if raw:
            try:
                sources = json.loads(raw)
            except ValueError:
                raise E.error("JSMessageCounterBrokenErr")
    origin = headers.get("Nats-Stream-Source")
    if origin:
        # a sourced counter: add the origin's change since the value last seen from it
        fields = origin.split(" ")
        orig_subject = fields[4] if len(fields) >= 5 else subject
        now = _value_of(payload)
        sources = sources or {}
        seen = sources.setdefault(fields[0], {})
        before = seen.get(orig_subject, "0")
        seen[orig_subject] = str(now)
        incr = now - int(before if _INTEGER.match(before or "") else 0)
        hdr = set_header(hdr, INCR, str(incr))
    total += incr
    if sources:
        hdr = set_header(hdr, SOURCES, json.dumps(sources, sort_keys=True, separators=(",", ":")))
    return hdr, b'{"val":"%d"}' % total, str(total)


def _value_of(payload):
    if payload[:8] == b'{"val":"' and payload[-2:] == b'"}' and payload[8:-2].isdigit():
        return int(payload[8:-2])          # what natsd itself stores: no JSON parse needed
    try:
        v = json.loads(payload) if payload else None
    except ValueError:
        raise E.error("JSMessageCounterBrokenErr")
    if not isinstance(v, dict):
        raise E.error("JSMessageCounterBrokenErr")
    val = v.get("val", "")
    if not isinstance(val, str):
        raise E.error("JSMessageCounterBrokenErr")
    return int(val) if _INTEGER.match(val) else 0


def _header(hdr, key):
    if not hdr:
        return None
    k = b"\r\n" + key.encode() + b":"
    i = hdr.find(k)
    if i < 0:
        return None
    i += len(k)
    j = hdr.find(b"\r\n", i)
    return hdr[i:j].strip().decode("utf-8", "replace")


class LastValues:
    """Each counter subject's value as of the last increment stored here, so the next one need
    not read that message back: subject -> (its seq, the value as text). An entry is used only
    while that seq is still the subject's last message in the store; anything stored on the
    subject or removed from it since makes it stale, so the store stays the truth. A message
    that carries sources' values (Nats-Counter-Sources) is not remembered: apply() reads it."""

    def __init__(self):
        self.values = {}

    def _remembered(self, store, subject):
        """The subject's value as text while the increment that stored it is still the
        subject's last message, else None."""
        known = self.values.get(subject)
        if known is not None and store.subject_state(subject)[2] == known[0]:
            return known[1]
        return None

    def last(self, store, subject):
        """What apply() takes as the subject's last message: (headers, payload) or None."""
        value = self._remembered(store, subject)
        if value is not None:
            return None, b'{"val":"%s"}' % value.encode()
        sm = store.load_last(subject)
        return (sm.hdr, sm.msg) if sm is not None else None

    def total(self, store, subject):
        """The subject's value as an int, for a plain increment: None when its last message
        carries sources' values or does not read as a counter (apply() and its errors then)."""
        value = self._remembered(store, subject)
        if value is not None:
            return int(value)
        sm = store.load_last(subject)
        if sm is None:
            return 0
        if _header(sm.hdr, SOURCES):
            return None
        try:
            return _value_of(sm.msg)
        except E.ApiError:
            return None

    def stored(self, subject, seq, value, hdr):
        """An increment stored as `seq` with this value and these headers (None: a plain
        increment's, which carry no sources)."""
        if hdr is not None and _header(hdr, SOURCES):
            self.values.pop(subject, None)
            return
        if len(self.values) >= MEMO_MAX:
            self.values.clear()
        self.values[subject] = (seq, value)
