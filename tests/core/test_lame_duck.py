"""Lame duck mode (SIGUSR2), on natsd and on nats-server: the client-visible INFO, nats-py's
lame-duck callback, the $SYS event, the log lines and the timing of closes and exit."""
import asyncio
import json
import re
import signal
import time

import nats
import pytest

from tests.support.rawclient import RawClient
from tests.support.waiting import poll

LDM_CONF = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'
INFO_RE = re.compile(rb"INFO ([^\r]*) \r\n")
# INFO keys nats-server sends that natsd does not: git_commit (natsd is not built from
# nats-server's git tree).
NOT_YET = {"git_commit"}


def write_conf(tmp_path, text=LDM_CONF):
    p = tmp_path / "ldm.conf"
    p.write_text(text)
    return str(p)


def exited(srv, timeout):
    deadline = time.monotonic() + timeout
    while srv.proc.poll() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def connects(port):
    try:
        with RawClient(port, timeout=1):
            return True
    except (OSError, AssertionError):
        return False


def ldm_info(start, tmp_path):
    """A protocol-1 client that had its first PONG gets the full INFO with "ldm": true (its
    client id and ip, no nonce); a protocol-0 client gets nothing; then both are closed.
    Returns the INFO's keys."""
    srv = start("-c", write_conf(tmp_path))
    p1 = RawClient(srv.port).connect(protocol=1)
    p1.read_until(b'"connect_info":true', 5)        # the INFO after the first PONG
    p1.read_available(0.1)
    p0 = RawClient(srv.port).connect(protocol=0)
    srv.signal(signal.SIGUSR2)
    info = json.loads(INFO_RE.search(p1.read_until(INFO_RE, 5)).group(1))
    assert info["ldm"] is True
    assert info["client_id"] > 0 and info["client_ip"] == "127.0.0.1"
    assert "nonce" not in info and "connect_info" not in info
    keys = set(info)
    assert poll(lambda: not connects(srv.port), 5), "still accepting in lame duck mode"
    assert p1.is_closed(10) and p0.is_closed(10)
    assert b"INFO" not in p0.buf
    assert exited(srv, 10) and srv.proc.returncode == 0
    return keys


def test_info_ldm_to_protocol_1_clients(natsd, reference, tmp_path):
    keys = {"natsd": ldm_info(natsd, tmp_path), "nats-server": ldm_info(reference, tmp_path)}
    assert keys["natsd"] == keys["nats-server"] - NOT_YET


def test_nats_py_lame_duck_callback(any_server, tmp_path):
    srv = any_server("-c", write_conf(tmp_path))
    events = []

    async def scenario():
        async def ldm_cb():
            events.append("ldm")

        async def disconnected_cb():
            events.append("disconnected")
        nc = await nats.connect(srv.url, lame_duck_mode_cb=ldm_cb, disconnected_cb=disconnected_cb,
                                max_reconnect_attempts=0)
        await nc.flush()
        srv.signal(signal.SIGUSR2)
        for _ in range(300):
            if "disconnected" in events:
                break
            await asyncio.sleep(0.02)
        await nc.close()
    asyncio.run(scenario())
    assert events[:2] == ["ldm", "disconnected"], events


def test_log_lines_and_grace_period(any_server, tmp_path):
    """Entering -> (grace) -> Closing existing clients -> shutdown; clients close no earlier
    than the grace period and at most a second apart; a second signal is ignored."""
    srv = any_server("-c", write_conf(tmp_path))
    clients = [RawClient(srv.port).connect(protocol=1) for _ in range(3)]
    t0 = time.monotonic()
    srv.signal(signal.SIGUSR2)
    srv.wait_log("Entering lame duck mode, stop accepting new clients", 5)
    srv.signal(signal.SIGUSR2)
    closed = []
    for c in clients:
        assert c.is_closed(10)
        closed.append(time.monotonic() - t0)
    assert exited(srv, 10) and srv.proc.returncode == 0
    assert closed[0] >= 0.9, closed
    assert closed[-1] < 1.0 + 3 * 1.0 + 1.0, closed       # at most 1 s apart, plus slack
    lines = [ln for ln in srv.log.splitlines() if "[INF]" in ln]
    order = ["Entering lame duck mode, stop accepting new clients", "Closing existing clients",
             "Initiating Shutdown...", "Server Exiting.."]
    idx = [next(i for i, ln in enumerate(lines) if ln.endswith(text)) for text in order]
    assert idx == sorted(idx), lines
    assert sum("Entering lame duck mode" in ln for ln in lines) == 1


