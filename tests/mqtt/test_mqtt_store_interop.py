"""MQTT state nats-server left behind is natsd's: nats-server keeps a persistent session (its
subscription, a QoS 1 message queued while the device was away) and a retained message; natsd
started on the same store directory gives the device its session back and new subscribers the
retained message, as nats-server itself does after a restart."""
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import start_mqtt
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def test_natsd_serves_the_mqtt_state_nats_server_stored(natsd, reference, tmp_path):
    store = tmp_path / "store"
    ref = start_mqtt(reference, tmp_path, "ref", store=store)
    dev, _ = M.connected(ref.mqtt_port, "device-7", clean=False)
    dev.send(M.subscribe(1, [("cmd/+", 1)]))
    dev.read_packet()
    dev.send(M.DISCONNECT)
    assert dev.closed()
    pub, _ = M.connected(ref.mqtt_port, "svc")
    pub.send(M.publish("cmd/reboot", b"now", qos=1, pi=1))
    pub.read_packet()
    pub.send(M.publish("state/fw", b"1.2.3", qos=1, pi=2, retain=True))
    pub.read_packet()
    pub.close()
    assert ref.proc.stop() == 0

    srv = start_mqtt(natsd, tmp_path, "natsd", store=store)
    dev, ack = M.connected(srv.mqtt_port, "device-7", clean=False)
    assert ack == b"\x20\x02\x01\x00"                       # the session is there
    assert dev.read_packet(10) == M.publish("cmd/reboot", b"now", qos=1, pi=1)
    dev.send(M.puback(1))
    fresh, _ = M.connected(srv.mqtt_port, "viewer")
    fresh.send(M.subscribe(1, [("state/#", 0)]))
    fresh.read_packet()
    assert fresh.read_packet() == M.publish("state/fw", b"1.2.3", retain=True)
    # the subscription carries on: a new command reaches the device
    pub, _ = M.connected(srv.mqtt_port, "svc")
    pub.send(M.publish("cmd/ping", b"?", qos=1, pi=3))
    pub.read_packet()
    assert dev.read_packet() == M.publish("cmd/ping", b"?", qos=1, pi=2)


def _old_retained_layout(starter, tmp_path, label):
    """A store with `$MQTT_rmsgs` as nats-server before 2.10 kept it: every retained message on
    the one subject `$MQTT.rmsgs`, in the JSON form, no per-subject limit; one record there is
    not JSON. Made by a JetStream-only server of `starter`'s kind, then stopped."""
    import base64
    import json

    from tests.support.rawclient import RawClient
    store = tmp_path / (label + "-store")
    srv = starter("-js", "-sd", str(store), "-n", label)
    with RawClient(srv.port) as c:
        c.connect()
        r = c.request(b"$JS.API.STREAM.CREATE.$MQTT_rmsgs", json.dumps(
            {"name": "$MQTT_rmsgs", "subjects": ["$MQTT.rmsgs"], "storage": "file",
             "retention": "limits"}).encode(), timeout=5)
        assert b'"error"' not in r, r
        for subject, topic, body, flags in (("state.fw", "state/fw", b"1.2.3", 0x01),
                                            ("state.mode", "state/mode", b"eco", 0x03),
                                            ("other", "other", b"x", 0x01)):
            rec = {"origin": "old", "subject": subject, "topic": topic,
                   "msg": base64.b64encode(body).decode(), "flags": flags, "source": ""}
            assert b'"error"' not in c.request(b"$MQTT.rmsgs", json.dumps(rec).encode(), timeout=5)
        assert b'"error"' not in c.request(b"$MQTT.rmsgs", b"not json", timeout=5)
    assert srv.stop() == 0
    return store


