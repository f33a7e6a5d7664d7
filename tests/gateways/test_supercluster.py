"""A super-cluster of three clusters, natsd and nats-server mixed, joined by gateways.

Cluster A: two natsd servers (routed), both told of cluster B. Cluster B: nats-server B1 and
natsd B2 (routed); only B1 is told of A, B2 of nobody. Cluster C: natsd C1, told only of B.
Every server must end up with an outbound connection to both other clusters (implicit
gateways: an inbound's INFO, gossip from the remote, gossip over routes), and then messages,
requests, queue groups and interest behave as nats-server's gateways make them behave:
one hop, one delivery per subscriber, replies back across clusters, `_GR_.` never seen.
"""
import asyncio

import nats
import pytest

from tests.support.servers import nats_server_cmd
from tests.support.supercluster import (start_gateway_server, wait_gateway_interest,
                                        wait_gateways)

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


@pytest.fixture(scope="module")
def sc(tmp_path_factory):
    from tools.serverproc import free_port
    tmp = tmp_path_factory.mktemp("sc")
    gw = {n: free_port() for n in ("A1", "A2", "B1", "B2", "C1")}
    rp = {n: free_port() for n in ("A1", "A2", "B1", "B2")}
    url = {n: "nats://127.0.0.1:%d" % p for n, p in gw.items()}
    rurl = {n: "nats://127.0.0.1:%d" % p for n, p in rp.items()}
    plan = [("natsd", "A1", "A", {"B": [url["B1"], url["B2"]]}, [rurl["A2"]]),
            ("natsd", "A2", "A", {"B": [url["B2"]]}, [rurl["A1"]]),
            ("nats-server", "B1", "B", {"A": [url["A1"]]}, [rurl["B2"]]),
            ("natsd", "B2", "B", {}, [rurl["B1"]]),
            ("natsd", "C1", "C", {"B": [url["B1"]]}, None)]
    servers = {}
    try:
        for kind, name, cluster, remotes, routes in plan:
            servers[name] = start_gateway_server(
                kind, tmp, name, cluster, gw[name], remotes,
                route_port=rp.get(name) if routes is not None else None, routes=routes or ())
        wait_gateways(list(servers.values()), timeout=30)
        yield servers
    finally:
        for s in servers.values():
            s.proc.kill()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def connect_all(sc):
    return {n: await nats.connect(s.url, allow_reconnect=False) for n, s in sc.items()}


async def close_all(ncs):
    for nc in ncs.values():
        await nc.close()


def test_every_server_reaches_every_cluster(sc):
    """Implicit gateways: B2 was told of nobody and C1 only of B; yet every server has an
    outbound connection to both other clusters, and says which ones were configured."""
    for s in sc.values():
        gz = s.get("/gatewayz")
        assert gz["name"] == s.cluster
        assert set(gz["outbound_gateways"]) == {"A", "B", "C"} - {s.cluster}, s.name
    b2 = sc["B2"].get("/gatewayz")["outbound_gateways"]
    assert not b2["A"]["configured"] and not b2["C"]["configured"]
    assert sc["A1"].get("/gatewayz")["outbound_gateways"]["B"]["configured"]
    assert set(sc["A1"].get("/gatewayz")) == set(sc["B1"].get("/gatewayz"))


def key_paths(doc, prefix=""):
    """The key paths of a JSON document, gateway names and list positions left out."""
    out = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            k = "*" if prefix.endswith("_gateways") else k
            out.add(prefix + "/" + k)
            out |= key_paths(v, prefix + "/" + k)
    elif isinstance(doc, list):
        for v in doc:
            out |= key_paths(v, prefix + "[]")
    return out


def entry_shapes(gz):
    """The key paths of /gatewayz's top level and of one outbound and one inbound entry."""
    top = {k for k in gz if not k.endswith("_gateways")}
    out = [key_paths(e) for e in gz["outbound_gateways"].values()]
    inb = [key_paths(e) for entries in gz["inbound_gateways"].values() for e in entries]
    return top, set().union(*out) if out else set(), set().union(*inb) if inb else set()


