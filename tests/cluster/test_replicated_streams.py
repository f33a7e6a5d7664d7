"""Replicated streams (natsd/jetstream/replicated/streams.py): three real natsd servers, an R3 stream,
publishers that record every PubAck, and faults: kill -9 of the stream's leader during the
publishing, kill -9 of every server at once, a restart. Afterwards every acknowledged message is
in the stream exactly once, at the sequence its PubAck named, on every replica. The API's answers
for a replicated stream are compared with a nats-server cluster where the bytes are stable."""
import asyncio
import base64
import contextlib
import json
import random
import signal
import time

import nats
import pytest

from tests.support.cluster import fault_seeds, js_cluster, kill9, leaders_by_term, restart_member
from tests.support.waiting import poll
from tests.support.servers import http_status_json

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")

STREAM = {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3}


def local_state(m, stream="R3"):
    """The stream's state in this server's own copy (/jsz), or None."""
    try:
        d = m.get("/jsz?streams=1")
    except (OSError, ValueError):
        return None
    for acc in d.get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == stream:
                return s["state"]
    return None


async def api(m, subject, body=b"", timeout=5):
    nc = await nats.connect(m.url)
    try:
        return json.loads((await nc.request(subject, body, timeout=timeout)).data)
    finally:
        await nc.close()


async def meta_request(m, subject, cfg, timeout=5):
    """A request the meta leader decides, asked through `m` again while the cluster has no
    meta leader yet (10008, or no answer at all from nats-server)."""
    for _ in range(100):
        try:
            r = await api(m, subject, json.dumps(cfg).encode(), timeout=timeout)
        except nats.errors.TimeoutError:
            continue
        if r.get("error", {}).get("err_code") != 10008:
            return r
        await asyncio.sleep(0.2)
    raise AssertionError("no meta leader answered")


async def create(m, cfg=STREAM):
    """Create through `m`, retrying while the cluster has no meta leader yet."""
    return await meta_request(m, "$JS.API.STREAM.CREATE.%s" % cfg["name"], cfg)


def created(members, cfg=STREAM):
    """The stream created through the first member -> its leader, once it has one."""
    asyncio.run(create(members[0], cfg))
    return leader_of(members, cfg["name"])


def leader_of(members, stream="R3"):
    """The member the stream's info names as its leader (a follower may name a dead one for an
    election timeout: asked again until it is one of `members`)."""
    names = {m.name for m in members}

    def check():
        try:
            info = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.%s" % stream))
        except Exception:
            return None
        leader = info.get("cluster", {}).get("leader")
        return leader if leader in names else None
    name = poll(check, timeout=30, interval=0.1)
    assert name, "the stream never had a leader"
    return next(m for m in members if m.name == name)


async def publish_window(url, count, prefix, window=16, on_progress=None):
    """Publish `count` messages with up to `window` in flight; -> {seq: payload} of the acked.
    on_progress(i) runs after the i-th is sent; a true answer stops the sending."""
    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    js = nc.jetstream(timeout=2)
    acked = {}
    sem = asyncio.Semaphore(window)

    async def one(i):
        payload = b"%s-%d" % (prefix, i)
        try:
            ack = await js.publish("r3.%d" % (i % 7), payload)
        except Exception:
            return
        finally:
            sem.release()
        assert ack.seq not in acked, "two PubAcks named sequence %d" % ack.seq
        acked[ack.seq] = payload

    tasks = []
    for i in range(count):
        await sem.acquire()
        tasks.append(asyncio.create_task(one(i)))
        if on_progress is not None and on_progress(i):
            break                       # the caller wants no more sent
    await asyncio.gather(*tasks)
    await nc.close()
    return acked


def unanswered(acked, count):
    """The numbers of the publishes of publish_window(..., count, ...) that got no PubAck."""
    return sorted(set(range(count)) - {int(p.rsplit(b"-", 1)[1]) for p in acked.values()})


