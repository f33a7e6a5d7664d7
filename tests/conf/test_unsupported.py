"""Configs and flags asking for what natsd cannot serve yet are refused (natsd.conf.unsupported).

Each scenario runs the reference nats-server too: where nats-server itself refuses the config
or flags, natsd must print exactly nats-server's error; where nats-server would run it, natsd
must exit 1 with `natsd: file:line:col: <feature> is not supported by natsd yet` (for flags:
`natsd: --tls: TLS is not supported by natsd yet`), for `-t` and for a plain start alike.
"""
import os
import shutil
import subprocess
import sys

import nkeys
import pytest

from natsd.conf import load_string
from natsd.conf.unsupported import CONFIG, FLAGS

NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
if not os.path.exists(NATS_SERVER):
    NATS_SERVER = shutil.which("nats-server")
need_ref = pytest.mark.skipif(NATS_SERVER is None, reason="reference nats-server not found")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def natsd(*args, cwd, timeout=30):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "natsd", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def ref(*args, cwd, timeout=30):
    return subprocess.run([NATS_SERVER, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def public_key(prefix):
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix))).public_key.decode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A real self-signed certificate and key (nats-server loads them at config time)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not found")
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "2", "-subj", "/CN=localhost"],
                   check=True, capture_output=True, timeout=60)
    return str(d / "cert.pem"), str(d / "key.pem")


OP = public_key(nkeys.PREFIX_BYTE_OPERATOR)
USER = public_key(nkeys.PREFIX_BYTE_USER)
ACCOUNT = public_key(nkeys.PREFIX_BYTE_ACCOUNT)

# name -> (config, [refusals]); {cert}/{key} are real files; {f} is the config file name.
REFUSED = {
    "ocsp_peer_gateway_remote": ('port: -1\ngateway {\n  name: A\n  port: -1\n  gateways: [ { name: B, url: "nats://127.0.0.1:1"\n'
                                 '    tls {\n      cert_file: "{cert}"\n      key_file: "{key}"\n      ocsp_peer: true\n'
                                 '    } } ]\n}\n',
                                 ["{f}:9:7: OCSP peer verification is not supported by natsd yet"]),
    "proxy_required": ("port: -1\nauthorization {\n  users: [ {user: a, password: b, proxy_required: true} ]\n}\n",
                       ["{f}:3:35: trusted proxy authentication is not supported by natsd yet"]),
    "proxies": (f'port: -1\nproxies {{\n  trusted: [ {{key: "{USER}"}} ]\n}}\n',
                ["{f}:2:1: trusted proxy authentication is not supported by natsd yet"]),
    "proxy_protocol_tls": ('port: -1\nproxy_protocol: true\ntls {\n  cert_file: "{cert}"\n  key_file: "{key}"\n}\n',
                           ["{f}:2:1: the PROXY protocol with TLS on the client port is not supported by natsd yet"]),
    "ocsp": ("port: -1\nocsp {\n  mode: always\n}\n", ["{f}:2:1: OCSP stapling is not supported by natsd yet"]),
    "ocsp_cache": ("port: -1\nocsp_cache {\n  type: local\n}\n", ["{f}:2:1: OCSP stapling is not supported by natsd yet"]),
    "ocsp_peer_routes": ('port: -1\ncluster {\n  port: -1\n  tls {\n    cert_file: "{cert}"\n    key_file: "{key}"\n'
                         '    ocsp_peer: true\n  }\n}\n',
                         ["{f}:7:5: OCSP peer verification is not supported by natsd yet"]),
    "ocsp_peer_leaf_remote": ('port: -1\nleafnodes {\n  remotes: [ { url: "tls://127.0.0.1:1"\n'
                              '    tls { ocsp_peer { verify: true } } } ]\n}\n',
                              ["{f}:4:11: OCSP peer verification is not supported by natsd yet"]),
    "cluster_traffic_owner": ("port: -1\naccounts {\n  A {\n    jetstream { cluster_traffic: owner }\n  }\n}\n",
                              ["{f}:4:17: JetStream cluster traffic in the account is not supported by natsd yet"]),
    "prof_block_rate": ("port: -1\nprof_block_rate: 5\n", ["{f}:2:1: block profiles is not supported by natsd yet"]),
    "feature_flags": ("port: -1\nfeature_flags {\n  js_api_reply_v2: true\n  js_raft_delete_range: true\n}\n",
                      ["{f}:3:3: feature flags other than nats-server 2.15's defaults is not supported by natsd yet"]),
    "insecure_ciphers_openssl": ('port: -1\ntls {\n  cert_file: "{cert}"\n  key_file: "{key}"\n'
                                '  allow_insecure_cipher_suites: true\n  cipher_suites: ["TLS_RSA_WITH_3DES_EDE_CBC_SHA"]\n}\n',
                                ["{f}:6:3: the insecure cipher suites OpenSSL no longer implements (3DES, RC4) "
                                 "is not supported by natsd yet"]),
    "js_internals": ('port: -1\njetstream {\n  store_dir: "js"\n  max_concurrent_io: 4\n}\n',
                     ["{f}:4:3: JetStream tuning of nats-server's own internals is not supported by natsd yet"]),
    "js_extension_hint": ('port: -1\njetstream {\n  store_dir: "js"\n  extension_hint: will_extend\n}\n',
                          ["{f}:4:3: JetStream domain extension hints is not supported by natsd yet"]),
    "several": ("port: -1\nprof_block_rate: 5\nocsp_cache {\n  type: local\n}\n",
                ["{f}:3:1: OCSP stapling is not supported by natsd yet",
                 "{f}:2:1: block profiles is not supported by natsd yet"]),
}

