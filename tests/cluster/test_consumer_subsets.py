"""Consumers with fewer replicas than their stream (natsd/jetstream/replicated/consumergroup.py): a
durable with `num_replicas` 2 on an R3 stream has a `C-R2F-` group of two of the stream's
servers, as on nats-server; the third observes it (applies what it commits, without a vote),
so the stream's leader lists it with its state wherever it runs. A consumer keeps the count
it asked for when its stream scales up; one with 0 follows the stream's. Shapes and states
are compared with a nats-server cluster; the kill -9 scenario and /healthz naming a consumer
group without quorum (beyond nats-server) are natsd's own."""
import asyncio
import random

import pytest

from tests.cluster.test_meta_group import healthz
from tests.cluster.test_replicated_consumers import STREAM, WORK, add_work, consumer_request, fetch, info, publish
from tests.cluster.test_replicated_streams import api, create, leader_of, meta_request
from tests.support.cluster import fault_seeds, js_cluster, kill9, restart_member
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")


def voters(cluster):
    """The servers of a consumer's group, as its info's cluster block names them."""
    return {cluster["leader"]} | {r["name"] for r in cluster.get("replicas", [])}


def listed(m, name="work"):
    """Consumer `name` as CONSUMER.LIST through `m` shows it."""
    r = asyncio.run(api(m, "$JS.API.CONSUMER.LIST.R3", b"{}"))
    return next((c for c in r.get("consumers") or [] if c["name"] == name), None)


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_consumer_with_fewer_replicas_than_its_stream(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        created = add_work(members[1], dict(WORK, num_replicas=2))
        c = created["cluster"]
        assert c["raft_group"].startswith("C-R2F-") and len(c["replicas"]) == 1, c
        two = voters(c)
        assert len(two) == 2 and two < {m.name for m in members}, c
        asyncio.run(publish(members[0].url, 10))
        got = asyncio.run(fetch(members[2].url, 4, ack=True))
        assert [s for s, _ in got] == [1, 2, 3, 4]
        o = info(members[0])
        assert o["config"]["num_replicas"] == 2 and voters(o["cluster"]) == two, o
        assert o["ack_floor"]["stream_seq"] == 4 and o["num_pending"] == 6, o
        # listed with its state through every server (the stream's leader answers; it may
        # not be one of the consumer's two)
        for m in members:
            row = poll(lambda: (lambda r: r if r and r["ack_floor"]["stream_seq"] == 4 else None)(listed(m)),
                       timeout=10)
            assert row and row["num_pending"] == 6 and row["cluster"]["raft_group"] == c["raft_group"], listed(m)
        # its two servers run the group; its quorum is two of two; the third does not list it
        for m in members:
            if m.name in two:
                g = poll(lambda: (m.get("/raftz?acc=$G").get("$G") or {}).get(c["raft_group"]), timeout=10)
                assert g and g["size"] == 2 and g["quorum_needed"] == 2, g
            else:
                assert c["raft_group"] not in (m.get("/raftz?acc=$G").get("$G") or {}), m.get("/raftz?acc=$G")


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_scale_up_keeps_the_replicas_a_consumer_asked_for(tmp_path, kind):
    """An R2 stream scaled to three: its consumer with num_replicas 2 keeps two servers and
    its acks; one with 0 follows the stream to three."""
    two = dict(STREAM, num_replicas=2)
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], two))
        add_work(members[0], dict(WORK, num_replicas=2))
        add_work(members[0], dict(WORK, durable_name="all"))
        asyncio.run(publish(members[0].url, 10))
        assert len(asyncio.run(fetch(members[1].url, 3, ack=True))) == 3
        r = asyncio.run(meta_request(members[0], "$JS.API.STREAM.UPDATE.R3", dict(two, num_replicas=3), timeout=10))
        assert "error" not in r, r

        def scaled():
            c = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.R3")).get("cluster", {})
            return "desired" not in c and len([x for x in c.get("replicas", []) if x.get("current")]) == 2
        assert poll(scaled, timeout=30)

        def followers(name, n):
            o = asyncio.run(consumer_request(members[2], "INFO", name))
            return o if len(o.get("cluster", {}).get("replicas", [])) == n else None
        assert poll(lambda: followers("all", 2), timeout=30), info(members[2])
        o = followers("work", 1)
        assert o and o["cluster"]["raft_group"].startswith("C-R2F-"), info(members[2])
        assert o["config"]["num_replicas"] == 2 and o["ack_floor"]["stream_seq"] == 3, o
        got = asyncio.run(fetch(members[2].url, 7, ack=True))
        assert [s for s, _ in got] == list(range(4, 11)), got


