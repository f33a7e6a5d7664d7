"""nats.c (libnats 3.4, tools/natsc) against natsd and nats-server: each step of the probe
runs on a fresh server of each kind and what the client saw must be the same: messages and
headers, queue groups, request/reply and no responders, PubAcks (duplicates, expectations
refused), stream state after deletes and purges, pull fetches with acks, naks and terms and
their metadata, ordered and durable push consumers, KV puts, revisions, history, watches
and purges, and the errors nats.c reports (status, JetStream error code, the server's
description), over TLS and with users and permissions."""
import pytest

from tests.support.probes import differences, on_both, on_clusters, tls_conf, users_conf

STEPS = ["core", "jetstream", "consumers", "push", "kv", "errors"]


@pytest.mark.parametrize("step", STEPS)
def test_natsc_sees_on_natsd_what_it_sees_on_nats_server(step, natsd, reference, natsc, tmp_path):
    theirs, ours = on_both(natsc, natsd, reference, tmp_path, step)
    assert ours == theirs


def test_natsc_steps_on_r3_assets_on_a_cluster_match(natsc, tmp_path):
    """The JetStream steps on three-server clusters, every stream and bucket with three
    replicas (NATSC_REPLICAS), the client on a server that may not lead them."""
    theirs, ours = on_clusters(natsc, tmp_path, *STEPS[1:], env={"NATSC_REPLICAS": "3"})
    assert theirs[0]["ok"]["replicas"] == 3
    for o, t in zip(ours, theirs):
        assert o == t, "natsd != nats-server at %s" % differences(o, t)


def test_natsc_over_tls_with_client_certificates_matches(natsd, reference, natsc, tmp_path):
    """A client certificate the server verifies: nats.c gets through with it, and is refused
    without one, or when it does not trust the server's certificate, as on nats-server."""
    conf, ca_file, ccert, ckey = tls_conf(tmp_path)
    theirs, ours = on_both(natsc, natsd, reference, tmp_path, "tls", args=("-c", conf),
                           env={"NATSC_CA": ca_file, "NATSC_CERT": ccert, "NATSC_KEY": ckey})
    assert theirs[0]["ok"]["round_trip"]["data"] == "secret", theirs
    assert theirs[0]["ok"]["untrusted_server"]["status"] != "OK", theirs
    assert ours == theirs


def test_natsc_refusals_and_permission_violations_match(natsd, reference, natsc, tmp_path):
    """A wrong password refused; a publish and a subscription the user may not make reported
    to nats.c's error handler with nats-server's texts, the connection kept."""
    theirs, ours = on_both(natsc, natsd, reference, tmp_path, "auth", args=("-c", users_conf(tmp_path)),
                           env={"NATSC_USER": "alice", "NATSC_PASS": "secret"})
    assert len(theirs[0]["ok"]["async_errors"]) == 2, theirs
    assert ours == theirs