def stored(member, last, first=1):
    """seq -> payload of the stream as `member` (its leader) serves it."""
    async def run():
        nc = await nats.connect(member.url)
        out = {}
        for seq in range(first, last + 1):
            r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.R3",
                                             json.dumps({"seq": seq}).encode(), timeout=5)).data)
            if "message" in r:
                out[seq] = base64.b64decode(r["message"]["data"])
        await nc.close()
        return out
    return asyncio.run(run())


def converged(members, want_last):
    """Every member's copy holds the same messages, at least up to want_last, with the same
    times (the leader's)."""
    def check():
        states = [local_state(m) for m in members]
        if any(s is None for s in states):
            return False
        keys = {(s["messages"], s["first_seq"], s["last_seq"], s["bytes"], s["first_ts"],
                 s["last_ts"]) for s in states}
        return len(keys) == 1 and states[0]["last_seq"] >= want_last and states
    states = poll(check, timeout=30, interval=0.1)
    assert states, "replicas never converged: %r" % [local_state(m) for m in members]
    return states[0]


def check_acked(member, acked, state):
    have = stored(member, state["last_seq"])
    for seq, payload in acked.items():
        assert have.get(seq) == payload, "acked seq %d: stored %r, acked %r" % (seq, have.get(seq), payload)
    seqs_of = {}
    for seq, payload in have.items():
        seqs_of.setdefault(payload, []).append(seq)
    twice = {p: seqs for p, seqs in seqs_of.items() if len(seqs) > 1}
    assert not twice, "stored twice (payload: sequences): %r; acked: %r" % (twice, acked)


def stream_elections(members):
    """Every election of the stream's group the members' logs name, checked for one leader per
    term (tests/support/cluster.py, leaders_by_term); fails if there were none."""
    terms = {term: peer for (group, term), peer in leaders_by_term(members).items() if group.startswith("S-")}
    assert terms, "no election of the stream's group in the logs"
    return terms


# (servers, the servers killed, seed): a kill -9 of the stream's leader or of a follower in a
# three-server cluster, of the leader and a follower together in a five-server one (R5).
KILLS = ([("ABC", ("leader",), s) for s in fault_seeds([2])]
         + [("ABC", ("follower",), s) for s in fault_seeds([1])]
         + [("ABCDE", ("leader", "follower"), s) for s in fault_seeds([1])])


@pytest.mark.parametrize("names,victims,seed", KILLS, ids=["%s-%s-%d" % (len(n), "+".join(v), s) for n, v, s in KILLS])
def test_kill9_during_publishing_loses_no_acked_message(tmp_path, names, victims, seed):
    """Each victim dies at its own seeded point of a windowed publish through a survivor; the
    survivors (still a quorum) elect a leader and take more writes; the victims come back and
    every acked message is on every copy, once, at its PubAck's sequence."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path, names=names) as members:
        created = asyncio.run(create(rng.choice(members), dict(STREAM, num_replicas=len(names))))
        assert created["type"] == "io.nats.jetstream.api.v1.stream_create_response", created
        assert created["config"]["num_replicas"] == len(names) and created["did_create"] is True
        leader = leader_of(members)
        followers = [m for m in members if m is not leader]
        rng.shuffle(followers)
        dead = [leader if v == "leader" else followers.pop() for v in victims]
        alive = [m for m in members if m not in dead]
        entry = rng.choice(alive)
        kills = dict(zip(sorted(rng.sample(range(40, 200), len(dead))), dead))

        def progress(i):
            if i in kills:
                kills[i].proc.proc.send_signal(signal.SIGKILL)
        acked = asyncio.run(publish_window(entry.url, 300, b"a", on_progress=progress))
        for m in dead:
            m.proc.proc.wait(5)
        assert leader_of(alive) in alive
        more = asyncio.run(publish_window(entry.url, 50, b"b"))
        assert len(more) == 50, "the survivors did not take every publish"
        acked.update(more)
        for m in dead:
            members[members.index(m)] = restart_member(m, tmp_path)
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        stream_elections(members)


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_every_server_killed_at_once_during_publishing_loses_no_acked_message(tmp_path, seed):
    """kill -9 of all three at a seeded point of a windowed publish; they come back (in a seeded
    order) with every message acked before the kill, and take writes again."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(rng.choice(members)))
        leader_of(members)
        kill_at = rng.randrange(30, 250)

        def progress(i):
            if i == kill_at:
                kill9(*members)
                return True             # nothing more to send: every server is gone
        acked = asyncio.run(publish_window(rng.choice(members).url, 300, b"c", on_progress=progress))
        assert acked, "nothing was acked before the kill"
        order = list(range(len(members)))
        rng.shuffle(order)
        for i in order:
            members[i] = restart_member(members[i], tmp_path)
        state = converged(members, max(acked))
        assert state["messages"] >= len(acked)
        check_acked(leader_of(members), acked, state)
        more = asyncio.run(publish_window(rng.choice(members).url, 20, b"d"))
        assert len(more) == 20, "the cluster did not take writes again"
        acked.update(more)
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        stream_elections(members)


