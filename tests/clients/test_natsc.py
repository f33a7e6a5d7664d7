"""nats.c (libnats 3.4, tools/natsc) against natsd and nats-server: each step of the probe
runs on a fresh server of each kind and what the client saw must be the same: messages and
headers, queue groups, request/reply and no responders, PubAcks (duplicates, expectations
refused), stream state after deletes and purges, pull fetches with acks, naks and terms and
their metadata, ordered and durable push consumers, KV puts, revisions, history, watches
and purges, and the errors nats.c reports (status, JetStream error code, the server's
description), over TLS and with users and permissions."""
import pytest

from tests.certs import CA

STEPS = ["core", "jetstream", "consumers", "push", "kv", "errors"]


@pytest.mark.parametrize("step", STEPS)
def test_natsc_sees_on_natsd_what_it_sees_on_nats_server(step, natsd, reference, natsc, tmp_path):
    theirs = natsc(reference("-js", "-sd", str(tmp_path / "ref")).url, step)
    ours = natsc(natsd("-js", "-sd", str(tmp_path / "ours")).url, step)
    assert len(theirs) == 1 and "ok" in theirs[0], theirs       # the probe ran through
    assert ours == theirs


def test_the_natsc_probe_tells_servers_apart(natsd, natsc, tmp_path):
    """The comparison can fail: a server without JetStream gives another transcript."""
    with_js = natsc(natsd("-js", "-sd", str(tmp_path / "a")).url, "jetstream")
    without = natsc(natsd().url, "jetstream")
    assert with_js[0]["ok"]["acks"][0] == {"stream": "JS1", "seq": 1, "duplicate": False}
    assert "error" in without[0] and without != with_js


def test_natsc_steps_on_r3_assets_on_a_cluster_match(natsc, tmp_path):
    """The JetStream steps on three-server clusters, every stream and bucket with three
    replicas (NATSC_REPLICAS), the client on a server that may not lead them."""
    from tests.cluster.clusterhelp import js_cluster
    steps = STEPS[1:]
    reports = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp_path / kind) as members:
            reports[kind] = natsc(members[1].url, *steps, env={"NATSC_REPLICAS": "3"})
    theirs, ours = reports["nats-server"], reports["natsd"]
    assert [r["step"] for r in theirs] == steps and all("ok" in r for r in theirs), theirs
    assert theirs[0]["ok"]["replicas"] == 3
    for o, t in zip(ours, theirs):
        assert o == t


def test_natsc_over_tls_with_client_certificates_matches(natsd, reference, natsc, tmp_path):
    """A client certificate the server verifies: nats.c gets through with it, and is refused
    without one, or when it does not trust the server's certificate, as on nats-server."""
    ca = CA(str(tmp_path / "pki"))
    cert, key = ca.server_cert()
    ccert, ckey = ca.issue("client", "client", server=False)
    conf = tmp_path / "tls.conf"
    conf.write_text('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true }\n'
                    % (cert, key, ca.ca_file))
    env = {"NATSC_CA": ca.ca_file, "NATSC_CERT": ccert, "NATSC_KEY": ckey}
    theirs = natsc(reference("-c", str(conf)).url, "tls", env=env)
    ours = natsc(natsd("-c", str(conf)).url, "tls", env=env)
    assert "ok" in theirs[0] and theirs[0]["ok"]["round_trip"]["data"] == "secret", theirs
    assert theirs[0]["ok"]["untrusted_server"]["status"] != "OK", theirs
    assert ours == theirs


def test_natsc_refusals_and_permission_violations_match(natsd, reference, natsc, tmp_path):
    """A wrong password refused; a publish and a subscription the user may not make reported
    to nats.c's error handler with nats-server's texts, the connection kept."""
    conf = tmp_path / "users.conf"
    conf.write_text('authorization { users: [ {user: alice, password: secret, permissions: {'
                    ' publish: {allow: ["pub.>", "_INBOX.>"]}, subscribe: {deny: ["secret.>"]} } } ] }\n')
    env = {"NATSC_USER": "alice", "NATSC_PASS": "secret"}
    theirs = natsc(reference("-c", str(conf)).url, "auth", env=env)
    ours = natsc(natsd("-c", str(conf)).url, "auth", env=env)
    assert "ok" in theirs[0] and len(theirs[0]["ok"]["async_errors"]) == 2, theirs
    assert ours == theirs
