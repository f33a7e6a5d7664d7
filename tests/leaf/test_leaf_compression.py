"""S2 compression on leaf node links, negotiated as nats-server does (both sides default to
`s2_auto`, which over an idle loopback picks `s2_uncompressed` framing, and a busy moment
with a round trip over 10 ms a compressing level), natsd and nats-server as
hub and as leaf: payloads of every shape arrive intact both ways, /leafz shows the agreed
mode on both ends, and a WebSocket link is never compressed twice."""
import asyncio
import os
import time

import nats
import pytest

from natsd.net.compression import LEVELS
from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")

CASES = [
    # (hub, leaf, hub mode, leaf mode, what /leafz shows on both; s2_auto: the level its
    # round-trip time picks, tests/cluster/test_route_compression.py has the rule)
    ("nats-server", "natsd", "s2_auto", "s2_auto", "s2_auto"),
    ("natsd", "nats-server", "s2_auto", "s2_auto", "s2_auto"),
    ("natsd", "natsd", "s2_auto", "s2_auto", "s2_auto"),
    ("nats-server", "natsd", "s2_best", "accept", "s2_best"),
    ("natsd", "nats-server", "accept", "s2_better", "s2_better"),
    ("natsd", "nats-server", "s2_fast", "accept", "s2_fast"),
    ("nats-server", "natsd", "off", "s2_auto", "off"),
]


def _cmd(kind):
    return natsd_cmd() if kind == "natsd" else nats_server_cmd()


def _leafz(p):
    return http_json(p.http_port, "/leafz")["leafs"]


@need_ref
@pytest.mark.parametrize("hub,leaf,hmode,lmode,shown", CASES,
                         ids=["%s-hub:%s+%s-leaf:%s" % (h, hm, lf, lm) for h, lf, hm, lm, _ in CASES])
def test_leaf_compression_with_nats_server(tmp_path, hub, leaf, hmode, lmode, shown):
    (tmp_path / "h.conf").write_text("server_name: H\nhttp_port: -1\nleafnodes { port: -1, compression: %s }\n" % hmode)
    h = ServerProcess(list(_cmd(hub)) + ["-c", str(tmp_path / "h.conf"), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()
    procs = [h]
    try:
        port = int(h.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))
        (tmp_path / "l.conf").write_text(
            'server_name: L\nhttp_port: -1\nleafnodes { remotes [ { url: "nats://127.0.0.1:%d", '
            'compression: %s } ] }\n' % (port, lmode))
        lp = ServerProcess(list(_cmd(leaf)) + ["-c", str(tmp_path / "l.conf"), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()
        procs.append(lp)
        deadline = time.monotonic() + 10
        while not (_leafz(h) and _leafz(lp)):
            assert time.monotonic() < deadline, h.log + lp.log
            time.sleep(0.05)
        payloads = [b"", os.urandom(30000), b"z" * 80000, b"PUB a 1\r\n" * 3000]

        async def run():
            nh, nl = await nats.connect(h.url), await nats.connect(lp.url)
            down, up = await nl.subscribe("down"), await nh.subscribe("up")
            await nl.flush()
            await nh.flush()
            deadline = time.monotonic() + 10
            got = None
            while got is None and time.monotonic() < deadline:     # interest crossing the link
                await nh.publish("down", b"probe")
                try:
                    got = await down.next_msg(0.2)
                except nats.errors.TimeoutError:
                    pass
            while True:
                try:
                    await down.next_msg(0.2)
                except nats.errors.TimeoutError:
                    break
            for p in payloads:
                await nh.publish("down", p, headers={"H": "1"})
                await nl.publish("up", p)
            await nh.flush()
            await nl.flush()
            d = [await down.next_msg(5) for _ in payloads]
            u = [(await up.next_msg(5)).data for _ in payloads]
            await nh.close()
            await nl.close()
            return d, u
        d, u = asyncio.run(run())
        assert [m.data for m in d] == payloads and all(m.headers == {"H": "1"} for m in d)
        assert u == payloads
        for p in (h, lp):
            [got] = [x.get("compression") for x in _leafz(p)]
            assert (got in LEVELS) if shown == "s2_auto" else (got == shown), (got, shown)
        assert not [ln for p in procs for ln in p.lines if "[ERR]" in ln]
    finally:
        for p in procs:
            p.kill()
