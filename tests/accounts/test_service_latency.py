"""Service latency tracking, natsd against nats-server: exports with `latency` (100% and
"headers" sampling, one with a short response threshold), imports that share the requester or
not, the same nats-py clients and requests; the metrics on the results subjects compared by
status, description, which fields the requestor and responder carry and their values that do
not depend on the server (account, user, name, kind), the trace headers reported, and the
durations' relations. Across a route (the requester on one server, the service on another),
every pairing of natsd and nats-server gives nats-server's metrics: each server measures its
half and the requester's merges them ($SYS.LATENCY.M2). So do a gateway, and a leaf node (the
hub measures; its requestor is the leaf node connection, with no client_type)."""
import asyncio
import json

import nats
import pytest

from tests.support.cluster import wait_interest
from tests.support.servers import nats_server_cmd, natsd_cmd
from tests.support.waiting import until

CONF = """accounts {
  SVC: { users: [{user: svc, password: svc}],
         exports: [{service: "svc.echo", latency: {sampling: 100, subject: "lat.echo"}},
                   {service: "svc.slow", latency: {sampling: "100%", subject: "lat.slow"},
                    response_threshold: "500ms"},
                   {service: "svc.none", latency: {sampling: 100, subject: "lat.none"}},
                   {service: "svc.hdr", latency: {sampling: "headers", subject: "lat.hdr"}},
                   {service: "svc.plain"}] }
  REQ: { users: [{user: req, password: req}],
         imports: [{service: {account: SVC, subject: "svc.echo"}, share: true},
                   {service: {account: SVC, subject: "svc.slow"}},
                   {service: {account: SVC, subject: "svc.none"}},
                   {service: {account: SVC, subject: "svc.hdr"}},
                   {service: {account: SVC, subject: "svc.plain"}}] }
}
"""
STABLE = ("acc", "user", "name", "lang", "kind", "client_type")
TRACE_HEADERS = [
    ("w3c sampled", {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                     "tracestate": "congo=t61rcWkgMzE"}),
    ("w3c not sampled", {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}),
    ("b3 sampled", {"X-B3-TraceId": "80f198ee56343ba864fe8b2a57d3eff7", "X-B3-SpanId": "e457b5a2e4d86bd1",
                    "X-B3-Sampled": "1"}),
    ("b3 single not sampled", {"b3": "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0"}),
    ("uber sampled", {"uber-trace-id": "479fefe9525eddb:5adb976bfc1f95c1:479fefe9525eddb:1",
                      "uberctx-user": "alice"}),
    ("no trace header", {"other": "x"}),
]


def shape(metric):
    """What of a metric does not depend on the server or the clock."""
    out = {k: metric[k] for k in ("type", "status", "description", "header") if k in metric}
    for side in ("requestor", "responder"):
        if side in metric:
            ci = metric[side]
            out[side] = {"keys": sorted(ci), **{k: ci[k] for k in STABLE if k in ci}}
    service, system, total = metric["service"], metric["system"], metric["total"]
    out["durations"] = (service >= 0, system >= 0, total >= service if metric["status"] == 200 else total == 0)
    return out


async def serving(svc, *subjects):
    """svc answers requests on `subjects` with their payload and collects the latency metrics
    (lat.>) -> the list they go into, (subject, decoded metric) each."""
    metrics = []

    async def collect(msg):
        metrics.append((msg.subject, json.loads(msg.data)))

    async def echo(msg):
        if msg.reply:
            await svc.publish(msg.reply, msg.data)
    await svc.subscribe("lat.>", cb=collect)
    for subject in subjects:
        await svc.subscribe(subject, cb=echo)
    return metrics


async def settled(metrics, n, *conns):
    """Once `n` metrics came (and 0.3 s more, for any that should not), the connections closed
    -> the metrics as (subject, their shape) in order."""
    await until(lambda: len(metrics) >= n, 5)
    await asyncio.sleep(0.3)                        # nothing more should come
    for nc in conns:
        await nc.close()
    return sorted((subject, json.dumps(shape(m), sort_keys=True)) for subject, m in metrics)


