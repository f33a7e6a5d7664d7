"""MQTT on a JetStream cluster: the MQTT streams are R3; a device connecting to another member
takes its session over (the first connection is closed); a device whose server is killed
(kill -9) reconnects to another member and finds its session there, with the QoS 1 message
published for it meanwhile; retained messages are known on every member. A second CONNECT
of a client id whose first waits on a JetStream without quorum gives up as on nats-server."""
import time

import pytest

from tests.support import mqttraw as M
from tests.support.cluster import js_cluster, kill9
from tests.support.mqttservers import MQTT_LISTEN
from tests.support.servers import http_json, nats_server_cmd
from tests.support.waiting import poll


def _mqtt_port(member):
    return int(member.proc.wait_log(MQTT_LISTEN).group(1))


def _led_by_others(member, gone):
    """Whether every MQTT stream and consumer has a leader other than `gone`, as `member`
    sees them."""
    jsz = http_json(member.proc.http_port, "/jsz?streams=true&consumers=true")
    streams = [s for d in jsz.get("account_details", []) for s in d.get("stream_detail", [])]
    groups = streams + [c for s in streams for c in s.get("consumer_detail") or []]
    leaders = [g.get("cluster", {}).get("leader") for g in groups]
    return len(streams) == 5 and all(x and x != gone for x in leaders)


def test_device_session_survives_its_server(tmp_path):
    # ack_wait 2s: a delivery made while the session was moving between servers (to an
    # interest that was going away) comes again soon, marked as a redelivery
    with js_cluster("natsd", tmp_path, extra=lambda n: 'mqtt { port: -1, ack_wait: "2s" }') as members:
        a, b, c = members
        dev, ack = M.connected(_mqtt_port(a), "device-1", clean=False)
        assert ack == b"\x20\x02\x00\x00"
        dev.send(M.subscribe(1, [("dev/1/cmd", 1)]))
        assert dev.read_packet(10) == b"\x90\x03\x00\x01\x01"
        svc, _ = M.connected(_mqtt_port(c), "svc")
        svc.send(M.publish("fleet/fw", b"2.0", qos=1, pi=1, retain=True))
        assert svc.read_packet(10) == b"\x40\x02\x00\x01"
        streams = http_json(a.proc.http_port, "/jsz?streams=true")
        infos = {s["name"]: s for d in streams["account_details"] for s in d["stream_detail"]}
        assert {n: len(infos[n]["cluster"].get("replicas", [])) + 1 for n in infos} == {
            "$MQTT_sess": 3, "$MQTT_msgs": 3, "$MQTT_rmsgs": 3, "$MQTT_qos2in": 3, "$MQTT_out": 3}
        # the same client id on another member: the session moves there, the old connection
        # is closed (the other server sees the session record stored)
        moved, ack = M.connected(_mqtt_port(c), "device-1", clean=False)
        assert ack == b"\x20\x02\x01\x00"
        assert dev.closed(10)
        a.proc.wait_log("Closing because a remote connection has started with the same client ID")
        moved.close()
        kill9(a)
        # the streams and consumers a led have new leaders
        assert poll(lambda: _led_by_others(b, a.name), 30)
        svc.send(M.publish("dev/1/cmd", b"reboot", qos=1, pi=2))
        assert svc.read_packet(15) == b"\x40\x02\x00\x02"
        again, ack = M.connected(_mqtt_port(b), "device-1", clean=False)
        assert ack == b"\x20\x02\x01\x00"
        got = again.read_packet(30)
        assert got == M.publish("dev/1/cmd", b"reboot", qos=1, pi=1, dup=bool(got[0] & 0x08))
        again.send(M.puback(1))
        viewer, _ = M.connected(_mqtt_port(b), "viewer")
        viewer.send(M.subscribe(1, [("fleet/#", 0)]))
        viewer.read_packet()
        assert viewer.read_packet(10) == M.publish("fleet/fw", b"2.0", retain=True)


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_second_connect_gives_up_while_the_first_waits_on_jetstream(tmp_path, kind):
    """nats-server's session lock: a CONNECT of a client id whose first CONNECT is still
    waiting on JetStream retries ten times 100 ms apart, then gives up (closed, no CONNACK,
    its error logged); the first goes on waiting. The wait: two of three members killed, so
    the R3 session stream has no leader to answer."""
    if kind == "nats-server" and nats_server_cmd() is None:
        pytest.skip("no nats-server")
    with js_cluster(kind, tmp_path, extra=lambda n: 'mqtt { port: -1, js_api_timeout: "4s" }') as members:
        a, b, c = members
        warm, ack = M.connected(_mqtt_port(a), "warm-up")      # a's session manager and streams
        assert ack == b"\x20\x02\x00\x00"
        warm.close()
        kill9(b, c)
        first = M.MqttRaw(_mqtt_port(a))
        first.send(M.connect("same-id"))
        time.sleep(0.2)                                         # the first holds the lock (no state shows it)
        second = M.MqttRaw(_mqtt_port(a))
        t0 = time.monotonic()
        second.send(M.connect("same-id"))
        assert second.quiet(0.5) == b""
        assert second.closed(5)
        assert time.monotonic() - t0 > 0.7                     # it retried before giving up
        a.proc.wait_log(r'\[ERR\] .*unable to connect: other session with client ID "same-id" is in the '
                        r'process of connecting', timeout=5)
        assert not first.closed(0.5)                            # still waiting on JetStream
        first.close()
