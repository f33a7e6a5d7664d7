"""Replicated consumers (natsd/jetstream/replicated/consumers.py): durable consumers of an R3 stream on
three real natsd servers. Their acks survive kill -9 of the leader and of every server: an
answered AckSync is never redelivered, an unacknowledged delivery is, and workqueue removals
reach every copy. The API's answers are compared with a nats-server cluster."""
import asyncio
import json
import random
import signal

import nats
import pytest

from tests.cluster.test_replicated_streams import api, converged, create, created, leader_of, local_state, stream_elections
from tests.support.cluster import clusters_of_each_kind, fault_seeds, js_cluster, kill9, restart_all, restart_member
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")

STREAM = {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3}
WORK = {"durable_name": "work", "ack_policy": "explicit", "ack_wait": 1_000_000_000}


async def publish(url, n, prefix=b"m"):
    nc = await nats.connect(url)
    js = nc.jetstream()
    for i in range(n):
        await js.publish("r3.%d" % (i % 5), b"%s-%d" % (prefix, i))
    await nc.close()


async def consumer_request(m, op, name="work", body=b"", stream="R3"):
    subject = "$JS.API.CONSUMER.%s.%s.%s" % (op, stream, name) if name else \
        "$JS.API.CONSUMER.%s.%s" % (op, stream)
    for _ in range(50):                 # a leader that just changed may miss one request
        try:
            return await api(m, subject, body)
        except nats.errors.TimeoutError:
            await asyncio.sleep(0.1)
    raise AssertionError("nobody answered %s" % subject)


def add_work(m, cfg=WORK):
    r = asyncio.run(consumer_request(m, "CREATE", cfg["durable_name"],
                                     json.dumps({"stream_name": "R3", "config": cfg}).encode()))
    assert r["type"] == "io.nats.jetstream.api.v1.consumer_create_response", r
    return r


async def fetch(url, n, ack, timeout=3.0, durable="work"):
    """Fetch up to n from `durable`; ack them with AckSync when `ack`. -> [(stream seq, payload)]"""
    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe_bind(durable, "R3")
    got = []
    while len(got) < n:
        try:
            msgs = await sub.fetch(n - len(got), timeout=timeout)
        except nats.errors.TimeoutError:
            break
        for msg in msgs:
            got.append((msg.metadata.sequence.stream, msg.data))
            if ack:
                await msg.ack_sync(timeout=5)
    await nc.close()
    return got


def seeded_stream(members, rng, published):
    """STREAM created through a member the seed picks, `published` messages sent through
    another the seed picks, not the stream's leader -> (the leader, that member)."""
    asyncio.run(create(members[rng.randrange(3)], STREAM))
    leader = leader_of(members)
    entry = rng.choice([m for m in members if m is not leader])
    asyncio.run(publish(entry.url, published))
    return leader, entry