async def scenario(url):
    svc = await nats.connect(url, user="svc", password="svc", name="the-service")
    req = await nats.connect(url, user="req", password="req", name="the-requester")
    metrics = await serving(svc, "svc.echo", "svc.hdr", "svc.plain")
    await svc.subscribe("svc.slow")                 # takes requests, never answers
    await svc.flush()
    out = {"echo": (await req.request("svc.echo", b"hi", timeout=2)).data.decode()}
    await req.publish("svc.echo", b"no reply")
    for subject in ("svc.none", "svc.slow"):
        try:
            await req.request(subject, b"?", timeout=2)
        except Exception as e:
            out[subject] = type(e).__name__
    out["plain"] = (await req.request("svc.plain", b"p", timeout=2)).data.decode()
    for name, headers in TRACE_HEADERS:
        await req.request("svc.hdr", name.encode(), timeout=2, headers=headers)
    await req.flush()
    out["metrics"] = await settled(metrics, 7, svc, req)
    return out


def test_service_latency_matches_nats_server(natsd, reference, tmp_path):
    conf = tmp_path / "lat.conf"
    conf.write_text(CONF)
    theirs = asyncio.run(scenario(reference("-c", str(conf)).url))
    ours = asyncio.run(scenario(natsd("-c", str(conf)).url))
    assert ours == theirs
    statuses = [(s, json.loads(m)["status"]) for s, m in theirs["metrics"]]
    assert sorted(statuses) == sorted([("lat.echo", 200), ("lat.echo", 400), ("lat.none", 503),
                                       ("lat.slow", 504), ("lat.hdr", 200), ("lat.hdr", 200),
                                       ("lat.hdr", 200)])
    shared = [json.loads(m) for s, m in theirs["metrics"] if s == "lat.echo"]
    assert all(m["requestor"]["name"] == "the-requester" for m in shared)
    alone = [json.loads(m) for s, m in theirs["metrics"] if s == "lat.none"][0]
    assert alone["requestor"]["keys"] == ["acc", "rtt"]          # not shared: account and RTT


PAIRINGS = [("nats-server", "nats-server"), ("natsd", "natsd"), ("natsd", "nats-server"),
            ("nats-server", "natsd")]


async def across_scenario(req_url, svc_url, wait_for):
    """The requester on one server, the service on another: each request's metric merges
    the responder's server's half (M2: who answered, the service time) with the
    requester's server's (the total). The metrics reach the service's lat.> over the link;
    wait_for(subject) waits until the requester's server knows the service's interest."""
    svc = await nats.connect(svc_url, user="svc", password="svc", name="the-service")
    req = await nats.connect(req_url, user="req", password="req", name="the-requester")
    metrics = await serving(svc, "svc.echo", "svc.hdr")
    await svc.flush()
    for subject in ("svc.echo", "svc.hdr"):
        await asyncio.to_thread(wait_for, subject)
    out = {"echo": [(await req.request("svc.echo", b"hi%d" % i, timeout=3)).data.decode() for i in range(3)]}
    for name, headers in TRACE_HEADERS[:2]:
        await req.request("svc.hdr", name.encode(), timeout=3, headers=headers)
    out["metrics"] = await settled(metrics, 4, svc, req)
    out["responders"] = sorted({m["responder"].get("name") for _, m in metrics if "responder" in m})
    return out


def every_pairing(tmp_path, linked):
    """linked(kinds, where) -> (servers, requester's url, service's url, wait_for) for each
    pairing; the scenario on each, compared with the all-nats-server run."""
    if nats_server_cmd() is None:
        pytest.skip("no nats-server")
    runs = {}
    for kinds in PAIRINGS:
        servers = []
        try:
            req_url, svc_url, wait_for = linked(kinds, tmp_path / "-".join(kinds), servers)
            runs[kinds] = asyncio.run(across_scenario(req_url, svc_url, wait_for))
        finally:
            for srv in servers:
                srv.proc.kill()
    reference = runs[("nats-server", "nats-server")]
    assert reference["echo"] == ["hi0", "hi1", "hi2"]
    assert [s for s, _ in reference["metrics"]] == ["lat.echo"] * 3 + ["lat.hdr"]
    assert reference["responders"] == ["the-service"]
    for kinds, out in runs.items():
        assert out == reference, kinds


