"""Random JetStream API requests (fixed seed), sent with the raw-socket client (rawclient).

`corpus(seed, n)` -> [(subject bytes, payload bytes, headers bytes|None)] aimed at every
`$JS.API` endpoint natsd dispatches (natsd/jetstream/engine/api.py TYPES, DIRECT.GET,
CONSUMER.MSG.NEXT): random and known tokens, tokens with bytes that are not UTF-8, NUL,
wildcards, path separators, over-long names, empty tokens, wrong token counts; bodies of random
JSON built from the request and config field names with values of every JSON type, raw
garbage, bytes that are not UTF-8, truncations and very deep nesting.

`expects_reply(subject)` says whether nats-server answers that subject at all: it dispatches
`$JS.API.>` on its own table of patterns (server/jetstream_api.go) and drops anything else
(empty tokens, unknown ops, wrong token counts) without a reply; DIRECT.GET, MSG.NEXT and
RESET are answered by the stream/consumer itself and only when it exists.
"""
import json
import random

from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import streamconfig as sc
from tests.support.rawclient import RawClient

# nats-server's API subscriptions (jetstream_api.go), tokens after "$JS.API."
GO_PATTERNS = [
    "INFO", "STREAM.CREATE.*", "STREAM.UPDATE.*", "STREAM.NAMES", "STREAM.LIST", "STREAM.INFO.*",
    "STREAM.DELETE.*", "STREAM.PURGE.*", "STREAM.SNAPSHOT.*", "STREAM.RESTORE.*",
    "STREAM.MSG.DELETE.*", "STREAM.MSG.GET.*", "STREAM.PEER.REMOVE.*", "STREAM.PEER.EVACUATE.*",
    "STREAM.CANCEL_MOVE.*", "STREAM.LEADER.STEPDOWN.*", "CONSUMER.CREATE.*", "CONSUMER.CREATE.*.>",
    "CONSUMER.DURABLE.CREATE.*.*", "CONSUMER.NAMES.*", "CONSUMER.LIST.*", "CONSUMER.INFO.*.*",
    "CONSUMER.DELETE.*.*", "CONSUMER.PAUSE.*.*", "CONSUMER.UNPIN.*.*", "CONSUMER.LEADER.STEPDOWN.*.*",
]
# (META.LEADER.STEPDOWN, SERVER.REMOVE/EVACUATE, META.RESCUE and ACCOUNT.* are system-account
# directives: nats-server's dispatch drops them when they come from an account)

# op -> number of name tokens after it (None: 1..4 tokens)
ENDPOINTS = {
    "INFO": 0, "STREAM.CREATE": 1, "STREAM.UPDATE": 1, "STREAM.DELETE": 1, "STREAM.INFO": 1,
    "STREAM.LIST": 0, "STREAM.NAMES": 0, "STREAM.PURGE": 1, "STREAM.MSG.GET": 1,
    "STREAM.MSG.DELETE": 1, "STREAM.SNAPSHOT": 1, "STREAM.RESTORE": 1, "STREAM.LEADER.STEPDOWN": 1,
    "STREAM.PEER.REMOVE": 1, "META.LEADER.STEPDOWN": 0, "SERVER.REMOVE": 0, "ACCOUNT.PURGE": 1,
    "ACCOUNT.STREAM.MOVE": 2, "ACCOUNT.STREAM.CANCEL_MOVE": 2, "STREAM.CANCEL_MOVE": 1,
    "STREAM.TEMPLATE": None, "CONSUMER.CREATE": None, "CONSUMER.DURABLE.CREATE": 2,
    "CONSUMER.INFO": 2, "CONSUMER.DELETE": 2, "CONSUMER.NAMES": 1, "CONSUMER.LIST": 1,
    "CONSUMER.PAUSE": 2, "CONSUMER.UNPIN": 2, "CONSUMER.RESET": 2, "CONSUMER.LEADER.STEPDOWN": 2,
    "CONSUMER.MSG.NEXT": 2, "DIRECT.GET": None,
}

STREAMS = ["S", "M", "W"]
CONSUMERS = ["D", "P"]

REQUEST_FIELDS = ["offset", "subject", "deleted_details", "subjects_filter", "filter", "seq", "keep",
                  "no_erase", "last_by_subj", "next_by_subj", "batch", "max_bytes", "start_time",
                  "multi_last", "up_to_seq", "up_to_time", "no_hdr", "pause_until", "group",
                  "deliver_subject", "chunk_size", "jsck", "config", "state", "stream_name", "action",
                  "pedantic", "expires", "no_wait", "idle_heartbeat", "peer", "leader_placement"]
