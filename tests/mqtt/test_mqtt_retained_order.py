"""The order of the retained messages a new subscription gets, natsd against nats-server.
nats-server sends them, and numbers the QoS 1 ones, in the order of its subject tree (an
adaptive radix tree whose children keep insertion slots, natsd/mqtt/stree.py). The same
retained messages stored and cleared in the same seeded random order must come out as the
same packets, byte for byte, for wildcard filters; the tree's own rules are checked against a
plain map over many more random operations."""
import json
import random
import string

import pytest

from natsd.mqtt.stree import SubjectTree
from natsd.subject import subject_matches
from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.rawclient import RawClient
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

FIRST = ["dev", "devices", "d", "sensor", "s"]
CHARS = string.ascii_letters + string.digits


def operations(seed, count=260):
    """[(topic, payload)] with b"" to clear: topics sharing prefixes, one level with more than
    48 first bytes (the tree's largest node), clears and stores again."""
    rnd = random.Random(seed)
    ops, live = [], []
    for i in range(count):
        if live and rnd.random() < 0.25:
            topic = live.pop(rnd.randrange(len(live)))
            ops.append((topic, b""))
            continue
        levels = [rnd.choice(FIRST), rnd.choice(CHARS) + rnd.choice(["", "1", "x"])]
        if rnd.random() < 0.6:
            levels.append(rnd.choice(["t", "temp", "h", "hum"]))
        topic = "/".join(levels)
        ops.append((topic, b"v%d" % i))
        if topic not in live:
            live.append(topic)
    return ops, sorted(live)


def publish_topics(data):
    """The topics of the PUBLISH packets in data."""
    topics = []
    while data:
        n = M._split(data)
        pkt, data = data[:n], data[n:]
        i = 1
        while pkt[i] & 0x80:
            i += 1
        i += 1
        size = int.from_bytes(pkt[i:i + 2], "big")
        topics.append(pkt[i + 2:i + 2 + size].decode())
    return topics


FILTERS = ["#", "dev/#", "+/a/+", "d/+", "+/+/temp", "sensor/+/+", "s/#"]


def js(nc, subject, body=b""):
    return json.loads(nc.request(subject.encode(), body, timeout=5))


def stored_and_sent(srv, ops, live):
    """Each operation stored and taken into the server's retained map before the next: the
    map is filled by a consumer of `$MQTT_rmsgs`, and a message replaced before the consumer
    delivered it never reaches the map (on both servers), so unpaced the order would depend
    on timing. Then a new session per filter subscribes at QoS 1."""
    nc = RawClient(srv.port).connect()
    pub, _ = M.connected(srv.mqtt_port, "writer")
    consumer = None
    for n, (topic, payload) in enumerate(ops, 1):
        pub.send(M.publish(topic, payload, qos=1, pi=n, retain=True))
        assert pub.read_packet(10) == M.puback(n)
        last = js(nc, "$JS.API.STREAM.INFO.$MQTT_rmsgs")["state"]["last_seq"]
        if consumer is None:
            consumer = js(nc, "$JS.API.CONSUMER.NAMES.$MQTT_rmsgs")["consumers"][0]
        info = "$JS.API.CONSUMER.INFO.$MQTT_rmsgs." + consumer
        assert poll(lambda: js(nc, info)["delivered"]["stream_seq"] >= last, 10, 0.001)
    pub.close()
    nc.close()

    def all_retained():
        c, _ = M.connected(srv.mqtt_port, "probe")
        c.send(M.subscribe(1, [("#", 0)]))
        c.read_packet()
        got = c.quiet(0.5)
        c.close()
        return sorted(publish_topics(got)) == live
    poll(all_retained, 20, 0.1)
    out = []
    for n, f in enumerate(FILTERS):
        c, _ = M.connected(srv.mqtt_port, "viewer%d" % n)
        c.send(M.subscribe(1, [(f, 1)]))
        suback = c.read_packet()
        want = sum(1 for t in live if subject_matches(f.replace("/", ".").replace("+", "*").replace("#", ">"),
                                                          t.replace("/", ".")))
        out.append((f, suback, c.read_packets(want, timeout=10), c.quiet(0.2)))
        c.close()
    return out


@pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")
@pytest.mark.parametrize("seed", [3])
def test_retained_messages_come_in_nats_servers_order(starters, tmp_path, seed):
    ops, live = operations(seed)
    natsd, ref = on_both(starters, tmp_path, lambda srv: stored_and_sent(srv, ops, live))
    for mine, theirs in zip(natsd, ref):
        assert mine == theirs, mine[0]
    assert any(len(packets) > 20 for _, _, packets, _ in natsd)
    topics = publish_topics(b"".join(natsd[0][2]))
    assert topics != sorted(topics)         # not in subject order: the tree's own


@pytest.mark.parametrize("seed", range(5))
def test_the_tree_keeps_and_matches_what_a_map_does(seed):
    rnd = random.Random(seed)
    tree, plain = SubjectTree(), {}
    words = ["a", "ab", "abc", "b", "dev", "devs"] + list(CHARS)
    filters = ["a.>", "*.*", "a.*.b", ">", "dev.*", "*.*.*.*", "*", "ab.>", "*.a"]
    for step in range(4000):
        if plain and rnd.random() < 0.4:
            key = rnd.choice(sorted(plain))
            assert tree.pop(key) == plain.pop(key)
        else:
            key = ".".join(rnd.choice(words) + rnd.choice(["", "1", "22"]) for _ in range(rnd.randint(1, 4)))
            tree[key] = plain[key] = step
        assert len(tree) == len(plain)
        if step % 500 == 0:
            for f in filters:
                got = tree.match(f)
                assert sorted(s for s, _ in got) == sorted(k for k in plain if subject_matches(f, k))
                assert all(plain[s] == v for s, v in got)
    assert all(tree.get(k) == v for k, v in plain.items())
    assert tree.pop("no.such.subject", "none") == "none"
    with pytest.raises(ValueError):
        tree["bad\x7f"] = 1
