"""One layer turns any unexpected failure in a JetStream API handler into nats-server's error
for that op: the traceback is logged, the reply has no Python exception text and no path."""
import json
import logging
import types

import pytest

from natsd.jetstream.engine import api, api_consumer
from natsd.jetstream.engine import errors as E

LEAKY = OSError(36, "File name too long", "/tmp/store/jetstream/$G/streams/S")


class Exploding(dict):
    def get(self, *a):
        raise LEAKY


@pytest.fixture
def handler(monkeypatch):
    sent = []
    monkeypatch.setattr(api, "publish", lambda sl, subj, reply, hdr, data: sent.append((subj, data)))
    monkeypatch.setattr(api_consumer, "publish", lambda sl, subj, reply, hdr, data: sent.append((subj, data)))
    monkeypatch.setattr(api.advisories, "api_audit", lambda *a, **k: None)
    loop = types.SimpleNamespace(call_soon=lambda fn, *a: fn(*a))
    server = types.SimpleNamespace(loop=loop, cluster=None)
    engine = types.SimpleNamespace(server=server, domain=None, stopped=False, strict=True,
                                   cluster=None, meta=None, listing=None)
    jsa = types.SimpleNamespace(streams=Exploding(), api_total=0, api_errors=0, sublist=None,
                                lookup=lambda name: (_ for _ in ()).throw(LEAKY))
    acc = types.SimpleNamespace(name="$G", sublist=types.SimpleNamespace(match=lambda s: types.SimpleNamespace(total=0)))
    h = api.ApiHandler(engine)
    sub = types.SimpleNamespace(data=(acc, jsa))

    def request(subject, payload=b""):
        sent.clear()
        h.on_request(sub, subject, b"_INBOX.r", None, payload)
        assert len(sent) == 1, sent
        return json.loads(sent[0][1])
    return request


@pytest.mark.parametrize("subject,payload,want", [
    (b"$JS.API.STREAM.INFO.S", b"", (500, 10051, "internal error")),
    (b"$JS.API.STREAM.PURGE.S", b"", (500, 10051, "internal error")),
    (b"$JS.API.STREAM.DELETE.S", b"", (500, 10050, "stream delete failed")),
    (b"$JS.API.STREAM.MSG.GET.S", b'{"seq":1}', (500, 10051, "internal error")),
    (b"$JS.API.CONSUMER.INFO.S.C", b"", (500, 10051, "internal error")),
    (b"$JS.API.CONSUMER.CREATE.S.C", b'{"stream_name":"S","config":{}}',
     (500, 10012, "error creating store for consumer")),
])
def test_unexpected_failures_get_generic_replies(handler, caplog, subject, payload, want):
    with caplog.at_level(logging.ERROR, logger="natsd"):
        reply = handler(subject, payload)
    assert (reply["error"]["code"], reply["error"]["err_code"], reply["error"]["description"]) == want
    text = json.dumps(reply)
    assert "/tmp/" not in text and "Errno" not in text and "OSError" not in text
    assert reply["type"] == "io.nats.jetstream.api.v1." + api.TYPES[".".join(subject.decode().split(".")[2:4])
                                                                     if b"CONSUMER" in subject else
                                                                     ".".join(subject.decode().split(".")[2:-1])]
    # the real error, with its traceback, is in the log
    assert "File name too long" in caplog.text and "Traceback" in caplog.text


def test_internal_error_catalogue():
    assert E.internal_error("STREAM.CREATE").to_dict() == {
        "code": 500, "err_code": 10049, "description": "error creating store for stream"}
    assert E.internal_error("CONSUMER.DURABLE.CREATE").err_code == 10012
    assert E.internal_error("STREAM.PURGE").to_dict() == {"code": 500, "err_code": 10051,
                                                          "description": "internal error"}
    # replies never fail on text that is not UTF-8: Go's encoder writes U+FFFD per bad byte
    assert E.dumps({"subject": b"s.\xff\xe2\x82<".decode("utf-8", "surrogateescape")}) == \
        b'{"subject":"s.\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\u003c"}'
