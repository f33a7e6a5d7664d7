"""The same JetStream API requests and publishes against natsd and the reference nats-server:
reply key sets, error codes and descriptions must agree."""
import json


from tests.support.jetstream import connect
from tests.support.waiting import run

# (subject, body, headers) — run in order on a fresh server each
SCENARIO = [
    ("$JS.API.INFO", "", None),
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["foo.>"]}, None),
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["foo.>"]}, None),
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["foo.>"], "bogus": 1}, None),
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["bar"]}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["foo.a"]}, None),
    ("$JS.API.STREAM.CREATE.T", "{bad", None),
    ("$JS.API.STREAM.CREATE.T", "[1]", None),
    ("$JS.API.STREAM.CREATE.T", "", None),
    ("$JS.API.STREAM.CREATE.T", {"name": "X"}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "max_msgs": "x"}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "retention": "bogus"}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "max_age": 5}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["a.*", "a.b"]}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "sealed": True}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "num_replicas": 3}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "discard_new_per_subject": True}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "deny_purge": True, "allow_rollup_hdrs": True}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": [">"]}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["$JS.API.foo"]}, None),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subject_delete_marker_ttl": 500000000}, None),
    ("$JS.API.STREAM.INFO.NOPE", "", None),
    ("$JS.API.STREAM.DELETE.NOPE", "x", None),
    ("$JS.API.STREAM.DELETE.NOPE", "", None),
    ("foo.a", "hello", None),
    ("foo.b", "x", {"Nats-Msg-Id": "1"}),
    ("foo.b", "x", {"Nats-Msg-Id": "1"}),
    ("foo.a", "x", {"Nats-Expected-Stream": "Q"}),
    ("foo.a", "x", {"Nats-Expected-Last-Sequence": "9"}),
    ("foo.a", "x", {"Nats-Expected-Last-Msg-Id": "zz"}),
    ("foo.a", "x", {"Nats-Expected-Last-Subject-Sequence": "7"}),
    ("foo.a", "x", {"Nats-Rollup": "sub"}),
    ("foo.a", "x", {"Nats-TTL": "5s"}),
    ("$JS.API.STREAM.INFO.S", "", None),
    ("$JS.API.STREAM.INFO.S", {"subjects_filter": ">", "deleted_details": True}, None),
    ("$JS.API.STREAM.MSG.GET.S", {"seq": 1}, None),
    ("$JS.API.STREAM.MSG.GET.S", {"seq": 99}, None),
    ("$JS.API.STREAM.MSG.GET.S", {"last_by_subj": "foo.b"}, None),
    ("$JS.API.STREAM.MSG.GET.S", {}, None),
    ("$JS.API.STREAM.MSG.GET.S", {"seq": 1, "last_by_subj": "foo.b"}, None),
    ("$JS.API.STREAM.MSG.DELETE.S", {"seq": 1}, None),
    ("$JS.API.STREAM.MSG.DELETE.S", {"seq": 1}, None),
    ("$JS.API.STREAM.NAMES", "", None),
    ("$JS.API.STREAM.NAMES", {"subject": "foo.x"}, None),
    ("$JS.API.STREAM.LIST", "", None),
    ("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["foo.>"], "storage": "memory"}, None),
    ("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["foo.>"], "retention": "workqueue"}, None),
    ("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["foo.>", "baz"], "max_msgs": 5}, None),
    ("$JS.API.STREAM.UPDATE.NOPE", {"name": "NOPE"}, None),
    ("$JS.API.STREAM.PURGE.S", {"seq": 2, "keep": 1}, None),
    ("$JS.API.STREAM.PURGE.S", {"filter": "foo.a"}, None),
    ("$JS.API.STREAM.PURGE.S", "", None),
    ("$JS.API.STREAM.CREATE.Q", {"name": "Q", "subjects": ["q.>"], "max_msgs_per_subject": 1,
                                 "discard": "new", "discard_new_per_subject": True,
                                 "allow_rollup_hdrs": True, "allow_msg_ttl": True, "max_msg_size": 64}, None),
    ("q.a", "x", None),
    ("q.a", "x", None),
    ("q.b", "x" * 100, None),
    ("q.b", "x", {"Nats-TTL": "bogus"}),
    ("q.b", "x", {"Nats-Rollup": "bogus"}),
    ("$JS.API.STREAM.CREATE.E", {"name": "E", "subjects": ["e"], "deny_delete": True, "deny_purge": True}, None),
    ("e", "x", None),
    ("$JS.API.STREAM.PURGE.E", "", None),
    ("$JS.API.STREAM.MSG.DELETE.E", {"seq": 1}, None),
    ("$JS.API.STREAM.UPDATE.E", {"name": "E", "subjects": ["e"], "deny_delete": False, "deny_purge": True}, None),
    ("$JS.API.STREAM.UPDATE.E", {"name": "E", "subjects": ["e"], "sealed": True, "deny_delete": True,
                                 "deny_purge": True}, None),
    ("e", "x", None),
    ("$JS.API.STREAM.DELETE.S", "", None),
    ("$JS.API.INFO", "", None),
]

VOLATILE = {"created", "ts", "first_ts", "last_ts", "time", "leader", "_nats.ver"}


def shape(obj):
    """Key structure and error fields, with volatile values blanked."""
    if isinstance(obj, dict):
        return {k: ("*" if k in VOLATILE or k == "api" else shape(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape(x) for x in obj]
    return obj


async def play(server):
    nc = await connect(server)
    out = []
    for subject, body, hdrs in SCENARIO:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        try:
            m = await nc.request(subject, body.encode(), timeout=2, headers=hdrs)
            out.append(shape(json.loads(m.data)))
        except Exception as e:
            out.append(type(e).__name__)
    await nc.close()
    return out


def test_api_replies_match_reference(natsd, reference, tmp_path):
    ours = natsd("-js", "-sd", str(tmp_path / "a"))
    ref = reference("-js", "-sd", str(tmp_path / "b"))
    mine = run(play)(ours)
    theirs = run(play)(ref)
    diffs = []
    for (subject, body, hdrs), a, b in zip(SCENARIO, mine, theirs):
        if a != b:
            diffs.append("%s %s %s\n  natsd:      %s\n  nats-server: %s" % (subject, body, hdrs, a, b))
    assert not diffs, "\n".join(diffs)


def test_direct_get_matches_reference(natsd, reference, tmp_path):
    async def scenario(server):
        nc = await connect(server)
        await nc.request("$JS.API.STREAM.CREATE.D", json.dumps(
            {"name": "D", "subjects": ["d.>"], "allow_direct": True}).encode())
        js = nc.jetstream()
        await js.publish("d.a", b"one", headers={"X": "y"})
        await js.publish("d.b", b"two")
        await js.publish("d.a", b"three")
        await js.publish("d.c", b"four", headers={"K": "v"})
        out = []
        for subj, body in [("$JS.API.DIRECT.GET.D", {"seq": 1}), ("$JS.API.DIRECT.GET.D", {"seq": 9}),
                           ("$JS.API.DIRECT.GET.D", {"last_by_subj": "d.a"}),
                           ("$JS.API.DIRECT.GET.D", {"next_by_subj": "d.b", "seq": 1}),
                           ("$JS.API.DIRECT.GET.D.d.b", ""), ("$JS.API.DIRECT.GET.D", {}),
                           # by subject in the request's subject: with headers, missing, a body
                           ("$JS.API.DIRECT.GET.D.d.c", ""), ("$JS.API.DIRECT.GET.D.d.zz", ""),
                           ("$JS.API.DIRECT.GET.D.d.a", {"seq": 1}), ("$JS.API.DIRECT.GET.D.d.a", {}),
                           ("$JS.API.DIRECT.GET.D", "bad"), ("$JS.API.DIRECT.GET.D", ""),
                           ("$JS.API.DIRECT.GET.D", {"seq": 1, "last_by_subj": "d.a"}),
                           # by start time: before the first message, far after, a bad time
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2020-01-02T03:04:05.5+01:00"}),
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2200-01-01T00:00:00Z"}),
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2999-01-01T00:00:00Z"}),  # wraps
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2020-01-02T03:04:05Z",
                                                     "next_by_subj": "d.b"}),
                           ("$JS.API.DIRECT.GET.D", {"start_time": "0001-01-01T00:00:00Z"}),
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2020-13-01T00:00:00Z"}),
                           ("$JS.API.DIRECT.GET.D", {"start_time": "2020-01-01t00:00:00z"})]:
            data = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
            m = await nc.request(subj, data, timeout=2)
            h = {k: ("*" if k == "Nats-Time-Stamp" else v) for k, v in (m.headers or {}).items()}
            out.append((h, m.data))
        # batch
        sub = await nc.subscribe("batch.reply")
        await nc.publish("$JS.API.DIRECT.GET.D", json.dumps({"seq": 1, "batch": 5}).encode(),
                         reply="batch.reply")
        for _ in range(4):
            m = await sub.next_msg(timeout=2)
            h = {k: ("*" if k == "Nats-Time-Stamp" else v) for k, v in (m.headers or {}).items()}
            out.append((h, m.data))
        await nc.close()
        return out
    ours = run(scenario)(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = run(scenario)(reference("-js", "-sd", str(tmp_path / "b")))
    assert ours == theirs


def test_direct_get_by_key_bytes_match_reference(natsd, reference, tmp_path):
    """A KV-style get (the key in the subject, no body) read off the socket: the HMSG frame and
    header block byte for byte (the time stamp masked, the lengths checked against what came),
    found and not found."""
    import asyncio
    import re

    async def scenario(server):
        nc = await connect(server)
        await nc.request("$JS.API.STREAM.CREATE.D", json.dumps(
            {"name": "D", "subjects": ["d.>"], "allow_direct": True}).encode())
        js = nc.jetstream()
        await js.publish("d.k", b"v1")
        await js.publish("d.k", b"value2")
        await nc.close()
        host, port = server.url.rsplit("/", 1)[1].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        await reader.readline()
        writer.write(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
                     b"SUB r 1\r\nPUB $JS.API.DIRECT.GET.D.d.k r 0\r\n\r\n"
                     b"PUB $JS.API.DIRECT.GET.D.d.none r 0\r\n\r\n")
        out = []
        while len(out) < 2:
            line = await asyncio.wait_for(reader.readline(), 5)
            if not line.startswith(b"HMSG"):
                continue
            op, subject, sid, hlen, total = line.split()
            body = await asyncio.wait_for(reader.readexactly(int(total) + 2), 5)
            # the lengths agree with what came (they move with the time stamp's digits)
            assert body.index(b"\r\n\r\n") + 4 == int(hlen) and body.endswith(b"\r\n")
            out.append(b" ".join((op, subject, sid)) + b"\n"
                       + re.sub(rb"Nats-Time-Stamp: [^\r]+", b"Nats-Time-Stamp: *", body))
        writer.close()
        return out
    ours = run(scenario)(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = run(scenario)(reference("-js", "-sd", str(tmp_path / "b")))
    assert ours == theirs
    assert b"Nats-Sequence: 2\r\n" in ours[0] and ours[0].endswith(b"value2\r\n")
