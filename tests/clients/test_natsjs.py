"""nats.js 3 (the @nats-io packages, tools/natsjs) against natsd and nats-server: each step of
the probe runs on a fresh server of each kind and what the client saw must be the same:
messages, headers and replies, PubAcks, errors as nats.js surfaces them (class, text, code),
consumer deliveries, KV and object store results, and what 2.11-2.15 added (TTLs, delete
markers, schedules, priority groups, consumer reset)."""
import pytest

from tests.certs import CA

STEPS = ["core", "requests", "jetstream", "consumers", "kv", "objects", "errors", "modern", "features"]


@pytest.mark.parametrize("step", STEPS)
def test_natsjs_sees_on_natsd_what_it_sees_on_nats_server(step, natsd, reference, natsjs, tmp_path):
    theirs = natsjs(reference("-js", "-sd", str(tmp_path / "ref")).url, step)
    ours = natsjs(natsd("-js", "-sd", str(tmp_path / "ours")).url, step)
    assert len(theirs) == 1 and "ok" in theirs[0], theirs       # the probe ran through
    assert ours == theirs


def test_the_probe_tells_servers_apart(natsd, natsjs, tmp_path):
    """The comparison can fail: a server without JetStream gives another transcript."""
    with_js = natsjs(natsd("-js", "-sd", str(tmp_path / "a")).url, "jetstream")
    without = natsjs(natsd().url, "jetstream")
    assert with_js[0]["ok"]["acks"][0] == {"stream": "JS1", "seq": 1, "duplicate": False}
    assert "error" in without[0] and without != with_js


def test_natsjs_on_a_cluster_sees_what_it_sees_on_nats_server(natsjs, tmp_path):
    """R3 streams, consumers and KV on three servers: created, settled (leader and two current
    followers), written, read, a stream leader stepped down and the writes going on."""
    from tests.cluster.clusterhelp import js_cluster
    reports = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp_path / kind) as members:
            reports[kind] = natsjs(members[1].url, "cluster")
    theirs, ours = reports["nats-server"], reports["natsd"]
    assert len(theirs) == 1 and "ok" in theirs[0], theirs
    assert ours == theirs


def test_natsjs_steps_on_r3_assets_on_a_cluster_match(natsjs, tmp_path):
    """The JetStream steps again on three-server clusters, every stream, bucket and object
    store with three replicas (NATSJS_REPLICAS)."""
    from tests.cluster.clusterhelp import js_cluster
    steps = [s for s in STEPS if s not in ("core", "requests")]
    reports = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp_path / kind) as members:
            reports[kind] = natsjs(members[1].url, *steps, env={"NATSJS_REPLICAS": "3"})
    theirs, ours = reports["nats-server"], reports["natsd"]
    assert [r["step"] for r in theirs] == steps and all("ok" in r for r in theirs), theirs
    assert theirs[0]["ok"]["created"]["config"]["num_replicas"] == 3
    for o, t in zip(ours, theirs):
        assert o == t


def test_natsjs_refusals_and_permission_violations_match(natsd, reference, natsjs, tmp_path):
    conf = tmp_path / "users.conf"
    conf.write_text('authorization { users: [ {user: alice, password: secret, permissions: {'
                    ' publish: {allow: ["pub.>", "_INBOX.>"]}, subscribe: {deny: ["secret.>"]} } } ] }\n')
    theirs = natsjs(reference("-c", str(conf)).url, "auth")
    ours = natsjs(natsd("-c", str(conf)).url, "auth")
    assert "ok" in theirs[0] and theirs[0]["ok"]["allowed"] == {"ok": "sent"}, theirs
    assert theirs[0]["ok"]["publish_denied"]["reported"], theirs   # the violation was seen
    assert ours == theirs


def test_natsjs_over_tls_with_client_certificates_matches(natsd, reference, natsjs, tmp_path, monkeypatch):
    ca = CA(str(tmp_path / "pki"))
    cert, key = ca.server_cert()
    ccert, ckey = ca.issue("client", "client", server=False)
    conf = tmp_path / "tls.conf"
    conf.write_text('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true }\n'
                    % (cert, key, ca.ca_file))
    monkeypatch.setenv("NATSJS_CA", ca.ca_file)
    monkeypatch.setenv("NATSJS_CERT", ccert)
    monkeypatch.setenv("NATSJS_KEY", ckey)
    theirs = natsjs(reference("-c", str(conf)).url, "tls")
    ours = natsjs(natsd("-c", str(conf)).url, "tls")
    assert "ok" in theirs[0] and theirs[0]["ok"]["echo"] == ["over tls"], theirs
    assert ours == theirs


def test_natsjs_sees_lame_duck_mode_as_on_nats_server(natsd, reference, natsjs, tmp_path):
    """SIGUSR2: nats.js is told (the `ldm` INFO) before the server lets it go."""
    conf = tmp_path / "ldm.conf"
    conf.write_text("lame_duck_duration: 30s\nlame_duck_grace_period: 1s\n")
    reports = []
    for factory in (reference, natsd):
        srv = factory("-c", str(conf))
        reports.append(natsjs(srv.url, "lameduck", env={"NATSJS_SERVER_PID": str(srv.proc.pid)}))
    theirs, ours = reports
    events = theirs[0]["ok"]["events"]
    assert "ldm" in events and events.index("ldm") < events.index("disconnect"), theirs
    assert ours == theirs
