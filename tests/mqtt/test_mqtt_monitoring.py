"""MQTT in the monitoring endpoints as nats-server shows it: /connz lists MQTT clients with
`type` "mqtt" and their `mqtt_client` id (and filters by it), /varz has the `mqtt` block."""
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import start_mqtt
from tests.support.servers import http_get, http_json, nats_server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

EXTRA = 'no_auth_user: "" \n  ack_wait: "45s"\n  max_ack_pending: 100\n  js_domain: ""'

def _observe(start, where):
    srv = start_mqtt(start, where, mqtt_extra="ack_wait: \"45s\"\n  max_ack_pending: 100",
                     args=("-m", "-1"))
    c, _ = M.connected(srv.mqtt_port, "dev-42")
    c.send(M.subscribe(1, [("a/b", 0), ("q/#", 1)]))
    c.read_packet()
    connz = http_json(srv.http_port, "/connz?mqtt_client=dev-42")
    none = http_json(srv.http_port, "/connz?mqtt_client=other")
    varz = http_json(srv.http_port, "/varz")
    c.close()
    return srv, connz, none, varz

def test_connz_and_varz(starters, tmp_path):
    got = {}
    for kind in ("natsd", "nats-server"):
        where = tmp_path / kind
        where.mkdir()
        got[kind] = _observe(starters[kind], where)
    (srv, connz, none, varz), (rsrv, rconnz, rnone, rvarz) = got["natsd"], got["nats-server"]
    entry, rentry = connz["connections"], rconnz["connections"]
    assert len(entry) == len(rentry) == 1
    assert list(entry[0]) == list(rentry[0])
    assert entry[0]["type"] == rentry[0]["type"] == "mqtt"
    assert entry[0]["mqtt_client"] == rentry[0]["mqtt_client"] == "dev-42"
    # a.b, q.> and q (the parent level of q/#), and the deliver subjects of q's two consumers
    assert entry[0]["subscriptions"] == rentry[0]["subscriptions"] == 5
    assert none["num_connections"] == rnone["num_connections"] == 0
    mq, rmq = varz["mqtt"], rvarz["mqtt"]
    assert list(mq) == list(rmq)
    assert mq["port"] == srv.mqtt_port and rmq["port"] == rsrv.mqtt_port
    assert {k: v for k, v in mq.items() if k != "port"} == {k: v for k, v in rmq.items() if k != "port"}


def test_metrics(natsd, tmp_path):
    """natsd's own /metrics families for MQTT: clients here, sessions, retained messages."""
    srv = start_mqtt(natsd, tmp_path, args=("-m", "-1"))
    c, _ = M.connected(srv.mqtt_port, "dev", clean=False)
    c.send(M.publish("r", b"kept", qos=1, pi=1, retain=True))
    c.read_packet()
    other, _ = M.connected(srv.mqtt_port, "other")

    def figures():
        text = http_get(srv.http_port, "/metrics")[2]
        found = {line.split(" ")[0]: line.split(" ")[1] for line in text.splitlines()
                 if line.startswith("natsd_mqtt_")}
        return found if found.get('natsd_mqtt_retained_messages{account="$G"}') == "1" else None
    got = poll(figures, 5)
    assert got['natsd_mqtt_clients{account="$G"}'] == "2"
    assert got['natsd_mqtt_sessions{account="$G"}'] == "2"
    other.close()
