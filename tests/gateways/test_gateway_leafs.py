"""A leaf node attached to a server of one cluster reaches subscribers and services of another
cluster through the gateway, and is reached from there: its interest travels up to the hub
and on to the other cluster, the other cluster's interest travels down to it."""
import asyncio

import nats
import pytest

from tests.support.servers import ServerProcess, nats_server_cmd, natsd_cmd
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


@pytest.mark.parametrize("far", ["natsd", "nats-server"])
def test_leaf_reaches_the_other_cluster(far, tmp_path):
    from tools.serverproc import free_port
    gw = {n: free_port() for n in ("A1", "B1")}
    leaf_port = free_port()
    url = {n: "nats://127.0.0.1:%d" % p for n, p in gw.items()}
    a = start_gateway_server("natsd", tmp_path, "A1", "A", gw["A1"], {"B": [url["B1"]]},
                             extra="leafnodes { port: %d }\naccounts { SYS {} }\nsystem_account: SYS" % leaf_port)
    b = start_gateway_server(far, tmp_path, "B1", "B", gw["B1"], {"A": [url["A1"]]})
    conf = tmp_path / "L.conf"
    conf.write_text('server_name: L\nleafnodes { remotes: [ { url: "nats://127.0.0.1:%d" } ] }\n' % leaf_port)
    leaf = ServerProcess(natsd_cmd() + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()
    try:
        wait_gateways([a, b])
        assert poll(lambda: a.get("/leafz").get("leafnodes") == 1, 10)

        async def main():
            lc = await nats.connect(leaf.url)
            bc = await nats.connect(b.url)
            down = await lc.subscribe("leaf.in")
            await lc.flush()
            await asyncio.to_thread(wait_gateway_interest, [b], "A", "leaf.in")
            await bc.publish("leaf.in", b"down")
            await bc.flush()
            assert (await down.next_msg(timeout=5)).data == b"down"

            up = await bc.subscribe("leaf.out")

            async def serve(m):
                await m.respond(b"served " + m.data)
            await bc.subscribe("leaf.svc", cb=serve)
            await bc.flush()
            await asyncio.to_thread(wait_gateway_interest, [a], "B", "leaf.svc")
            # the hub passed B's interest down to the leaf: its messages go up
            for _ in range(50):
                await lc.publish("leaf.out", b"up")
                await lc.flush()
                try:
                    assert (await up.next_msg(timeout=0.2)).data == b"up"
                    break
                except nats.errors.TimeoutError:
                    continue
            else:
                raise AssertionError("the leaf's message never reached the other cluster")
            fresh = await nats.connect(leaf.url)
            r = await fresh.request("leaf.svc", b"q", timeout=5)
            assert r.data == b"served q"
            for nc in (fresh, lc, bc):
                await nc.close()
        asyncio.run(main())
    finally:
        for p in (leaf, a.proc, b.proc):
            p.kill()
