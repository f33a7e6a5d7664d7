"""Every JetStream API request gets nats-server's answer (issue 10, items 8 and 9).

Requests nats-server answers but natsd did not (a consumer name with NUL, 200,000-deep JSON,
a subject token that is not UTF-8), names over 255 bytes, stored subjects that are not UTF-8
(STREAM.MSG.GET, STREAM.INFO subjects, DIRECT.GET), `/` `\\` in stream names, Nats-TTL values,
odd purge filters, numbers out of a field's range, Go's decoder errors, store failures, and the
subjects nats-server does not answer at all. Each case is sent as raw bytes to natsd and to the
reference nats-server; replies must match (volatile fields aside), and the expectations below
are what nats-server v2.15.1 answers.
"""
import json
import os

from tests.support.rawclient import RawClient

J = json.dumps
TTL = "NATS/1.0\r\nNats-TTL: %s\r\n\r\n"
LONG = "\u00e9" * 200          # 400 bytes, 200 characters

SETUP = [
    ("$JS.API.STREAM.CREATE.S", J({"name": "S", "subjects": ["s.>"], "allow_direct": True,
                                   "allow_msg_ttl": True})),
    ("$JS.API.STREAM.CREATE.N", J({"name": "N", "subjects": ["n.>"]})),
    (b"s.\xff", "one"), (b"s.\xe2\x82", "two"), ("s.a", "three"),
]


def err(code, err_code, desc):
    return {"error": {"code": code, "err_code": err_code, "description": desc}}


NOTHING = "<no reply>"