# nats-server accepts these and they change nothing for a standalone server: natsd runs them.
ACCEPTED = {
    "resolver_memory": "port: -1\nresolver: MEMORY\n",
    "gateway_empty": "port: -1\ngateway {}\n",
    "resolver_url": "port: -1\nresolver: URL(http://127.0.0.1:1/jwt/v1/accounts/)\n",
    "resolver_tls": "port: -1\nresolver_tls {}\n",
    "resolver_preload_empty": "port: -1\nresolver: MEMORY\nresolver_preload {}\n",
    "cluster_name_only": "port: -1\ncluster {\n  name: hub\n}\n",
    "cluster_no_port": "port: -1\ncluster {\n  name: hub\n  no_advertise: true\n  connect_retries: 3\n  pool_size: 2\n}\n",
    "remote_nats_url": 'port: -1\nleafnodes {\n  remotes [ { url: "nats-leaf://127.0.0.1:7422" } ]\n}\n',
    "proxy_required_false": "port: -1\nauthorization {\n  users: [ {user: a, password: b, proxy_required: false} ]\n}\n",
    "prof_port_zero": "port: -1\nprof_port: 0\n",
    "prof_port": "port: -1\nprof_port: 6061\n",
    "feature_flags_defaults": "port: -1\nfeature_flags {\n  js_raft_delete_range: true\n}\n",
    "leafnode_nkey_auth": f'port: -1\nleafnodes {{\n  port: -1\n  authorization {{\n    nkey: "{USER}"\n  }}\n}}\n',
    "cluster_permissions": 'port: -1\ncluster {\n  port: -1\n  permissions { import: "a", export: ["b.>"] }\n}\n',
    "cluster_traffic_system": "port: -1\naccounts {\n  A {\n    jetstream { cluster_traffic: system }\n  }\n}\n",
    "auth_callout": ("port: -1\naccounts {\n  AUTH { users: [ {user: auth, password: pwd} ] }\n}\n"
                     f'authorization {{\n  auth_callout {{\n    issuer: "{ACCOUNT}"\n'
                     "    auth_users: [ auth ]\n    account: AUTH\n  }\n}\n"),
}


def write(tmp_path, name, text, certs=None):
    if certs:
        text = text.replace("{cert}", certs[0]).replace("{key}", certs[1])
    path = tmp_path / f"{name}.conf"
    path.write_text(text)
    return path.name


