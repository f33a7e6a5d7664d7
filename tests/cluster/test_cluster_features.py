"""Everything else over routes: leaf nodes attached to any server of a cluster (and a leaf
cluster attached to two of them), accounts with imports and service responses across
servers, the system account of the whole cluster, and the monitoring of routes. Mixed
natsd/nats-server clusters, compared with an all-nats-server run."""
import asyncio
import json
import os
import time

import nats
import pytest

from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.leafnodes import carries
from tests.support.monitoring import differences
from tests.support.servers import ServerProcess, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")
MIXES = [("natsd", "natsd"), ("nats-server", "nats-server"), ("natsd", "nats-server"),
         ("nats-server", "natsd")]
MIX_IDS = ["natsd", "nats-server", "natsd+ref", "ref+natsd"]


def _cmd(kind):
    return natsd_cmd() if kind == "natsd" else nats_server_cmd()


def _leaf_port(member):
    return int(member.proc.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))


def _start_leaf(kind, tmp_path, name, hub_port, extra=""):
    conf = os.path.join(str(tmp_path), "%s.conf" % name)
    with open(conf, "w") as f:
        f.write('server_name: %s\n%s\nleafnodes { remotes [ { url: "nats://127.0.0.1:%d" } ] }\n'
                % (name, extra, hub_port))
    p = ServerProcess(list(_cmd(kind)) + ["-c", conf, "-p", "-1", "-a", "127.0.0.1", "-m", "-1"]).wait_ready()
    p.wait_log("Leafnode connection created")
    return p


async def _collect(sub, want, timeout=5.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        try:
            got.append(await sub.next_msg(0.1))
        except nats.errors.TimeoutError:
            pass
    try:                                    # anything past `want` is a duplicate
        got.append(await sub.next_msg(0.3))
    except nats.errors.TimeoutError:
        pass
    return got


@need_ref
@pytest.mark.parametrize("kinds", MIXES, ids=MIX_IDS)
@pytest.mark.parametrize("leaf", ["natsd", "nats-server"])
def test_leaf_on_one_server_reaches_the_cluster(tmp_path, kinds, leaf):
    """A leaf node attached to A: its interest travels over the route, so a client on B
    reaches it, and the leaf's messages reach B."""
    a = start_member(kinds[0], tmp_path, "A", extra="leafnodes { port: -1 }")
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url])
    procs = [a.proc, b.proc]
    try:
        wait_mesh([a, b])
        lp = _start_leaf(leaf, tmp_path, "L", _leaf_port(a))
        procs.append(lp)

        async def run():
            nl = await nats.connect(lp.url)
            nb = await nats.connect(b.url)
            down = await nl.subscribe("to.leaf")
            up = await nb.subscribe("from.leaf")
            await nl.flush()
            await nb.flush()
            wait_interest([a], "from.leaf")
            wait_interest([b], "to.leaf")
            # the leaf sends what its hub has interest in: B's subscription must have reached it
            assert poll(lambda: carries(lp, "from.leaf"), 10)
            await nb.publish("to.leaf", b"down", headers={"H": "1"})
            await nl.publish("from.leaf", b"up")
            await nb.flush()
            await nl.flush()
            got_down = await _collect(down, 1)
            got_up = await _collect(up, 1)

            async def svc(msg):
                await msg.respond(b"leaf:" + msg.data)
            await nl.subscribe("svc.leaf", cb=svc)
            await nl.flush()
            wait_interest([b], "svc.leaf")
            answer = await nb.request("svc.leaf", b"q", timeout=5)
            await nl.close()
            await nb.close()
            return ([(m.subject, m.data, dict(m.headers or {})) for m in got_down],
                    [(m.subject, m.data) for m in got_up], answer.data)
        down, up, answer = asyncio.run(run())
        assert down == [("to.leaf", b"down", {"H": "1"})]
        assert up == [("from.leaf", b"up")]
        assert answer == b"leaf:q"
    finally:
        for p in procs:
            p.kill()


@need_ref
@pytest.mark.parametrize("kinds", MIXES, ids=MIX_IDS)
def test_leaf_cluster_on_two_hub_servers_gets_each_message_once(tmp_path, kinds):
    """A leaf cluster (L1, L2) attached to hub A and hub B: a message published on L1 reaches
    a subscriber on L2 once (through the leaf cluster's own route), not a second time back
    through the hub (nats-server's leaf origin: LS+/LMSG carry the leaf cluster's name)."""
    a = start_member(kinds[0], tmp_path, "A", extra="leafnodes { port: -1 }")
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url], extra="leafnodes { port: -1 }")
    procs = [a.proc, b.proc]
    try:
        wait_mesh([a, b])
        l1 = start_member(kinds[1], tmp_path / "lc", "L1", cluster="LC",
                          extra='leafnodes { remotes [ { url: "nats://127.0.0.1:%d" } ] }' % _leaf_port(a))
        procs.append(l1.proc)
        l2 = start_member(kinds[0], tmp_path / "lc", "L2", cluster="LC", routes=[l1.route_url],
                          extra='leafnodes { remotes [ { url: "nats://127.0.0.1:%d" } ] }' % _leaf_port(b))
        procs.append(l2.proc)
        wait_mesh([l1, l2])

        async def run():
            n2 = await nats.connect(l2.url)
            n1 = await nats.connect(l1.url)
            nh = await nats.connect(a.url)
            on_l2 = await n2.subscribe("lc.x")
            on_hub = await nh.subscribe("lc.x")
            await n2.flush()
            await nh.flush()
            wait_interest([l1, b], "lc.x")
            # the leaf links' interest settles: the hub's reached L1 and L2, L2's reached B
            assert poll(lambda: all(carries(s, "lc.x") for s in (l1.proc, l2.proc, b.proc)), 10)
            for i in range(5):
                await n1.publish("lc.x", b"%d" % i)
            await n1.flush()
            got2 = await _collect(on_l2, 5)
            goth = await _collect(on_hub, 5)
            for nc in (n1, n2, nh):
                await nc.close()
            return [m.data for m in got2], [m.data for m in goth]
        on_l2, on_hub = asyncio.run(run())
        assert sorted(on_l2) == [b"%d" % i for i in range(5)]
        assert sorted(on_hub) == [b"%d" % i for i in range(5)]
    finally:
        for p in procs:
            p.kill()