def test_latency_measured_across_a_route_as_nats_server(tmp_path):
    """The requester's server first, the responder's second: natsd on either side, or both,
    gives the metrics nats-server gives."""
    from tests.support.cluster import start_member, wait_mesh

    def linked(kinds, where, servers):
        a = start_member(kinds[0], where, "A", extra=CONF)
        servers.append(a)
        servers.append(start_member(kinds[1], where, "B", routes=["nats://127.0.0.1:%d" % a.route_port],
                                    extra=CONF))
        wait_mesh(servers)
        return a.url, servers[1].url, lambda subject: wait_interest([a], subject)
    every_pairing(tmp_path, linked)


def _jwt_world(tmp_path):
    from tests.support.jwtmint import Mint, creds
    m = Mint(seed=61)
    op, _ = m.operator("OP")
    sys_acc, sys_jwt = m.account(op, "SYS")        # metrics go out only with a system account
    op_jwt = m.token(op, op.public, "operator", {"system_account": sys_acc.public}, name="OP")
    exports = [{"name": "echo", "subject": "svc.echo", "type": "service",
                "service_latency": {"sampling": 100, "results": "lat.echo"}},
               {"name": "hdr", "subject": "svc.hdr", "type": "service",
                "service_latency": {"sampling": "headers", "results": "lat.hdr"}}]
    svc, svc_jwt = m.account(op, "SVC", exports=exports)
    req, req_jwt = m.account(op, "REQ", imports=[
        {"subject": "svc.echo", "account": svc.public, "type": "service", "share": True},
        {"subject": "svc.hdr", "account": svc.public, "type": "service"}])
    jwts = {svc: svc_jwt, req: req_jwt, sys_acc: sys_jwt}
    for name, lat in (("bad sampling", {"sampling": 150, "results": "lat.x"}),
                      ("wildcard results", {"sampling": 100, "results": "lat.*"}),
                      ("on a stream", {"sampling": 100, "results": "lat.x"})):
        kind = "stream" if name == "on a stream" else "service"
        key, tok = m.account(op, name, exports=[{"subject": "x", "type": kind, "service_latency": lat}])
        jwts[key] = tok
        u, utok = m.user(key, "u")
        (tmp_path / (name + ".creds")).write_text(creds(utok, u))
    paths = {}
    for name, key in (("svc", svc), ("req", req)):
        u, utok = m.user(key, name)
        paths[name] = str(tmp_path / (name + ".creds"))
        (tmp_path / (name + ".creds")).write_text(creds(utok, u))
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\n"
                    % (op_jwt, "".join("  %s: %s\n" % (k.public, j) for k, j in jwts.items())))
    return str(conf), paths


async def jwt_scenario(url, tmp_path, paths):
    out = {}
    for name in ("bad sampling", "wildcard results", "on a stream"):
        try:
            await (await nats.connect(url, user_credentials=str(tmp_path / (name + ".creds")),
                                      allow_reconnect=False)).close()
            out[name] = "connected"
        except Exception as e:
            out[name] = str(e).lower()
    svc = await nats.connect(url, user_credentials=paths["svc"], name="jwt-service")
    req = await nats.connect(url, user_credentials=paths["req"], name="jwt-requester")
    metrics = await serving(svc, "svc.*")
    await svc.flush()
    # an untraced request to the header-sampled export makes no metric (it once answered "no
    # responders": flush() sent its PING ahead of the SUBs, see tests/support/natspy.py)
    await req.request("svc.hdr", b"plain", timeout=2)
    await req.request("svc.echo", b"hi", timeout=2)
    await req.request("svc.hdr", b"traced", timeout=2, headers=dict(TRACE_HEADERS[0][1]))
    out["metrics"] = await settled(metrics, 2, svc, req)
    return out


def test_jwt_service_latency_matches_nats_server(natsd, reference, tmp_path):
    conf, paths = _jwt_world(tmp_path)
    theirs = asyncio.run(jwt_scenario(reference("-c", conf).url, tmp_path, paths))
    ours = asyncio.run(jwt_scenario(natsd("-c", conf).url, tmp_path, paths))
    assert ours == theirs
    assert [s for s, _ in theirs["metrics"]] == ["lat.echo", "lat.hdr"]
    assert theirs["bad sampling"] == theirs["wildcard results"] == theirs["on a stream"] == \
        "nats: 'authorization violation'"
    shared = json.loads(theirs["metrics"][0][1])
    assert "jwt" in shared["requestor"]["keys"] and shared["requestor"]["name"] == "jwt-requester"


