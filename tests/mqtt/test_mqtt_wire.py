"""MQTT packets on the wire, natsd against nats-server: the same packets in give the same
packets out, byte for byte (CONNACK codes, SUBACK grants, PUBACK, PINGRESP, deliveries with
their packet identifiers), and the same connections are closed for malformed input."""
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

KINDS = ["natsd", "nats-server"]


def test_connack_codes(starters, tmp_path):
    def scenario(srv):
        got = []
        for pkt in (M.connect("ok1"),                        # accepted
                    M.connect("lvl5", level=5),              # unacceptable protocol version
                    M.connect("", clean=False),              # empty id needs the clean flag
                    M.connect("has space"),                  # an id nats-server refuses
                    M.connect("x", proto=b"MQIsdp", level=3),  # MQTT 3.1: closed, no CONNACK
                    M.connect("x", flags_extra=0x01)):       # reserved flag
            with M.MqttRaw(srv.mqtt_port) as c:
                c.send(pkt)
                got.append((c.quiet(0.4), c.closed(2)))
        return got
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref
    assert natsd[0][0] == b"\x20\x02\x00\x00" and natsd[1][0] == b"\x20\x02\x00\x01"
    assert natsd[2][0] == b"\x20\x02\x00\x02" and natsd[3][0] == b"\x20\x02\x00\x02"
    assert natsd[4] == (b"", True) and natsd[5] == (b"", True)


def test_subscribe_publish_and_acks(starters, tmp_path):
    def scenario(srv):
        sub, ack = M.connected(srv.mqtt_port, "sub")
        sub.send(M.subscribe(7, [("a/b", 0), ("q/+", 1), ("$MQTT/x", 0), ("w/#/x", 1),
                                 ("all/#", 1)]))
        suback = sub.read_packet()
        pub, _ = M.connected(srv.mqtt_port, "pub")
        pub.send(M.publish("a/b", b"zero"))
        pub.send(M.publish("q/1", b"one", qos=1, pi=9))
        puback = pub.read_packet()
        pub.send(M.PINGREQ)
        pong = pub.read_packet()
        got = sub.read_packets(2)
        got.sort()
        sub.send(M.puback(1))
        pub.send(M.publish("all", b"parent", qos=1, pi=10))
        pub.read_packet()
        parent = sub.read_packet()
        sub.close()
        pub.close()
        return [ack, suback, puback, pong, got, parent]
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref
    ack, suback, puback, pong, got, parent = natsd
    assert suback == b"\x90\x07\x00\x07\x00\x01\x80\x80\x01"
    assert puback == b"\x40\x02\x00\x09" and pong == b"\xd0\x00"
    assert got == sorted([M.publish("a/b", b"zero"), M.publish("q/1", b"one", qos=1, pi=1)])
    assert parent == M.publish("all", b"parent", qos=1, pi=2)


@pytest.mark.parametrize("bad", [
    M.publish("a/+", b"x"),                             # a wildcard in a PUBLISH topic
    bytes((0x36, 5)) + b"\x00\x01a\x00\x01",            # QoS 3
    M.connect("again"),                                 # a second CONNECT
    bytes((0x82, 3, 0, 1, 0)),                          # SUBSCRIBE whose filter is cut short
    bytes((0x40, 3, 0, 1, 0)),                          # PUBACK with a wrong remaining length
    bytes((0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01)),        # a malformed remaining length
    M.publish("a b", b"x"),                             # a space in a topic
    M.publish(b"\xff\xfe", b"x"),                       # invalid UTF-8
], ids=["wildcard-topic", "qos3", "second-connect", "short-subscribe", "puback-length",
        "bad-varint", "space", "utf8"])
def test_malformed_packets_close_only_that_connection(starters, tmp_path, bad):
    def scenario(srv):
        other, _ = M.connected(srv.mqtt_port, "other")
        other.send(M.subscribe(1, [("ok", 0)]))
        other.read_packet()
        c, _ = M.connected(srv.mqtt_port, "bad")
        c.send(bad)
        closed = c.closed(3)
        pub, _ = M.connected(srv.mqtt_port, "pub")
        pub.send(M.publish("ok", b"still"))
        delivered = other.read_packet()
        return closed, delivered
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref == (True, M.publish("ok", b"still"))


def test_first_packet_must_be_connect(starters, tmp_path):
    def scenario(srv):
        with M.MqttRaw(srv.mqtt_port) as c:
            c.send(M.PINGREQ)
            return c.quiet(0.3), c.closed(2)
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref == (b"", True)
