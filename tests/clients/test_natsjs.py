"""nats.js 3 (the @nats-io packages, tools/natsjs) against natsd and nats-server: each step of
the probe runs on a fresh server of each kind and what the client saw must be the same:
messages, headers and replies, PubAcks, errors as nats.js surfaces them (class, text, code),
consumer deliveries, KV and object store results, and what 2.11-2.15 added (TTLs, delete
markers, schedules, priority groups, consumer reset)."""
import pytest

from tests.support.probes import differences, on_both, on_clusters, tls_conf, users_conf

STEPS = ["core", "requests", "jetstream", "consumers", "kv", "objects", "errors", "modern", "features"]


@pytest.mark.parametrize("step", STEPS)
def test_natsjs_sees_on_natsd_what_it_sees_on_nats_server(step, natsd, reference, natsjs, tmp_path):
    theirs, ours = on_both(natsjs, natsd, reference, tmp_path, step)
    assert ours == theirs


def test_natsjs_on_a_cluster_sees_what_it_sees_on_nats_server(natsjs, tmp_path):
    """R3 streams, consumers and KV on three servers: created, settled (leader and two current
    followers), written, read, a stream leader stepped down and the writes going on."""
    theirs, ours = on_clusters(natsjs, tmp_path, "cluster")
    assert ours == theirs, "natsd != nats-server at %s" % differences(ours, theirs)


def test_natsjs_steps_on_r3_assets_on_a_cluster_match(natsjs, tmp_path):
    """The JetStream steps again on three-server clusters, every stream, bucket and object
    store with three replicas (NATSJS_REPLICAS)."""
    steps = [s for s in STEPS if s not in ("core", "requests")]
    theirs, ours = on_clusters(natsjs, tmp_path, *steps, env={"NATSJS_REPLICAS": "3"})
    assert theirs[0]["ok"]["created"]["config"]["num_replicas"] == 3
    for o, t in zip(ours, theirs):
        assert o == t, "natsd != nats-server at %s" % differences(o, t)


def test_natsjs_refusals_and_permission_violations_match(natsd, reference, natsjs, tmp_path):
    theirs, ours = on_both(natsjs, natsd, reference, tmp_path, "auth", args=("-c", users_conf(tmp_path)))
    assert theirs[0]["ok"]["allowed"] == {"ok": "sent"}, theirs
    assert theirs[0]["ok"]["publish_denied"]["reported"], theirs   # the violation was seen
    assert ours == theirs


def test_natsjs_over_tls_with_client_certificates_matches(natsd, reference, natsjs, tmp_path):
    conf, ca_file, ccert, ckey = tls_conf(tmp_path)
    theirs, ours = on_both(natsjs, natsd, reference, tmp_path, "tls", args=("-c", conf),
                           env={"NATSJS_CA": ca_file, "NATSJS_CERT": ccert, "NATSJS_KEY": ckey})
    assert theirs[0]["ok"]["echo"] == ["over tls"], theirs
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
