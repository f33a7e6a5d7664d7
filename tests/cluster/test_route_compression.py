"""S2 compression on routes, negotiated as nats-server does (`accept` by default, the asking
side's level otherwise, `s2_auto` by round-trip time), between natsd and nats-server in both
directions: every payload shape arrives intact, and /routez shows the agreed mode."""
import asyncio
import os
import random

import nats
import pytest

from natsd.net.compression import LEVELS
from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.servers import nats_server_cmd

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")

# s2_auto shows the level the route's round-trip time picks: uncompressed below 10 ms (this
# machine, idle), fast, better, best above 10, 50, 100 ms (this machine, busy). nats-server
# pools three routes per peer and measures each on its own, so a busy moment can give one of
# them another level.
AUTO_LEVELS = set(LEVELS)

CASES = [
    # (kinds, modes, what both /routez show)
    (("natsd", "natsd"), ("s2_fast", "accept"), ("s2_fast", "s2_fast")),
    (("natsd", "natsd"), ("s2_best", "s2_better"), ("s2_best", "s2_better")),
    (("nats-server", "natsd"), ("s2_best", "accept"), ("s2_best", "s2_best")),
    (("natsd", "nats-server"), ("accept", "s2_best"), ("s2_best", "s2_best")),
    (("nats-server", "natsd"), ("s2_better", "s2_fast"), ("s2_better", "s2_fast")),
    (("natsd", "nats-server"), ("s2_auto", "s2_auto"), ("s2_auto", "s2_auto")),
    (("nats-server", "natsd"), ("off", "s2_fast"), ("off", "off")),
    (("natsd", "nats-server"), ("accept", "accept"), ("off", "off")),
    # the map form: a mode, and s2_auto's RTT thresholds
    (("natsd", "nats-server"), ("{mode: s2_best}", '{mode: s2_auto, rtt_thresholds: ["10ms", "50ms", "100ms"]}'),
     ("s2_best", "s2_auto")),
    (("nats-server", "natsd"), ("{mode: s2_best}", '{mode: s2_auto, rtt_thresholds: ["10ms", "50ms", "100ms"]}'),
     ("s2_best", "s2_auto")),
]


def _payloads(seed):
    rnd = random.Random(seed)
    return ([os.urandom(n) for n in (0, 1, 100, 5000, 70000)]
            + [(b"abc%d " % i) * rnd.randint(100, 3000) for i in range(4)]
            + [bytes(rnd.choice(b"ab") for _ in range(100000))])


@need_ref
@pytest.mark.parametrize("kinds,modes,shown", CASES,
                         ids=["-".join(k) + ":" + "/".join(m) for k, m, _ in CASES])
def test_route_compression_with_nats_server(tmp_path, kinds, modes, shown):
    a = start_member(kinds[0], tmp_path, "A", cluster_extra="compression: %s" % modes[0])
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url],
                     cluster_extra="compression: %s" % modes[1])
    try:
        wait_mesh([a, b])
        payloads = _payloads(len(modes[0]))

        async def run():
            na, nb = await nats.connect(a.url), await nats.connect(b.url)
            to_a, to_b = await na.subscribe("to.a"), await nb.subscribe("to.b")
            await na.flush()
            await nb.flush()
            wait_interest([a], "to.b")
            wait_interest([b], "to.a")
            for p in payloads:
                await na.publish("to.b", p)
                await nb.publish("to.a", p, headers={"K": "v"})
            await na.flush()
            await nb.flush()
            got_b = [(await to_b.next_msg(5)).data for _ in payloads]
            got_a = [await to_a.next_msg(5) for _ in payloads]
            await na.close()
            await nb.close()
            return got_b, got_a
        got_b, got_a = asyncio.run(run())
        assert got_b == payloads
        assert [m.data for m in got_a] == payloads and all(m.headers == {"K": "v"} for m in got_a)
        for m, want in zip((a, b), shown):
            got = {r.get("compression") for r in m.get("/routez")["routes"]}
            if want == "s2_auto":
                assert got and got <= AUTO_LEVELS, got
            else:
                assert got == {want}
        assert not [ln for m in (a, b) for ln in m.proc.lines if "[ERR]" in ln]
    finally:
        a.proc.kill()
        b.proc.kill()


def test_unknown_compression_mode_stops_the_server(tmp_path, natsd):
    conf = tmp_path / "c.conf"
    conf.write_text("cluster { port: -1, compression: s2_huge }\n")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "natsd", "-c", str(conf)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1 and 'unsupported compression mode "s2_huge"' in r.stderr


def test_s2_auto_level_follows_the_round_trip_time():
    """The rule the s2_auto case above leaves to the machine's load, as nats-server's
    selectS2AutoModeBasedOnRTT has it: at or below each threshold, the next level."""
    from natsd.net.compression import DEFAULT_RTT_THRESHOLDS, auto_level
    rtts = (0.0001, 0.010, 0.0101, 0.050, 0.051, 0.100, 0.101, 2.0)
    assert [auto_level(r, DEFAULT_RTT_THRESHOLDS) for r in rtts] == [
        "s2_uncompressed", "s2_uncompressed", "s2_fast", "s2_fast", "s2_better", "s2_better",
        "s2_best", "s2_best"]
    assert [auto_level(r, (0.005, 0.020)) for r in (0.001, 0.01, 0.5)] == [
        "s2_uncompressed", "s2_fast", "s2_fast"]