def info(m):
    return asyncio.run(consumer_request(m, "INFO"))


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_acks_survive_the_leader(tmp_path, seed):
    """40 messages acked with AckSync, 10 delivered and left unacked, then kill -9 of the
    leader: the new leader redelivers the 10 and the 50 never delivered, and nothing acked."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        leader, entry = seeded_stream(members, rng, 100)
        add_work(entry)
        acked = asyncio.run(fetch(entry.url, 40, ack=True))
        assert [s for s, _ in acked] == list(range(1, 41))
        held = asyncio.run(fetch(entry.url, 10, ack=False))
        assert [s for s, _ in held] == list(range(41, 51))
        kill9(leader)
        others = [m for m in members if m is not leader]
        assert leader_of(others) is not leader
        after = info(entry)
        assert after["ack_floor"]["stream_seq"] == 40, after
        assert after["delivered"]["stream_seq"] in (40, 50), after
        rest = asyncio.run(fetch(entry.url, 60, ack=True))
        assert sorted(s for s, _ in rest) == list(range(41, 101)), rest
        final = info(entry)
        assert final["ack_floor"]["stream_seq"] == 100 and final["num_ack_pending"] == 0, final
        assert final["num_pending"] == 0
        back = restart_member(leader, tmp_path)
        members[members.index(leader)] = back
        # the restarted server rebuilt the consumer from the group's log: made leader, it
        # carries on at the same place
        poll(lambda: local_state(back) and local_state(back)["last_seq"] == 100, timeout=30)
        asyncio.run(api(leader_of(members), "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                        json.dumps({"placement": {"preferred": back.name}}).encode()))
        assert poll(lambda: leader_of(members) is back, timeout=30)
        again = info(back)
        assert again["ack_floor"]["stream_seq"] == 100 and again["num_pending"] == 0, again
        stream_elections(members)


def test_consumer_comes_back_after_every_server_is_killed(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        created(members)
        asyncio.run(publish(members[1].url, 30))
        add_work(members[1])
        assert len(asyncio.run(fetch(members[2].url, 12, ack=True))) == 12
        kill9(*members)
        restart_all(members, tmp_path)
        converged(members, 30)
        leader_of(members)
        got = info(members[0])
        assert got["ack_floor"]["stream_seq"] == 12 and got["num_pending"] == 18, got
        rest = asyncio.run(fetch(members[0].url, 18, ack=True))
        assert [s for s, _ in rest] == list(range(13, 31))


def test_workqueue_removals_reach_every_copy(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, retention="workqueue")))
        leader_of(members)
        asyncio.run(publish(members[0].url, 20))
        add_work(members[0])
        assert len(asyncio.run(fetch(members[1].url, 15, ack=True))) == 15

        def copies():
            states = [local_state(m) for m in members]
            return all(s and s["messages"] == 5 and s["first_seq"] == 16 for s in states) and states
        assert poll(copies, timeout=20), [local_state(m) for m in members]


def test_inactive_durable_is_deleted_everywhere(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        leader = created(members)
        add_work(members[0], dict(WORK, inactive_threshold=500_000_000))
        r = poll(lambda: (lambda x: x.get("error") and x)(info(members[1])), timeout=20)
        assert r["error"]["err_code"] == 10014, r
        # another leader does not bring it back
        asyncio.run(api(leader, "$JS.API.STREAM.LEADER.STEPDOWN.R3"))
        poll(lambda: leader_of(members) is not leader, timeout=30)
        assert info(members[2])["error"]["err_code"] == 10014


def _shape(r):
    """A consumer API reply without what differs run to run (times, leader names)."""
    out = {k: v for k, v in r.items() if k not in ("created", "ts", "cluster")}
    if "config" in out:
        out["config"] = {k: v for k, v in out["config"].items() if k != "metadata"}
    for k in ("delivered", "ack_floor"):
        if k in out:
            out[k] = {a: b for a, b in out[k].items() if a != "last_active"}
    return out


@need_ref
def test_consumer_api_matches_nats_server(tmp_path):
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path):
        created(members)
        asyncio.run(publish(members[1].url, 10))
        replies = [add_work(members[2])]
        replies.append(asyncio.run(consumer_request(members[0], "CREATE", "big", json.dumps(
            {"stream_name": "R3", "config": {"durable_name": "big", "num_replicas": 5}}).encode())))
        assert len(asyncio.run(fetch(members[1].url, 4, ack=True))) == 4
        i = info(members[0])
        cluster = i["cluster"]
        assert set(cluster) >= {"name", "leader", "replicas"} and len(cluster["replicas"]) == 2
        replies.append(i)
        replies.append(asyncio.run(consumer_request(members[1], "NAMES", None)))
        replies.append(asyncio.run(consumer_request(members[1], "LEADER.STEPDOWN")))
        replies.append(asyncio.run(consumer_request(members[1], "LEADER.STEPDOWN", "nope")))
        # both servers answer for a consumer again once its new leader is elected
        assert poll(lambda: info(members[0]).get("cluster", {}).get("leader"), timeout=30)
        replies.append(asyncio.run(consumer_request(members[0], "DELETE")))
        # the consumer's own group leads wherever it may (nats-server's too): it hears of
        # the deletion a moment after the stream's leader answered
        replies.append(poll(lambda: (lambda r: "error" in r and r)(info(members[2])), timeout=10))
        seen[kind] = [_shape(r) for r in replies]
    assert seen["natsd"] == seen["nats-server"]


def test_one_replica_consumer_follows_the_stream_leader(tmp_path):
    """A durable asked with `num_replicas: 1` keeps that in its config, but its state rides in
    the stream's group like the others: after a stepdown the new leader has it, acks and all."""
    with js_cluster("natsd", tmp_path) as members:
        leader = created(members)
        asyncio.run(publish(members[1].url, 10))
        add_work(members[1], dict(WORK, num_replicas=1))
        assert len(asyncio.run(fetch(members[2].url, 5, ack=True))) == 5
        asyncio.run(api(leader, "$JS.API.STREAM.LEADER.STEPDOWN.R3"))
        assert poll(lambda: leader_of(members) is not leader, timeout=30)
        got = info(members[0])
        assert got["config"]["num_replicas"] == 1 and got["ack_floor"]["stream_seq"] == 5, got
        assert [s for s, _ in asyncio.run(fetch(members[0].url, 5, ack=True))] == [6, 7, 8, 9, 10]


