"""MQTT and NATS clients exchange messages both ways, as through nats-server: the subject a
NATS subscriber sees for a topic (levels, dots, empty levels), the `Nmqtt-Pub` header it gets,
and the topic an MQTT subscriber sees for a NATS subject."""
import asyncio

import nats
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

TOPICS = ["a/b", "/a", "a/", "a//b", "a.b/c", "x", "sp.$x/y"]


def mqtt_to_nats(starters, tmp_path, send, count):
    """send(mqtt client) on each server, a NATS subscriber to `>` watching -> what it got
    (subject, data, headers; `$` subjects left out) on natsd, the same as on nats-server."""
    async def scenario(srv):
        nc = await nats.connect(srv.url)
        sub = await nc.subscribe(">")
        await nc.flush()
        c, _ = M.connected(srv.mqtt_port, "pub")
        send(c)
        got = []
        while len(got) < count:
            m = await sub.next_msg(timeout=5)
            if not m.subject.startswith("$"):
                got.append((m.subject, m.data, dict(m.headers or {})))
        c.close()
        await nc.close()
        return got
    natsd, ref = on_both(starters, tmp_path, lambda srv: asyncio.run(scenario(srv)))
    assert natsd == ref
    return natsd


def test_mqtt_publishes_reach_nats_subscribers(starters, tmp_path):
    def send(c):
        for i, topic in enumerate(TOPICS):
            qos = i % 2
            c.send(M.publish(topic, b"p%d" % i, qos=qos, pi=i + 1 if qos else 0))
            if qos:
                c.read_packet()
    natsd = mqtt_to_nats(starters, tmp_path, send, len(TOPICS))
    assert natsd[0] == ("a.b", b"p0", {"Nmqtt-Pub": "0"})
    assert [s for s, _, _ in natsd] == ["a.b", "/.a", "a./", "a./.b", "a//b.c", "x", "sp//$x.y"]


def test_a_burst_of_publishes_keeps_its_order_and_subjects(starters, tmp_path):
    """One write of many PUBLISHes, plain QoS 0 and QoS 1 ones (natsd publishes runs of those
    in its core, natsd/_core/mqttwire.pyx) between ones that need more: topics converted
    specially, a retained one, a Sparkplug topic, non-ASCII UTF-8, a packet split across two
    writes. NATS subscribers get them all in order and the PUBACKs come in order, as from
    nats-server."""
    plain = [M.publish("s/%d/t" % i, b"p%d" % i) for i in range(6)]
    burst = [plain[0], plain[1], M.publish("a.b/c", b"dots"), plain[2],
             M.publish("q/1", b"one", qos=1, pi=7), M.publish("q/2", b"two", qos=1, pi=8),
             M.publish("q.3", b"three", qos=1, pi=9), M.publish("q/4", b"four", qos=1, pi=10, retain=True),
             plain[3], M.publish("r/k", b"kept", retain=True), M.publish("spBv1.0/g/NDATA/n", b"spark"),
             M.publish("caf\u00e9/x".encode(), b"utf8"), M.publish("/lead", b"lead"), plain[4],
             M.publish("t", b""), plain[5]]
    data = b"".join(burst)

    def send(c):
        cut = len(data) - 3             # the last packet's end comes in a second write
        c.send(data[:cut])
        c.send(data[cut:])
        assert c.read_packets(4) == [M.pi_packet(0x40, pi) for pi in (7, 8, 9, 10)]
    natsd = mqtt_to_nats(starters, tmp_path, send, len(burst))
    assert [s for s, _, _ in natsd] == [
        "s.0.t", "s.1.t", "a//b.c", "s.2.t", "q.1", "q.2", "q//3", "q.4", "s.3.t", "r.k",
        "spBv1//0.g.NDATA.n", "caf\u00e9.x", "/.lead", "s.4.t", "t", "s.5.t"]
    assert natsd[0] == ("s.0.t", b"p0", {"Nmqtt-Pub": "0"})
    assert natsd[5] == ("q.2", b"two", {"Nmqtt-Pub": "1"})


def test_nats_publishes_reach_mqtt_subscribers(starters, tmp_path):
    async def scenario(srv):
        c, _ = M.connected(srv.mqtt_port, "sub")
        c.send(M.subscribe(1, [("#", 0)]))
        c.read_packet()
        nc = await nats.connect(srv.url)
        for subject in ["a.b", "/.a", "a././.b", "a//b.c", "x"]:
            await nc.publish(subject, subject.encode())
        await nc.publish("h.x", b"with-header", headers={"K": "v"})
        await nc.flush()
        got = c.read_packets(6)
        c.close()
        await nc.close()
        return got
    natsd, ref = on_both(starters, tmp_path, lambda srv: asyncio.run(scenario(srv)))
    assert natsd == ref
    assert natsd[0] == M.publish("a/b", b"a.b") and natsd[-1] == M.publish("h/x", b"with-header")


def test_account_mappings_apply_to_mqtt_publishes(starters, tmp_path):
    async def scenario(srv):
        nc = await nats.connect(srv.url)
        sub = await nc.subscribe("fleet.>")
        await nc.flush()
        watcher, _ = M.connected(srv.mqtt_port, "watcher")
        watcher.send(M.subscribe(1, [("fleet/#", 0)]))
        watcher.read_packet()
        c, _ = M.connected(srv.mqtt_port, "pub")
        c.send(M.publish("dev/7/temp", b"21.5"))
        m = await sub.next_msg(timeout=5)
        seen = watcher.read_packet()
        c.close()
        watcher.close()
        await nc.close()
        return m.subject, seen
    natsd, ref = on_both(starters, tmp_path, lambda srv: asyncio.run(scenario(srv)),
                         top_extra='mappings { "dev.*.temp": "fleet.temp.{{wildcard(1)}}" }')
    assert natsd == ref == ("fleet.temp.7", M.publish("fleet/temp/7", b"21.5"))