@pytest.mark.parametrize("subject", ["lat.*", "lat.>", "lat..x"])
def test_latency_subject_must_be_publishable_as_nats_server(tmp_path, subject):
    """A results subject a message cannot be published to is a config error in both."""
    import re
    import subprocess
    from tests.support.servers import nats_server_cmd
    conf = tmp_path / "bad.conf"
    conf.write_text('accounts { A: { exports: [{service: "svc", latency: {sampling: 100, subject: "%s"}}] } }\n'
                    % subject)

    def check(cmd):
        out = subprocess.run(cmd + ["-t", "-c", str(conf)], capture_output=True, text=True, timeout=30)
        texts = {re.sub(r"^.*?\.conf:\d+:\d+: ", "", line) for line in (out.stdout + out.stderr).splitlines()
                 if ".conf:" in line and "configuration file" not in line}
        return out.returncode, sorted(texts)
    ours = check(natsd_cmd())
    assert ours == (1, ['Error adding service latency sampling for "svc" on subject "%s": invalid publish subject'
                        % subject])
    if nats_server_cmd() is not None:
        assert check(nats_server_cmd()) == ours


def test_latency_measured_across_a_gateway_as_nats_server(tmp_path):
    """The requester in one cluster, the service in another (one server each, joined by a
    gateway; the reply crosses as `_GR_.`): every pairing gives nats-server's metrics."""
    from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways
    from tools.serverproc import free_port

    def linked(kinds, where, servers):
        gw = {"A": free_port(), "B": free_port()}
        a = start_gateway_server(kinds[0], where, "A1", "A", gw["A"], {"B": ["nats://127.0.0.1:%d" % gw["B"]]},
                                 extra=CONF)
        servers.append(a)
        servers.append(start_gateway_server(kinds[1], where, "B1", "B", gw["B"],
                                            {"A": ["nats://127.0.0.1:%d" % gw["A"]]}, extra=CONF))
        wait_gateways(servers, timeout=30)
        return a.url, servers[1].url, lambda subject: wait_gateway_interest([a], "B", subject, 10, True, "SVC")
    every_pairing(tmp_path, linked)


LEAF_SYS = """
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
LEAF_ACCOUNTS = """server_name: leaf
accounts {
  SVC: { users: [{user: svc, password: svc}] }
  REQ: { users: [{user: req, password: req}] }
""" + LEAF_SYS


def test_latency_measured_across_a_leaf_node_as_nats_server(tmp_path):
    """The requester on a leaf server whose REQ, SVC and SYS accounts are bound to its hub's,
    the import and the service on the hub: the hub measures, the requestor being the leaf
    node connection. Every pairing gives nats-server's metrics."""
    from tests.support.leafnodes import carries
    from tests.support.servers import ServerProcess, http_json
    from tests.support.waiting import poll
    from tools.serverproc import free_port

    class _Server:
        def __init__(self, kind, conf_path, text):
            conf_path.write_text(text)
            cmd = natsd_cmd() if kind == "natsd" else nats_server_cmd()
            self.proc = ServerProcess(list(cmd) + ["-c", str(conf_path), "-p", "-1", "-a", "127.0.0.1",
                                                   "-m", str(free_port())])
            self.proc.wait_ready()
            self.url = self.proc.url

    def linked(kinds, where, servers):
        where.mkdir(parents=True)
        port = free_port()
        hub = _Server(kinds[1], where / "hub.conf", "server_name: hub\n" + CONF.rstrip().rstrip("}") + LEAF_SYS
                      + "leafnodes { port: %d }\n" % port)
        servers.append(hub)
        remotes = ", ".join('{ url: "nats-leaf://%s:%s@127.0.0.1:%d", account: %s }' % (u, u, port, a)
                            for a, u in (("SVC", "svc"), ("REQ", "req"), ("SYS", "sys")))
        leaf = _Server(kinds[0], where / "leaf.conf", LEAF_ACCOUNTS + "leafnodes { remotes: [ %s ] }\n" % remotes)
        servers.append(leaf)
        for s in servers:
            assert poll(lambda: http_json(s.proc.http_port, "/varz").get("leafnodes") == 3, 10)
        return leaf.url, hub.url, lambda subject: poll(lambda: carries(leaf.proc, subject), 10)
    every_pairing(tmp_path, linked)