STREAM_FIELDS = list(sc.STREAM_FIELDS)
CONSUMER_FIELDS = [name for name, _, _ in cc.FIELDS]
ENUM_WORDS = ["limits", "interest", "workqueue", "old", "new", "file", "memory", "s2", "none", "all",
              "last", "explicit", "instant", "original", "create", "update", "default", "async",
              "by_start_sequence", "last_per_subject", "pinned_client", "MEMORY", "undefined"]


def _token(r):
    k = r.random()
    if k < 0.35:
        return r.choice(STREAMS + CONSUMERS).encode()
    if k < 0.55:
        return "".join(r.choice("abcXYZ019_-") for _ in range(r.randint(1, 8))).encode()
    if k < 0.62:
        return r.choice([b"\xff", b"a\xc3", b"\xe2\x82", b"x\xffy", b"\xc3\xa9t\xc3\xa9"])
    if k < 0.67:
        return r.choice([b"a\x00b", b"\x00"])
    if k < 0.72:
        return r.choice([b"*", b">", b"a*", b"$JS"])
    if k < 0.77:
        return r.choice([b"a/b", b"a\\b", b"..", b"/", b"\\"])
    if k < 0.83:
        return r.choice(["\u00e9" * r.choice([127, 128, 200]), "x" * r.choice([255, 256, 300])]).encode()
    if k < 0.88:
        return "\u03bb\u4e2d\U0001F600".encode()
    return r.choice([b"SS", b"s", b"D2", b"ABC", b"\x7f", b"a\x01"])


def _subject(r):
    op = r.choice(list(ENDPOINTS))
    n = ENDPOINTS[op]
    if n is None:
        n = r.randint(1, 4)
    if r.random() < 0.08:
        n = max(0, n + r.choice([-1, 1, 2]))       # wrong token count
    toks = [_token(r) for _ in range(n)]
    if op in ("STREAM.CREATE", "STREAM.UPDATE") and toks and r.random() < 0.5:
        toks[0] = r.choice([b"N%d" % r.randint(0, 30), b"S", b"M"])
    subj = b"$JS.API." + op.encode() + b"".join(b"." + t for t in toks)
    k = r.random()
    if k < 0.04:
        subj = subj.replace(b".", b"..", 1)            # an empty token
    elif k < 0.06:
        subj += b"."
    return subj


def _value(r, depth=0):
    k = r.random()
    if depth > 3:
        k = k * 0.6
    if k < 0.15:
        return r.choice([0, 1, -1, 5, 2 ** 31, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 2 ** 64, 10 ** 30,
                         r.randint(-10 ** 12, 10 ** 12)])
    if k < 0.2:
        return r.choice([1.5, -0.0, 1000.0, 1e300, 2.0])
    if k < 0.4:
        return r.choice(ENUM_WORDS + ["", "x", "a.b", "a..b", "s.>", "*", ">", " ", "a b",
                                      "2020-01-01T00:00:00Z", "2020-13-01T00:00:00Z", "5s",
                                      "\u00e9" * 130, "\x00", "\ud800"])
    if k < 0.5:
        return r.choice([True, False, None])
    if k < 0.75:
        return [_value(r, depth + 1) for _ in range(r.randint(0, 3))]
    return _object(r, depth + 1)


def _object(r, depth=0, fields=None):
    fields = fields or r.choice([REQUEST_FIELDS, STREAM_FIELDS, CONSUMER_FIELDS, ["name", "durable_name"]])
    out = {}
    for _ in range(r.randint(0, 5)):
        key = r.choice(fields) if r.random() < 0.9 else r.choice(["x", "Name", "NAME", ""])
        out[key] = _value(r, depth)
    return out


