"""The gateway block's `write_deadline` and `write_timeout`, natsd against nats-server.
Cluster A's outbound gateway connection reaches cluster B through a proxy the test throttles
(a slow reader) while messages flood towards B: once the gateway's deadline (300 ms, not the
server's 10 s) passes, the connection is a slow consumer; `write_timeout: close` closes it,
the default (`retry` for gateways) keeps it while it still reads. What is compared: the
deadline in the log line, whether the connection was closed, /varz's gateway slow
consumers."""
import socket
import time

import pytest

from tests.support.servers import nats_server_cmd
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

FRAME = b"PUB flood 4096\r\n" + b"x" * 4096 + b"\r\n"


def scenario(tmp_path, kind, policy):
    """-> (the deadline logged, whether A closed its connection to B, gateway slow consumers
    counted)."""
    from tools.serverproc import free_port
    gw = {"A": free_port(), "B": free_port()}
    proxy = TcpProxy(gw["B"])
    extra = '  write_deadline: "300ms"\n' + ("  write_timeout: %s\n" % policy if policy else "")
    a = start_gateway_server(kind, tmp_path, "A1", "A", gw["A"], {"B": ["nats://127.0.0.1:%d" % proxy.port]},
                             gateway_extra=extra)
    b = start_gateway_server("nats-server", tmp_path, "B1", "B", gw["B"], {"A": ["nats://127.0.0.1:%d" % gw["A"]]})
    sub = pub = None
    try:
        wait_gateways([a, b], timeout=30)
        sub = socket.create_connection(("127.0.0.1", b.proc.port))
        sub.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')
        wait_gateway_interest([a], "B", "flood")
        proxy.throttle(2 << 20)                         # B reads, more slowly than A writes
        pub = socket.create_connection(("127.0.0.1", a.proc.port))
        pub.sendall(b'CONNECT {"verbose":false}\r\n')
        pub.settimeout(0.5)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:             # 2 s of flood, whatever happens to B
            try:
                pub.sendall(FRAME * 16)
            except OSError:
                pass
            time.sleep(0.01)
        line = a.proc.wait_log(r"Slow Consumer (?:Detected|State): WriteDeadline of (\S+) exceeded", timeout=5)
        closed = any("Slow Consumer (Write Deadline)" in x for x in a.proc.lines)
        return line.group(1), closed, a.get("/varz")["slow_consumer_stats"]["gateways"] >= 1
    finally:
        for c in (sub, pub):
            if c is not None:
                c.close()
        proxy.close()
        a.proc.kill()
        b.proc.kill()


@pytest.mark.parametrize("policy, closed", [("close", True), (None, False)], ids=["close", "default"])
def test_the_gateways_write_deadline_and_policy_as_nats_server(tmp_path, policy, closed):
    theirs = scenario(tmp_path / "ref", "nats-server", policy)
    ours = scenario(tmp_path / "natsd", "natsd", policy)
    assert ours == theirs == ("300ms", closed, True)
