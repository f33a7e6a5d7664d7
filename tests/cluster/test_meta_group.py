"""The JetStream meta group of a cluster (natsd/jetstream/replicated/meta.py over natsd/raft/group.py):
three real servers joined by routes elect a meta leader and report it as nats-server does
(/jsz and /varz `meta_cluster`, /raftz, /healthz), survive kill -9 of the leader and of a
quorum, restart from their disks, and hand leadership over on $JS.API.META.LEADER.STEPDOWN.
The shapes and the stepdown replies are compared with a nats-server cluster run the same way."""
import asyncio
import json
import time

import nats
import pytest

from tests.support.cluster import fault_seeds, js_cluster, kill9, leaders_by_term, restart_member
from tests.support.servers import ServerProcess, http_status_json, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")

REMOVE = "$JS.API.SERVER.REMOVE"
SYS_USERS = ("accounts { SYS: { users: [{user: sys, password: pass}] }, "
             "APP: { jetstream: enabled, users: [{user: app, password: pass}] } }\n"
             "system_account: SYS\n")


def meta_cluster(kind, tmp_path):
    """Three servers, each routed to all, with JetStream and a system account (a context:
    js_cluster)."""
    return js_cluster(kind, tmp_path, extra=lambda name: SYS_USERS)


def restart(member, tmp_path):
    return restart_member(member, tmp_path, SYS_USERS)


def meta(m):
    try:
        return m.get("/jsz").get("meta_cluster") or {}
    except (OSError, ValueError):
        return {}


def agreed_leader(members, timeout=30.0, exclude=()):
    """Poll until every member names the same meta leader (not one of `exclude`) -> its name."""
    def check():
        leaders = {meta(m).get("leader") for m in members}
        if len(leaders) == 1 and None not in leaders and not leaders & set(exclude):
            return leaders.pop()
    leader = poll(check, timeout=timeout, interval=0.05)
    assert leader, "no agreed meta leader: %r" % [meta(m) for m in members]
    return leader


def raft_group(m):
    return m.get("/raftz")["SYS"]["_meta_"]


def healthz(m):
    return http_status_json(m.proc.http_port, "/healthz?js-enabled-only=true&details=true")


def _shape(obj):
    """The keys of a JSON value, recursively (values left out; lists by their first item; a
    map keyed by peer id by its number of entries and their shapes)."""
    if isinstance(obj, dict):
        return {k: (sorted(map(json.dumps, map(_shape, v.values()))) if k == "peers" else _shape(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shape(obj[0])] if obj else []
    return type(obj).__name__


def _unix(go_time):
    """RFC 3339 (nanoseconds allowed) -> seconds since the epoch."""
    from datetime import datetime
    whole, _, frac = go_time.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))


def _snapshot(members):
    leader_name = agreed_leader(members)
    leader = next(m for m in members if m.name == leader_name)
    follower = next(m for m in members if m.name != leader_name)
    # the leader's view of the replicas is current once they answered
    poll(lambda: all(r["current"] for r in meta(leader).get("replicas", [])), timeout=10)
    return leader, follower