def test_no_clients_exits_at_once(any_server, tmp_path):
    srv = any_server("-c", write_conf(tmp_path, 'lame_duck_duration: "30s"\nlame_duck_grace_period: "10s"\n'))
    srv.signal(signal.SIGUSR2)
    assert exited(srv, 5), "waited for the grace period with no client to tell"
    assert not any("Closing existing clients" in ln for ln in srv.lines)


def test_jetstream_stops_and_lame_duck_event(any_server, tmp_path):
    """JetStream shuts down when lame duck mode starts; a system account subscriber sees
    $SYS.SERVER.<id>.LAMEDUCK with the server's info."""
    conf = write_conf(tmp_path, LDM_CONF + """
accounts { SYS { users: [{user: sys, password: sys}] }, APP { jetstream: enabled, users: [{user: a, password: a}] } }
system_account: SYS
jetstream { store_dir: "%s" }
""" % (tmp_path / "js"))
    srv = any_server("-c", conf)
    sysc = RawClient(srv.port).connect(user="sys", **{"pass": "sys"})
    sysc.send(b"SUB $SYS.SERVER.*.LAMEDUCK 1\r\n")
    sysc.sync()
    app = RawClient(srv.port).connect(user="a", no_responders=True, **{"pass": "a"})
    srv.signal(signal.SIGUSR2)
    # (nats-server writes this event's MSG line with two spaces before the size)
    data = sysc.read_until(re.compile(rb"MSG \$SYS\.SERVER\.\w+\.LAMEDUCK 1 +(\d+)\r\n"), 5)
    size = int(data.rsplit(b" ", 1)[1])
    body = json.loads(sysc.read_until(b"\r\n", 5)[:size])
    assert body["id"] == data.split(b".")[2].decode()
    assert set(body) == {"name", "host", "id", "ver", "feature_flags", "jetstream", "flags", "seq",
                         "time"}
    srv.wait_log("JetStream Shutdown", 5)
    # as nats-server: a request to the stopped JetStream gets no answer at all
    app.send(b'SUB _INBOX.r 1\r\nPUB $JS.API.INFO _INBOX.r 0\r\n\r\n')
    assert app.sync() == b""
    assert app.read_available(0.5) == b""
    assert exited(srv, 10)


def test_shutdown_event(any_server, tmp_path):
    """SIGTERM: a system account subscriber gets $SYS.SERVER.<id>.SHUTDOWN, the server's info
    as the payload (the same shape as LAMEDUCK)."""
    conf = write_conf(tmp_path, """
accounts { SYS { users: [{user: sys, password: sys}] } }
system_account: SYS
""")
    srv = any_server("-c", conf)
    sysc = RawClient(srv.port).connect(user="sys", **{"pass": "sys"})
    sysc.send(b"SUB $SYS.SERVER.*.SHUTDOWN 1\r\n")
    sysc.sync()
    srv.signal(signal.SIGTERM)
    data = sysc.read_until(re.compile(rb"MSG \$SYS\.SERVER\.\w+\.SHUTDOWN 1 +(\d+)\r\n"), 5)
    size = int(data.rsplit(b" ", 1)[1])
    body = json.loads(sysc.read_until(b"\r\n", 5)[:size])
    assert set(body) == {"name", "host", "id", "ver", "feature_flags", "jetstream", "flags", "seq",
                         "time"}
    assert exited(srv, 10)


@pytest.mark.alone
def test_signal_ldm_finds_the_server(natsd, tmp_path):
    """`natsd --signal ldm` with no pid finds the running server by name, as nats-server does
    for itself (run with no other natsd on the machine)."""
    import subprocess
    import sys
    srv = natsd("-c", write_conf(tmp_path))
    c = RawClient(srv.port).connect(protocol=1)
    r = subprocess.run([sys.executable, "-m", "natsd", "--signal", "ldm"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    srv.wait_log("Entering lame duck mode", 5)
    assert c.is_closed(10)
