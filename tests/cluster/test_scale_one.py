"""Scaling between one replica and several on a cluster (natsd/jetstream/replicated/streams.py,
replscale.py), and moving a one-replica stream.

- Up (`num_replicas` 1 -> 3 in a stream update): the stream's server's copy becomes the Raft
  group's first state (`_adopt`), the other servers copy it from that snapshot, and its
  consumers go on with their acks; the stream then survives kill -9 of the server it started on.
- Down (3 -> 1): the leader keeps its copy as a one-replica stream (`become_one`), with its
  consumers' committed state; the other servers drop theirs.
- Move (a one-replica stream's placement update its server does not meet): up to a group of
  its server and one that meets it, then down to that one alone.
- A consumer that counts the stream's replicas gets a group of its own when the stream
  scales up, as on nats-server (natsd/jetstream/replicated/consumergroup.py).
The updates' answers are shaped as nats-server's."""
import asyncio
import json
import random

import nats
import pytest

from tests.cluster.test_replicated_consumers import WORK, add_work, consumer_request, fetch, info
from tests.cluster.test_replicated_streams import (api, check_acked, converged, create, leader_of, local_state,
                                                   meta_request, publish_window)
from tests.support.cluster import clusters_of_each_kind, fault_seeds, js_cluster, kill9, restart_all, restart_member
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")
ONE = {"name": "R3", "subjects": ["r3.>"], "num_replicas": 1}


def create_one(m):
    return asyncio.run(create(m, ONE))


def scale(m, replicas):
    """The update, asked again while the cluster has no meta leader yet."""
    return asyncio.run(meta_request(m, "$JS.API.STREAM.UPDATE.R3", dict(ONE, num_replicas=replicas), timeout=10))


def scaled(m):
    """The stream's info through `m` shows the scale done: two current followers."""
    try:
        c = asyncio.run(api(m, "$JS.API.STREAM.INFO.R3")).get("cluster", {})
    except nats.errors.TimeoutError:
        return False                    # a leader just elected may miss one request
    return "desired" not in c and len([x for x in c.get("replicas", []) if x.get("current")]) == 2


