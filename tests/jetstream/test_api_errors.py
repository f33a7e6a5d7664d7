"""API error replies (code / err_code / description) of natsd, each one checked against what
nats-server v2.15.1 answers for the same request (values recorded from the reference and also
compared live when it is installed)."""
import json

import pytest

from tests.support.jetstream import connect
from tests.support.waiting import run

SETUP = [
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}),
    ("$JS.API.STREAM.CREATE.DD", {"name": "DD", "subjects": ["dd"], "deny_delete": True, "deny_purge": True}),
]

CASES = [
    ("$JS.API.STREAM.INFO.NOPE", "", (404, 10059, "stream not found")),
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]},
     (400, 10058, "stream name already in use with a different configuration")),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["s.a"]},
     (400, 10065, "subjects overlap with an existing stream")),
    ("$JS.API.STREAM.CREATE.T", {"name": "U"}, (400, 10056, "stream name in subject does not match request")),
    ("$JS.API.STREAM.CREATE.T", "{bad",
     (400, 10025, "invalid JSON: invalid character 'b' looking for beginning of object key string at offset 2")),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "x": 1}, (400, 10025, 'invalid JSON: json: unknown field "x"')),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "num_replicas": 2},
     (500, 10074, "replicas > 1 not supported in non-clustered mode")),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "max_age": 1}, (500, 10052, "max age needs to be >= 100ms")),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "sealed": True},
     (500, 10052, "stream configuration for create can not be sealed")),
    ("$JS.API.STREAM.CREATE.T", {"name": "T", "discard_new_per_subject": True},
     (500, 10052, "discard new per subject requires discard new policy to be set")),
    ("$JS.API.STREAM.DELETE.S", "junk", (400, 10038, "expected an empty request payload")),
    ("$JS.API.STREAM.MSG.GET.S", {"seq": 5}, (404, 10037, "no message found")),
    ("$JS.API.STREAM.MSG.GET.S", {}, (400, 10003, "bad request")),
    ("$JS.API.STREAM.MSG.DELETE.S", {"seq": 5}, (500, 10057, "stream store EOF")),
    ("$JS.API.STREAM.MSG.DELETE.DD", {"seq": 1}, (500, 10057, "message delete not permitted")),
    ("$JS.API.STREAM.PURGE.DD", "", (500, 10110, "stream purge not permitted")),
    ("$JS.API.STREAM.PURGE.S", {"seq": 3, "keep": 1}, (400, 10003, "bad request")),
    ("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"], "storage": "memory"},
     (500, 10052, "stream configuration update can not change storage type")),
    ("$JS.API.STREAM.UPDATE.DD", {"name": "DD", "subjects": ["dd"], "deny_purge": True},
     (500, 10052, "stream configuration update can not cancel deny message deletes")),
]


async def collect(server):
    nc = await connect(server)
    for subj, body in SETUP:
        await nc.request(subj, json.dumps(body).encode(), timeout=2)
    await nc.request("dd", b"x", timeout=2)
    out = []
    for subj, body, _ in CASES:
        data = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
        m = await nc.request(subj, data, timeout=2)
        e = json.loads(m.data).get("error") or {}
        out.append((e.get("code"), e.get("err_code"), e.get("description")))
    await nc.close()
    return out


def test_error_catalogue_natsd(natsd, tmp_path):
    got = run(collect)(natsd("-js", "-sd", str(tmp_path)))
    for (subj, body, want), have in zip(CASES, got):
        assert have == want, (subj, body)


def test_error_catalogue_reference(reference, tmp_path):
    """The expectations above are what nats-server itself answers."""
    got = run(collect)(reference("-js", "-sd", str(tmp_path)))
    for (subj, body, want), have in zip(CASES, got):
        assert have == want, (subj, body)


def test_publish_errors_and_not_enabled(natsd, tmp_path):
    from natsd.jetstream.engine import errors as E
    assert E.error("JSStreamNotFoundErr").to_dict() == {"code": 404, "err_code": 10059, "description": "stream not found"}
    assert E.error("JSStreamWrongLastSequenceErrF", seq=3).description == "wrong last sequence: 3"
    assert E.api_response("stream_delete_response", {"success": True}) == \
        b'{"type":"io.nats.jetstream.api.v1.stream_delete_response","success":true}'
    srv = natsd()        # no JetStream at all: no responders

    @run
    async def scenario():
        import nats.errors
        nc = await connect(srv)
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.INFO", b"", timeout=1)
        await nc.close()
    scenario()


def test_direct_get_without_direct_access_has_no_responders(any_server, tmp_path):
    """nats-server subscribes DIRECT.GET only for streams with allow_direct: a request to any
    other stream fails at once with no responders (a 503 status), not after a timeout."""
    import nats
    srv = any_server("-js", "-sd", str(tmp_path / "d"))

    @run
    async def main():
        nc = await connect(srv)
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(
            {"name": "S", "subjects": ["s.>"], "allow_direct": False}).encode(), timeout=2)
        await nc.request("$JS.API.STREAM.CREATE.D", json.dumps(
            {"name": "D", "subjects": ["d.>"], "allow_direct": True}).encode(), timeout=2)
        await nc.request("d.1", b"x", timeout=2)
        for subject in ("$JS.API.DIRECT.GET.S", "$JS.API.DIRECT.GET.nosuch"):
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request(subject, b'{"seq": 1}', timeout=2)
        m = await nc.request("$JS.API.DIRECT.GET.D", b'{"seq": 1}', timeout=2)
        assert m.data == b"x" and m.headers["Nats-Stream"] == "D"
        await nc.close()
    main()


def test_subject_rollup_keeps_the_rolling_message(any_server, tmp_path):
    """Nats-Rollup: sub keeps the message that rolls up (nats-server purges with Keep: 1), also
    when it is the stream's first message."""
    srv = any_server("-js", "-sd", str(tmp_path / "d"))

    @run
    async def main():
        nc = await connect(srv)
        await nc.request("$JS.API.STREAM.CREATE.R", json.dumps(
            {"name": "R", "subjects": ["r.>"], "allow_rollup_hdrs": True}).encode(), timeout=2)
        for body in (b"first", b"second"):
            await nc.request("r.a", body, timeout=2, headers={"Nats-Rollup": "sub"})
            info = json.loads((await nc.request("$JS.API.STREAM.INFO.R", b"", timeout=2)).data)
            assert info["state"]["messages"] == 1
        await nc.close()
    main()


def test_every_error_named_in_the_code_is_in_the_catalogue():
    """`E.error("Name")` is how the code names an API error: every such name must exist in the
    catalogue (nats-server's errors.json constants)."""
    import pathlib
    import re
    from natsd.jetstream.engine.errors import CATALOG
    root = pathlib.Path(__file__).resolve().parents[2] / "natsd"
    used = set()
    for path in root.rglob("*.py"):
        used |= set(re.findall(r'\berror\("(JS[A-Za-z]+)"', path.read_text()))
    assert len(used) > 100
    assert not used - set(CATALOG), sorted(used - set(CATALOG))