@need_ref
def test_meta_cluster_and_raftz_are_shaped_as_nats_server(tmp_path):
    shapes = {}
    for kind in ("natsd", "nats-server"):
        with meta_cluster(kind, tmp_path / kind) as members:
            leader, follower = _snapshot(members)
            names = {m.name for m in members}
            lm, fm = meta(leader), meta(follower)
            assert lm["name"] == "C1" and lm["cluster_size"] == 3 and lm["quorum_needed"] == 2
            assert [r["name"] for r in lm["replicas"]] == sorted(names - {leader.name})
            assert all(r["current"] and r["active"] > 0 for r in lm["replicas"])
            # a follower lists everyone but itself, the leader current
            assert [r["name"] for r in fm["replicas"]] == sorted(names - {follower.name})
            assert next(r for r in fm["replicas"] if r["name"] == leader.name)["current"]
            lg, fg = raft_group(leader), raft_group(follower)
            assert lg["state"] == "LEADER" and fg["state"] == "FOLLOWER"
            assert lg["id"] == lm["peer"] == fg["leader"] and lg["term"] == fg["term"] >= 1
            assert {p["name"] for p in lg["peers"].values()} == names - {leader.name}
            assert lg["committed"] >= 1
            assert poll(lambda: raft_group(follower)["committed"] >= 1, timeout=10)
            wal = raft_group(leader)["wal"]     # when its entries were appended, as a stream's
            assert wal["messages"] >= 1 or kind == "nats-server"
            if wal["messages"]:
                first, last = (_unix(wal["first_ts"]), _unix(wal["last_ts"]))
                assert time.time() - 300 < first <= last < time.time() + 1, wal
            varz_meta = leader.get("/varz")["jetstream"]["meta"]
            assert varz_meta["leader"] == leader.name and varz_meta["cluster_size"] == 3
            assert leader.get("/jsz")["ha_assets"] == 1
            assert healthz(follower) == (200, {"status": "ok"})
            shapes[kind] = (_shape(lm), _shape(fm), _shape(lg), _shape(fg),
                            list(leader.get("/varz")["jetstream"]))
    for what, mine, ref in zip(("leader meta_cluster", "follower meta_cluster", "leader raftz",
                                "follower raftz", "varz jetstream"), shapes["natsd"], shapes["nats-server"]):
        assert mine == ref, "%s: natsd %s, nats-server %s" % (what, json.dumps(mine), json.dumps(ref))


@pytest.mark.parametrize("seed", fault_seeds([2]))
def test_leader_kill9_elects_another_and_the_restarted_server_follows(tmp_path, seed):
    with meta_cluster("natsd", tmp_path) as members:
        first = agreed_leader(members)
        victim = next(m for m in members if m.name == first)
        term = raft_group(victim)["term"]
        kill9(victim)
        rest = [m for m in members if m is not victim]
        second = agreed_leader(rest, exclude=(first,))
        assert raft_group(next(m for m in rest if m.name == second))["term"] > term
        back = restart(victim, tmp_path)
        members[members.index(victim)] = back
        assert agreed_leader(members) == second
        assert raft_group(back)["state"] == "FOLLOWER"
        # every server killed at once: they come back from their disks, term moves on
        term = max(raft_group(m)["term"] for m in members)
        order = members[seed:] + members[:seed]
        kill9(*order)
        for i, m in enumerate(members):         # in place: the context kills what the list holds
            members[i] = restart(m, tmp_path)
        leader = agreed_leader(members)
        assert raft_group(next(m for m in members if m.name == leader))["term"] > term
        assert all(raft_group(m)["size"] == 3 for m in members)
        # one leader per term throughout, and the three elections the test made are there
        assert len({t for g, t in leaders_by_term(members) if g == "_meta_"}) >= 3


def test_lost_quorum_is_explained_and_heals(tmp_path):
    with meta_cluster("natsd", tmp_path) as members:
        agreed_leader(members)
        survivor, gone = members[1], [members[0], members[2]]
        kill9(*gone)
        status = poll(lambda: healthz(survivor)[0] == 503 and healthz(survivor), timeout=20)
        assert status, "the survivor never reported the lost quorum"
        code, body = status
        assert body["status"] == "error"
        assert body["errors"][0]["error"] == "JetStream has not established contact with a meta leader"
        detail = [e["error"] for e in body["errors"][1:]]
        assert len(detail) == 2 and all(e.startswith("JetStream meta group member ") for e in detail)
        assert {d.split()[4] for d in detail} == {"A", "C"}
        assert all("needs 2 of its 3 members" in d for d in detail)
        survivor.proc.wait_log(r"JetStream meta group has no leader: it needs 2 of its 3 members "
                               r"and 2 are unreachable \(A, C\)", timeout=15)
        back = restart(members[2], tmp_path)
        members[2] = back
        agreed_leader([survivor, back])
        assert poll(lambda: healthz(survivor) == (200, {"status": "ok"}), timeout=10)


