"""The move of pre-2.10 retained messages (`$MQTT.rmsgs`, one subject) to a subject each, step
by step: AccountSessions._transfer_retained driven by hand against a JetStream that answers
as told, the clock too. End to end, with stores nats-server 2.15.1 also upgrades, it is in
test_mqtt_store_interop.py; here are the limits nats-server puts on it: 10 s at most (then
its notice), and a failure to load or to remove a message ends the move without failing the
start (mqtt.go transferRetainedToPerKeySubjectStream)."""
import base64
import json
import logging
from types import SimpleNamespace

import pytest

from natsd.mqtt import jsa as jsa_mod
from natsd.mqtt import sessions


class Store:
    """The old subject's messages, answering the transfer's calls; each call takes `step` s."""

    def __init__(self, count, clock, step=0.0, fail=None):
        self.old = [(seq, {"subject": "dev.%d" % seq, "topic": "dev/%d" % seq, "msg": "b24="})
                    for seq in range(1, count + 1)]
        self.stored, self.deleted = [], []
        self.clock, self.step, self.fail = clock, step, fail or {}

    def _answer(self, kind, done, value):
        self.clock[0] += self.step
        err = self.fail.get(kind)
        if err is not None:
            done(None, err)
        else:
            done(value, None)

    def load_next(self, stream, subject, done):
        assert (stream, subject) == ("$MQTT_rmsgs", "$MQTT.rmsgs")
        left = [m for m in self.old if m[0] not in self.deleted]
        if not left:
            done(None, jsa_mod.JsApiError({"code": 404, "err_code": 10037, "description": "no message found"}))
            return
        seq, rec = left[0]
        self._answer("load", done, {"message": {"seq": seq, "data": base64.b64encode(json.dumps(rec).encode()).decode()}})

    def store(self, subject, hdr, data, done):
        self.stored.append(subject)
        self._answer("store", done, {"seq": 100 + len(self.stored)})

    def delete_msg(self, stream, seq, done):
        self.deleted.append(seq)
        self._answer("delete", done, {"success": True})


def transfer(store):
    gen = sessions.AccountSessions._transfer_retained(SimpleNamespace(jsa=store))
    result = {}

    def step(value=None, error=None):
        try:
            call = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration:
            result["ended"] = True
            return
        call(step)
    step()
    return result.get("ended", False)


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(sessions, "monotonic", lambda: now[0])
    return now


def test_every_message_moves_within_the_time(clock, caplog):
    store = Store(5, clock, step=0.01)
    with caplog.at_level(logging.INFO, logger="natsd"):
        assert transfer(store)
    assert store.stored == ["$MQTT.rmsgs.dev.%d" % i for i in range(1, 6)]
    assert store.deleted == [1, 2, 3, 4, 5]
    assert "Processed 5 messages from '$MQTT.rmsgs', successfully transferred 5 in" in caplog.text


def test_the_move_stops_after_ten_seconds_with_nats_servers_notice(clock, caplog):
    store = Store(100, clock, step=1.0)         # three calls a message: 3 s each
    with caplog.at_level(logging.INFO, logger="natsd"):
        assert transfer(store)
    assert len(store.deleted) == 4                # 12 s after the fourth: past the 10 s
    assert ("timed out while transferring retained messages from '$MQTT.rmsgs' after 12s, "
            "4 processed, 4 successfully transferred") in caplog.text
    assert "Processed" not in caplog.text


@pytest.mark.parametrize("kind, text", [
    ("load", "    Unable to transfer a retained message: failed to load from '$MQTT.rmsgs': "),
    ("delete", "    Unable to clean up the retained message with sequence 1: "),
])
def test_a_failure_ends_the_move_without_failing_the_start(clock, caplog, kind, text):
    store = Store(3, clock, fail={kind: jsa_mod.JsTimeout()})
    with caplog.at_level(logging.INFO, logger="natsd"):
        assert transfer(store)                    # ended, not raised
    assert text in caplog.text
    assert store.deleted == ([] if kind == "load" else [1])


def test_a_failed_store_still_removes_the_message(clock, caplog):
    store = Store(2, clock, fail={"store": jsa_mod.JsTimeout()})
    with caplog.at_level(logging.INFO, logger="natsd"):
        assert transfer(store)
    assert store.deleted == [1, 2]
    assert "    Unable to transfer the retained message with sequence 1: " in caplog.text
    assert "Processed 2 messages from '$MQTT.rmsgs', successfully transferred 2 in" in caplog.text