# (subject, payload, headers, expectation): expectation is a dict that must be a subset of the
# JSON reply, NOTHING, or None (only compared with nats-server)
CASES = [
    # a consumer name nats-server cannot make a directory of: its store creation fails
    (b"$JS.API.CONSUMER.CREATE.S.a\x00b", J({"stream_name": "S", "config": {"name": "a\x00b"}}), None,
     err(500, 10012, "error creating store for consumer")),
    ("$JS.API.CONSUMER.CREATE.S", J({"stream_name": "S", "config": {"name": "a\x00b"}}), None,
     err(500, 10012, "error creating store for consumer")),
    (b"$JS.API.CONSUMER.DURABLE.CREATE.S.a\x00b", J({"stream_name": "S", "config": {"durable_name": "a\x00b"}}),
     None, err(500, 10012, "error creating store for consumer")),
    # very deep JSON: Go's decoder stops at depth 10000
    ("$JS.API.STREAM.CREATE.T", "[" * 200000 + "]" * 200000, None,
     err(400, 10025, "invalid JSON: exceeded max depth at offset 10001")),
    ("$JS.API.CONSUMER.CREATE.S", "[" * 200000 + "]" * 200000, None,
     err(400, 10025, "invalid JSON: exceeded max depth at offset 10001")),
    ("$JS.API.STREAM.INFO.S", '{"x":' + '{"a":' * 100000 + "1" + "}" * 100001, None,
     err(400, 10025, "invalid JSON: exceeded max depth at offset 50001")),
    ("$JS.API.STREAM.CREATE.T", '{"name":"T","metadata":' + "[" * 5000 + "]" * 5000 + "}", None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal array into Go struct field "
                     "StreamConfigRequest.metadata of type map[string]string")),
    # subject tokens that are not UTF-8 are names that exist nowhere
    (b"$JS.API.STREAM.CREATE.\xff", b'{"name":"\xff"}', None,
     err(400, 10056, "stream name in subject does not match request")),
    (b"$JS.API.STREAM.INFO.\xff", "", None, err(404, 10059, "stream not found")),
    (b"$JS.API.CONSUMER.INFO.S.\xff", "", None, err(404, 10014, "consumer not found")),
    (b"$JS.API.CONSUMER.CREATE.S.\xff", J({"stream_name": "S", "config": {"durable_name": "x"}}), None,
     err(400, 10017, "consumer name in subject does not match durable name in request")),
    # names longer than 255 bytes (but not 255 characters)
    ("$JS.API.STREAM.CREATE." + LONG, J({"name": LONG}), None,
     err(500, 10052, "stream name is too long, maximum allowed is 255")),
    ("$JS.API.CONSUMER.CREATE.S." + LONG, J({"stream_name": "S", "config": {"name": LONG}}), None,
     err(500, 10012, "error creating store for consumer")),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S." + LONG, J({"stream_name": "S", "config": {"durable_name": LONG}}),
     None, err(400, 10102, "consumer name is too long, maximum allowed is 255")),
    ("$JS.API.STREAM.CREATE.MEM" + LONG[:120], J({"name": "MEM" + LONG[:120], "storage": "memory"}), None,
     {"did_create": True}),
    # path separators in a stream name
    ("$JS.API.STREAM.CREATE.a/b", J({"name": "a/b"}), None,
     err(400, 10128, "Stream name can not contain path separators")),
    ("$JS.API.STREAM.CREATE.a\\b", J({"name": "a\\b"}), None,
     err(400, 10128, "Stream name can not contain path separators")),
    # a purge filter that is no subject purges nothing
    ("$JS.API.STREAM.PURGE.S", J({"filter": "a..b"}), None, {"success": True, "purged": 0}),
    ("$JS.API.STREAM.PURGE.S", J({"filter": "s. x"}), None, {"success": True, "purged": 0}),
    # numbers Go does not fit in the field
    ("$JS.API.CONSUMER.CREATE.S", J({"stream_name": "S", "config": {"max_deliver": 2 ** 63}}), None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number 9223372036854775808 into Go struct "
                     "field CreateConsumerRequest.config.max_deliver of type int")),
    ("$JS.API.CONSUMER.CREATE.S", J({"stream_name": "S", "config": {"max_deliver": -2 ** 63 - 1}}), None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number -9223372036854775809 into Go struct "
                     "field CreateConsumerRequest.config.max_deliver of type int")),
    ("$JS.API.CONSUMER.CREATE.S", '{"stream_name":"S","config":{"max_deliver":1e3}}', None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number 1e3 into Go struct field "
                     "CreateConsumerRequest.config.max_deliver of type int")),
    ("$JS.API.CONSUMER.CREATE.S", J({"stream_name": "S", "config": {"ack_wait": 2 ** 63}}), None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number 9223372036854775808 into Go struct "
                     "field CreateConsumerRequest.config.ack_wait of type time.Duration")),
    ("$JS.API.STREAM.CREATE.T", '{"name":"T","max_msg_size":2147483648}', None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number 2147483648 into Go struct field "
                     "StreamConfigRequest.max_msg_size of type int32")),
    ("$JS.API.STREAM.CREATE.T", '{"name":"T","first_seq":-0}', None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number -0 into Go struct field "
                     "StreamConfigRequest.first_seq of type uint64")),
    ("$JS.API.STREAM.CREATE.T", '{"name":"T","sources":[{"name":5}]}', None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number into Go struct field "
                     "StreamConfigRequest.sources.0.name of type string")),
    ("$JS.API.STREAM.CREATE.T", '{"name":"T","subjects":[5]}', None,
     err(400, 10025, "invalid JSON: json: cannot unmarshal number into StreamConfigRequest.subjects.0 "
                     "of type string")),
    ("$JS.API.CONSUMER.CREATE.S", '{"stream_name":"S","config":{"opt_start_time":"2020-13-01T00:00:00Z"}}',
     None, err(400, 10025, 'invalid JSON: parsing time "2020-13-01T00:00:00Z": month out of range')),
    # Go's decoder on bytes that are not UTF-8, escapes, several values
    ("$JS.API.STREAM.CREATE.Z", b'{"name":"Z",\xff}', None,
     err(400, 10025, "invalid JSON: invalid character '\\xff' looking for beginning of object key "
                     "string at offset 13")),
    ("$JS.API.STREAM.CREATE.Z", b'{"name":"\\u12"}', None,
     err(400, 10025, 'invalid JSON: invalid escape sequence `\\u12"}` in string at offset 15')),
    ("$JS.API.STREAM.CREATE.Z", b'{"name":"Z"', None, err(400, 10025, "invalid JSON: unexpected EOF")),
    ("$JS.API.STREAM.CREATE.Z", b'{"name":"Z","description":"\xe2\x82\\ud800"}', None,
     {"config": {"description": "\ufffd\ufffd\ufffd"}}),
    ("$JS.API.STREAM.CREATE.Y", b'{"name":"X"} {"name":"Y"}', None, {"did_create": True}),
    ("$JS.API.STREAM.CREATE.Q", b'{"name":"Q","storage":"MEMORY"}', None,
     err(400, 10025, 'invalid JSON: can not unmarshal "\\"MEMORY\\""')),
    ("$JS.API.STREAM.CREATE.Q", b'{"name":"Q","compression":""}', None,
     err(400, 10025, "invalid JSON: unknown compression algorithm")),
    # CONSUMER.UNPIN reads its body with json.Unmarshal: one value, whole characters named
    ("$JS.API.CONSUMER.UNPIN.S.D", b"0\xca\x88s", None,
     err(400, 10025, "invalid JSON: invalid character '\u0288' after top-level value")),
    ("$JS.API.CONSUMER.UNPIN.S.D", b"", None, err(400, 10025, "invalid JSON: unexpected end of JSON input")),
    ("$JS.API.CONSUMER.UNPIN.S.D", J({"group": "x"}), None, err(404, 10014, "consumer not found")),
    # config rules as nats-server's: no transform destination is no mapping
    ("$JS.API.STREAM.UPDATE.NOPE", J({"name": "NOPE", "subject_transform": {}}), None,
     err(404, 10059, "stream not found")),
    ("$JS.API.STREAM.CREATE.RP", J({"name": "RP", "republish": {"src": ">"}}), None, {"did_create": True}),
    # a transform destination is checked as nats-server's ValidateMapping does, before compiling
    ("$JS.API.STREAM.CREATE.TB", J({"name": "TB", "subjects": ["tb.>"], "subject_transform": {
        "src": "tb.>", "dest": "u.{{bogus(1)}}"}}), None,
     err(400, 10156, "stream transform: invalid mapping destination: unknown function in {{bogus(1)}}")),
    ("$JS.API.STREAM.CREATE.TB", J({"name": "TB", "subjects": ["tb.>"], "subject_transform": {
        "src": "tb.>", "dest": "u..x"}}), None,
     err(400, 10156, "stream transform: invalid mapping destination: invalid transform")),
    # a source's transforms may not overlap; a source's filter that is no subject fails the create
    ("$JS.API.STREAM.CREATE.SO", J({"name": "SO", "sources": [{"name": "S", "subject_transforms": [
        {"src": "s.>", "dest": "x.>"}, {"src": "s.a", "dest": "y.a"}]}]}), None,
     err(400, 10147, "source filters can not overlap")),
    ("$JS.API.STREAM.CREATE.SF", J({"name": "SF", "sources": [{"name": "S", "filter_subject": "s..a"}]}), None,
     err(500, 10049, "subject filter 's..a' for the source: invalid subject")),
    ("$JS.API.STREAM.UPDATE.NOPE", "", None,
     err(500, 10052, "stream name is required and can not contain '.', '*', '>', '\\', '/'")),
    # Nats-TTL as nats-server parses it
    ("s.a", "x", TTL % "-5", err(400, 10165, "invalid per-message TTL")),
    ("n.a", "x", TTL % "-5", err(400, 10165, "invalid per-message TTL")),
    ("n.a", "x", TTL % "5", err(400, 10166, "per-message TTL is disabled")),
    ("s.a", "x", TTL % "+5", err(400, 10165, "invalid per-message TTL")),
    ("s.a", "x", TTL % "1.5s", {"stream": "S"}),
    ("s.a", "x", TTL % "999999999999999999999", {"stream": "S"}),
    ("s.a", "x", TTL % "", {"stream": "S"}),
    # stored subjects that are not UTF-8: U+FFFD per bad byte in JSON, byte-exact in headers
    ("$JS.API.STREAM.MSG.GET.S", J({"seq": 1}), None, {"message": {"subject": "s.\ufffd", "seq": 1}}),
    ("$JS.API.STREAM.MSG.GET.S", J({"seq": 2}), None, {"message": {"subject": "s.\ufffd\ufffd", "seq": 2}}),
    ("$JS.API.STREAM.INFO.S", J({"subjects_filter": "s.*"}), None, {"total": 3}),
    ("$JS.API.STREAM.INFO.S", b'{"subjects_filter":"s.\xff"}', None, {"total": 0, "limit": 0}),
    ("$JS.API.DIRECT.GET.S", J({"seq": 1}), None, None),
    (b"$JS.API.DIRECT.GET.S.s.\xff", "", None, None),
    (b"$JS.API.DIRECT.GET.S.s.\xe2\x82", "", None, None),
    # error replies carry the zero fields of nats-server's response structs
    ("$JS.API.STREAM.NAMES", J({"x": 1}), None, {"total": 0, "streams": None}),
    ("$JS.API.STREAM.NAMES", J({"subject": "zz"}), None, {"total": 0, "streams": None}),
    ("$JS.API.CONSUMER.NAMES.NOPE", "", None, {"consumers": [], "limit": 0}),
    ("$JS.API.CONSUMER.PAUSE.S.NOPE", "", None, {"paused": False, "pause_until": "0001-01-01T00:00:00Z"}),
    ("$JS.API.STREAM.RESTORE.R", "{bad", None, {"deliver_subject": ""}),
    # cluster-only requests on a server that is not clustered, checked before anything else
    ("$JS.API.STREAM.LEADER.STEPDOWN.NOPE", "", None,
     err(503, 10010, "JetStream clustering support required")),
    ("$JS.API.CONSUMER.LEADER.STEPDOWN.S.D", "", "NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n",
     err(503, 10010, "JetStream clustering support required")),
    # checked before the required API level, as nats-server does
    ("$JS.API.CONSUMER.CREATE.S", "{bad", "NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n",
     err(400, 10025, "invalid JSON: invalid character 'b' looking for beginning of object key string "
                     "at offset 2")),
    ("$JS.API.CONSUMER.INFO.S.D", "x", "NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n",
     err(400, 10038, "expected an empty request payload")),
    ("$JS.API.STREAM.INFO.S", "", "NATS/1.0\r\nNats-Required-Api-Level: 5x\r\n\r\n",
     err(412, 10185, "JetStream minimum api level required")),
    # subjects nats-server's API does not answer at all (the last request shows it is up)
    ("$JS.API.META.LEADER.STEPDOWN", "", None, NOTHING),
    ("$JS.API.ACCOUNT.PURGE.X", "", None, NOTHING),
    ("$JS.API.STREAM.TEMPLATE.NAMES", "", None, NOTHING),
    ("$JS.API.STREAM.INFO.S.extra", "", None, NOTHING),
    ("$JS.API.STREAM.INFO", "", None, NOTHING),
    # an empty token matches no subscription at all: "no responders"
    ("$JS.API.STREAM..INFO", "", None, b"NATS/1.0 503\r\nNats-Subject: $JS.API.STREAM..INFO\r\n\r\n"),
    ("$JS.API.CONSUMER.INFO.S.", "", None, b"NATS/1.0 503\r\nNats-Subject: $JS.API.CONSUMER.INFO.S.\r\n\r\n"),
    ("$JS.API.INFO", "", None, {"type": "io.nats.jetstream.api.v1.account_info_response"}),
]

