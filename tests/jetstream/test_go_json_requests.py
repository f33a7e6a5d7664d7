"""API request bodies decoded as nats-server's Go decoder decodes them (natsd/jetstream/gojson).

The expected texts are nats-server v2.15.1's (Go 1.27) replies, recorded with the same
requests; the end-to-end tests send them to natsd and to the reference, the unit tests run
the decoder directly (fast, no server)."""
import pytest

from natsd.gofmt import parse_go_duration

from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import gojson
from natsd.jetstream.engine import streamconfig as sc
from tests.jetstream.test_api_robustness import _check, _play, err

SC = "StreamConfigRequest"

# (body of $JS.API.STREAM.CREATE.T, nats-server's description after "invalid JSON: ")
STREAM = [
    (b'{"name":"T","mirror":{"name":5}}',
     "json: cannot unmarshal number into Go struct field StreamConfigRequest.mirror.name of type string"),
    (b'{"name":"T","sources":[5]}',
     "json: cannot unmarshal number into StreamConfigRequest.sources.0 of type server.StreamSource"),
    (b'{"name":"T","subjects":"x"}',
     "json: cannot unmarshal string into Go struct field StreamConfigRequest.subjects of type []string"),
    (b'{"name":"T","metadata":{"a":5}}',
     "json: cannot unmarshal number into Go struct field StreamConfigRequest.metadata.a of type string"),
    (b'{"name":"T","metadata":{"0":5}}',
     "json: cannot unmarshal number into StreamConfigRequest.metadata.0 of type string"),
    (b'{"name":"T","mirror":{"opt_start_time":5}}',
     "json: cannot unmarshal number into Go struct field StreamConfigRequest.mirror.opt_start_time of type "
     "time.Time"),
    (b'{"name":"T","mirror":{"opt_start_time":"x"}}',
     'parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"'),
    (b'{"name":"T","sources":[{"subject_transforms":[{"src":5}]}]}',
     "json: cannot unmarshal number into Go struct field StreamConfigRequest.sources.0.subject_transforms.0.src "
     "of type string"),
    (b'{"name":"T","placement":{"cluster":"","tags":["a",5]}}',
     "json: cannot unmarshal number into StreamConfigRequest.placement.tags.1 of type string"),
    (b'{"name":"T","consumer_limits":{"max_ack_pending":"x"}}',
     "json: cannot unmarshal string into Go struct field StreamConfigRequest.consumer_limits.max_ack_pending of "
     "type int"),
    (b'{"name":"T","mirror":[]}',
     "json: cannot unmarshal array into Go struct field StreamConfigRequest.mirror of type server.StreamSource"),
    (b'{"name":"T","max_msgs":true}',
     "json: cannot unmarshal bool into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"T","max_msgs":1E3}',
     "json: cannot unmarshal number 1E3 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"T","max_msgs":-0.0}',
     "json: cannot unmarshal number -0.0 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"T","max_msgs":1e400}',
     "json: cannot unmarshal number 1e400 into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"T","no_ack":"true"}',
     "json: cannot unmarshal string into Go struct field StreamConfigRequest.no_ack of type bool"),
    (b'{"name":"T","retention":null}', 'can not unmarshal "null"'),
    (b'{"name":"T","retention":5}', 'can not unmarshal "5"'),
    (b'{"name":"T","retention":"lim\\u0069ts"}', 'can not unmarshal "\\"lim\\\\u0069ts\\""'),
    (b'{"name":"T","retention":{"a": 1}}', 'can not unmarshal "{\\"a\\": 1}"'),
    (b'{"name":"T","persist_mode":null}', 'can not unmarshal "null"'),
    (b'{"name":"T","compression":5}', "json: cannot unmarshal number into Go value of type string"),
    (b'{"name":"T","x":1,"max_msgs":"x"}', 'json: unknown field "x"'),
    (b'{"name":"T","max_msgs":"x","x":1}',
     "json: cannot unmarshal string into Go struct field StreamConfigRequest.max_msgs of type int64"),
    (b'{"name":"T","\xff":1}', 'json: unknown field "\ufffd"'),
    (b'{"name":"T","x\\"y":1}', 'json: unknown field "x\\"y"'),
    (b'{"Name":{}}', "json: cannot unmarshal object into Go struct field StreamConfigRequest.Name of type string"),
    (b'{"name":"T"', "unexpected EOF"),
    (b'{"name"', "unexpected EOF"),
    (b'"abc', "unexpected EOF"),
    (b'1e', "unexpected EOF"),
    (b'{"name":"\\u12', "unexpected EOF"),
    (b'{"name":"T\x01"}', "invalid character '\\x01' in string at offset 11"),
    (b'{"name":"\\x"}', "invalid escape sequence `\\x` in string at offset 11"),
    (b'{"name":"\\ x"}', 'invalid escape sequence "\\\\ " in string at offset 11'),
    (b'{"name":"\\u1x34"}', "invalid escape sequence `\\u1x34` in string at offset 15"),
    (b'{"name":"\\\xc3\xa9"}', 'invalid escape sequence "\\\\\\xc3" in string at offset 11'),
    # Go's decoder buffers 64 bytes, then 128, ...: an escape cut by that end is reported cut
    (b'{"' + b"a" * 54 + b'":"\\u12tt"}', "invalid escape sequence `\\u12t` in string at offset 64"),
    (b'{"' + b"a" * 118 + b'":"\\u1xyz"}', "invalid escape sequence `\\u1xy` in string at offset 128"),
    (b'{"' + b"a" * 57 + b'":"\\u12tt"}', "invalid escape sequence `\\u12tt` in string at offset 68"),
    (b'{"name":"T"]', "invalid character ']' after object key:value pair at offset 12"),
    (b'[1 2]', "invalid character '2' after array element at offset 4"),
    (b'[1,]', "invalid character ']' looking for beginning of value at offset 4"),
    (b'{"a":1,}', "invalid character '}' looking for beginning of object key string at offset 8"),
    (b'{"a" 1}', "invalid character '1' after object key at offset 6"),
    (b'{"name":01}', "invalid character '1' after object key:value pair at offset 10"),
    (b'{"name":-a}', "invalid character 'a' in numeric literal at offset 10"),
    (b'{"name":1.a}', "invalid character 'a' in numeric literal at offset 11"),
    (b'{"name":tx}', "invalid character 'x' in literal true (expecting 'r') at offset 10"),
    (b'{"name":nul}', "invalid character '}' in literal null (expecting 'l') at offset 12"),
    (b'\x80', "invalid character '\\x80' looking for beginning of value at offset 1"),
    (b'\xdc\x82', "invalid character '\u0702' looking for beginning of value at offset 2"),
    (b'{"a":\'x\'}', "invalid character '\\'' looking for beginning of value at offset 6"),
    (b'{"name":"T"}}', "invalid character '}' looking for beginning of value at offset 13"),
    (b'{"name":"T"} x', "invalid character 'x' looking for beginning of value at offset 14"),
    (b'{"name":NaN}', "invalid character 'N' looking for beginning of value at offset 9"),
    (b'{"x":' + b'[' * 10001, "exceeded max depth at offset 10005"),
    (b'[' * 10000 + b']' * 10000, "json: cannot unmarshal array into Go value of type server.StreamConfigRequest"),
    (b'{"a":' * 10000 + b'1' + b'}' * 10000, 'json: unknown field "a"'),
    (b'true', "json: cannot unmarshal bool into Go value of type server.StreamConfigRequest"),
    (b'{"name":"T"} 5', "json: cannot unmarshal number into Go value of type server.StreamConfigRequest"),
]

