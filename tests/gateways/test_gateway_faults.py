"""Gateway servers killed (-9) and restarted while messages flow: nothing is delivered twice,
the links come back (the solicited side redials, the restarted side is redialed) and the
interest is rebuilt, so traffic resumes; with natsd and nats-server on the far side."""
import asyncio
import signal

import nats
import pytest

from tests.support.servers import ServerProcess, nats_server_cmd
from tests.support.supercluster import (start_gateway_server, wait_gateway_interest,
                                        wait_gateways)
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def restart(server):
    """The same server again (same config, same ports), once the old process is gone."""
    server.proc.signal(signal.SIGKILL)
    server.proc.proc.wait(10)
    server.proc = ServerProcess(server.proc.argv).wait_ready()


@pytest.mark.parametrize("far", ["natsd", "nats-server"])
def test_kill_and_restart_while_traffic_flows(far, tmp_path):
    from tools.serverproc import free_port
    gw = {n: free_port() for n in ("A1", "A2", "B1")}
    rp = {n: free_port() for n in ("A1", "A2")}
    url = {n: "nats://127.0.0.1:%d" % p for n, p in gw.items()}
    a1 = start_gateway_server("natsd", tmp_path, "A1", "A", gw["A1"], {"B": [url["B1"]]},
                              route_port=rp["A1"], routes=["nats://127.0.0.1:%d" % rp["A2"]])
    a2 = start_gateway_server("natsd", tmp_path, "A2", "A", gw["A2"], {"B": [url["B1"]]},
                              route_port=rp["A2"], routes=["nats://127.0.0.1:%d" % rp["A1"]])
    b1 = start_gateway_server(far, tmp_path, "B1", "B", gw["B1"], {"A": [url["A1"], url["A2"]]})
    servers = [a1, a2, b1]
    try:
        wait_gateways(servers)

        async def flow(seen, stop, pub_url):
            """Publish numbered messages until `stop` is set; returns how many went out."""
            nc = await nats.connect(pub_url, allow_reconnect=False)
            n = 0
            while not stop.is_set():
                await nc.publish("seq", b"%d" % n)
                n += 1
                if n % 20 == 0:
                    await nc.flush()
                    await asyncio.sleep(0.01)
            await nc.flush()
            await nc.close()
            return n

        async def subscriber():
            """A subscriber of `seq` on B1, known to cluster A: (connection, numbers seen)."""
            sub_nc = await nats.connect(b1.url)
            seen = []

            async def cb(m):
                seen.append(int(m.data))
            await sub_nc.subscribe("seq", cb=cb)
            await sub_nc.flush()
            await asyncio.to_thread(wait_gateway_interest, [a1, a2], "B", "seq")
            return sub_nc, seen

        async def phase_one():
            """A2 (the other server of the publisher's cluster) dies and comes back."""
            sub_nc, seen = await subscriber()
            stop = asyncio.Event()
            task = asyncio.create_task(flow(seen, stop, a1.url))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(restart, a2)
            await asyncio.to_thread(wait_gateways, servers)
            await asyncio.sleep(0.3)
            stop.set()
            sent = await task
            await asyncio.wait_for(_until(lambda: len(seen) >= sent), 10)
            await asyncio.sleep(0.2)
            assert sorted(seen) == list(range(sent))      # each once, none lost (A1's link held)
            await sub_nc.close()

        async def phase_two():
            """B1 (the subscriber's server) dies and comes back: A redials, interest returns."""
            await asyncio.to_thread(restart, b1)
            await asyncio.to_thread(wait_gateways, servers)
            sub_nc, seen = await subscriber()
            stop = asyncio.Event()
            task = asyncio.create_task(flow(seen, stop, a2.url))
            await asyncio.sleep(0.3)
            stop.set()
            sent = await task
            await asyncio.wait_for(_until(lambda: len(seen) >= sent), 10)
            await asyncio.sleep(0.2)
            assert sorted(seen) == list(range(sent))
            await sub_nc.close()

        asyncio.run(phase_one())
        asyncio.run(phase_two())
        assert poll(lambda: all(s.proc.proc.poll() is None for s in servers), 1)
    finally:
        for s in servers:
            s.proc.kill()


async def _until(cond):
    while not cond():
        await asyncio.sleep(0.02)