async def _sys_request(m, payload, subject="$JS.API.META.LEADER.STEPDOWN"):
    """A request from the system account's user -> the reply's bytes."""
    nc = await nats.connect(m.url, user="sys", password="pass")
    try:
        r = await nc.request(subject, payload, timeout=10)
        return r.data
    finally:
        await nc.close()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_meta_stepdown_replies_and_moves_the_leader(tmp_path, kind):
    with meta_cluster(kind, tmp_path) as members:
        leader, _ = _snapshot(members)
        prefix = b'{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response",'
        unknown = asyncio.run(_sys_request(leader, b'{"placement":{"preferred":"nope"}}'))
        assert unknown == prefix + (b'"error":{"code":400,"err_code":10005,'
                                    b'"description":"preferred server \\"nope\\" not known"}}')
        same = asyncio.run(_sys_request(leader, b'{"placement":{"preferred":"%s"}}' % leader.name.encode()))
        assert same == prefix + (b'"error":{"code":400,"err_code":10005,"description":'
                                 b'"preferred server \\"%s\\" is already leader"}}' % leader.name.encode())
        bad = asyncio.run(_sys_request(leader, b'{"placement":{"preferred":1}}'))
        assert bad.startswith(prefix + b'"error":{"code":400,"err_code":10025,')
        target = sorted({m.name for m in members} - {leader.name})[0]
        ok = asyncio.run(_sys_request(leader, b'{"placement":{"preferred":"%s"}}' % target.encode()))
        assert ok == prefix + b'"success":true}'
        assert agreed_leader(members, exclude=(leader.name,)) == target
        poll(lambda: all(r["current"] for r in meta(next(m for m in members if m.name == target))
                         .get("replicas", [])), timeout=10)
        ok = asyncio.run(_sys_request(next(m for m in members if m.name == target), b""))
        assert ok == prefix + b'"success":true}'
        assert agreed_leader(members, exclude=(target,)) != target


def test_malformed_raft_traffic_is_dropped_and_logged(tmp_path):
    with meta_cluster("natsd", tmp_path) as members:
        leader_name = agreed_leader(members)
        leader = next(m for m in members if m.name == leader_name)
        term = raft_group(leader)["term"]
        peer = raft_group(leader)["id"]

        async def garbage():
            nc = await nats.connect(members[0].url, user="sys", password="pass")
            for payload in (b"", b"\xff" * 3, b"\x02" + b"\x00" * 40, b"\x01" * 200):
                await nc.publish("$NRG._meta_.%s" % peer, payload)
            await nc.flush()
            await nc.close()
        asyncio.run(garbage())
        leader.proc.wait_log(r"Raft group _meta_: dropped a malformed message", timeout=10)
        time.sleep(0.5)
        assert agreed_leader(members) == leader_name and raft_group(leader)["term"] == term
        assert leader.proc.proc.poll() is None


NO_ROUTES = ("[FTL] Can't start JetStream: JetStream cluster requires configured routes or solicited "
             "leafnode for the system account")


@need_ref
@pytest.mark.parametrize("block,error", [
    ("cluster { name: C1, port: -1 }", NO_ROUTES),
    ("gateway { name: G1, port: -1 }", NO_ROUTES),        # a gateway alone is not stand-alone either
    ("cluster { port: -1, routes: [nats://127.0.0.1:1] }", "nats-server: jetstream cluster requires `cluster.name` to be set")],
    ids=["cluster-without-routes", "gateway-without-routes", "cluster-without-name"])
def test_jetstream_cluster_config_refused_as_nats_server(tmp_path, block, error):
    conf = tmp_path / "c.conf"
    conf.write_text("server_name: S\njetstream { store_dir: '%s' }\n%s\n" % (tmp_path / "s", block))
    for cmd in (natsd_cmd(), nats_server_cmd()):
        p = ServerProcess(list(cmd) + ["-c", str(conf), "-p", "-1"])
        try:
            assert p.proc.wait(15) == 1
            p.reader.join(5)
            assert error in p.log, p.log
        finally:
            p.kill()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_server_remove_takes_a_dead_server_out_of_the_meta_group(tmp_path, kind):
    with meta_cluster(kind, tmp_path) as members:
        leader, _ = _snapshot(members)
        dead = next(m for m in members if m is not leader)
        kill9(dead)
        prefix = b'{"type":"io.nats.jetstream.api.v1.meta_server_remove_response",'
        empty = asyncio.run(_sys_request(leader, b"", REMOVE))
        assert empty == prefix + b'"error":{"code":400,"err_code":10003,"description":"bad request"}}'
        unknown = asyncio.run(_sys_request(leader, b'{"peer":"nope"}', REMOVE))
        assert unknown == prefix + (b'"error":{"code":400,"err_code":10044,'
                                    b'"description":"server is not a member of the cluster"}}')
        ok = asyncio.run(_sys_request(leader, b'{"peer":"%s"}' % dead.name.encode(), REMOVE))
        assert ok == prefix + b'"success":true}'
        assert poll(lambda: meta(leader).get("cluster_size") == 2, timeout=10), meta(leader)
        assert dead.name not in [r["name"] for r in meta(leader).get("replicas", [])]