VOLATILE = {"created", "ts", "time", "first_ts", "last_ts", "_nats.ver", "api", "leader", "name"}


def _b(x):
    return x.encode() if isinstance(x, str) else x


def _norm(reply):
    if reply is None:
        return NOTHING
    if reply.startswith(b"NATS/1.0"):
        return b"\r\n".join(l for l in reply.split(b"\r\n") if not l.startswith(b"Nats-Time-Stamp:"))
    obj = json.loads(reply)

    def blank(o):
        if isinstance(o, dict):
            return {k: "*" if k in VOLATILE and not isinstance(v, dict) or k == "api" else blank(v)
                    for k, v in o.items()}
        if isinstance(o, list):
            return [blank(v) for v in o]
        return o
    return blank(obj)


def _subset(want, have):
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _subset(v, have[k]) for k, v in want.items())
    return want == have


def _play(server, cases=CASES, setup=SETUP):
    with RawClient(server.port) as c:
        c.connect(no_responders=True, protocol=1)
        for subj, body in setup:
            c.request(_b(subj), _b(body), None, 3)
        out = []
        for subj, body, hdr, want in cases:
            timeout = 0.3 if want == NOTHING else 5
            out.append(c.request(_b(subj), _b(body), _b(hdr) if hdr else None, timeout))
    return out