def test_delete_removes_every_copy(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[2]))
        leader_of(members)
        asyncio.run(publish_window(members[0].url, 10, b"e"))
        converged(members, 10)
        r = asyncio.run(api(members[1], "$JS.API.STREAM.DELETE.R3"))
        assert r == {"type": "io.nats.jetstream.api.v1.stream_delete_response", "success": True}
        assert poll(lambda: all(local_state(m) is None for m in members), timeout=10)
        r = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.R3"))
        assert r["error"]["err_code"] == 10059


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_more_replicas_than_servers_refused_as_nats_server(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        r = asyncio.run(create(members[0], dict(STREAM, name="R5", num_replicas=5)))
        assert r == {"type": "io.nats.jetstream.api.v1.stream_create_response",
                     "error": {"code": 400, "err_code": 10005, "description": "no suitable peers for placement"}}


@need_ref
def test_purge_delete_update_change_every_copy_as_nats_server(tmp_path):
    """The same operations on an R3 stream of natsd and of nats-server: the same replies, the
    same final state; on natsd every replica's copy ends the same."""
    seen = {}
    for kind in ("natsd", "nats-server"):
        with js_cluster(kind, tmp_path / kind) as members:
            asyncio.run(create(members[0]))
            leader_of(members)
            assert len(asyncio.run(publish_window(members[1].url, 20, b"f"))) == 20

            async def ops():
                out = [await api(members[2], "$JS.API.STREAM.MSG.DELETE.R3", b'{"seq":5}'),
                       await api(members[2], "$JS.API.STREAM.MSG.DELETE.R3", b'{"seq":5}'),
                       await api(members[0], "$JS.API.STREAM.PURGE.R3", b'{"filter":"r3.1"}'),
                       await api(members[1], "$JS.API.STREAM.PURGE.R3", b'{"filter":"r3.2","keep":1}')]
                cfg = dict(STREAM, max_msgs=10)
                upd = await api(members[1], "$JS.API.STREAM.UPDATE.R3", json.dumps(cfg).encode())
                out.append({k: upd[k] for k in ("type", "state")} if "state" in upd else upd)
                out[-1]["state"] = {k: upd["state"][k] for k in ("messages", "first_seq", "last_seq")}
                out.append(upd["config"]["max_msgs"])
                bad = await api(members[1], "$JS.API.STREAM.UPDATE.R3",
                                json.dumps(dict(STREAM, num_replicas=3, subjects=[])).encode())
                out.append(bad.get("error", {}).get("err_code"))
                return out
            seen[kind] = asyncio.run(ops())
            if kind == "natsd":
                state = converged(members, 20)
                assert state["messages"] == seen[kind][4]["state"]["messages"]
    assert seen["natsd"] == seen["nats-server"]


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_stream_leader_stepdown(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0]))
        leader = leader_of(members)
        prefix = {"type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response"}
        r = asyncio.run(api(members[1], "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                            b'{"placement":{"preferred":"nope"}}'))
        assert r == dict(prefix, error={"code": 400, "err_code": 10005,
                                        "description": 'preferred server "nope" not known'})
        target = sorted(m.name for m in members if m is not leader)[0]
        poll(lambda: all(x.get("current") for x in asyncio.run(
            api(members[0], "$JS.API.STREAM.INFO.R3"))["cluster"].get("replicas", [])), timeout=10)
        r = asyncio.run(api(members[2], "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                            json.dumps({"placement": {"preferred": target}}).encode()))
        assert r == dict(prefix, success=True)
        assert poll(lambda: leader_of(members).name == target, timeout=15)
        assert len(asyncio.run(publish_window(members[0].url, 20, b"g"))) == 20
        r = asyncio.run(api(members[0], "$JS.API.STREAM.LEADER.STEPDOWN.NOPE"))
        assert r["error"]["err_code"] == 10059


async def publish_with_one_reply(url, subject, payloads):
    """Publish `payloads` with one reply subject for all (as a publisher whose random reply
    tokens repeat) -> the PubAcks on it, in order."""
    nc = await nats.connect(url)
    try:
        sub = await nc.subscribe("_INBOX.same.reply")
        for p in payloads:
            await nc.publish(subject, p, reply="_INBOX.same.reply")
        await nc.flush()
        return [json.loads((await sub.next_msg(timeout=5)).data) for _ in payloads]
    finally:
        await nc.close()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_publishes_with_one_reply_are_each_stored_by_a_new_leader(tmp_path, kind):
    """Two publishes with the same reply subject are two publishes, also in a new leader's
    first seconds (natsd's leader then drops a publish another server forwarded when it took
    the same one itself, and once dropped any second reply: nats.go's async publisher repeats
    a six-character reply token within seconds at 70,000 a second). Right after the create and
    right after a step-down, through a follower and through the leader; nats-server stores
    every one, and so must natsd."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0]))
        leader = leader_of(members)
        follower = next(m for m in members if m is not leader)
        acks = asyncio.run(publish_with_one_reply(follower.url, "r3.a", [b"1", b"2"]))
        acks += asyncio.run(publish_with_one_reply(leader.url, "r3.a", [b"3", b"4"]))
        target = sorted(m.name for m in members if m is not leader)[0]
        poll(lambda: all(x.get("current") for x in asyncio.run(
            api(members[0], "$JS.API.STREAM.INFO.R3"))["cluster"].get("replicas", [])), timeout=10)
        r = asyncio.run(api(follower, "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                            json.dumps({"placement": {"preferred": target}}).encode()))
        assert r.get("success"), r
        assert poll(lambda: leader_of(members).name == target, timeout=15)
        new_leader = leader_of(members)
        other = next(m for m in members if m is not new_leader)
        acks += asyncio.run(publish_with_one_reply(other.url, "r3.a", [b"5", b"6"]))
        acks += asyncio.run(publish_with_one_reply(new_leader.url, "r3.a", [b"7", b"8"]))
        assert [a.get("seq") for a in acks] == list(range(1, 9)), acks
        info = asyncio.run(api(members[0], "$JS.API.STREAM.INFO.R3"))
        assert info["state"]["messages"] == 8, info["state"]


@contextlib.contextmanager
def stream_with_a_long_lame_duck(tmp_path):
    """The R3 stream on three natsd servers whose lame duck mode lasts 30 s -> (its leader,
    the other two); every member killed afterwards."""
    ldm = "lame_duck_duration: 30s\nlame_duck_grace_period: 20s\n"
    with js_cluster("natsd", tmp_path, extra=lambda name: ldm) as members:
        asyncio.run(create(members[0]))
        leader = leader_of(members)
        yield leader, [m for m in members if m is not leader]


def test_lame_duck_hands_leadership_on(tmp_path):
    """As nats-server (transferRaftLeaders): a server entering lame duck mode hands the groups
    it leads to other members before its JetStream stops; the stream goes on taking writes
    through the others while that server is still up, and every acknowledged message stays."""
    with stream_with_a_long_lame_duck(tmp_path) as (leader, others):
        acked = asyncio.run(publish_window(others[0].url, 50, b"a"))
        assert len(acked) == 50
        leader.proc.proc.send_signal(signal.SIGUSR2)
        leader.proc.wait_log(r"JetStream handed the leadership of \d+ Raft groups? to other members", timeout=10)
        assert leader_of(others) in others
        more = asyncio.run(publish_window(others[1].url, 50, b"b"))
        assert len(more) == 50
        assert leader.proc.proc.poll() is None, "the server in lame duck mode is still up"
        acked.update(more)
        check_acked(others[0], acked, converged(others, max(acked)))


def test_publishes_during_a_hand_off_are_all_answered(tmp_path):
    """A publisher waiting for each PubAck goes on through the stream leader's lame duck mode:
    what reaches the leader while it hands leadership on is held and forwarded to the new
    leader (natsd/jetstream/replicated/forward.py), so no publish goes unanswered (before, the one in
    flight was dropped and its publisher timed out), and each is stored once."""
    with stream_with_a_long_lame_duck(tmp_path) as (leader, others):
        def signal_at(i):
            if i == 50:
                leader.proc.proc.send_signal(signal.SIGUSR2)
        acked = asyncio.run(publish_window(others[0].url, 400, b"h", window=1, on_progress=signal_at))
        leader.proc.wait_log(r"JetStream handed the leadership of \d+ Raft groups? to other members", timeout=10)
        assert not unanswered(acked, 400), "publishes never answered: %r" % unanswered(acked, 400)
        check_acked(others[0], acked, converged(others, max(acked)))


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_partitioned_leader_acks_nothing_and_the_majority_goes_on(tmp_path, seed):
    """Every route runs through a proxy per direction (and each server advertises a dead
    address, so no route is made around them). The stream's leader is cut off with a client
    on each side: nothing published on its side is acknowledged, the other two elect a leader
    and take writes, and after the heal every replica holds exactly the acknowledged ones."""
    from tests.support.cluster import start_member, wait_mesh
    from tests.support.tcpproxy import TcpProxy
    from tools.serverproc import free_port
    rng = random.Random(seed)
    names = "ABC"
    ports = {n: free_port() for n in names}
    dead = free_port()
    proxies = {(x, y): TcpProxy(ports[y]) for x in names for y in names if x != y}
    members = []
    try:
        for n in names:
            routes = ["nats://127.0.0.1:%d" % proxies[(n, y)].port for y in names if y != n]
            members.append(start_member(
                "natsd", tmp_path, n, routes=routes, route_port=ports[n],
                cluster_extra='ping_interval: "1s"\n  ping_max: 2\n  advertise: "127.0.0.1:%d"' % dead,
                extra="jetstream { store_dir: '%s' }" % (tmp_path / ("store-" + n))))
        wait_mesh(members)
        asyncio.run(create(members[rng.randrange(3)]))
        leader = leader_of(members)
        rest = [m for m in members if m is not leader]
        acked = asyncio.run(publish_window(rest[0].url, rng.randrange(20, 60), b"h"))
        for (x, y), p in proxies.items():
            if leader.name in (x, y):
                p.cut()

        async def both_sides():
            minority = asyncio.create_task(publish_window(leader.url, 40, b"minority", window=4))
            await asyncio.sleep(0.5)
            majority = []
            deadline = asyncio.get_running_loop().time() + 30
            while len(majority) < 30 and asyncio.get_running_loop().time() < deadline:
                got = await publish_window(rest[rng.randrange(2)].url, 10, b"major-%d" % len(majority))
                majority.extend(got.items())
            return await minority, dict(majority)
        lost, won = asyncio.run(both_sides())
        assert lost == {}, "the cut-off leader acknowledged %r" % lost
        assert len(won) >= 30, "the majority took only %d writes" % len(won)
        assert not set(won) & set(acked)
        acked.update(won)
        for p in proxies.values():
            p.heal()
        wait_mesh(members, timeout=30)
        state = converged(members, max(acked))
        have = stored(leader_of(members), state["last_seq"])
        for seq, payload in acked.items():
            assert have.get(seq) == payload, "acked seq %d: stored %r" % (seq, have.get(seq))
        assert not [p for p in have.values() if p.startswith(b"minority")]
        stream_elections(members)
    finally:
        for m in members:
            m.proc.kill()
        for p in proxies.values():
            p.close()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_leader_elected_advisory(tmp_path, kind):
    with js_cluster(kind, tmp_path) as members:
        async def run():
            nc = await nats.connect(members[1].url)
            sub = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.R3")
            await nc.flush()
            await create(members[0])
            msg = await sub.next_msg(timeout=20)
            await nc.close()
            return json.loads(msg.data)
        adv = asyncio.run(run())
        assert list(adv) == ["type", "id", "timestamp", "stream", "leader", "replicas"]
        assert adv["type"] == "io.nats.jetstream.advisory.v1.stream_leader_elected"
        assert adv["stream"] == "R3" and adv["leader"] in {m.name for m in members}
        assert sorted(r["name"] for r in adv["replicas"]) == ["A", "B", "C"]
        assert all({"name", "current", "active", "peer"} <= set(r) for r in adv["replicas"])


def test_five_servers_stream_quorum_lost_is_advised_and_explained(tmp_path):
    """Five servers, an R3 stream: its two followers die; the meta group keeps its quorum, the
    stream's leader steps down, says so (advisory, log line) and /healthz names the stream and
    the servers it cannot reach; one follower back and the stream takes writes again."""
    with js_cluster("natsd", tmp_path, names="ABCDE") as members:
        async def setup():
            nc = await nats.connect(members[0].url)
            lost = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.R3")
            await nc.flush()
            await create(members[0])
            return nc, lost
        loop = asyncio.new_event_loop()
        nc, lost = loop.run_until_complete(setup())
        leader = leader_of(members)
        info = asyncio.run(api(leader, "$JS.API.STREAM.INFO.R3"))
        followers = [m for m in members if m.name in {r["name"] for r in info["cluster"]["replicas"]}]
        assert len(followers) == 2 and leader not in followers
        assert len(asyncio.run(publish_window(leader.url, 20, b"q"))) == 20
        kill9(*followers)
        adv = json.loads(loop.run_until_complete(lost.next_msg(timeout=20)).data)
        assert adv["type"] == "io.nats.jetstream.advisory.v1.stream_quorum_lost" and adv["stream"] == "R3"
        leader.proc.wait_log(r"JetStream stream '\$G > R3' lost quorum: it needs 2 of its 3 servers", timeout=10)

        def unhealthy():
            status, body = http_status_json(leader.proc.http_port, "/healthz?js-enabled-only=true&details=true")
            return body if status != 200 else None
        body = poll(unhealthy, timeout=15)
        assert body and body["errors"][0]["error"] == "JetStream stream '$G > R3' is not current: group node unhealthy"
        detail = body["errors"][1]["error"]
        assert detail.startswith("JetStream stream '$G > R3' has no leader: it needs 2 of its 3 servers")
        assert sorted(detail.rsplit("reach ", 1)[1].split(", ")) == sorted(m.name for m in followers)
        back = restart_member(followers[0], tmp_path)
        members[members.index(followers[0])] = back
        alive = [m for m in members if m is not followers[1]]
        leader_of(alive)
        assert len(asyncio.run(publish_window(alive[0].url, 10, b"r"))) == 10
        loop.run_until_complete(nc.close())
        loop.close()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_two_creates_at_once(tmp_path, kind):
    """Two clients on different servers create the same name at the same moment: with
    different configs one wins and the other gets 10058, with the same config both succeed;
    every replica runs the winner's config."""
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], dict(STREAM, name="WARMUP", subjects=["warm"])))

        async def race(cfgs):
            conns = [await nats.connect(m.url) for m in members[1:]]
            try:
                replies = await asyncio.gather(*[
                    nc.request("$JS.API.STREAM.CREATE.%s" % c["name"], json.dumps(c).encode(), timeout=10)
                    for nc, c in zip(conns, cfgs)])
                return [json.loads(r.data) for r in replies]
            finally:
                for nc in conns:
                    await nc.close()
        a, b = dict(STREAM, subjects=["a.>"]), dict(STREAM, subjects=["b.>"])
        got = asyncio.run(race([a, b]))
        codes = sorted(r.get("error", {}).get("err_code", 0) for r in got)
        assert codes == [0, 10058], got
        winner = next(r for r in got if "error" not in r)["config"]["subjects"]
        for m in members:
            assert asyncio.run(api(m, "$JS.API.STREAM.INFO.R3"))["config"]["subjects"] == winner
        same = dict(STREAM, name="SAME", subjects=["s.>"])
        got = asyncio.run(race([same, same]))
        assert all("error" not in r and r["config"]["subjects"] == ["s.>"] for r in got), got


@need_ref
def test_stream_and_consumer_advisories_on_a_cluster_match(tmp_path):
    """A replicated stream created, updated and deleted, a replicated consumer created and
    deleted, requests another server answers: one advisory of each kind from the cluster (its
    leaders send them) with the fields nats-server gives them, and one API audit per request
    naming the client that asked (changes answered once applied carry no request)."""
    def audit(d):
        response = json.loads(d["response"])
        return ("API", d["subject"], "request" in d, response["type"],
                (response.get("error") or {}).get("err_code"), d["client"]["server"],
                sorted(d), sorted(d["client"]))

    def advisories_of(kind):
        with js_cluster(kind, tmp_path / kind) as members:
            async def run():
                nc = await nats.connect(members[1].url)
                got = []

                async def cb(m):
                    d = json.loads(m.data)
                    if m.subject != "$JS.EVENT.ADVISORY.API":
                        got.append((m.subject, sorted(d)))
                    elif audit(d)[4] != 10008:     # a create asked again until a meta leader is elected
                        got.append(audit(d))
                await nc.subscribe("$JS.EVENT.ADVISORY.>", cb=cb)
                await nc.flush()
                await create(members[0], {"name": "AD", "subjects": ["ad.>"], "num_replicas": 3})
                # the update once the stream has its leader: nats-server sent no answer to one
                # that came before (CI), and a second request would add an audit of its own
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not any("STREAM.LEADER_ELECTED" in s[0] for s in got):
                    await asyncio.sleep(0.05)
                cfg = {"name": "AD", "subjects": ["ad.>"], "num_replicas": 3, "max_msgs": 10}
                assert "error" not in await api(members[2], "$JS.API.STREAM.UPDATE.AD", json.dumps(cfg).encode())
                r = await api(members[2], "$JS.API.CONSUMER.CREATE.AD.dd", json.dumps(
                    {"stream_name": "AD", "config": {"durable_name": "dd", "ack_policy": "explicit"}}).encode())
                assert "error" not in r, r
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not any("CONSUMER.LEADER_ELECTED" in s[0] for s in got):
                    await asyncio.sleep(0.05)
                for m in members:       # answered by the stream's leader, wherever it is
                    assert "error" not in await api(m, "$JS.API.STREAM.INFO.AD")
                assert "error" not in await api(members[1], "$JS.API.CONSUMER.INFO.AD.dd")
                assert "error" not in await api(members[1], "$JS.API.STREAM.PURGE.AD")
                again = {"name": "AD", "subjects": ["other"], "num_replicas": 3}
                assert (await api(members[1], "$JS.API.STREAM.CREATE.AD", json.dumps(again).encode())
                        )["error"]["err_code"] == 10058
                assert (await api(members[0], "$JS.API.CONSUMER.DELETE.AD.dd"))["success"]
                assert (await api(members[0], "$JS.API.STREAM.DELETE.AD"))["success"]
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not any("STREAM.DELETED" in s[0] for s in got):
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)        # a second copy of any would be here by now
                await nc.close()
                return sorted(got, key=repr)
            return asyncio.run(run())
    theirs = advisories_of("nats-server")
    ours = advisories_of("natsd")
    assert [s[0] for s in theirs if s[0] != "API"] == [
        "$JS.EVENT.ADVISORY.CONSUMER.CREATED.AD.dd", "$JS.EVENT.ADVISORY.CONSUMER.DELETED.AD.dd",
        "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.AD.dd", "$JS.EVENT.ADVISORY.STREAM.CREATED.AD",
        "$JS.EVENT.ADVISORY.STREAM.DELETED.AD", "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.AD",
        "$JS.EVENT.ADVISORY.STREAM.UPDATED.AD"], theirs
    assert len([s for s in theirs if s[0] == "API"]) == 11, theirs
    assert ours == theirs