@pytest.mark.parametrize("seed", fault_seeds([2]))
def test_a_two_replica_consumer_keeps_its_acks_across_kill9(tmp_path, seed):
    """AckSyncs through an R2 consumer of an R3 stream. kill -9 of the server that observes
    it (not one of its two) changes nothing; kill -9 of its leader stops it (two of two is
    its quorum, as on nats-server) until that server is back: then it delivers exactly what
    was not acked, once."""
    rng = random.Random(seed)
    n = rng.randrange(1, 20)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        c = add_work(members[0], dict(WORK, num_replicas=2))["cluster"]
        asyncio.run(publish(members[0].url, 30))
        observer = next(m for m in members if m.name not in voters(c))
        kill9(observer)
        rest = [m for m in members if m is not observer]
        leader_of(rest)
        acked = asyncio.run(fetch(rest[rng.randrange(2)].url, n, ack=True))
        assert [s for s, _ in acked] == list(range(1, n + 1))
        dead = next(m for m in members if m.name == c["leader"])
        kill9(dead)
        survivor = next(m for m in members if m not in (observer, dead))
        for m in (observer, dead):
            members[members.index(m)] = restart_member(m, tmp_path)

        def answered():
            try:
                o = asyncio.run(api(survivor, "$JS.API.CONSUMER.INFO.R3.work", timeout=1))
            except Exception:
                return None
            assert "error" not in o, o
            return o if o["cluster"].get("leader") else None    # its group has elected one
        o = poll(answered, timeout=30)
        assert o and o["ack_floor"]["stream_seq"] == n and voters(o["cluster"]) == voters(c), o
        got = asyncio.run(fetch(members[rng.randrange(3)].url, 30, ack=True))
        assert [s for s, _ in got] == list(range(n + 1, 31)), got


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_num_replicas_updates_scale_a_consumer(tmp_path, kind):
    """A consumer's num_replicas updated 1 -> 3 -> 2 -> 1 on an R3 stream: a group of its
    own, then one member fewer (the same group), then none (nats-server's R1 block); its
    acks carry through each step."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        asyncio.run(publish(members[0].url, 10))
        add_work(members[0], dict(WORK, num_replicas=1))
        done = 0

        def step(replicas, shape):
            nonlocal done
            add_work(members[1], dict(WORK, num_replicas=replicas))

            def shaped():
                try:
                    o = asyncio.run(api(members[2], "$JS.API.CONSUMER.INFO.R3.work", timeout=1))
                except Exception:
                    return None
                return o if shape(o.get("cluster", {})) else None
            o = poll(shaped, timeout=30)
            assert o and o["config"]["num_replicas"] == replicas, info(members[2])
            assert o["ack_floor"]["stream_seq"] == done and o["num_pending"] == 10 - done, o
            got = asyncio.run(fetch(members[0].url, 2, ack=True))
            assert [s for s, _ in got] == [done + 1, done + 2], got
            done += 2
            return o["cluster"]
        assert len(asyncio.run(fetch(members[0].url, 2, ack=True))) == 2
        done = 2
        three = step(3, lambda c: c.get("raft_group", "").startswith("C-R3F-") and len(c.get("replicas", [])) == 2)
        two = step(2, lambda c: len(c.get("replicas", [])) == 1)
        assert two["raft_group"] == three["raft_group"]
        one = step(1, lambda c: "raft_group" not in c)
        assert sorted(one) == ["leader", "name"], one


def test_healthz_names_a_consumer_group_without_quorum(tmp_path):
    """natsd beyond nats-server: an R2 consumer whose leader died has no quorum while its
    stream (two of three) is healthy; /healthz on its surviving server names it, as
    nats-server's text does, and which server it cannot reach; the server that only
    observes it reports nothing."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        c = add_work(members[0], dict(WORK, num_replicas=2))["cluster"]
        dead = next(m for m in members if m.name == c["leader"])
        voter = next(m for m in members if m.name in voters(c) and m is not dead)
        observer = next(m for m in members if m.name not in voters(c))
        kill9(dead)
        want = [{"type": "CONSUMER", "account": "$G", "stream": "R3", "consumer": "work",
                 "error": "JetStream consumer '$G > R3 > work' is not current: group node unhealthy"},
                {"type": "CONSUMER", "account": "$G", "stream": "R3", "consumer": "work",
                 "error": "JetStream consumer '$G > R3 > work' has no leader: it needs 2 of its 2 servers "
                          "and cannot reach %s" % dead.name}]
        assert poll(lambda: healthz(voter) == (503, {"status": "error", "errors": want}), timeout=15), healthz(voter)
        assert healthz(observer) == (200, {"status": "ok"}), healthz(observer)
