"""Bad gateway configs and bad gateway peers get nats-server's errors, from natsd as from the
reference: the same stderr for a config either refuses, the same -ERR and log lines for a
client on the gateway port, wrong credentials, a remote cluster of another name, RS+ on an
inbound connection; the link closes (and is retried), the server carries on."""
import os
import socket
import subprocess
import sys

import pytest

from tests.support.servers import ROOT, nats_server_cmd, recv_until_quiet
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_outbound

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")
KINDS = ["natsd", "nats-server"]


def run(kind, conf, *args):
    cmd = [sys.executable, "-m", "natsd"] if kind == "natsd" else nats_server_cmd()
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(cmd + list(args) + ["-c", conf], capture_output=True, text=True,
                          timeout=30, env=env, cwd=os.path.dirname(conf))


BAD_CONFIGS = {
    "no_port": "gateway {\n  name: A\n}\n",
    "no_name": "gateway {\n  port: -1\n}\n",
    "name_with_spaces": 'gateway {\n  name: "A B"\n  port: -1\n}\n',
    "remote_without_name": 'gateway {\n  name: A\n  port: -1\n  gateways: [ { url: "nats://127.0.0.1:1" } ]\n}\n',
    "remote_without_url": "gateway {\n  name: A\n  port: -1\n  gateways: [ { name: B } ]\n}\n",
    "bad_url": 'gateway {\n  name: A\n  port: -1\n  gateways: [ { name: B, url: "nats://a b:1" } ]\n}\n',
    "token": "gateway {\n  name: A\n  port: -1\n  authorization { token: t }\n}\n",
    "users": "gateway {\n  name: A\n  port: -1\n  authorization { users: [ { user: a, password: b } ] }\n}\n",
    "auth_callout": ("gateway {\n  name: A\n  port: -1\n  authorization { auth_callout { issuer: "
                     "ABJHLOVMPA4CI6R5KLNGOB4GSLNIY7IOUPAJC4YFNDLQVIOBYQGUWVLA, auth_users: [a] } }\n}\n"),
    "not_a_map": "gateway: 5\n",
    "gateways_not_array": "gateway {\n  name: A\n  port: -1\n  gateways: 5\n}\n",
    "unknown_key": "gateway {\n  name: A\n  port: -1\n  bogus: 1\n}\n",
    "cluster_name_conflict": "cluster {\n  name: C\n  port: -1\n}\ngateway {\n  name: A\n  port: -1\n}\n",
    "leafnodes_without_system_account": "leafnodes { port: -1 }\ngateway {\n  name: A\n  port: -1\n}\n",
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_bad_configs_get_nats_servers_errors(name, tmp_path):
    """A start refused with nats-server's stderr (config-time errors and start-time checks
    alike; `-t` of the config-time ones is the loader's, tested in tests/conf)."""
    conf = tmp_path / ("%s.conf" % name)
    conf.write_text("port: -1\n" + BAD_CONFIGS[name])
    want = run("nats-server", str(conf))
    got = run("natsd", str(conf))
    assert want.returncode == 1
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout)


def raw_exchange(port, data, quiet=0.5):
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        first = s.recv(65536)
        s.sendall(data)
        return first, recv_until_quiet(s, quiet)


