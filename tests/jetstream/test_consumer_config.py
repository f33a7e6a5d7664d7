"""ConsumerConfig unit tests: decoding, nats-server defaults, validation error codes, the JSON
rendering (omit-empty) and which fields an update may change; plus pull request parsing."""
import pytest

from natsd.gofmt import go_duration, go_time

from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine.errors import ApiError
from natsd.jetstream.engine.pull import BadRequest, parse_next_request, status_hdr

NS = 1_000_000_000
STREAM = {"name": "S", "subjects": ["s.>"], "retention": "limits", "num_replicas": 1}


def make(raw, stream=STREAM, durable=True):
    cfg = cc.decode_config(raw)
    cc.set_static_metadata(cfg)
    cc.set_defaults(cfg, stream)
    cc.check(cfg, stream)
    return cfg


def err_code(raw, stream=STREAM):
    with pytest.raises(ApiError) as ei:
        make(raw, stream)
    return ei.value.err_code


def test_defaults_pull_explicit():
    cfg = make({"durable_name": "d", "ack_policy": "explicit"})
    assert cfg["ack_wait"] == 30 * NS and cfg["max_deliver"] == -1
    assert cfg["max_ack_pending"] == 1000 and cfg["max_waiting"] == 512
    assert cfg["inactive_threshold"] == 0
    out = cc.to_json(cfg)
    assert list(out) == ["durable_name", "deliver_policy", "ack_policy", "ack_wait", "max_deliver",
                         "replay_policy", "max_waiting", "max_ack_pending", "num_replicas",
                         "metadata"]
    assert out["metadata"] == {"_nats.req.level": "0"}
    dyn = cc.to_json(cfg, dynamic_metadata=True)["metadata"]
    assert dyn == {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"}


def test_defaults_ack_none_push_ephemeral():
    cfg = make({"deliver_subject": "x"})
    out = cc.to_json(cfg)
    assert out["ack_policy"] == "none" and "ack_wait" not in out and "max_ack_pending" not in out
    assert "max_waiting" not in out and out["inactive_threshold"] == 5 * NS
    assert out["num_replicas"] == 0


def test_backoff_sets_ack_wait():
    cfg = make({"durable_name": "d", "ack_policy": "explicit", "backoff": [NS, 2 * NS],
                "max_deliver": 5, "ack_wait": 7})
    assert cfg["ack_wait"] == NS


@pytest.mark.parametrize("raw,code", [
    ({"durable_name": "a", "bogus": 1}, 10025),
    ({"durable_name": "a", "ack_policy": "bogus"}, 10025),
    ({"durable_name": "a", "ack_wait": "x"}, 10025),
    ({"durable_name": "a", "deliver_subject": "x.*"}, 10079),
    ({"durable_name": "a", "deliver_subject": "x", "idle_heartbeat": 5_000_000}, 10083),
    ({"durable_name": "a", "flow_control": True}, 10089),
    ({"durable_name": "a", "idle_heartbeat": NS}, 10088),
    ({"durable_name": "a", "deliver_subject": "x", "flow_control": True}, 10108),
    ({"durable_name": "a", "ack_policy": "explicit", "backoff": [NS, NS], "max_deliver": 1}, 10116),
    ({"durable_name": "a", "filter_subject": "s.a", "filter_subjects": ["s.b"]}, 10136),
    ({"durable_name": "a", "filter_subjects": ["s.>", "s.b"]}, 10138),
    ({"durable_name": "a", "filter_subjects": [""]}, 10139),
    ({"durable_name": "a", "name": "b"}, 10132),
    ({"durable_name": "a", "rate_limit_bps": 10}, 10086),
    ({"durable_name": "a", "deliver_policy": "by_start_sequence"}, 10094),
    ({"durable_name": "a", "deliver_policy": "by_start_time"}, 10094),
    ({"durable_name": "a", "deliver_policy": "last_per_subject"}, 10094),
    ({"durable_name": "a", "opt_start_seq": 4}, 10094),
    ({"durable_name": "a", "sample_freq": "x%"}, 10095),
    ({"durable_name": "a", "deliver_subject": "q", "max_waiting": 3}, 10080),
    ({"durable_name": "a", "deliver_subject": "q", "max_ack_pending": 3}, 10082),
    ({"durable_name": "a", "deliver_subject": "s.x"}, 10081),
    ({"name": "a.b"}, 10052),
    ({"durable_name": "a", "max_expires": 10}, 10115),
    ({"durable_name": "a", "priority_groups": ["g"]}, 10196),
    ({"durable_name": "a", "priority_policy": "pinned_client"}, 10159),
])
def test_validation_codes(raw, code):
    assert err_code(raw) == code


def test_workqueue_pull_requires_ack():
    wq = dict(STREAM, retention="workqueue")
    assert err_code({"durable_name": "a", "ack_policy": "none"}, wq) == 10084


def test_times_roundtrip():
    cfg = make({"durable_name": "a", "deliver_policy": "by_start_time",
                "opt_start_time": "2020-01-01T00:00:00.5+01:00"})
    assert cfg["opt_start_time"][1] == cc.parse_time("2019-12-31T23:00:00.5Z")
    assert cc.to_json(cfg)["opt_start_time"] == "2020-01-01T00:00:00.5+01:00"
    assert go_time(cc.parse_time("2026-11-22T03:45:12.3379Z")) == "2026-11-22T03:45:12.3379Z"
    assert go_time(None) == "0001-01-01T00:00:00Z"


def test_go_duration():
    assert go_duration(10 * NS) == "10s"
    assert go_duration(90 * NS) == "1m30s"
    assert go_duration(500_000_000) == "500ms"
    assert go_duration(3600 * NS) == "1h0m0s"
    assert go_duration(1500) == "1.5µs"


def test_update_rules():
    old = make({"durable_name": "d", "ack_policy": "explicit"})

    def upd(**kw):
        raw = {"durable_name": "d", "ack_policy": "explicit"}
        raw.update(kw)
        new = make(raw)
        return cc.check_update(old, new)
    assert upd() is None
    assert upd(description="x") is None and upd(max_ack_pending=5) is None
    assert upd(filter_subject="s.a") is None and upd(max_deliver=3) is None
    assert upd(ack_policy="all").description == "ack policy can not be updated"
    assert upd(deliver_policy="new").description == "deliver policy can not be updated"
    assert upd(replay_policy="original").description == "replay policy can not be updated"
    assert upd(mem_storage=True).description == "storage type can not be updated"
    assert upd(max_waiting=10).description == "max waiting can not be updated"
    e = upd(deliver_subject="x")
    assert (e.code, e.err_code, e.description) == (500, 10012, "can not update pull consumer to push based")


def test_create_request_decoding():
    s, cfg, action, ped = cc.decode_create_request({"stream_name": "S", "config": {"name": "x"},
                                                     "action": "create"})
    assert (s, cfg["name"], action, ped) == ("S", "x", "create", False)
    assert cc.decode_create_request({"stream_name": "S"})[2] == "create_or_update"
    with pytest.raises(ApiError) as ei:
        cc.decode_create_request({"stream_name": "S", "action": "nope"})
    assert ei.value.err_code == 10025
    with pytest.raises(ApiError):
        cc.decode_create_request({"stream_name": "S", "x": 1})


def test_pull_request_parsing():
    assert parse_next_request(b"")["batch"] == 1
    assert parse_next_request(b" 7 ")["batch"] == 7
    r = parse_next_request(b'{"batch":3,"expires":5000000000,"no_wait":true,"max_bytes":9}')
    assert (r["batch"], r["expires"], r["no_wait"], r["max_bytes"]) == (3, 5 * NS, True, 9)
    with pytest.raises(BadRequest) as ei:
        parse_next_request(b'{"batch":1,"expires":1000,"idle_heartbeat":1000}')
    assert str(ei.value) == "heartbeat value too large"
    with pytest.raises(BadRequest) as ei:
        parse_next_request(b"{bad")
    assert str(ei.value) == "invalid character 'b' looking for beginning of object key string"
    assert status_hdr(408, "Request Timeout", (2, 0)) == (
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 2\r\nNats-Pending-Bytes: 0\r\n\r\n")


@pytest.mark.parametrize("spec_name", ["pull", "msg_get", "purge", "info"])
def test_plain_bodies_read_as_go_reads_them(spec_name):
    """json.loads for common request bodies (natsd/jetstream/engine/gojson.py decode_plain) against
    the Go-exact decoder on seeded random bodies: where the shortcut answers, both agree;
    everything else (case-folded names, wrong types, floats, "-0" for unsigned, big numbers,
    lone surrogates, null, junk) falls through to the Go decoder."""
    import json
    import random
    from natsd.jetstream.engine import api, gojson, pull
    spec = {"pull": pull._NEXT_REQ, "msg_get": api._GET_REQ, "purge": api._PURGE_REQ,
            "info": api._INFO_REQ}[spec_name]
    rnd = random.Random(11)
    names = list(spec) + ["Batch", "SEQ", "unknown", "no_Wait"]
    values = [0, 1, -1, 7, 2 ** 31, 2 ** 63 - 1, 2 ** 63, 2 ** 64, -2 ** 63, -2 ** 63 - 1, 1.0, 1e3,
              True, False, None, "", "g", "\u00e9", "\ud800", "x" * 20, [], {}, "5s"]
    plain = fallback = 0
    for _ in range(3000):
        d = {rnd.choice(names): rnd.choice(values) for _ in range(rnd.randrange(0, 5))}
        body = json.dumps(d, ensure_ascii=rnd.random() < 0.5).encode("utf-8", "surrogatepass")
        if rnd.random() < 0.3:
            body = body.replace(b": 0", b": -0")
        if rnd.random() < 0.05:
            body = body[:-1]                              # cut short
        got = gojson.decode_plain(body, spec)
        try:
            want = gojson.unmarshal(gojson.loads_node(body), spec, "", strict=False, data=body)
        except gojson.JSONError:
            want = "error"
        if got is None:
            fallback += 1
            continue
        plain += 1
        assert got == want, body
    assert plain > 100 and fallback > 300           # both ways were taken