def _body(r, subject):
    k = r.random()
    if k < 0.1:
        return r.choice([b"", b" ", b"{}", b"null", b"[]", b"\t\r\n"])
    if k < 0.18:
        return bytes(r.randrange(256) for _ in range(r.randint(1, 40)))
    if k < 0.22:
        d = r.choice([10, 999, 1001, 10000, 10001, 30000])
        return r.choice([b"[", b'{"a":']) * d + b"1" * (d < 20)
    if k < 0.4 and b"CONSUMER" in subject:
        toks = subject.split(b".")
        cfg = _object(r, 1, CONSUMER_FIELDS)
        if r.random() < 0.5 and len(toks) > 5:
            cfg[r.choice(["name", "durable_name"])] = toks[-1].decode("utf-8", "replace")
        body = {"stream_name": r.choice(STREAMS + [toks[4].decode("utf-8", "replace") if len(toks) > 4 else ""]),
                "config": cfg}
        if r.random() < 0.3:
            body["action"] = r.choice(["create", "update", "", "bogus", None])
        data = json.dumps(body).encode()
    elif k < 0.55 and (b"STREAM.CREATE" in subject or b"STREAM.UPDATE" in subject):
        name = subject.split(b".")[-1].decode("utf-8", "replace")
        body = _object(r, 1, STREAM_FIELDS)
        body["name"] = name if r.random() < 0.85 else r.choice(["", "x", name + "x"])
        if r.random() < 0.5:
            body["subjects"] = [r.choice(["%s.%d" % (name.lower(), r.randint(0, 9)), "q.>", "a..b", ">"])]
        if r.random() < 0.5:
            body["storage"] = r.choice(["memory", "file"])
        data = json.dumps(body).encode()
    else:
        data = json.dumps(_object(r)).encode()
    k = r.random()
    if k < 0.08:
        data = data[:r.randint(0, len(data))]           # truncated
    elif k < 0.14:
        i = r.randint(0, len(data))
        data = data[:i] + r.choice([b"\xff", b"\xc3", b"\x00", b"\\", b"\\u12", b'"', b"}", b",,"]) + data[i:]
    elif k < 0.18:
        data = data + r.choice([b" {}", b" null", b"{\"name\":\"S\"}", b" x", b"]"])
    return data


def _headers(r):
    k = r.random()
    if k < 0.9:
        return None
    return r.choice([b"NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n",
                     b"NATS/1.0\r\nNats-Required-Api-Level: x\r\n\r\n",
                     b"NATS/1.0\r\nX: \xff\r\n\r\n"])


def corpus(seed, n):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        s = _subject(r)
        out.append((s, _body(r, s), _headers(r)))
    return out


def _matches(pattern, tokens):
    pt = pattern.split(".")
    for i, p in enumerate(pt):
        if p == ">":
            return len(tokens) > i
        if i >= len(tokens):
            return False
        if p != "*" and p.encode() != tokens[i]:
            return False
    return len(tokens) == len(pt)


def expects_reply(subject):
    """Whether nats-server answers a request on `subject` (whatever the body)."""
    if not subject.startswith(b"$JS.API."):
        return False
    tokens = subject[8:].split(b".")
    if b"" in tokens or subject.endswith(b"."):
        return False
    return any(_matches(p, tokens) for p in GO_PATTERNS)


SETUP = [
    (b"$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"], "allow_direct": True,
                                             "allow_msg_ttl": True}).encode(), None),
    (b"$JS.API.STREAM.CREATE.M", json.dumps({"name": "M", "subjects": ["m.>"], "storage": "memory"}).encode(),
     None),
    (b"$JS.API.STREAM.CREATE.W", json.dumps({"name": "W", "subjects": ["w.>"],
                                             "retention": "workqueue"}).encode(), None),
    (b"s.a", b"one", None), (b"s.\xff", b"two", None), (b"s.\xe2\x82", b"three", b"NATS/1.0\r\nA: b\r\n\r\n"),
    (b"m.a", b"x", None), (b"w.a", b"y", None),
    (b"$JS.API.CONSUMER.DURABLE.CREATE.S.D", json.dumps(
        {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}).encode(), None),
    (b"$JS.API.CONSUMER.DURABLE.CREATE.S.P", json.dumps(
        {"stream_name": "S", "config": {"durable_name": "P", "deliver_subject": "push.p"}}).encode(),
     None),
]


def play(port, requests, timeout=2.0, wait_all=False):
    """Send the requests in order; -> [reply bytes | None] (None: no reply). Requests
    nats-server answers are waited for one by one (up to `timeout`); the others are not
    waited for: their replies are collected after a last request that is answered (the
    server handles one connection's requests in order), unless `wait_all`."""
    with RawClient(port) as c:
        c.connect(no_responders=True, protocol=1)
        for subj, body, hdr in SETUP:
            c.request(subj, body, hdr, timeout)
        out = []
        for subj, body, hdr in requests:
            if wait_all or expects_reply(subj):
                out.append(c.request(subj, body, hdr, timeout))
            else:
                out.append(Unanswered(c.send_request(subj, body, hdr)))
        c.request(b"$JS.API.INFO", b"", None, timeout)
        c.read_replies(0.05)
        return [c.reply(r.subject) if isinstance(r, Unanswered) else r for r in out]


class Unanswered:
    """A request play() does not wait for: its reply subject."""

    def __init__(self, subject):
        self.subject = subject
