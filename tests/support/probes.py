"""The client probes (tools/goclient, tools/natsjs, tools/natsc: real client libraries driven
step by step, one JSON report a step) and the client suites' comparison: one probe's
transcript on natsd against the same on nats-server, on fresh single servers or on fresh
three-server clusters of each kind. The fixtures that build the probes once per run are in
tests/support/fixtures.py."""
import json
import os
import subprocess

from tests.support.cluster import js_cluster
from tests.support.servers import ROOT


def build_probe(script):
    """Build or install a client probe with tools/<script> (once per run) -> its path."""
    build = subprocess.run([os.path.join(ROOT, "tools", script)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, "tools/%s failed:\n%s" % (script, build.stderr)
    return build.stdout.strip().splitlines()[-1]


def probe_reports(argv, env=None, timeout=120):
    """Run a client probe -> the JSON reports it printed, one per step."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def on_both(probe, natsd, reference, tmp_path, *steps, args=None, env=None):
    """The steps on a fresh nats-server, then on a fresh natsd (`args`: their flags, JetStream
    in tmp_path by default) -> (theirs, ours), after checking theirs ran through."""
    def flags(where):
        return args if args is not None else ("-js", "-sd", str(tmp_path / where))
    theirs = probe(reference(*flags("ref")).url, *steps, env=env)
    ours = probe(natsd(*flags("ours")).url, *steps, env=env)
    assert [r["step"] for r in theirs] == list(steps) and all("ok" in r for r in theirs), theirs
    return theirs, ours


def on_clusters(probe, tmp_path, *steps, env=None):
    """The steps through the second server of a fresh three-server cluster of each kind ->
    (theirs, ours), after checking theirs ran through."""
    reports = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp_path / kind) as members:
            reports[kind] = probe(members[1].url, *steps, env=env)
    theirs, ours = reports["nats-server"], reports["natsd"]
    assert [r["step"] for r in theirs] == list(steps) and all("ok" in r for r in theirs), theirs
    return theirs, ours


def users_conf(tmp_path):
    """alice (password secret) may publish to pub.> and _INBOX.>, and not subscribe to
    secret.> -> the config file's path."""
    conf = tmp_path / "users.conf"
    conf.write_text('authorization { users: [ {user: alice, password: secret, permissions: {'
                    ' publish: {allow: ["pub.>", "_INBOX.>"]}, subscribe: {deny: ["secret.>"]} } } ] }\n')
    return str(conf)


def tls_conf(tmp_path):
    """A TLS config that verifies client certificates, from a CA made here -> (the config
    file's path, the CA file, a client certificate and its key)."""
    from tests.support.certs import CA
    ca = CA(str(tmp_path / "pki"))
    cert, key = ca.server_cert()
    ccert, ckey = ca.issue("client", "client", server=False)
    conf = tmp_path / "tls.conf"
    conf.write_text('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true }\n'
                    % (cert, key, ca.ca_file))
    return str(conf), ca.ca_file, ccert, ckey


def differences(ours, theirs, path=""):
    """Where two probe reports differ: ["path: natsd's value != nats-server's"], for an
    assertion's message (pytest cuts a long dict comparison short)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [d for k in sorted(set(ours) | set(theirs), key=str)
                for d in differences(ours.get(k, "<absent>"), theirs.get(k, "<absent>"), "%s.%s" % (path, k))]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (o, t) in enumerate(zip(ours, theirs)) for d in differences(o, t, "%s[%d]" % (path, i))]
    return [] if ours == theirs else ["%s: %r != %r" % (path or ".", ours, theirs)]
