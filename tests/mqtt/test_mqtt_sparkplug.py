"""Sparkplug B as nats-server handles it: a BIRTH is also sent and retained as its
certificate on `$sparkplug/certificates/<topic>` (delivered retained at QoS 0), a late
subscriber gets the certificate, and a DEATH is delivered with the current time as its
protobuf timestamp (field 1)."""
import time

import pytest

from natsd.gofmt import uvarint
from natsd.mqtt import sparkplug
from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

BIRTH = "spBv1.0/g1/NBIRTH/n1"
DEATH = "spBv1.0/g1/NDEATH/n1"
# protobuf: field 1 (timestamp, varint) = 1, field 2 (metrics, bytes) = b"m"
DEATH_PAYLOAD = b"\x08\x01\x12\x01m"


def _timestamp(payload):
    """The varint of field 1 in a payload shaped like DEATH_PAYLOAD."""
    assert payload[0] == 0x08
    v, i = uvarint(payload, 1)
    return v, payload[i:]


def test_birth_certificates_and_death_timestamps(starters, tmp_path):
    def scenario(srv):
        live, _ = M.connected(srv.mqtt_port, "live")
        live.send(M.subscribe(1, [("spBv1.0/#", 0), ("$sparkplug/certificates/#", 0)]))
        live.read_packet()
        node, _ = M.connected(srv.mqtt_port, "node")
        node.send(M.publish(BIRTH, b"birth-payload", qos=1, pi=1))
        node.read_packet()
        got = sorted(live.read_packets(2))
        late, _ = M.connected(srv.mqtt_port, "late")
        late.send(M.subscribe(1, [("$sparkplug/certificates/#", 1)]))
        late.read_packet()
        certificate = late.read_packet()
        before = int(time.time() * 1000)
        node.send(M.publish(DEATH, DEATH_PAYLOAD))
        death = live.read_packet()
        stamp, rest = _timestamp(death[4 + len(DEATH):])
        return got, certificate, death[:4 + len(DEATH)], stamp >= before, rest
    natsd, ref = on_both(starters, tmp_path, scenario)
    assert natsd == ref
    got, certificate, head, fresh, rest = natsd
    cert_topic = "$sparkplug/certificates/" + BIRTH
    assert got == sorted([M.publish(BIRTH, b"birth-payload"), M.publish(cert_topic, b"birth-payload", retain=True)])
    assert certificate == M.publish(cert_topic, b"birth-payload", qos=1, pi=1, retain=True)
    assert fresh and rest == b"\x12\x01m"


def test_death_timestamp_rewrite():
    assert sparkplug.with_death_timestamp(b"not protobuf \xff") == b"not protobuf \xff"
    added = sparkplug.with_death_timestamp(b"\x12\x01m")
    assert added.startswith(b"\x12\x01m\x08") and uvarint(added, 4)[0] > 1_600_000_000_000
    assert sparkplug.birth_death(b"spBv1.0/g/DBIRTH/n/d") == (True, False, False)
    assert sparkplug.birth_death(b"$sparkplug/certificates/spBv1.0/g/NDEATH/n") == (False, True, True)
    assert sparkplug.birth_death(b"spBv1.0/g/NDATA/n") == (False, False, False)
