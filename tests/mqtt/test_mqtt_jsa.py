"""natsd/mqtt/jsa.py's requests: an answer reaches its callback (decoded, or
as bytes with its error still found), and one timer for all waiting requests gives each its
JsTimeout at its own deadline, oldest first, and is set again for the next."""
from types import SimpleNamespace

from natsd._core.sublist import Sublist
from natsd.mqtt import jsa as J


def _jsa(monkeypatch):
    timers, clock = [], [100.0]
    monkeypatch.setattr(J, "monotonic", lambda: clock[0])
    loop = SimpleNamespace(call_later=lambda delay, fn, *a: timers.append((delay, fn))
                           or SimpleNamespace(cancel=lambda: timers.remove((delay, fn))))
    account = SimpleNamespace(sublist=Sublist(), internal_client=None)
    jsa = J.Jsa(SimpleNamespace(loop=loop), account, "h1")
    return jsa, account.sublist, timers, clock


def test_answers_reach_their_callbacks(monkeypatch):
    """(The requests are caught as published: internal subscribers run on the loop, which
    this test does not run; the whole path runs in every other MQTT test.)"""
    jsa, sl, timers, _ = _jsa(monkeypatch)
    sent = []
    monkeypatch.setattr(J, "publish", lambda sublist, subject, reply, hdr, payload: sent.append(reply))
    got = []
    jsa.store("$MQTT.msgs.ok", None, b"x", lambda a, e: got.append((a, e)))
    jsa.store("$MQTT.msgs.ok", None, b"x", lambda a, e: got.append((a, e)), decoded=False)
    jsa.store("$MQTT.msgs.bad", None, b"x", lambda a, e: got.append((a, e)), decoded=False)
    assert [r.rsplit(b".", 2)[0] for r in sent] == [b"$MQTT.JSA.h1"] * 3
    ok, bad = b'{"stream":"$MQTT_msgs","seq":7}', b'{"error":{"code":503,"err_code":10077,"description":"x"}}'
    for reply, answer in zip(sent, (ok, ok, bad)):
        jsa._answer(None, reply, None, None, answer)
    jsa._answer(None, sent[0], None, None, ok)          # answered already: nobody waits
    assert got[0] == ({"stream": "$MQTT_msgs", "seq": 7}, None)
    assert got[1] == (ok, None)
    assert got[2][0] is None and isinstance(got[2][1], J.JsApiError) and got[2][1].err_code == 10077
    assert len(got) == 3 and not jsa.waiting


def test_one_timer_times_out_each_request_at_its_deadline(monkeypatch):
    jsa, sl, timers, clock = _jsa(monkeypatch)
    out = []
    jsa.api(J.MSG_LOAD, "$JS.API.STREAM.MSG.GET.X", b"", lambda a, e: out.append(("first", type(e))))
    assert len(timers) == 1 and timers[0][0] == J.API_TIMEOUT
    clock[0] += 2
    jsa.api(J.MSG_LOAD, "$JS.API.STREAM.MSG.GET.X", b"", lambda a, e: out.append(("second", type(e))))
    assert len(timers) == 1, "one timer for all"
    clock[0] += 3                       # the first one's deadline
    timers.pop()[1]()
    assert out == [("first", J.JsTimeout)]
    assert timers[0][0] == 2.0, "set again for the second one's deadline"
    clock[0] += 2
    timers.pop()[1]()
    assert out == [("first", J.JsTimeout), ("second", J.JsTimeout)] and not timers and not jsa.waiting
    jsa.close()