@need_ref
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_config_check_and_start(name, tmp_path, certs):
    text, refusals = REFUSED[name]
    f = write(tmp_path, name, text, certs)
    # nats-server accepts the file ...
    r = ref("-t", "-c", f, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # ... natsd refuses it, with -t and when starting, at the key that asks for the feature
    expected = "".join("natsd: %s\n" % line.format(f=f) for line in refusals)
    for args in (["-t", "-c", f], ["-c", f]):
        r = natsd(*args, cwd=tmp_path)
        assert (r.returncode, r.stderr, r.stdout) == (1, expected, ""), args


@need_ref
@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_configs(name, tmp_path):
    f = write(tmp_path, name, ACCEPTED[name])
    r = ref("-t", "-c", f, cwd=tmp_path)
    ours = natsd("-t", "-c", f, cwd=tmp_path)
    assert (ours.returncode, ours.stderr, ours.stdout) == (0, r.stderr, r.stdout) == (0, r.stderr, "")
    assert load_string(ACCEPTED[name], f).unsupported == []


# nats-server refuses these first (config time, -t and start): natsd prints its error.
REF_REFUSES = {
    "tls_cert_store": 'port: -1\ntls { cert_store: "WindowsCurrentUser", cert_match_by: "Subject", cert_match: "x" }\n',
    "tls_missing_cert": 'port: -1\ntls {\n  cert_file: "a.pem"\n  key_file: "b.pem"\n}\n',
    "tls_missing_key_file_key": 'port: -1\ntls {\n  cert_file: "{cert}"\n}\n',
    "tls_missing_cert_file_key": 'port: -1\ntls {\n  key_file: "{key}"\n}\n',
    "tls_missing_key": 'port: -1\ntls {\n  cert_file: "{cert}"\n  key_file: "nokey.pem"\n}\n',
    "tls_not_pem": 'port: -1\ntls {\n  cert_file: "junk.pem"\n  key_file: "junk.pem"\n}\n',
    "tls_dir_as_cert": 'port: -1\ntls {\n  cert_file: "adir"\n  key_file: "{key}"\n}\n',
    "tls_missing_ca": 'port: -1\ntls {\n  ca_file: "noca.pem"\n}\n',
    "tls_unknown_field": "port: -1\ntls {\n  bogus: 1\n}\n",
    "tls_cert_not_string": "port: -1\ntls {\n  cert_file: 5\n}\n",
    "tls_verify_not_bool": 'port: -1\ntls {\n  verify: "yes"\n}\n',
    "tls_not_a_map": "port: -1\ntls: true\n",
    "leafnode_tls_missing": 'port: -1\nleafnodes {\n  tls {\n    cert_file: "a.pem"\n    key_file: "b.pem"\n  }\n}\n',
    "remote_tls_missing_ca": ('port: -1\nleafnodes {\n  remotes [ { url: "nats://127.0.0.1:7422", '
                              'tls { ca_file: "nope.pem" } } ]\n}\n'),
    "cluster_tls_missing": ('port: -1\ncluster {\n  name: c\n  tls { cert_file: "a.pem", key_file: "b.pem" }\n}\n'),
    "gateway_tls_unknown": "port: -1\ngateway {\n  name: A\n  tls { nope: 1 }\n}\n",
    "websocket_unknown_field": "port: -1\nwebsocket {\n  port: -1\n  bogus: 1\n}\n",
    "websocket_not_a_map": "port: -1\nwebsocket: true\n",
    "mqtt_not_a_map": "port: -1\nmqtt: 5\n",
    "mqtt_tls_missing": 'port: -1\nmqtt {\n  tls { cert_file: "a.pem", key_file: "b.pem" }\n}\n',
    "operator_missing_file": 'port: -1\noperator: "op.jwt"\n',
    # the last character changed (to one it is not): the checksum no longer fits
    "trusted_bad_key": f'port: -1\ntrusted_keys: ["{OP}", "{OP[:-1]}{"B" if OP.endswith("A") else "A"}"]\n',
    "trusted_not_operator": f'port: -1\ntrusted: "{USER}"\n',
}


@need_ref
@pytest.mark.parametrize("name", sorted(REF_REFUSES))
def test_nats_server_errors_come_first(name, tmp_path, certs):
    f = write(tmp_path, name, REF_REFUSES[name], certs)
    (tmp_path / "junk.pem").write_text("junk\n")
    (tmp_path / "adir").mkdir()
    for args in (["-t", "-c", f], ["-c", f]):
        want = ref(*args, cwd=tmp_path)
        assert want.returncode == 1 and want.stderr.startswith("nats-server: "), want.stderr
        got = natsd(*args, cwd=tmp_path)
        assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout), args


# nats-server checks these only when it starts (not with -t): a plain start gets its error.
REF_REFUSES_AT_START = {
    "mqtt_without_jetstream": "port: -1\nmqtt {\n  port: -1\n}\n",
    "mqtt_cluster_without_server_name": "port: -1\ncluster { port: -1 }\nmqtt {\n  port: -1\n}\n",
}