ACCOUNTS = """
accounts {
  SVC: { users: [{user: svc, password: svc}]
         exports: [{service: "svc.>"}, {stream: "feed.>"}] }
  APP: { users: [{user: app, password: app}]
         imports: [{service: {account: SVC, subject: "svc.>"}},
                   {stream: {account: SVC, subject: "feed.>"}, prefix: "in"}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


@need_ref
@pytest.mark.parametrize("kinds", MIXES, ids=MIX_IDS)
def test_accounts_imports_and_system_account_across_servers(tmp_path, kinds):
    """A service exported by one account and imported by another, requester and responder on
    different servers; a stream import across servers; the system account's PING answered by
    every server of the cluster; STATSZ counting the active servers."""
    a = start_member(kinds[0], tmp_path, "A", extra=ACCOUNTS)
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url], extra=ACCOUNTS)
    try:
        wait_mesh([a, b])

        async def run():
            responder = await nats.connect(b.url, user="svc", password="svc")
            app = await nats.connect(a.url, user="app", password="app")

            async def echo(msg):
                await msg.respond(b"svc:" + msg.data)
            await responder.subscribe("svc.echo", cb=echo)
            await responder.flush()
            deadline = time.monotonic() + 10
            answer = None
            while answer is None and time.monotonic() < deadline:
                try:
                    answer = await app.request("svc.echo", b"hi", timeout=1)
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    await asyncio.sleep(0.1)
            feed = await app.subscribe("in.feed.>")
            await app.flush()
            wait_interest([b], "feed.>")            # the import's interest, in SVC, reached B
            await responder.publish("feed.one", b"f")
            await responder.flush()
            fed = await _collect(feed, 1)
            sysc = await nats.connect(a.url, user="sys", password="sys")
            inbox = sysc.new_inbox()
            pongs = await sysc.subscribe(inbox)
            await sysc.publish("$SYS.REQ.SERVER.PING.STATSZ", b"", reply=inbox)
            answers = await _collect(pongs, 2)
            for nc in (responder, app, sysc):
                await nc.close()
            return answer, [(m.subject, m.data) for m in fed], [json.loads(m.data) for m in answers]
        answer, fed, statsz = asyncio.run(run())
        assert answer is not None and answer.data == b"svc:hi"
        assert fed == [("in.feed.one", b"f")]
        assert sorted(s["server"]["name"] for s in statsz) == ["A", "B"]
        for s in statsz:
            assert s["statsz"]["active_servers"] == 2
            assert {r["name"] for r in s["statsz"]["routes"]} == {"A", "B"} - {s["server"]["name"]}
    finally:
        a.proc.kill()
        b.proc.kill()


@need_ref
def test_route_monitoring_has_nats_server_fields(tmp_path):
    """/routez (with subscriptions) and /varz's cluster section: the keys and JSON types
    nats-server gives, for the same two-server cluster."""
    shapes = {}
    for kind in ("nats-server", "natsd"):
        a = start_member(kind, tmp_path / kind, "A", cluster_extra="authorization { user: u, password: p }")
        b = start_member(kind, tmp_path / kind, "B", routes=[a.route_url.replace("nats://", "nats://u:p@")],
                         cluster_extra="authorization { user: u, password: p }")
        try:
            wait_mesh([a, b])
            assert poll(lambda: a.get("/routez")["num_routes"] == b.get("/routez")["num_routes"] == 4, 10)
            shapes[kind] = {"routez": a.get("/routez?subs=detail"), "routez_b": b.get("/routez?subs=1"),
                            "varz": a.get("/varz"), "varz_b": b.get("/varz")}
        finally:
            a.proc.kill()
            b.proc.kill()
    ref, mine = shapes["nats-server"], shapes["natsd"]
    for key in ("routez", "routez_b"):
        assert differences(ref[key], mine[key]) == [], key
        assert mine[key]["num_routes"] == ref[key]["num_routes"] == 4
    for key in ("varz", "varz_b"):
        assert set(ref[key]["cluster"]) == set(mine[key]["cluster"]), key
        assert differences(ref[key]["cluster"], mine[key]["cluster"]) == []
        assert mine[key]["routes"] == ref[key]["routes"] and mine[key]["remotes"] == ref[key]["remotes"]