async def ack_each(url, count, on_fetched, batch=10):
    """Fetch `work` `batch` messages at a time and AckSync each, until `count` are acknowledged
    (or a minute passes); on_fetched(number delivered so far) runs between a fetch and its
    acks. -> (stream seqs as delivered, those acknowledged, those whose AckSync went
    unanswered)"""
    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe_bind("work", "R3")
    seen, acked, unanswered = [], [], []
    deadline = asyncio.get_running_loop().time() + 60
    while len(acked) < count and asyncio.get_running_loop().time() < deadline:
        try:
            msgs = await sub.fetch(batch, timeout=1)
        except nats.errors.TimeoutError:
            continue
        seen += [msg.metadata.sequence.stream for msg in msgs]
        on_fetched(len(seen))
        for msg in msgs:
            try:
                await msg.ack_sync(timeout=3)
                acked.append(msg.metadata.sequence.stream)
            except nats.errors.TimeoutError:
                unanswered.append(msg.metadata.sequence.stream)
    await nc.close()
    return seen, acked, unanswered


@pytest.mark.parametrize("seed", fault_seeds([1]))
@pytest.mark.parametrize("how", ["lame duck", "stepdown"])
def test_acks_during_a_hand_off_are_all_answered(tmp_path, how, seed):
    """A consumer that fetches a few at a time and AckSyncs each goes on through its stream
    leader handing leadership on (lame duck mode, or a stepdown request) between a fetch and
    its acks: the acks that reach the old leader while it hands on, or just after, are
    forwarded to the new one (replconsumers.py, replforward.py), so every AckSync is answered
    and no acknowledged message is delivered again. The seed picks the batch size and the
    moment."""
    from tests.cluster.test_replicated_streams import stream_with_a_long_lame_duck
    rng = random.Random(seed)
    batch, at = rng.randrange(1, 21), rng.randrange(20, 160)
    with stream_with_a_long_lame_duck(tmp_path) as (leader, others):
        asyncio.run(publish(others[0].url, 200))
        add_work(others[0])
        handed = []

        def hand_off_at(delivered):
            if delivered < at or handed:
                return
            handed.append(delivered)
            if how == "lame duck":
                leader.proc.proc.send_signal(signal.SIGUSR2)
            else:
                asyncio.get_running_loop().create_task(api(leader, "$JS.API.STREAM.LEADER.STEPDOWN.R3"))
        seen, acked, unanswered = asyncio.run(ack_each(others[0].url, 200, hand_off_at, batch))
        assert handed
        assert not unanswered, "AckSyncs never answered: %r" % unanswered
        assert sorted(acked) == list(range(1, 201)), acked
        again = [s for i, s in enumerate(seen) if s in seen[:i]]
        assert not again, "acknowledged messages delivered again: %r" % again
        assert leader_of(others) in others
        final = info(others[1])
        assert final["ack_floor"]["stream_seq"] == 200 and final["num_ack_pending"] == 0, final


PULL_REQUEST = json.dumps({"batch": 1, "expires": 60_000_000_000}).encode()


