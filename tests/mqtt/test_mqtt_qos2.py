"""QoS 2 both ways, as nats-server does it: a PUBLISH is kept in `$MQTT_qos2in` (a resent
one is not kept twice) and delivered once at its PUBREL; a QoS 2 subscriber gets PUBLISH,
answers PUBREC, gets PUBREL (kept in `$MQTT_out`, so it survives a reconnect) and ends with
PUBCOMP. `reject_qos2_publish` and `downgrade_qos2_subscribe` as configured."""
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

PUBREC, PUBREL, PUBCOMP = 0x50, 0x62, 0x70


def test_qos2_exchange(starters, tmp_path):
    def scenario(srv):
        sub, _ = M.connected(srv.mqtt_port, "sub", clean=False)
        sub.send(M.subscribe(1, [("q2/#", 2), ("low", 1)]))
        suback = sub.read_packet()
        pub, _ = M.connected(srv.mqtt_port, "pub")
        pub.send(M.publish("q2/a", b"exactly-once", qos=2, pi=5))
        rec1 = pub.read_packet()
        pub.send(M.publish("q2/a", b"exactly-once", qos=2, pi=5, dup=True))
        rec2 = pub.read_packet()
        early = sub.quiet(0.3)                      # nothing before the PUBREL
        pub.send(M.pi_packet(PUBREL, 5))
        comp = pub.read_packet()
        delivered = sub.read_packet()
        sub.send(M.pi_packet(PUBREC, 1))
        rel = sub.read_packet()
        sub.close()                                 # no PUBCOMP: the PUBREL comes again
        sub, ack = M.connected(srv.mqtt_port, "sub", clean=False)
        rel_again = sub.read_packet(10)
        sub.send(M.pi_packet(PUBCOMP, 1))
        pub.send(M.pi_packet(PUBREL, 5))            # a second PUBREL: PUBCOMP, nothing delivered
        comp2 = pub.read_packet()
        pub.send(M.publish("low", b"down", qos=2, pi=6))
        pub.read_packet()
        pub.send(M.pi_packet(PUBREL, 6))
        pub.read_packet()
        down = sub.read_packet()
        after = sub.quiet(0.4)
        return [suback, rec1, rec2, early, comp, delivered, rel, ack, rel_again, comp2, down, after]
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra='ack_wait: "1s"')
    assert natsd == ref
    assert natsd == [b"\x90\x04\x00\x01\x02\x01", b"\x50\x02\x00\x05", b"\x50\x02\x00\x05", b"",
                     b"\x70\x02\x00\x05", M.publish("q2/a", b"exactly-once", qos=2, pi=1),
                     b"\x62\x02\x00\x01", b"\x20\x02\x01\x00", b"\x62\x02\x00\x01",
                     b"\x70\x02\x00\x05", M.publish("low", b"down", qos=1, pi=2), b""]


def test_qos2_options(starters, tmp_path):
    def scenario(srv):
        c, _ = M.connected(srv.mqtt_port, "c")
        c.send(M.subscribe(1, [("a", 2)]))
        suback = c.read_packet()
        c.send(M.publish("a", b"x", qos=2, pi=1))
        return suback, c.closed(3)
    natsd, ref = on_both(starters, tmp_path, scenario,
                       mqtt_extra="reject_qos2_publish: true\n  downgrade_qos2_subscribe: true")
    assert natsd == ref == (b"\x90\x03\x00\x01\x01", True)
