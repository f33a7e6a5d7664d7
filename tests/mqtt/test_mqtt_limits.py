"""Limits and permissions as nats-server applies them to MQTT clients: keep-alive (1.5 times
the client's value, then closed), max_payload on the NATS message a PUBLISH makes, and a
user's publish and subscribe permissions on the converted subjects."""
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def test_keepalive_closes_a_silent_client(starters, tmp_path):
    def scenario(srv):
        quiet, _ = M.connected(srv.mqtt_port, "quiet", keepalive=1)
        talker, _ = M.connected(srv.mqtt_port, "talker", keepalive=1)
        pongs = []
        for _ in range(4):                      # 2 s of pings every half second: kept
            talker.send(M.PINGREQ)
            pongs.append(talker.read_packet())
            talker.quiet(0.5)
        return quiet.closed(0.1) or quiet.closed(3), pongs, talker.closed(0.1)
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref == (True, [b"\xd0\x00"] * 4, False)


def test_max_payload(starters, tmp_path):
    def scenario(srv):
        c, _ = M.connected(srv.mqtt_port, "big")
        c.send(M.publish("p", b"x" * 70, qos=1, pi=1))      # 25 + 70 = 95 <= 100
        ok = c.read_packet()
        c.send(M.publish("p", b"x" * 80, qos=1, pi=2))      # 105 > 100
        return ok, c.closed(3)
    natsd, ref = on_both(starters, tmp_path, scenario, top_extra="max_payload: 100")
    assert natsd == ref == (b"\x40\x02\x00\x01", True)


def test_permissions_on_converted_subjects(starters, tmp_path):
    users = ("authorization { users: [\n"
             "  {user: dev, password: pw, permissions: {publish: {allow: [\"up.>\"]}, "
             "subscribe: {allow: [\"down.>\"]}}}\n"
             "  {user: all, password: pw}\n] }")

    def scenario(srv):
        watcher, _ = M.connected(srv.mqtt_port, "watch", user="all", password="pw")
        watcher.send(M.subscribe(1, [("#", 0)]))
        watcher.read_packet()
        dev, _ = M.connected(srv.mqtt_port, "dev", user="dev", password="pw")
        dev.send(M.subscribe(2, [("down/cmd", 1), ("other/x", 0)]))
        suback = dev.read_packet()
        dev.send(M.publish("side/x", b"denied", qos=1, pi=3))
        denied_ack = dev.read_packet()
        dev.send(M.publish("up/x", b"allowed", qos=1, pi=4))
        allowed_ack = dev.read_packet()
        seen = watcher.read_packet()
        nothing_else = watcher.quiet(0.3)
        return suback, denied_ack, allowed_ack, seen, nothing_else, dev.closed(0.2)
    natsd, ref = on_both(starters, tmp_path, scenario, top_extra=users)
    assert natsd == ref
    assert natsd == (b"\x90\x04\x00\x02\x01\x80", b"\x40\x02\x00\x03", b"\x40\x02\x00\x04",
                     M.publish("up/x", b"allowed"), b"", False)