async def pull_and_wait(url, during, quiet=0.5, timeout=20.0):
    """A pull request for `work` (batch 1, a minute to expire) that waits on an empty stream;
    once the consumer counts it, `await during(nc)` runs. -> what the request's inbox heard
    until `quiet` seconds passed with nothing more (or `timeout` with nothing at all), as
    (headers, payload) pairs."""
    nc = await nats.connect(url)
    heard = []
    try:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.R3.work", PULL_REQUEST, reply=inbox)
        await nc.flush()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while json.loads((await nc.request("$JS.API.CONSUMER.INFO.R3.work", b"",
                                           timeout=5)).data).get("num_waiting") != 1:
            assert loop.time() < deadline, "the consumer never counted the pull request"
            await asyncio.sleep(0.05)
        await during(nc)
        wait = timeout
        while True:
            try:
                msg = await sub.next_msg(timeout=wait)
            except nats.errors.TimeoutError:
                return heard
            heard.append((dict(msg.headers or {}), msg.data))
            wait = quiet
    finally:
        await nc.close()


LEADERSHIP_CHANGE = [({"Status": "409", "Description": "Leadership Change"}, b"")]
LAME_DUCK = "lame_duck_duration: 30s\nlame_duck_grace_period: 1s"


@need_ref
@pytest.mark.parametrize("how", ["stepdown", "stepdown to a stopped server", "lame duck", "shutdown"])
def test_a_waiting_pull_request_hears_of_a_leadership_change(tmp_path, how):
    """A pull request waiting at a consumer's leader when its leadership moves (a consumer
    stepdown, on natsd it moves the stream's too; its leader entering lame duck mode or
    shutting down) hears `409 Leadership Change` from the new leader, once, and from the old
    one nothing, or `409 Server Shutdown` when it shuts down (the consumer was asked with no replica count), on
    nats-server and natsd alike, so that its client asks again at once rather than wait out
    the request's minute. A stepdown to a server that cannot take over (stopped with SIGSTOP)
    still ends the leadership, as nats-server's does: the member elected tells the request."""
    seen = {}
    # nats-server tells the request of a stepdown to a stopped server in some runs only (seen:
    # nothing within 20 s), so only natsd's run of that case can fail: it alone runs
    kinds = ("natsd",) if how == "stepdown to a stopped server" else ("nats-server", "natsd")
    for kind, members in clusters_of_each_kind(tmp_path, kinds, extra=lambda name: LAME_DUCK):
        created(members)
        add_work(members[1])
        by_name = {m.name: m for m in members}
        entry = members[2]
        stopped = []

        async def move(nc):
            if how.startswith("stepdown"):
                body = b""
                if how == "stepdown to a stopped server":
                    ci = json.loads((await nc.request("$JS.API.CONSUMER.INFO.R3.work", b"", timeout=5)).data)
                    target = next(m for m in members if m.name not in (ci["cluster"]["leader"], entry.name))
                    target.proc.signal(signal.SIGSTOP)
                    stopped.append(target)
                    body = json.dumps({"placement": {"preferred": target.name}}).encode()
                reply = json.loads((await nc.request("$JS.API.CONSUMER.LEADER.STEPDOWN.R3.work",
                                                     body, timeout=5)).data)
                assert reply.get("success"), reply
                return
            ci = json.loads((await nc.request("$JS.API.CONSUMER.INFO.R3.work", b"", timeout=5)).data)
            by_name[ci["cluster"]["leader"]].proc.signal(
                signal.SIGTERM if how == "shutdown" else signal.SIGUSR2)
        if how != "stepdown":           # the client's server stays up
            ci = asyncio.run(api(entry, "$JS.API.CONSUMER.INFO.R3.work"))
            entry = next(m for m in members if m.name != ci["cluster"]["leader"])
        try:
            seen[kind] = asyncio.run(pull_and_wait(entry.url, move, quiet=6 if how == "shutdown" else 0.5,
                                                   timeout=12 if how.endswith("stopped server") else 20))
        finally:
            for m in stopped:
                m.proc.signal(signal.SIGCONT)
    if how == "stepdown to a stopped server":
        # natsd steps down once the transfer timed out, and the member elected tells the
        # request every time
        assert seen["natsd"] == LEADERSHIP_CHANGE, seen
        return
    if how != "shutdown":
        assert seen["nats-server"] == LEADERSHIP_CHANGE, seen
        assert seen["natsd"] == seen["nats-server"], seen
        return
    # the new leader tells the request only if the replicas heard of it before the shutdown
    # (the request's entry is proposed a moment after the request, on both servers)
    shutdown = ({"Status": "409", "Description": "Server Shutdown", "Nats-Pending-Messages": "1",
                 "Nats-Pending-Bytes": "0"}, b"")
    for kind, heard in seen.items():
        assert heard in ([shutdown], [shutdown] + LEADERSHIP_CHANGE), (kind, heard)