@pytest.mark.parametrize("query", ["", "?accs=1", "?accs=1&subs=1", "?acc_name=$G", "?gw_name=C"])
def test_gatewayz_has_nats_servers_keys(sc, query):
    """A natsd server and B1 (nats-server): the same keys at the top and in every outbound and
    inbound entry (the connection's, the accounts' and their subscriptions)."""
    ref = sc["B1"].get("/gatewayz" + query)
    docs = [sc[n].get("/gatewayz" + query) for n in ("A1", "A2", "C1", "B2")]
    # (which servers a cluster's inbound connections come from varies from run to run)
    ours = max(docs, key=lambda d: sum(len(v) for v in d["inbound_gateways"].values()))
    (top, out, inb), (rtop, rout, rinb) = entry_shapes(ours), entry_shapes(ref)
    assert top == rtop
    if out and rout:
        assert out == rout
    if inb and rinb:
        assert inb == rinb
    assert (out or inb) and (rout or rinb)


def test_messages_cross_once_from_every_server(sc):
    """Subscribers on every server of the other clusters get each message exactly once, with
    its subject, reply and headers, whichever server (natsd or nats-server) published it."""
    async def main():
        ncs = await connect_all(sc)
        got = {n: [] for n in sc}
        for n, nc in ncs.items():
            async def cb(m, n=n):
                got[n].append((m.subject, m.reply, m.data, tuple(sorted((m.headers or {}).items()))))
            await nc.subscribe("cross.>", cb=cb)
            await nc.flush()
        for cluster in "ABC":
            wait_gateway_interest(list(sc.values()), cluster, "cross.>")
        for n, nc in ncs.items():
            await nc.publish("cross.%s" % n, n.encode(), reply="r.%s" % n, headers={"K": n})
            await nc.flush()
        want = {("cross.%s" % p, "r.%s" % p, p.encode(), (("K", p),)) for p in sc}

        async def all_in():
            while any(len(v) < len(sc) for v in got.values()):
                await asyncio.sleep(0.02)
        await asyncio.wait_for(all_in(), 10)
        await asyncio.sleep(0.2)                # anything duplicated would have come by now
        for n, msgs in got.items():
            assert len(msgs) == len(sc) and set(msgs) == want, n
        await close_all(ncs)
    run(main())


def test_requests_reach_services_in_other_clusters(sc):
    """A request right after its reply inbox was made (the other cluster may not know the
    inbox yet: the reply leaves routed, `_GR_.`) is answered from every other cluster; the
    service sees a plain reply; a `_GR_.>` subscriber sees nothing; a client may not publish
    on `_GR_.` (nats-server's permissions violation)."""
    async def main():
        ncs = await connect_all(sc)
        seen_replies = []
        spies = []

        async def spy(m):
            spies.append(m.subject)
        for nc in ncs.values():
            await nc.subscribe("_GR_.>", cb=spy)
        for n in ("A2", "B1", "B2", "C1"):
            async def svc(m, n=n):
                seen_replies.append(m.reply)
                await m.respond(b"from " + n.encode() + b": " + m.data)
            await ncs[n].subscribe("svc.%s" % n, cb=svc)
            await ncs[n].flush()
        for cluster in "BC":
            wait_gateway_interest([sc["A1"], sc["A2"]], cluster, "svc.%s1" % cluster)
        for requester in ("A1", "B1", "C1"):
            for n in ("A2", "B1", "B2", "C1"):
                if n == requester:
                    continue
                fresh = await nats.connect(sc[requester].url, allow_reconnect=False)
                r = await fresh.request("svc.%s" % n, requester.encode(), timeout=5)
                assert r.data == b"from %s: %s" % (n.encode(), requester.encode())
                await fresh.close()
        assert seen_replies and not any(r.startswith("_GR_.") for r in seen_replies)
        assert spies == []
        await close_all(ncs)
    run(main())


