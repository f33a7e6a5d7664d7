"""MQTT clients through an auth callout in operator mode, natsd against nats-server with the
same operator, accounts and service (tests/auth/test_auth_callout_operator.py's): the client
sends a bearer user JWT of the callout account AUTH as its password and its user name says who
it is; the service issues users of APP (allowed: the MQTT session lives in APP's JetStream),
of OTHER (not an allowed account) or an error. The same CONNACKs, the same deliveries and the
same callout requests (their connect options, `client_info.type` mqtt) on both servers."""
import pytest

from tests.auth.test_auth_callout_operator import answer, build
from tests.mqtt.test_mqtt_auth_callout import RunningService
from tests.support import mqttraw as M
from tests.support.jwtmint import Mint
from tests.support.mqttservers import MqttServer
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

JS_LIMITS = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


class Service:
    """answer() for RunningService, keeping the requests."""

    def __init__(self, m, keys):
        self.m, self.keys, self.requests = m, keys, []

    def answer(self, msg):
        out, req = answer(self.m, self.keys, msg)
        self.requests.append(req)
        return out


def scenario(start, tmp_path, label):
    where = tmp_path / label
    where.mkdir()
    extra = "server_name: %s\njetstream { store_dir: '%s' }\nmqtt { port: -1 }\n" % (label, where / "js")
    m, conf, keys, _ = build(where, app_limits=JS_LIMITS, extra=extra)
    sentinel = Mint(seed=62).key("user")          # a bearer user of AUTH: what every client sends
    bearer = m.token(keys["auth"], sentinel.public, "user", {
        "pub": {"deny": [">"]}, "sub": {"deny": [">"]}, "subs": -1, "data": -1, "payload": -1,
        "bearer_token": True}, name="mqtt-sentinel")
    srv = MqttServer(start("-c", conf, "-p", "-1"))
    service = Service(m, keys)
    running = RunningService(srv.url, service, user_credentials=str(where / "svc.creds"))
    out = {}
    try:
        for user in ("alice", "eve", "mallory"):
            c, connack = M.connected(srv.mqtt_port, "dev-" + user, user=user, password=bearer)
            if connack != b"\x20\x02\x00\x00":
                out[user] = (connack, c.closed(3))
                continue
            c.send(M.subscribe(1, [("app/#", 1)]))
            suback = c.read_packet()
            c.send(M.publish("app/x", b"hi", qos=1, pi=5))
            got = sorted(c.read_packets(2))     # its PUBACK and the delivery (either first)
            out[user] = (connack, suback, got)
            c.close()
    finally:
        running.stop()
    requests = [(r.nats["client_info"].get("type"), r.nats["client_info"].get("mqtt_id"),
                 sorted(r.nats["connect_opts"]), r.nats["connect_opts"].get("user"),
                 r.nats["connect_opts"].get("jwt") == bearer) for r in service.requests]
    return out, requests


def test_mqtt_clients_through_an_operator_mode_callout_as_on_nats_server(natsd, reference, tmp_path):
    theirs = scenario(reference, tmp_path, "ref")
    ours = scenario(natsd, tmp_path, "natsd")
    assert ours == theirs
    out, requests = ours
    accepted, refused = b"\x20\x02\x00\x00", b"\x20\x02\x00\x05"
    connack, suback, got = out["alice"]
    assert connack == accepted and suback == b"\x90\x03\x00\x01\x01"
    assert M.pi_packet(0x40, 5) in got
    assert out["eve"] == out["mallory"] == (refused, True)
    assert [r[:2] for r in requests] == [("mqtt", "dev-alice"), ("mqtt", "dev-eve"), ("mqtt", "dev-mallory")]
    assert all(r[3:] == (r[3], True) for r in requests)        # the bearer JWT travels as `jwt`