@need_ref
@pytest.mark.parametrize("name", sorted(REF_REFUSES_AT_START))
def test_nats_server_start_errors_come_first(name, tmp_path):
    f = write(tmp_path, name, REF_REFUSES_AT_START[name])
    want = ref("-c", f, cwd=tmp_path)
    assert want.returncode == 1 and want.stderr.startswith("nats-server: "), want.stderr
    got = natsd("-c", f, cwd=tmp_path)
    assert (got.returncode, got.stderr, got.stdout) == (1, want.stderr, want.stdout)
    want = ref("-t", "-c", f, cwd=tmp_path)
    got = natsd("-t", "-c", f, cwd=tmp_path)
    assert want.returncode == 0 and (got.returncode, got.stderr) == (0, want.stderr)


# -- flags -------------------------------------------------------------------------------------

@need_ref
@pytest.mark.parametrize("args", [
    ["--tls"], ["--tlsverify"], ["--tlscacert", "ca.pem"], ["--tlscert", "a.pem"],
    ["--tlscert", "a.pem", "--tlskey", "b.pem"], ["--tlscert", "junk.pem", "--tlskey", "junk.pem"],
    ["--cluster", "bad"], ["--cluster", "nats://h"], ["--cluster", "nats://h:abc"],
    ["--cluster", "nats://u@h:1"], ["--routes", "nats://127.0.0.1:6222"],
])
def test_nats_server_flag_errors_come_first(args, tmp_path):
    (tmp_path / "junk.pem").write_text("junk\n")
    want = ref("-p", "-1", *args, cwd=tmp_path)
    assert want.returncode == 1 and want.stderr.startswith("nats-server: "), want.stderr
    got = natsd("-p", "-1", *args, cwd=tmp_path)
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout)


@need_ref
def test_check_config_ignores_flags_as_nats_server(tmp_path):
    """`-t` checks the file: nats-server does not look at the other flags then."""
    (tmp_path / "ok.conf").write_text("port: -1\n")
    args = ["-t", "-c", "ok.conf", "--tls", "--cluster", "nats://127.0.0.1:6222", "--profile", "6060"]
    want, got = ref(*args, cwd=tmp_path), natsd(*args, cwd=tmp_path)
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout) == \
        (0, want.stderr, "")


def test_tls_false_turns_the_config_tls_off(tmp_path):
    """nats-server: `--tls=false` disables TLS, the config file's `tls {}` included."""
    from natsd.conf.flags import parse_command_line
    conf = tmp_path / "t.conf"
    conf.write_text("port: -1\ntls {}\n")
    assert parse_command_line(["-c", str(conf)]).opts.tls_config.configured
    off = parse_command_line(["-c", str(conf), "--tls=false", "--tlscert", "x.pem"]).opts
    assert not off.tls_config.configured and not off.tls and not off.tls_cert


def test_accepted_cluster_flags_do_not_start_a_cluster():
    from natsd.conf.flags import parse_command_line
    cl = parse_command_line(["--cluster_name", "c", "--no_advertise", "--connect_retries", "2",
                             "--cluster_advertise", "h:1", "--cluster="])
    assert cl.refusals == [] and cl.opts.cluster.port == 0


def test_table_is_the_one_place():
    """Every row names a feature; flags point at Options attributes."""
    from natsd.options import Options
    assert all(feature and path and callable(when) for feature, path, when in CONFIG)
    o = Options()
    assert all(hasattr(o, dest) or dest in ("cluster_listen", "routes") for _, dests in FLAGS for dest in dests)


@need_ref
def test_websocket_without_tls_fails_at_start_as_nats_server(tmp_path):
    f = write(tmp_path, "ws_no_tls", "port: -1\nwebsocket {\n  port: -1\n}\n")
    want, got = ref("-c", f, cwd=tmp_path), natsd("-c", f, cwd=tmp_path)
    assert want.returncode == 1 and "websocket requires TLS configuration" in want.stderr
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout)
    assert ref("-t", "-c", f, cwd=tmp_path).returncode == natsd("-t", "-c", f, cwd=tmp_path).returncode == 0


@need_ref
def test_mixed_websocket_remote_urls_fail_at_start_as_nats_server(tmp_path):
    f = write(tmp_path, "mixed", 'port: -1\nleafnodes {\n  remotes [ { urls: ["nats://a:1", "ws://b:2"] } ]\n}\n')
    want, got = ref("-c", f, cwd=tmp_path), natsd("-c", f, cwd=tmp_path)
    assert want.returncode == 1
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout)