def _after_transfer(srv):
    """What a new subscriber to state/# gets, and the stream as clients see it."""
    import json

    from tests.support.rawclient import RawClient
    viewer, _ = M.connected(srv.mqtt_port, "viewer")   # the account's MQTT state starts now
    viewer.send(M.subscribe(1, [("state/#", 1)]))
    got = viewer.read_packets(3, 10)
    srv.proc.wait_log(r"Processed 4 messages from '\$MQTT\.rmsgs', successfully transferred 3 in ")
    with RawClient(srv.port) as c:
        c.connect()
        info = json.loads(c.request(b"$JS.API.STREAM.INFO.$MQTT_rmsgs", b'{"subjects_filter":">"}', timeout=5))
    return (got[0], sorted(got[1:]), info["config"]["subjects"], info["config"]["max_msgs_per_subject"],
            info["state"]["messages"], info["state"]["subjects"])


def test_retained_messages_of_the_pre_2_10_layout_are_moved_as_nats_server_moves_them(natsd, reference, tmp_path):
    out = []
    for label, starter in (("natsd", natsd), ("ref", reference)):
        store = _old_retained_layout(starter, tmp_path, label)
        out.append(_after_transfer(start_mqtt(starter, tmp_path, label, store=store)))
    assert out[0] == out[1]
    suback, retained, subjects, per_subject, messages, by_subject = out[0]
    assert retained == sorted([M.publish("state/fw", b"1.2.3", retain=True),
                               M.publish("state/mode", b"eco", qos=1, pi=1, retain=True)])
    assert (subjects, per_subject, messages) == (["$MQTT.rmsgs.>"], 1, 3)
    assert by_subject == {"$MQTT.rmsgs.state.fw": 1, "$MQTT.rmsgs.state.mode": 1, "$MQTT.rmsgs.other": 1}


def _old_session_streams(starter, tmp_path, label):
    """Sessions as nats-server's first MQTT releases kept them: a stream per session,
    `$MQTT_sess_<hash>`, its record on the subject of its own name; one stream holds no JSON."""
    import json

    from tests.support.rawclient import RawClient
    store = tmp_path / (label + "-sess-store")
    srv = starter("-js", "-sd", str(store), "-n", label)
    with RawClient(srv.port) as c:
        c.connect()
        for name, record in (("$MQTT_sess_OLDDEV01", json.dumps({"origin": "old", "id": "old-device"}).encode()),
                             ("$MQTT_sess_BROKEN1", b"not json")):
            r = c.request(b"$JS.API.STREAM.CREATE." + name.encode(), json.dumps(
                {"name": name, "subjects": [name], "storage": "file"}).encode(), timeout=5)
            assert b'"error"' not in r, r
            assert b'"error"' not in c.request(name.encode(), record, timeout=5)
    assert srv.stop() == 0
    return store


def test_session_streams_of_the_first_mqtt_releases_move_into_mqtt_sess_as_on_nats_server(natsd, reference, tmp_path):
    import json

    from tests.support.rawclient import RawClient
    out = []
    for label, starter in (("natsd", natsd), ("ref", reference)):
        srv = start_mqtt(starter, tmp_path, label, store=_old_session_streams(starter, tmp_path, label))
        _, fresh = M.connected(srv.mqtt_port, "someone-new")     # the account's MQTT state starts
        srv.proc.wait_log(r"Transfer of 2 MQTT session streams done!")
        assert 'Transferring stream "$MQTT_sess_OLDDEV01" to "$MQTT_sess"' in srv.proc.log
        assert "Unable to unmarshal the content of this stream" in srv.proc.log
        _, back = M.connected(srv.mqtt_port, "old-device", clean=False)
        with RawClient(srv.port) as c:
            c.connect()
            names = json.loads(c.request(b"$JS.API.STREAM.NAMES", b"", timeout=5))["streams"]
        out.append((fresh, back, sorted(names)))
    assert out[0] == out[1]
    fresh, back, names = out[0]
    assert (fresh, back) == (b"\x20\x02\x00\x00", b"\x20\x02\x01\x00")   # the old session is there
    assert "$MQTT_sess_OLDDEV01" not in names and "$MQTT_sess_BROKEN1" in names