@pytest.mark.parametrize("kind", KINDS)
def test_client_on_the_gateway_port(kind, tmp_path):
    """A CONNECT without a gateway name: -ERR 'attempted to connect to gateway port', closed;
    with gateway credentials configured, the credentials are checked first."""
    from tools.serverproc import free_port
    s = start_gateway_server(kind, tmp_path, "T", "T", free_port())
    try:
        first, rest = raw_exchange(s.gw_port, b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert first.startswith(b"INFO {") and b'"gateway":"T"' in first and b'"gateway_iom":true' in first
        assert rest == b"-ERR 'attempted to connect to gateway port'\r\n"
        s.proc.wait_log(r"\[ERR\] 127\.0\.0\.1:\d+ - gid:\d+ - attempted to connect to gateway port")
        s.proc.wait_log(r"Gateway connection closed: Incorrect Port")
    finally:
        s.proc.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_rs_plus_on_an_inbound_connection_closes_it(kind, tmp_path):
    from tools.serverproc import free_port
    s = start_gateway_server(kind, tmp_path, "T", "T", free_port())
    try:
        raw_exchange(s.gw_port, b'CONNECT {"gateway":"Z","name":"ZZZ"}\r\n'
                                b'INFO {"server_id":"ZZZ","server_name":"z","gateway":"Z"}\r\n'
                                b'RS+ $G foo\r\n')
        s.proc.wait_log(r"\[ERR\] 127\.0\.0\.1:\d+ - gid:\d+ - Received RS\+ from gateway on inbound connection")
        assert s.proc.proc.poll() is None
    finally:
        s.proc.kill()


@pytest.mark.parametrize("dialer,target", [("natsd", "nats-server"), ("nats-server", "natsd")])
def test_wrong_name_and_wrong_credentials(dialer, target, tmp_path):
    """A remote that is not the cluster it was configured as, and one that refuses our
    credentials: nats-server's lines on both sides, retried, the servers carry on."""
    from tools.serverproc import free_port
    tport = free_port()
    t = start_gateway_server(target, tmp_path / "t", "T", "T", tport,
                             gateway_extra="  authorization { user: a, password: b }")
    url = "nats://127.0.0.1:%d" % tport
    n = start_gateway_server(dialer, tmp_path / "n", "N", "X", free_port(), {"WRONG": ["nats://a:b@127.0.0.1:%d" % tport]})
    m = start_gateway_server(dialer, tmp_path / "m", "M", "Y", free_port(), {"T": [url.replace("//", "//a:bad@")]})
    try:
        n.proc.wait_log(r'\[ERR\] 127\.0\.0\.1:%d - gid:\d+ - Failing connection to gateway "WRONG", '
                        r'remote gateway name is "T"' % tport)
        n.proc.wait_log(r"Gateway connection closed: Wrong Gateway - Remote: T")
        t.proc.wait_log(r'\[ERR\] 127\.0\.0\.1:\d+ - gid:\d+ - authentication error - User "a"')
        t.proc.wait_log(r"Gateway connection closed: Authentication Failure")
        n.proc.wait_log(r'Connecting to explicit gateway "WRONG" .*\(attempt 1\)')
        assert len([line for line in n.proc.lines if "Creating outbound gateway connection" in line]) >= 1
        for s in (t, n, m):
            assert s.proc.proc.poll() is None
    finally:
        for s in (t, n, m):
            s.proc.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_gateway_credentials_let_the_right_peer_in(kind, tmp_path):
    """`authorization { user, password }` on the gateway: a peer that names them (in its URL)
    gets in, and the link carries messages."""
    import asyncio
    import nats
    from tools.serverproc import free_port
    tport = free_port()
    t = start_gateway_server(kind, tmp_path / "t", "T", "T", tport,
                             gateway_extra="  authorization { user: a, password: b }")
    n = start_gateway_server("natsd", tmp_path / "n", "N", "X", free_port(),
                             {"T": ["nats://a:b@127.0.0.1:%d" % tport]})
    try:
        wait_outbound(n, {"T"})

        async def main():
            sub_nc = await nats.connect(t.url)
            sub = await sub_nc.subscribe("hello")
            await sub_nc.flush()
            wait_gateway_interest([n], "T", "hello")
            pub_nc = await nats.connect(n.url)
            await pub_nc.publish("hello", b"world")
            await pub_nc.flush()
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b"world"
            await sub_nc.close()
            await pub_nc.close()
        asyncio.run(main())
    finally:
        t.proc.kill()
        n.proc.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_reject_unknown_cluster(kind, tmp_path):
    """`reject_unknown_cluster: true`: a cluster that is not configured is turned away, with
    nats-server's line and -ERR; a configured one gets in."""
    from tools.serverproc import free_port
    tport, kport = free_port(), free_port()
    t = start_gateway_server(kind, tmp_path / "t", "T", "T", tport,
                             {"K": ["nats://127.0.0.1:%d" % kport]},
                             gateway_extra="  reject_unknown_cluster: true")
    n = start_gateway_server("natsd", tmp_path / "n", "N", "X", free_port(),
                             {"T": ["nats://127.0.0.1:%d" % tport]})
    k = start_gateway_server("natsd", tmp_path / "k", "K", "K", kport,
                             {"T": ["nats://127.0.0.1:%d" % tport]})
    try:
        t.proc.wait_log(r'\[ERR\] 127\.0\.0\.1:\d+ - gid:\d+ - Rejecting connection from gateway "X"')
        n.proc.wait_log(r"Gateway Error 'Connection to gateway \"T\" rejected'")
        wait_outbound(k, {"T"})
        wait_outbound(t, {"K"})
    finally:
        for s in (t, n, k):
            s.proc.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_a_reload_may_not_change_the_gateway(kind, tmp_path):
    """nats-server reloads nothing of the gateway block: a changed one is refused, and the
    gateway stays as it was."""
    import signal
    from tools.serverproc import free_port
    s = start_gateway_server(kind, tmp_path, "T", "T", free_port(), {"U": ["nats://127.0.0.1:1"]})
    try:
        with open(s.conf) as f:
            text = f.read()
        with open(s.conf, "w") as f:
            f.write(text.replace("name: U", "name: V"))
        s.proc.signal(signal.SIGHUP)
        s.proc.wait_log(r"\[ERR\] Failed to reload server configuration: config reload not supported "
                        r"for Gateway: old=\{T ")
        assert s.get("/varz")["gateway"]["gateways"][0]["name"] == "U"
    finally:
        s.proc.kill()


@pytest.mark.parametrize("block", ["gateway { name: X, port: %d }", "cluster { name: X, port: %d }"])
def test_a_busy_gateway_or_route_port_is_fatal_as_on_nats_server(block, tmp_path):
    """The port is taken: nats-server's [FTL] line for that listener, exit 1."""
    import re
    from tools.serverproc import free_port
    port = free_port()
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    busy.bind(("0.0.0.0", port))
    busy.listen()
    conf = tmp_path / "busy.conf"
    conf.write_text("port: -1\n" + block % port + "\n")
    try:
        got = {}
        for kind in KINDS:
            r = run(kind, str(conf))
            got[kind] = (r.returncode, [re.sub(r"^\[\d+\] \S+ \S+ ", "", line)
                                        for line in r.stderr.splitlines() if "[FTL]" in line])
        assert got["natsd"] == got["nats-server"] and got["natsd"][0] == 1 and got["natsd"][1]
    finally:
        busy.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_malformed_rmsg_closes_that_link_only(kind, tmp_path):
    """nats-server's parse error line, the link closed as a protocol violation; the server
    goes on taking gateway connections."""
    from tools.serverproc import free_port
    s = start_gateway_server(kind, tmp_path, "T", "T", free_port())
    hello = (b'CONNECT {"gateway":"Z","name":"ZZZ"}\r\n'
             b'INFO {"server_id":"ZZZ","server_name":"z","gateway":"Z"}\r\n')
    try:
        raw_exchange(s.gw_port, hello + b"RMSG $G\r\n")
        s.proc.wait_log(r"\[ERR\] 127\.0\.0\.1:\d+ - gid:\d+ - processRoutedMsgArgs Parse Error: '\[\$G\]'")
        s.proc.wait_log(r"Gateway connection closed: Protocol Violation - Remote: z")
        first, _ = raw_exchange(s.gw_port, b"")
        assert first.startswith(b"INFO {")
    finally:
        s.proc.kill()


def test_varz_gateway_block_is_nats_servers(tmp_path):
    """The gateway block of /varz for one config, natsd and nats-server: the same (the
    listening port aside)."""
    from tools.serverproc import free_port
    out = {}
    for kind in KINDS:
        s = start_gateway_server(kind, tmp_path / kind, "V", "V", free_port(),
                                 {"W": ["nats://127.0.0.1:1", "nats://127.0.0.1:2"]},
                                 gateway_extra='  advertise: "1.2.3.4:5555"\n  connect_retries: 3\n'
                                               '  reject_unknown_cluster: true\n'
                                               '  authorization { user: a, password: b, timeout: 3 }')
        try:
            v = s.get("/varz")["gateway"]
            v.pop("port")
            for g in v.get("gateways") or []:
                g["urls"] = sorted(g.get("urls") or [])     # (nats-server lists a map's keys)
            out[kind] = v
        finally:
            s.proc.kill()
    assert out["natsd"] == out["nats-server"]
