"""Accounts across gateways: a service and a stream exported in one cluster and imported by an
account whose clients are in the other, and the system account's `$SYS.REQ.SERVER.PING`
answered by every server of both clusters, from either side; natsd with nats-server both
ways. The requests leave right after their inboxes are made, so the answers (a service's,
the system services') go back through the routed-reply mapping."""
import asyncio
import json

import nats
import pytest

from tests.support.servers import nats_server_cmd
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

ACCOUNTS = """accounts {
  SYS { users: [ {user: sys, password: sys} ] }
  SVC { users: [ {user: svc, password: svc} ], exports: [ {service: "svc.>"}, {stream: "feed.>"} ] }
  APP { users: [ {user: app, password: app} ],
        imports: [ {service: {account: SVC, subject: "svc.>"}}, {stream: {account: SVC, subject: "feed.>"}} ] }
}
system_account: SYS
"""


# natsd on either side of a nats-server (each role of natsd once; both natsd in the super-cluster
# of tests/gateways/test_supercluster.py)
@pytest.fixture(scope="module", params=[("natsd", "nats-server"), ("nats-server", "natsd")],
                ids=lambda p: "A=%s,B=%s" % p)
def pair(request, tmp_path_factory):
    from tools.serverproc import free_port
    tmp_path = tmp_path_factory.mktemp("pair")
    gw = {n: free_port() for n in ("A1", "B1")}
    url = {n: "nats://127.0.0.1:%d" % p for n, p in gw.items()}
    a = start_gateway_server(request.param[0], tmp_path, "A1", "A", gw["A1"], {"B": [url["B1"]]},
                             extra=ACCOUNTS)
    b = start_gateway_server(request.param[1], tmp_path, "B1", "B", gw["B1"], {"A": [url["A1"]]},
                             extra=ACCOUNTS)
    try:
        wait_gateways([a, b])
        yield a, b
    finally:
        a.proc.kill()
        b.proc.kill()


def as_user(server, user):
    return server.url.replace("//", "//%s:%s@" % (user, user))


def test_imports_across_clusters(pair):
    a, b = pair

    async def main():
        svc = await nats.connect(as_user(b, "svc"))

        async def serve(m):
            await m.respond(b"served " + m.data)
        await svc.subscribe("svc.>", cb=serve)
        await svc.flush()
        await asyncio.to_thread(wait_gateway_interest, [a], "B", "svc.>", 10, True, "SVC")
        app = await nats.connect(as_user(a, "app"))
        r = await app.request("svc.x", b"q", timeout=5)
        assert r.data == b"served q"
        feed = await app.subscribe("feed.>")
        await app.flush()
        await asyncio.to_thread(wait_gateway_interest, [b], "A", "feed.>", 10, True, "SVC")
        await svc.publish("feed.1", b"f")
        await svc.flush()
        m = await feed.next_msg(timeout=5)
        assert (m.subject, m.data) == ("feed.1", b"f")
        await app.close()
        await svc.close()
    asyncio.run(main())


def test_server_ping_is_answered_by_every_cluster(pair):
    async def main():
        for s in pair:
            nc = await nats.connect(as_user(s, "sys"))
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$SYS.REQ.SERVER.PING", b"", reply=inbox)
            await nc.flush()
            names = []
            while len(names) < 2:
                m = await sub.next_msg(timeout=5)
                names.append(json.loads(m.data)["server"]["name"])
            assert sorted(names) == ["A1", "B1"], s.name
            await nc.close()
    asyncio.run(main())


def test_connect_events_cross_clusters(pair):
    """A client connecting in one cluster: its CONNECT and DISCONNECT events reach a system
    subscriber in the other, from natsd and from nats-server."""
    a, b = pair

    async def main():
        for here, there in ((a, b), (b, a)):
            sys_nc = await nats.connect(as_user(here, "sys"))
            events = await sys_nc.subscribe("$SYS.ACCOUNT.APP.>")
            await sys_nc.flush()
            cluster = {"A1": "A", "B1": "B"}[here.name]
            await asyncio.to_thread(wait_gateway_interest, [there], cluster, "$SYS.ACCOUNT.APP.>",
                                    10, True, "SYS")
            app = await nats.connect(as_user(there, "app"), name="visitor")
            await app.close()
            kinds = []
            while len(kinds) < 2:
                m = await events.next_msg(timeout=5)
                ev = json.loads(m.data)
                if ev.get("client", {}).get("name") == "visitor":
                    kinds.append((m.subject.rsplit(".", 1)[1], ev["server"]["name"]))
            assert kinds == [("CONNECT", there.name), ("DISCONNECT", there.name)]
            await sys_nc.close()
    asyncio.run(main())


def test_gatewayz_is_served_to_the_system_account(pair):
    """`$SYS.REQ.SERVER.PING.GATEWAYZ`: every server of both clusters answers with its
    /gatewayz (its cluster's name, its outbound connection to the other)."""
    async def main():
        nc = await nats.connect(as_user(pair[0], "sys"))
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$SYS.REQ.SERVER.PING.GATEWAYZ", b"{}", reply=inbox)
        await nc.flush()
        got = {}
        while len(got) < 2:
            m = json.loads((await sub.next_msg(timeout=5)).data)
            got[m["server"]["name"]] = m["data"]
        assert got["A1"]["name"] == "A" and set(got["A1"]["outbound_gateways"]) == {"B"}
        assert got["B1"]["name"] == "B" and set(got["B1"]["outbound_gateways"]) == {"A"}
        await nc.close()
    asyncio.run(main())