async def expire_then_step_down(url):
    """A pull request for `work` that expires (0.3 s) on an empty stream; once its 408 came,
    the consumer's leader steps down, and once the new leader answers, -> what the request's
    inbox heard, as (headers, payload) pairs. A new leader tells the requests it knows at once,
    before it answers anything, and both reach the client's server over the same route."""
    nc = await nats.connect(url)
    try:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.R3.work",
                         json.dumps({"batch": 1, "expires": 300_000_000}).encode(), reply=inbox)
        msg = await sub.next_msg(timeout=10)
        heard = [(dict(msg.headers or {}), msg.data)]
        info = "$JS.API.CONSUMER.INFO.R3.work"
        old = json.loads((await nc.request(info, b"", timeout=5)).data)["cluster"]["leader"]
        reply = json.loads((await nc.request("$JS.API.CONSUMER.LEADER.STEPDOWN.R3.work", b"",
                                             timeout=5)).data)
        assert reply.get("success"), reply
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:
            try:
                ci = json.loads((await nc.request(info, b"", timeout=1)).data)
                if ci.get("cluster", {}).get("leader") not in (None, old):
                    break
            except nats.errors.TimeoutError:
                pass
            assert loop.time() < deadline, "no new consumer leader answered"
            await asyncio.sleep(0.05)
        await nc.flush()
        while sub.pending_msgs:
            msg = await sub.next_msg(timeout=1)
            heard.append((dict(msg.headers or {}), msg.data))
        return heard
    finally:
        await nc.close()


@need_ref
def test_an_expired_pull_request_hears_nothing_when_leadership_moves(tmp_path):
    """A pull request that expired leaves the waiting requests of every replica, as nats-server
    proposes its removal: the consumer's next leader does not tell its inbox `409 Leadership
    Change`, on nats-server and natsd alike."""
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path):
        created(members)
        add_work(members[1])
        seen[kind] = asyncio.run(expire_then_step_down(members[2].url))
    timeout = ({"Status": "408", "Description": "Request Timeout", "Nats-Pending-Messages": "1",
                "Nats-Pending-Bytes": "0"}, b"")
    assert seen["nats-server"] == [timeout]
    assert seen["natsd"] == seen["nats-server"]


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_a_waiting_pull_request_hears_of_a_new_leader_after_kill9(tmp_path, seed):
    """The replicas know a leader's waiting pull requests from its consumer_state entries: the
    leader is killed with -9 and the next one still tells the request `409 Leadership Change`.
    An AckSync on a second consumer, answered once committed, shows the request's entry is in
    the log (it was proposed in the same entry or before)."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        leader, entry = seeded_stream(members, rng, 1)
        add_work(entry, dict(WORK, durable_name="other"))
        asyncio.run(consumer_request(entry, "CREATE", "work", json.dumps(
            {"stream_name": "R3", "config": dict(WORK, filter_subject="none.yet")}).encode()))

        async def commit_then_kill(nc):
            js = nc.jetstream()
            sub = await js.pull_subscribe_bind("other", "R3")
            [msg] = await sub.fetch(1, timeout=5)
            await msg.ack_sync(timeout=5)
            kill9(leader)
        assert asyncio.run(pull_and_wait(entry.url, commit_then_kill)) == LEADERSHIP_CHANGE
        assert leader_of([m for m in members if m is not leader]) is not leader