@pytest.mark.parametrize("seed", fault_seeds([5]))
def test_servers_routed_through_one_seed_form_one_meta_group(tmp_path, seed):
    """The seed layout of the NATS docs: the first server's route list names only itself,
    the others name only it and find each other through it; started at seeded intervals,
    they form one meta group of all of them with one leader."""
    import random
    from tests.support.cluster import js_extra, start_member
    from tools.serverproc import free_port
    rng = random.Random(seed)
    seeds = ["nats://127.0.0.1:%d" % free_port()]
    port = int(seeds[0].rsplit(":", 1)[1])
    members = []
    try:
        members.append(start_member("natsd", tmp_path, "A", routes=seeds, route_port=port,
                                    extra=js_extra(tmp_path, "A")))
        for name in "BCD":
            time.sleep(rng.choice((0, 0.3, 0.8, 1.5)))
            members.append(start_member("natsd", tmp_path, name, routes=seeds, extra=js_extra(tmp_path, name)))

        def one_group():
            views = [(meta(m).get("leader"), meta(m).get("cluster_size")) for m in members]
            return views[0][0] and views[0][1] == len(members) and len(set(views)) == 1
        assert poll(one_group, timeout=30, interval=0.25), [meta(m) for m in members]
    finally:
        for m in members:
            m.proc.kill()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_restarted_server_never_says_a_stream_is_not_found(tmp_path, kind):
    """A server killed and started again is asked STREAM.INFO of an existing R3 stream at
    once, over and over for two seconds: before its meta group hears a leader it does not
    know every stream, so it does not answer 10059; the stream's leader answers (nats-server
    never answered not found either)."""
    from tests.support.cluster import js_cluster
    from tests.cluster.test_replicated_streams import create, leader_of
    with js_cluster(kind, tmp_path) as members:
        asyncio.run(create(members[0], {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3}))
        lead = leader_of(members)
        m = next(x for x in members if x is not lead)
        kill9(m)
        back = members[members.index(m)] = restart_member(m, tmp_path)

        async def ask():
            nc = await nats.connect(back.url)
            codes, t0 = [], time.monotonic()
            while time.monotonic() - t0 < 2:
                try:
                    r = json.loads((await nc.request("$JS.API.STREAM.INFO.R3", b"", timeout=0.3)).data)
                    codes.append(r.get("error", {}).get("err_code", 0))
                except nats.errors.TimeoutError:
                    pass
            await nc.close()
            return codes
        codes = asyncio.run(ask())
        assert codes and set(codes) == {0}, codes


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_a_fresh_cluster_creates_a_stream_asked_before_its_first_leader(tmp_path, kind):
    """nats.c's cluster info test: a stream created through a three-server cluster the moment
    its routes are up. A request that comes before the first meta leader is left unanswered
    (nats-server answers 503 "JetStream system temporarily unavailable" only once the group
    has been leaderless for its lost-quorum interval, 10 s); asked again it is created. What
    each attempt heard, in order, must be timeouts and then the stream, never an error."""
    with js_cluster(kind, tmp_path, elected=False) as members:
        async def run():
            nc = await nats.connect(members[0].url)
            heard = []
            try:
                for _ in range(10):
                    try:
                        msg = await nc.request("$JS.API.STREAM.CREATE.FRESH", json.dumps(
                            {"name": "FRESH", "subjects": ["fresh.>"], "num_replicas": 3}).encode(),
                            timeout=2)
                    except nats.errors.TimeoutError:
                        heard.append("no answer")
                        continue
                    r = json.loads(msg.data)
                    heard.append(r.get("error") or r["config"]["name"])
                    break
            finally:
                await nc.close()
            return heard
        heard = asyncio.run(run())
    assert heard[-1] == "FRESH", heard
    assert set(heard[:-1]) <= {"no answer"}, heard
