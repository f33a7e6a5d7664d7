"""Consumers with Raft groups of their own (natsd/jetstream/replicated/consumergroup.py): a durable consumer
of an R3 stream has its own `C-R3F-` group, as on nats-server; its leader moves without the
stream's, serves from a stream follower's copy, and its acks survive kill -9 of that leader.
On workqueue and interest streams its committed acks remove messages from every copy, and
only those. The shapes, the stepdown and the removals are compared with a nats-server
cluster."""
import asyncio
import json
import random

import pytest

from tests.cluster.test_replicated_consumers import STREAM, WORK, add_work, consumer_request, fetch, info, publish
from tests.cluster.test_replicated_streams import api, create, leader_of, local_state
from tests.support.cluster import fault_seeds, js_cluster, kill9, restart_all
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")


def consumer_leader(members):
    """The member that consumer `work`'s info names as its leader."""
    names = {m.name: m for m in members}

    def check():
        try:
            got = asyncio.run(consumer_request(members[0], "INFO"))
        except Exception:
            return None
        return names.get(got.get("cluster", {}).get("leader"))
    m = poll(check, timeout=30, interval=0.1)
    assert m is not None, "the consumer never had a leader"
    return m


def move_consumer_off_stream_leader(members):
    """CONSUMER.LEADER.STEPDOWN naming a stream follower that does not lead the consumer yet
    (nats-server may have put its first leader on one) -> (stream leader, consumer leader)."""
    stream_leader = leader_of(members)
    current = consumer_leader(members)
    target = next(m for m in members if m is not stream_leader and m is not current)
    body = json.dumps({"placement": {"preferred": target.name}}).encode()
    # "preferred" is a wish: a target too slow to take over in time (a loaded machine) lets
    # an election pick any member, on nats-server and natsd alike; ask again, as an operator
    # would, until the target leads
    for _ in range(3):
        r = asyncio.run(consumer_request(members[0], "LEADER.STEPDOWN", body=body))
        if consumer_leader(members) is target:
            break
        assert r.get("success") is True, r
        if poll(lambda: consumer_leader(members) is target, timeout=15, interval=0.1):
            break
    assert consumer_leader(members) is target, "the consumer's leadership never moved to %s" % target.name
    return stream_leader, target


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_durable_consumer_has_a_group_of_its_own(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        created = add_work(members[1])
        group = created["cluster"]["raft_group"]
        stream_group = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.R3"))["cluster"]["raft_group"]
        assert group.startswith("C-R3F-") and len(group) == len("C-R3F-") + 8, group
        assert group != stream_group
        got = info(members[2])
        assert got["cluster"]["raft_group"] == group
        assert sorted([got["cluster"]["leader"]] + [r["name"] for r in got["cluster"]["replicas"]]) == ["A", "B", "C"]
        # every server runs the group: /raftz lists it in the stream's account
        for m in members:
            assert poll(lambda: group in (m.get("/raftz?acc=$G").get("$G") or {}), timeout=10), \
                m.get("/raftz?acc=$G")


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_consumer_stepdown_moves_only_the_consumer(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        add_work(members[0])
        asyncio.run(publish(members[0].url, 20))
        stream_leader, consumer_at = move_consumer_off_stream_leader(members)
        assert leader_of(members) is stream_leader      # the stream stayed where it was
        # the stream's leader lists it all the same
        names = asyncio.run(api(members[0], "$JS.API.CONSUMER.NAMES.R3"))
        assert names["consumers"] == [WORK["durable_name"]] and names["total"] == 1, names
        listed = asyncio.run(api(members[0], "$JS.API.CONSUMER.LIST.R3"))
        assert [c["name"] for c in listed["consumers"]] == [WORK["durable_name"]], listed
        assert listed["consumers"][0]["cluster"]["leader"] == consumer_at.name, listed["consumers"][0]["cluster"]
        got = asyncio.run(fetch(members[2].url, 20, ack=True))
        assert [s for s, _ in got] == list(range(1, 21))
        done = info(members[0])
        assert done["ack_floor"]["stream_seq"] == 20 and done["num_ack_pending"] == 0, done
        assert done["cluster"]["leader"] == consumer_at.name


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_acks_survive_a_consumer_leader_that_follows_the_stream(tmp_path, seed):
    """The consumer's leader is a stream follower; AckSyncs through it (how many: the seed),
    then kill -9 of it: the next leader redelivers nothing acked, and the stream's leader never
    changed."""
    n = random.Random(seed).randrange(1, 60)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        add_work(members[0])
        asyncio.run(publish(members[0].url, 60))
        stream_leader, consumer_at = move_consumer_off_stream_leader(members)
        client = stream_leader              # its connection survives the kill
        acked = asyncio.run(fetch(client.url, n, ack=True))
        assert [s for s, _ in acked] == list(range(1, n + 1))
        kill9(consumer_at)
        others = [m for m in members if m is not consumer_at]
        poll(lambda: consumer_leader(others) is not None, timeout=30)
        after = asyncio.run(consumer_request(client, "INFO"))
        assert after["ack_floor"]["stream_seq"] == n, after
        rest = asyncio.run(fetch(client.url, 60 - n, ack=True))
        assert [s for s, _ in rest] == list(range(n + 1, 61)), rest
        assert leader_of(others) is stream_leader


def test_a_consumer_group_without_a_leader_is_reported():
    """/healthz's errors for a consumer whose group has no leader: nats-server's text, then
    (beyond it) the servers this one cannot reach. The group here is a stand-in with no
    leader: a real cluster where the stream has a quorum and its consumer has none cannot
    be made on purpose."""
    from types import SimpleNamespace as NS
    from natsd.jetstream.replicated.consumergroup import ConsumerGroup
    g = ConsumerGroup.__new__(ConsumerGroup)
    g.name, g.jsa, g.rs = "work", NS(name="A"), NS(stream=NS(name="S"))
    g.meta = NS(peer="p1", connected={"p2"}, peer_names={"p2": "B", "p3": "C"})
    g.group = NS(leader="p2", members=lambda: ("p1", "p2", "p3"))
    assert g.health_errors() == []
    g.group.leader = ""
    where = {"type": "CONSUMER", "account": "A", "stream": "S", "consumer": "work"}
    assert g.health_errors() == [
        dict(where, error="JetStream consumer 'A > S > work' is not current: group node unhealthy"),
        dict(where, error="JetStream consumer 'A > S > work' has no leader: it needs 2 of its 3 servers "
                          "and cannot reach C")]


def copies_hold(members, messages, first_seq):
    """Every member's own copy of R3 holds `messages` messages from `first_seq` (polled)."""
    def check():
        states = [local_state(m) for m in members]
        return all(s and s["messages"] == messages and (not messages or s["first_seq"] == first_seq)
                   for s in states)
    assert poll(check, timeout=20), [local_state(m) for m in members]


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_workqueue_consumer_led_by_a_stream_follower_removes_what_it_acks(tmp_path, kind):
    """A workqueue stream's consumer has a group of its own too; led by a stream follower, its
    acks remove the messages from every copy, and nothing else."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="workqueue")))
        group = add_work(members[0])["cluster"]["raft_group"]
        assert group.startswith("C-R3F-"), group
        asyncio.run(publish(members[0].url, 20))
        move_consumer_off_stream_leader(members)
        assert len(asyncio.run(fetch(members[0].url, 15, ack=True))) == 15
        copies_hold(members, 5, 16)
        assert [s for s, _ in asyncio.run(fetch(members[1].url, 5, ack=True))] == list(range(16, 21))
        copies_hold(members, 0, 0)


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_an_interest_stream_keeps_a_message_until_every_consumer_acked_it(tmp_path, kind):
    """Two durable consumers of an interest stream, one led by a stream follower: a message
    stays on every copy until both have acked it."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="interest")))
        add_work(members[0])
        add_work(members[0], dict(WORK, durable_name="audit"))
        move_consumer_off_stream_leader(members)
        asyncio.run(publish(members[0].url, 10))
        copies_hold(members, 10, 1)
        assert len(asyncio.run(fetch(members[1].url, 10, ack=True, durable="audit"))) == 10
        asyncio.run(asyncio.sleep(0.5))         # what the acks of one consumer would remove, had
        copies_hold(members, 10, 1)             # they wrongly removed anything, is gone by now
        assert len(asyncio.run(fetch(members[2].url, 6, ack=True))) == 6
        copies_hold(members, 4, 7)
        # the follower-led consumer deleted: what only it still needed goes too
        r = asyncio.run(consumer_request(members[0], "DELETE"))
        assert r.get("success") is True, r
        copies_hold(members, 0, 0)


@pytest.mark.parametrize("seed", fault_seeds([2]))
@pytest.mark.parametrize("killed", ["consumer leader", "stream leader"])
def test_workqueue_acks_survive_kill9_of_either_leader(tmp_path, seed, killed):
    """A workqueue stream whose consumer is led by a stream follower; AckSyncs (how many: the
    seed), then kill -9 of the consumer's leader, or of the stream's (which may not have
    proposed their removals yet): the copies left hold exactly the unacked messages, the
    consumer's next leader delivers them once, and they go too."""
    n = random.Random(seed).randrange(1, 40)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="workqueue")))
        add_work(members[0])
        asyncio.run(publish(members[0].url, 40))
        stream_leader, consumer_at = move_consumer_off_stream_leader(members)
        victim, client = (consumer_at, stream_leader) if killed == "consumer leader" else (stream_leader, consumer_at)
        acked = asyncio.run(fetch(client.url, n, ack=True))
        assert [s for s, _ in acked] == list(range(1, n + 1))
        kill9(victim)
        others = [m for m in members if m is not victim]
        leader_of(others)
        copies_hold(others, 40 - n, n + 1)
        consumer_leader(others)
        rest = asyncio.run(fetch(client.url, 40 - n, ack=True))
        assert [s for s, _ in rest] == list(range(n + 1, 41)), rest
        copies_hold(others, 0, 0)


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_create_checks_count_consumers_led_elsewhere(tmp_path, kind):
    """A workqueue consumer whose leader is a stream follower still counts when the stream's
    leader checks a new one: a second unfiltered one (10099), one whose filter overlaps
    (10100). (max_consumers counts the same list.)"""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="workqueue")))
        add_work(members[0])
        move_consumer_off_stream_leader(members)
        for code, more in ((10099, {}), (10100, {"filter_subject": "r3.1"})):
            body = json.dumps({"stream_name": "R3", "config": dict(WORK, durable_name="more", **more)}).encode()
            r = asyncio.run(consumer_request(members[0], "CREATE", "more", body))
            assert r.get("error", {}).get("err_code") == code, r


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_an_inactive_durable_led_by_a_stream_follower_is_deleted(tmp_path, kind):
    """inactive_threshold on a durable whose leader is a stream follower: its leader has the
    stream's leader delete it, everywhere. The threshold comes with an update once the leader
    has moved: nats-server counts it from the consumer's creation, and the move (reported
    some 5 s after the stepdown) could outlast it."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        add_work(members[0])
        move_consumer_off_stream_leader(members)
        add_work(members[0], dict(WORK, inactive_threshold=8_000_000_000))
        r = poll(lambda: (lambda x: x.get("error") and x)(info(members[1])), timeout=20)
        assert r["error"]["err_code"] == 10014, r
        for m in members:
            assert info(m)["error"]["err_code"] == 10014


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_which_consumers_have_groups_of_their_own(tmp_path, kind):
    """As nats-server counts a consumer's replicas: an ephemeral with num_replicas 3, and one
    of an interest stream with 0 (the stream's count), have C-R3F- groups; an ephemeral of a
    limits stream with 0, and a durable with num_replicas 1, have one replica and no group:
    their info's cluster block names the server they run on alone."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        asyncio.run(create(members[0], dict(STREAM, name="INT", subjects=["int.>"], retention="interest")))

        def cluster_of(stream, cfg):
            body = json.dumps({"stream_name": stream, "config": dict(cfg, ack_policy="explicit")}).encode()
            subject = "$JS.API.CONSUMER.CREATE." + stream + ("." + cfg["name"] if "name" in cfg else "")
            r = asyncio.run(api(members[1], subject, body))
            assert "error" not in r, r
            return r["cluster"]
        assert cluster_of("R3", {"name": "e3", "num_replicas": 3})["raft_group"].startswith("C-R3F-")
        assert cluster_of("INT", {})["raft_group"].startswith("C-R3F-")
        names = {m.name for m in members}
        for one in (cluster_of("R3", {}), cluster_of("R3", {"name": "d1", "durable_name": "d1", "num_replicas": 1})):
            assert sorted(one) == ["leader", "name"] and one["name"] == "C1" and one["leader"] in names, one


@pytest.mark.parametrize("seed", fault_seeds([4]))
def test_an_interest_stream_keeps_what_a_deliver_new_consumer_still_needs_across_kill9_of_all(tmp_path, seed):
    """An interest stream's consumer that started at new messages, with messages it has not
    acked, then kill -9 of every server and a restart: the stream's next leader may start
    before the consumer's group has applied its log again, and a consumer whose state it does
    not know yet needs everything; all the unacked messages are still delivered."""
    n = random.Random(seed).randrange(1, 20)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="interest")))
        group = add_work(members[0], dict(WORK, deliver_policy="new"))["cluster"]["raft_group"]
        # its starting position committed everywhere first (the group's third entry, after
        # its leader's and its members'): the restart, not the start, is under test
        assert poll(lambda: all(m.get("/raftz?acc=$G")["$G"][group]["applied"] >= 3 for m in members),
                    timeout=10)
        asyncio.run(publish(members[0].url, 20))
        acked = asyncio.run(fetch(members[0].url, n, ack=True))
        assert [s for s, _ in acked] == list(range(1, n + 1))
        copies_hold(members, 20 - n, n + 1)
        kill9(*members)
        restart_all(members, tmp_path)
        leader_of(members)
        consumer_leader(members)
        rest = asyncio.run(fetch(members[0].url, 20 - n, ack=True))
        assert [s for s, _ in rest] == list(range(n + 1, 21)), rest
        copies_hold(members, 0, 0)


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_an_interest_stream_keeps_what_a_new_deliver_new_consumer_needs(tmp_path, kind):
    """Messages published right after a deliver-new consumer of an interest stream was created,
    before its group committed its starting position: the stream keeps them for it."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="interest")))
        add_work(members[0], dict(WORK, deliver_policy="new"))
        asyncio.run(publish(members[0].url, 5))
        got = asyncio.run(fetch(members[0].url, 5, ack=True))
        assert [s for s, _ in got] == [1, 2, 3, 4, 5], got
