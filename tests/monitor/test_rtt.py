"""A client's RTT, natsd against nats-server: estimated at CONNECT (time since accept), then
measured by the server's first PING, which goes out within about 2 s of CONNECT and whose
PONG sets /connz `rtt` (here a PONG held back 300 ms)."""
import re
import socket
import time

import pytest

from tests.support.servers import get_json


def go_seconds(text):
    """A Go duration string of /connz (`1.234ms`, `300.5ms`, `2s`, `850µs`) in seconds."""
    units = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ns|µs|us|ms|s|m|h)", text))


def rtt_of(srv, name):
    conns = get_json(srv.http_port, "/connz")["connections"]
    return next(c["rtt"] for c in conns if c.get("name") == name)


def slow_ponger(srv):
    """A raw client: CONNECT, then the server's first PING answered 300 ms late.
    -> (seconds from CONNECT to the PING, rtt before it, rtt after the PONG)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.recv(4096)                                            # INFO
    s.sendall(b'CONNECT {"verbose":false,"name":"slow"}\r\n')
    sent = time.monotonic()
    deadline, got = sent + 5, b""
    estimate = None
    while b"PING\r\n" not in got and time.monotonic() < deadline:
        if estimate is None:
            time.sleep(0.2)
            estimate = rtt_of(srv, "slow")
        s.settimeout(max(0.01, deadline - time.monotonic()))
        got += s.recv(4096)
    waited = time.monotonic() - sent
    time.sleep(0.3)
    s.sendall(b"PONG\r\nPING\r\n")
    while b"PONG\r\n" not in got.split(b"PING\r\n", 1)[1]:
        got += s.recv(4096)
    measured = rtt_of(srv, "slow")
    s.close()
    return waited, estimate, measured


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_rtt_estimated_at_connect_then_measured(natsd, reference, kind):
    srv = (natsd if kind == "natsd" else reference)("-m", "-1")
    waited, estimate, measured = slow_ponger(srv)
    assert 1.5 < waited < 3.0                       # the first PING: 2 s and up to a fifth more
    assert 0 < go_seconds(estimate) < 0.3           # time from accept to CONNECT
    assert 0.3 <= go_seconds(measured) < 1.0        # the PONG we held back