def _check(replies, cases=CASES):
    bad = []
    for (subj, body, hdr, want), reply in zip(cases, replies):
        if want is None:
            continue
        have = _norm(reply)
        if want == NOTHING or have == NOTHING or isinstance(want, bytes):
            ok = want == have
        else:
            ok = _subset(want, have)
        if not ok:
            bad.append("%r %r %r\n  want %r\n  have %r" % (subj, _b(body)[:60], hdr, want, reply and reply[:300]))
    return bad


def test_replies_natsd(natsd, tmp_path):
    srv = natsd("-js", "-sd", str(tmp_path))
    replies = _play(srv)
    bad = _check(replies)
    assert not bad, "\n".join(bad)
    # the server logs, but never answers with, Python exception texts or store paths
    for r in replies:
        if r:
            assert str(tmp_path).encode() not in r and b"Error" not in r and b"Traceback" not in r


def test_replies_reference(reference, tmp_path):
    """The expectations are what nats-server answers."""
    bad = _check(_play(reference("-js", "-sd", str(tmp_path))))
    assert not bad, "\n".join(bad)


def test_replies_match_reference(natsd, reference, tmp_path):
    ours = _play(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = _play(reference("-js", "-sd", str(tmp_path / "b")))
    diffs = ["%r %r\n  natsd:       %r\n  nats-server: %r" % (c[0], _b(c[1])[:60], a and a[:300], b and b[:300])
             for c, a, b in zip(CASES, ours, theirs) if _norm(a) != _norm(b)]
    assert not diffs, "\n".join(diffs)


def test_message_get_is_byte_exact(natsd, reference, tmp_path):
    """STREAM.MSG.GET of a subject that is not UTF-8: the very bytes nats-server sends."""
    def get(server):
        with RawClient(server.port) as c:
            c.connect(no_responders=True, protocol=1)
            c.request(b"$JS.API.STREAM.CREATE.S", _b(J({"name": "S", "subjects": ["s.>"]})), None, 3)
            c.request(b"s.\xff\xe2\x82<", b"one", None, 3)
            r = c.request(b"$JS.API.STREAM.MSG.GET.S", b'{"seq":1}', None, 3)
        i = r.index(b'"time":')
        return r[:i]
    ours = get(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = get(reference("-js", "-sd", str(tmp_path / "b")))
    assert ours == theirs
    assert b'"subject":"s.\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\u003c"' in ours


def test_store_failures_do_not_leak(natsd, reference, tmp_path):
    """A directory the store cannot create: nats-server's generic store error, no path, no
    OS error text; the real error goes to the log."""
    def scenario(server, sd):
        with RawClient(server.port) as c:
            c.connect(no_responders=True, protocol=1)
            out = [c.request(b"$JS.API.STREAM.CREATE.S", _b(J({"name": "S", "subjects": ["s.>"]})), None, 3)]
            base = os.path.join(sd, "jetstream", "$G", "streams")
            with open(os.path.join(base, "BLOCK"), "w") as f:
                f.write("x")
            for d in ("obs", "consumers"):
                os.makedirs(os.path.join(base, "S", d), exist_ok=True)
                with open(os.path.join(base, "S", d, "C"), "w") as f:
                    f.write("x")
            out.append(c.request(b"$JS.API.STREAM.CREATE.BLOCK", b'{"name":"BLOCK"}', None, 3))
            out.append(c.request(b"$JS.API.CONSUMER.DURABLE.CREATE.S.C",
                                 _b(J({"stream_name": "S", "config": {"durable_name": "C"}})), None, 3))
            out.append(c.request(b"$JS.API.STREAM.INFO.BLOCK", b"", None, 3))
            out.append(c.request(b"$JS.API.CONSUMER.INFO.S.C", b"", None, 3))   # not left behind
        return [_norm(r) for r in out[1:]]
    sa, sb = str(tmp_path / "a"), str(tmp_path / "b")
    ours_srv = natsd("-js", "-sd", sa)
    ours = scenario(ours_srv, sa)
    theirs = scenario(reference("-js", "-sd", sb), sb)
    assert ours == theirs
    assert ours[0]["error"] == {"code": 500, "err_code": 10049, "description": "error creating store for stream"}
    assert ours[1]["error"] == {"code": 500, "err_code": 10012,
                                "description": "error creating store for consumer"}
    assert ours[3]["error"]["err_code"] == 10014
    ours_srv.wait_log(r"Stream create failed for '\$G > BLOCK'")
    ours_srv.wait_log(r"Consumer create failed for '\$G > S > C'")