CCR = "CreateConsumerRequest"
# (config object of $JS.API.CONSUMER.CREATE.S, description after "invalid JSON: ")
CONSUMER = [
    (b'{"max_deliver":"x"}',
     "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"max_deliver":1.5}',
     "json: cannot unmarshal number 1.5 into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"max_deliver":1.0}',
     "json: cannot unmarshal number 1.0 into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"opt_start_seq":-1}',
     "json: cannot unmarshal number -1 into Go struct field CreateConsumerRequest.config.opt_start_seq of type "
     "uint64"),
    (b'{"num_replicas":9223372036854775808}',
     "json: cannot unmarshal number 9223372036854775808 into Go struct field CreateConsumerRequest.config."
     "num_replicas of type int"),
    (b'{"backoff":[1,"x"]}',
     "json: cannot unmarshal string into CreateConsumerRequest.config.backoff.1 of type time.Duration"),
    (b'{"backoff":[1,2.5]}',
     "json: cannot unmarshal number 2.5 into CreateConsumerRequest.config.backoff.1 of type time.Duration"),
    (b'{"filter_subjects":[1]}',
     "json: cannot unmarshal number into CreateConsumerRequest.config.filter_subjects.0 of type string"),
    (b'{"metadata":[]}',
     "json: cannot unmarshal array into Go struct field CreateConsumerRequest.config.metadata of type "
     "map[string]string"),
    (b'{"deliver_policy":null}', 'can not unmarshal "null"'),
    (b'{"deliver_policy":5}', 'can not unmarshal "5"'),
    (b'{"max_deliver":"x","deliver_policy":"bad"}',
     "json: cannot unmarshal string into Go struct field CreateConsumerRequest.config.max_deliver of type int"),
    (b'{"opt_start_time":"2020-01-01"}',
     'parsing time "2020-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
    (b'{"opt_start_time":"2020-01-01T00:00:00"}',
     'parsing time "2020-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"'),
    (b'{"opt_start_time":"2020-01-01T25:00:00Z"}', 'parsing time "2020-01-01T25:00:00Z": hour out of range'),
    (b'{"opt_start_time":"2020-01-01T00:00:00+0100"}',
     'parsing time "2020-01-01T00:00:00+0100" as "2006-01-02T15:04:05Z07:00": cannot parse "+0100" as "Z07:00"'),
    (b'{"opt_start_time":""}', 'parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"'),
    (b'[]', "json: cannot unmarshal array into Go struct field CreateConsumerRequest.config of type "
            "server.ConsumerConfig"),
    (b'5', "json: cannot unmarshal number into Go struct field CreateConsumerRequest.config of type "
           "server.ConsumerConfig"),
]

REQUESTS = [
    (b'{"stream_name":"S","pedantic":1}',
     "json: cannot unmarshal number into Go struct field CreateConsumerRequest.pedantic of type bool"),
    (b'{"stream_name":"S","action":null}', "unknown consumer action: null"),
    (b'{"stream_name":"S","action":"bogus"}', 'unknown consumer action: "bogus"'),
    (b'[]', "json: cannot unmarshal array into Go value of type server.CreateConsumerRequest"),
]


def _stream_cases():
    return [("$JS.API.STREAM.CREATE.T", body, None, err(400, 10025, "invalid JSON: " + want))
            for body, want in STREAM]


def _consumer_cases():
    cases = [("$JS.API.CONSUMER.CREATE.S", b'{"stream_name":"S","config":' + body + b"}", None,
              err(400, 10025, "invalid JSON: " + want)) for body, want in CONSUMER]
    cases += [("$JS.API.CONSUMER.CREATE.S", body, None, err(400, 10025, "invalid JSON: " + want))
              for body, want in REQUESTS]
    # accepted by Go: later values merge into earlier ones, null and "" as Go reads them
    cases += [("$JS.API.CONSUMER.CREATE.S", b'{"stream_name":"S","config":{}} {"config":{"max_deliver":3}}', None,
               {"config": {"max_deliver": 3}}),
              ("$JS.API.CONSUMER.CREATE.S", b'{"stream_name":"S","config":{"opt_start_time":null}}', None,
               {"stream_name": "S"}),
              ("$JS.API.CONSUMER.CREATE.S", b'{"stream_name":"S","config":{"metadata":{"a":null}}}', None,
               {"config": {"metadata": {"a": ""}}}),
              ("$JS.API.CONSUMER.CREATE.S", b'{"stream_name":null}', None,
               err(400, 10056, "stream name in subject does not match request")),
              ("$JS.API.CONSUMER.CREATE.S", b'null', None,
               err(400, 10056, "stream name in subject does not match request"))]
    return cases


CASES = _stream_cases() + _consumer_cases()
SETUP = [("$JS.API.STREAM.CREATE.S", '{"name":"S","subjects":["s.>"]}')]


def test_decoder_unit():
    """The decoder alone gives nats-server's texts."""
    for body, want in STREAM:
        with pytest.raises(gojson.JSONError) as ei:
            gojson.unmarshal_request(body, sc.STREAM_FIELDS, SC)
        assert str(ei.value) == want, body
    for body, want in CONSUMER:
        with pytest.raises(gojson.JSONError) as ei:
            gojson.unmarshal_request(b'{"config":' + body + b"}", cc.CREATE_REQUEST, CCR)
        assert str(ei.value) == want, body
    assert gojson.unmarshal_request(b"", sc.STREAM_FIELDS, SC) == {}
    assert gojson.unmarshal_request(b" \t\r\n", sc.STREAM_FIELDS, SC) == {}
    assert gojson.unmarshal_request(b'{"name":"X"} {"max_msgs":5} null', sc.STREAM_FIELDS, SC) == \
        {"name": "X", "max_msgs": 5}
    assert gojson.unmarshal_request(b'{"Name":"\xff\\ud800\\ud83d\\ude00"}', sc.STREAM_FIELDS, SC) == \
        {"name": "\ufffd\ufffd\U0001F600"}
    assert gojson.unmarshal_request(b'{"name":"T","discard":"NEW"}', sc.STREAM_FIELDS, SC)["discard"] == "new"
    # not strict (Go's json.Unmarshal fallback): unknown fields are ignored, one value only
    assert gojson.unmarshal_request(b'{"name":"T","x":1}', sc.STREAM_FIELDS, SC, strict=False) == {"name": "T"}
    with pytest.raises(gojson.JSONError) as ei:
        gojson.unmarshal_request(b'{"name":"T"} {"x":1}', sc.STREAM_FIELDS, SC, strict=False)
    assert str(ei.value) == "invalid character '{' after top-level value"
    assert gojson.is_empty_request(b" { } ") and not gojson.is_empty_request(b"null")
    # the json.loads shortcut answers as Go's parser would, on seeded bodies
    import random
    rnd = random.Random(5)
    parts = [b"{", b"}", b" ", b"\n", b'"a"', b":", b"1", b"NaN", b"[", b"]", b",", b"\xff", b"null",
             b'"\\ud800"', b"{}", b"\t"]
    for _ in range(3000):
        body = b"".join(rnd.choice(parts) for _ in range(rnd.randrange(1, 7)))
        try:
            v = gojson.loads(body)
            want = isinstance(v, dict) and not v
        except gojson.JSONError:
            want = False
        assert gojson.is_empty_request(body) == want, body
    assert gojson.is_json_object_or_array(b"\t [") and not gojson.is_json_object_or_array(b"5")


PLAIN_BODIES = [  # (spec, body): each decoded by json.loads' shortcut, or left to Go's rules
    (cc.CREATE_REQUEST, b'{"stream_name":"$MQTT_msgs","config":{"durable_name":"d","deliver_policy":'
                        b'"new","ack_policy":"explicit","ack_wait":30000000000,"filter_subject":'
                        b'"$MQTT.msgs.a","replay_policy":"instant","max_ack_pending":1024,'
                        b'"deliver_subject":"$MQTT.sub.x","num_replicas":0,"mem_storage":true}}'),
    (cc.CREATE_REQUEST, b'{"config":{"deliver_policy":"undefined","ack_policy":"all"},"action":""}'),
    (cc.CREATE_REQUEST, b'{"config":{"durable_name":"a"},"action":"update","pedantic":true}'),
    (cc.CREATE_REQUEST, b'{"config":{"deliver_policy":"\\u006eew"}}'),       # an escape: Go's rules
    (cc.CREATE_REQUEST, b'{"config":{"durable_name":"a"},"config":{"ack_wait":5}}'),    # merged in Go
    (cc.CREATE_REQUEST, b'{"config":{"Durable_Name":"a"}}'),                   # Go ignores the case
    (cc.CREATE_REQUEST, b'{"config":null}'),
    (sc.STREAM_FIELDS, b'{"name":"T","discard":"OLD","retention":"interest","storage":"memory"}'),
    (sc.STREAM_FIELDS, b'{"name":"T","max_msgs":-1,"max_age":0}'),
    (sc.STREAM_FIELDS, b'{"name":"T","compression":"s2"}'),    # its check reads Go's node
]


def test_the_json_loads_shortcut_decodes_as_go_rules_do(monkeypatch):
    """Where the shortcut takes a body (nested structs and enums included), it gives what Go's
    rules give; where it cannot be sure, it leaves the body to them."""
    taken = []
    for spec, body in PLAIN_BODIES:
        plain = gojson.decode_plain(body, spec)
        with monkeypatch.context() as m:
            m.setattr(gojson, "decode_plain", lambda data, spec: None)
            try:
                ruled = gojson.unmarshal_request(body, spec, "R")
            except gojson.JSONError as e:
                ruled = e
        if plain is not None:
            assert plain == ruled, body
        taken.append(plain is not None)
    assert taken == [True, True, True, False, False, False, False, True, True, False]


def test_go_durations():
    d = parse_go_duration
    assert d("1.5s") == 1_500_000_000 and d("-5s") == -5_000_000_000 and d("+1h2m") == 3_720_000_000_000
    assert d("0") == 0 and d("1\u00b5s") == 1000 and d(".5ms") == 500_000
    for bad in ("", "5", "+5", "-", "1x", "s", "9223372036854775808ns", "1..5s"):
        with pytest.raises(ValueError):
            d(bad)
    with pytest.raises(ValueError, match='^time: unknown unit "x" in duration "1x"$'):
        d("1x")
    with pytest.raises(ValueError, match='^time: missing unit in duration "5"$'):
        d("5")


def test_decoding_natsd(natsd, tmp_path):
    bad = _check(_play(natsd("-js", "-sd", str(tmp_path)), CASES, SETUP), CASES)
    assert not bad, "\n".join(bad)


def test_decoding_reference(reference, tmp_path):
    bad = _check(_play(reference("-js", "-sd", str(tmp_path)), CASES, SETUP), CASES)
    assert not bad, "\n".join(bad)