def test_gr_prefix_is_reserved_as_on_nats_server(sc):
    """A client's PUB on `_GR_.x`: the same -ERR from natsd and nats-server."""
    import socket

    def exchange(s):
        host, port = s.url.rsplit("/", 1)[1].split(":")
        with socket.create_connection((host, int(port)), 5) as sock:
            sock.recv(4096)
            sock.sendall(b'CONNECT {"verbose":false}\r\nPUB _GR_.abcdef.ghijkl.x 2\r\nhi\r\nPING\r\n')
            got = b""
            while b"PONG" not in got:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
            return got
    assert exchange(sc["A1"]) == exchange(sc["B1"])
    assert exchange(sc["B2"]).startswith(b"-ERR 'Permissions Violation for Publish to")


def test_queue_groups_prefer_the_local_cluster_then_fail_over(sc):
    """Members in A and B: a publisher in A reaches A's members only; when they leave, B's;
    one delivery per message across the super-cluster."""
    async def main():
        ncs = await connect_all(sc)
        hits = {n: 0 for n in sc}
        subs = {}
        for n in ("A2", "B1", "B2"):
            async def cb(m, n=n):
                hits[n] += 1
            subs[n] = await ncs[n].subscribe("work", queue="workers", cb=cb)
            await ncs[n].flush()
        wait_gateway_interest([sc["A1"], sc["A2"], sc["C1"]], "B", "work")
        for _ in range(30):
            await ncs["A1"].publish("work", b"x")
        await ncs["A1"].flush()
        await _until(lambda: sum(hits.values()) >= 30)
        assert hits == {"A1": 0, "A2": 30, "B1": 0, "B2": 0, "C1": 0}
        await subs["A2"].unsubscribe()
        await ncs["A2"].flush()
        await asyncio.sleep(0.3)                # the route takes A2's member away from A1
        for _ in range(30):
            await ncs["A1"].publish("work", b"y")
        await ncs["A1"].flush()
        await _until(lambda: sum(hits.values()) >= 60)
        await asyncio.sleep(0.2)
        assert hits["A2"] == 30 and hits["B1"] + hits["B2"] == 30 and sum(hits.values()) == 60
        for _ in range(30):
            await ncs["C1"].publish("work", b"z")
        await ncs["C1"].flush()
        await _until(lambda: sum(hits.values()) >= 90)
        await asyncio.sleep(0.2)
        assert sum(hits.values()) == 90
        await close_all(ncs)
    run(main())


async def _until(cond, timeout=10):
    async def wait():
        while not cond():
            await asyncio.sleep(0.02)
    await asyncio.wait_for(wait(), timeout)


def test_interest_leaves_when_subscribers_leave(sc):
    """RS- when a cluster's last subscriber of a subject leaves, on every other server; while
    it is there, other clusters' interest is not counted as this server's subscriptions
    (/subsz, /varz), as nats-server keeps it out of the account's sublist."""
    def counts():
        return {n: (sc[n].get("/subsz")["num_subscriptions"], sc[n].get("/varz")["subscriptions"])
                for n in ("A1", "B2")}

    async def main():
        before = counts()
        nc = await nats.connect(sc["C1"].url, allow_reconnect=False)
        sub = await nc.subscribe("gone.soon")
        await nc.flush()
        wait_gateway_interest(list(sc.values()), "C", "gone.soon")
        assert counts() == before
        await sub.unsubscribe()
        await nc.flush()
        wait_gateway_interest(list(sc.values()), "C", "gone.soon", present=False)
        await nc.close()
    run(main())


def test_metrics_count_gateway_links(sc):
    """/metrics (natsd's own): gateway connections per remote cluster and direction, and
    among the connections by kind."""
    from tests.support.servers import http_get
    status, _, text = http_get(sc["A1"].proc.http_port, "/metrics")
    assert status == 200
    assert 'natsd_gateway_connections{remote="B",direction="outbound"} 1' in text
    assert 'natsd_gateway_connections{remote="C",direction="outbound"} 1' in text
    gz = sc["A1"].get("/gatewayz")
    links = len(gz["outbound_gateways"]) + sum(len(v) for v in gz["inbound_gateways"].values())
    assert 'natsd_connections_by_kind{kind="Gateway"} %d' % links in text