def shape(r):
    """The answer's fields that both servers must agree on."""
    c = r.get("cluster", {})
    return {"type": r["type"], "replicas": r["config"]["num_replicas"], "messages": r["state"]["messages"],
            "last_seq": r["state"]["last_seq"], "cluster": sorted(k for k in c if k != "raft_group"),
            "followers": len(c.get("replicas", [])), "did_create": "did_create" in r}


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_scale_answers_as_nats_server(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        r = create_one(members[0])
        assert r["config"]["num_replicas"] == 1, r
        assert len(asyncio.run(publish_window(members[0].url, 50, b"a"))) == 50
        # placement chose the one server (not always the one asked, on either server)
        home = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.R3"))["cluster"]["leader"]
        r = scale(members[0], 3)
        # nats-server answers at once, from the stream's server: the stream on it alone, and
        # the servers it goes to
        assert shape(r) == {"type": "io.nats.jetstream.api.v1.stream_update_response", "replicas": 3,
                            "messages": 50, "last_seq": 50,
                            "cluster": ["desired", "name", "replicas", "system_account", "traffic_account"],
                            "followers": 1, "did_create": False}, (kind, r)
        c = r["cluster"]
        assert c["replicas"][0]["name"] == home and c["replicas"][0]["current"] is True, (kind, home, c)
        assert sorted(x["name"] for x in c["desired"]["replicas"]) == sorted(m.name for m in members)
        assert c["desired"]["origin"] == {"replicas": 1} and c["desired"]["name"] == "C1"
        assert converged(members, 50)["messages"] == 50
        assert poll(lambda: scaled(members[0]), timeout=30)
        leader = leader_of(members)
        r = scale(leader, 1)
        # answered at once too: the group as it is, and where the stream comes from
        assert shape(r) == {"type": "io.nats.jetstream.api.v1.stream_update_response", "replicas": 1,
                            "messages": 50, "last_seq": 50,
                            "cluster": ["desired", "leader", "leader_since", "name", "replicas", "system_account",
                                        "traffic_account"],
                            "followers": 2, "did_create": False}, (kind, r)
        assert r["cluster"]["desired"]["origin"] == {"replicas": 3}, r
        assert "replicas" not in r["cluster"]["desired"]

        def one():
            try:
                c = asyncio.run(api(leader, "$JS.API.STREAM.INFO.R3")).get("cluster", {})
            except nats.errors.TimeoutError:
                return False
            return c.get("leader") == leader.name and "replicas" not in c and "desired" not in c
        assert poll(one, timeout=30)


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_scale_up_gives_consumers_counting_the_streams_replicas_groups_of_their_own(tmp_path, kind):
    """A durable with num_replicas 0 counts its stream's replicas: scaled up from one to
    three, it gets a C-R3F- group that goes on from its acks; one with num_replicas 1 keeps
    one replica (its cluster block names its server alone)."""
    with js_cluster(kind, tmp_path) as members:
        create_one(members[0])
        assert len(asyncio.run(publish_window(members[0].url, 20, b"a"))) == 20
        add_work(members[0])
        add_work(members[0], dict(WORK, durable_name="one", num_replicas=1))
        assert len(asyncio.run(fetch(members[0].url, 5, ack=True))) == 5
        scale(members[0], 3)
        assert poll(lambda: scaled(members[0]), timeout=30)
        names = {m.name for m in members}

        def grouped():
            o = info(members[1])
            return o if o.get("cluster", {}).get("raft_group", "").startswith("C-R3F-") else None
        o = poll(grouped, timeout=30)
        assert o, info(members[1])
        assert o["ack_floor"]["stream_seq"] == 5 and o["num_pending"] == 15, o
        assert len(o["cluster"]["replicas"]) == 2 and o["cluster"]["leader"] in names, o
        one = asyncio.run(consumer_request(members[2], "INFO", "one"))["cluster"]
        assert sorted(one) == ["leader", "name"] and one["leader"] in names, one
        got = asyncio.run(fetch(members[2].url, 15, ack=True))
        assert [s for s, _ in got] == list(range(6, 21)), got


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_scaled_up_and_down_the_stream_keeps_messages_and_acks(tmp_path, seed):
    """Up from one server (seeded), which is then killed: the others carry the stream and its
    consumer. Down again through the new leader: it keeps the stream, with the acks, and
    survives kill -9 as a one-replica stream; the others drop their copies. The counts of
    messages and acks are seeded too."""
    rng = random.Random(seed)
    first, second = rng.randrange(100, 400), rng.randrange(1, 80)
    acks = rng.randrange(1, first // 2)             # acknowledged before the scale up
    with js_cluster("natsd", tmp_path) as members:
        origin = members[rng.randrange(3)]
        create_one(origin)
        acked = asyncio.run(publish_window(origin.url, first, b"a"))
        add_work(origin)
        done = asyncio.run(fetch(origin.url, acks, ack=True))
        assert len(done) == acks
        r = scale(origin, 3)
        assert r["type"] == "io.nats.jetstream.api.v1.stream_update_response" and r["config"]["num_replicas"] == 3, r
        assert r["cluster"]["replicas"][0]["name"] == origin.name, r
        assert leader_of(members) is origin
        state = converged(members, first)
        assert state["messages"] == first
        rest = [m for m in members if m is not origin]
        acked.update(asyncio.run(publish_window(rng.choice(rest).url, second, b"b")))
        kill9(origin)
        leader = leader_of(rest)
        state = converged(rest, max(acked))
        check_acked(leader, acked, state)
        total = first + second
        o = info(leader)
        assert o["ack_floor"]["stream_seq"] >= acks and o["num_pending"] + o["num_ack_pending"] == total - acks, o
        got = asyncio.run(fetch(leader.url, 10, ack=True))
        assert got and not {s for s, _ in done} & {s for s, _ in got}, got
        done += got
        back = restart_member(origin, tmp_path)
        members[members.index(origin)] = back
        converged(members, max(acked))
        # and down to one replica, on the leader
        leader = leader_of(members)
        r = scale(leader, 1)
        assert r["type"] == "io.nats.jetstream.api.v1.stream_update_response" and r["config"]["num_replicas"] == 1, r
        others = [m for m in members if m is not leader]
        assert poll(lambda: all(local_state(m) is None for m in others), timeout=10)
        assert local_state(leader)["messages"] == total
        assert info(leader)["ack_floor"]["stream_seq"] >= acks + 10
        kill9(leader)
        back = restart_member(leader, tmp_path)
        members[members.index(leader)] = back
        check_acked(back, acked, local_state(back))
        got = asyncio.run(fetch(back.url, 10, ack=True))
        assert got and not {s for s, _ in done} & {s for s, _ in got}, got
        more = asyncio.run(publish_window(rng.choice(others).url, 10, b"e"))
        assert sorted(more) == list(range(total + 1, total + 11))


def test_memory_stream_scaled_up_and_down_keeps_its_messages(tmp_path):
    """A memory stream's messages are not on disk to be handed over: they are copied, and
    written beside the group's first snapshot on every replica."""
    cfg = dict(ONE, storage="memory")
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], cfg))
        acked = asyncio.run(publish_window(members[0].url, 100, b"m"))
        r = asyncio.run(meta_request(members[0], "$JS.API.STREAM.UPDATE.R3", dict(cfg, num_replicas=3)))
        assert r["config"]["num_replicas"] == 3, r
        state = converged(members, 100)
        assert state["messages"] == 100
        leader = leader_of(members)
        check_acked(leader, acked, state)
        # the messages the group started from are on no server's disk but in the files each
        # replica wrote beside its snapshot: every server killed at once keeps them
        kill9(*members)
        restart_all(members, tmp_path)
        state = converged(members, 100)
        assert state["messages"] == 100
        leader = leader_of(members)
        check_acked(leader, acked, state)
        r = asyncio.run(meta_request(leader, "$JS.API.STREAM.UPDATE.R3", dict(cfg, num_replicas=1)))
        assert r["config"]["num_replicas"] == 1, r
        assert poll(lambda: all(local_state(m) is None for m in members if m is not leader), timeout=10)
        check_acked(leader, acked, local_state(leader))


