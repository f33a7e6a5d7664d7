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
