"""Nats-TTL read and judged as nats-server does (getMessageTTL / parseMessageTTL): a Go duration
of at least 1s, digits only (int64 that wraps like Go's parseInt64), "never"; an invalid value
counts as no TTL for the "disabled" check, so it is 10165 invalid on every stream; an empty
value is no TTL at all."""
import json

import pytest

from natsd.jetstream.engine.headers import parse_ttl, ttl_header
from tests.support.rawclient import RawClient


def test_parse_ttl_unit():
    assert parse_ttl("never") == -1 and parse_ttl("NEVER") == -1
    assert parse_ttl("5") == 5 and parse_ttl("1.5s") == 1 and parse_ttl("2m") == 120
    assert parse_ttl("999999999999999999999") == 3875820019684212735      # Go's int64 wrap
    for bad in ("-5", "+5", "0", "-1s", "1ns", "999ms", "5x", "5 ", "", "1e3", "18446744073709551615"):
        with pytest.raises(ValueError):
            parse_ttl(bad)
    hdr = b"NATS/1.0\r\nX-Nats-TTL: 9\r\nNats-TTL:   7 \r\nNats-TTL: 8\r\n\r\n"
    assert ttl_header(hdr) == "7 "
    assert ttl_header(b"NATS/1.0\r\nnats-ttl: 5\r\n\r\n") is None


CASES = [("s.a", v) for v in ("-5", "-1", "0", "5", "+5", "-5s", "1ns", "never", "1.5s", "5 ", "5x", "",
                              "999999999999999999999", "18446744073709551615", "9223372036854775807",
                              "-9223372036854775808")]
CASES += [("n.a", v) for v in ("-5", "5", "never", "+5", "")]


def _play(server):
    with RawClient(server.port) as c:
        c.connect(no_responders=True, protocol=1)
        c.request(b"$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"],
                                                         "allow_msg_ttl": True}).encode(), None, 3)
        c.request(b"$JS.API.STREAM.CREATE.N", json.dumps({"name": "N", "subjects": ["n.>"]}).encode(), None, 3)
        out = []
        for subj, v in CASES:
            hdr = b"NATS/1.0\r\nNats-TTL: " + v.encode() + b"\r\n\r\n"
            out.append(c.request(subj.encode(), b"x", hdr, 3))
    return [json.loads(r) for r in out]


WANT = {("s.a", "-5"): 10165, ("s.a", "+5"): 10165, ("s.a", "0"): 10165, ("n.a", "-5"): 10165,
        ("n.a", "5"): 10166, ("n.a", "never"): 10166, ("n.a", "+5"): 10165,
        ("s.a", "999999999999999999999"): None, ("s.a", ""): None, ("n.a", ""): None}


def test_ttl_natsd(natsd, tmp_path):
    got = _play(natsd("-js", "-sd", str(tmp_path)))
    for case, r in zip(CASES, got):
        if case in WANT:
            assert (r.get("error") or {}).get("err_code") == WANT[case], (case, r)


def test_ttl_matches_reference(natsd, reference, tmp_path):
    ours = _play(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = _play(reference("-js", "-sd", str(tmp_path / "b")))
    assert [(c, o) for c, o in zip(CASES, ours)] == [(c, t) for c, t in zip(CASES, theirs)]