def tags(name):
    return 'server_tags: ["%s"]' % name.lower()


def moved_to(m, name):
    """The stream's info through `m` shows it on `name` alone (the move done)."""
    try:
        r = asyncio.run(api(m, "$JS.API.STREAM.INFO.R3"))
    except nats.errors.TimeoutError:
        return None                     # asked while the leadership moves
    c = r.get("cluster", {})
    return r if c.get("leader") == name and not c.get("replicas") and "desired" not in c else None


@need_ref
def test_one_replica_stream_moves_as_on_nats_server(tmp_path):
    """A placement its server does not meet moves a one-replica stream: answered at once
    (the stream where it is, and `desired`: where it goes and the placement it had), then
    on the new server alone with its messages and its consumer's acks, as on nats-server;
    natsd's old server keeps no copy. A move back cancelled at once leaves it there."""
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path, extra=tags):
        a, b, c = members
        cfg = dict(ONE, placement={"tags": ["a"]})
        r = asyncio.run(create(a, cfg))
        assert r["cluster"]["leader"] == "A", r
        acked = asyncio.run(publish_window(a.url, 200, b"m"))
        add_work(a)
        assert len(asyncio.run(fetch(a.url, 30, ack=True))) == 30
        # asked again until the servers' tags are known (their STATSZ)
        r = poll(lambda: (lambda r: None if r.get("error", {}).get("err_code") == 10005 else r)(
            asyncio.run(meta_request(a, "$JS.API.STREAM.UPDATE.R3", dict(cfg, placement={"tags": ["c"]})))),
            timeout=20, interval=0.25)
        answer = dict(shape(r), placement=r["config"]["placement"],
                      cluster=sorted(k for k in r["cluster"] if k != "leader_since"),
                      members=[x["name"] for x in r["cluster"]["replicas"]],
                      desired={k: v for k, v in r["cluster"]["desired"].items() if k != "created"})
        for x in answer["desired"]["replicas"]:
            x.pop("peer")
        done = poll(lambda: moved_to(b, "C"), timeout=30)
        assert done, asyncio.run(api(b, "$JS.API.STREAM.INFO.R3"))
        o = info(c)
        # a move back cancelled at once (enough messages that the move is not over
        # first): the stream stays on C
        assert len(asyncio.run(publish_window(b.url, 20000, b"x" * 100, window=256))) == 20000
        back = asyncio.run(api(b, "$JS.API.STREAM.UPDATE.R3", json.dumps(cfg).encode()))
        cancel = asyncio.run(api(b, "$JS.API.STREAM.CANCEL_MOVE.R3"))
        again = poll(lambda: moved_to(b, "C"), timeout=30)
        seen[kind] = (answer, done["config"]["placement"], done["config"]["num_replicas"],
                      done["state"]["messages"], o["ack_floor"]["stream_seq"], o["num_pending"],
                      back["cluster"]["desired"]["replicas"][0]["name"], sorted(cancel),
                      cancel["config"]["placement"], again["config"]["placement"], again["state"]["messages"])
        if kind == "natsd":
            assert poll(lambda: local_state(a) is None, timeout=10)
            check_acked(c, acked, local_state(c))
            more = asyncio.run(publish_window(b.url, 10, b"n"))
            assert sorted(more) == list(range(20201, 20211))
            # every server killed and started again: the move replays to the same end
            kill9(*members)
            for i, m in enumerate(members):
                members[i] = restart_member(m, tmp_path / kind, tags(m.name))
            a, b, c = members
            assert poll(lambda: moved_to(b, "C"), timeout=30)
            assert local_state(a) is None and local_state(c)["messages"] == 20210
    assert seen["natsd"] == seen["nats-server"]
    assert seen["natsd"][0]["desired"] == {"name": "C1", "replicas": [{"name": "C"}],
                                           "origin": {"replicas": 1, "placement": {"tags": ["a"]}}}
    assert seen["natsd"][1:] == ({"tags": ["c"]}, 1, 200, 30, 170, "A",
                                 ["cluster", "config", "created", "state", "ts", "type"],
                                 {"tags": ["c"]}, {"tags": ["c"]}, 20200)
