"""A storm of logins against a bcrypt (cost 11) password, on natsd and nats-server: wrong
passwords are refused, right ones accepted, commands pipelined behind a CONNECT wait for it,
and a connected bystander keeps getting its PONGs meanwhile. The bystander's round trips are
printed (tools/login_storm_bench.py compares them); only completion is asserted."""
import statistics
import threading
import time

import bcrypt

from tests.support.rawclient import RawClient

HASH = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=11)).decode()


def config(tmp_path):
    p = tmp_path / "bc.conf"
    p.write_text("authorization { users: [ {user: u, password: \"%s\"}, {user: b, password: b} ] }\n"
                 % HASH)
    return str(p)


def attempt(port, password, out, i):
    c = RawClient(port, timeout=30)
    try:
        c.send(b'CONNECT {"verbose":false,"user":"u","pass":"%s"}\r\nPING\r\n' % password.encode())
        line = c.read_until(b"\r\n", 30)
        while line == b"PING\r\n":        # the server's first PING (2 s after CONNECT) came first
            c.send(b"PONG\r\n")
            line = c.read_until(b"\r\n", 30)
        out[i] = line
    finally:
        c.close()


def test_login_storm(any_server, tmp_path):
    srv = any_server("-c", config(tmp_path))
    bystander = RawClient(srv.port).connect(user="b", **{"pass": "b"})
    results = [None] * 11
    threads = [threading.Thread(target=attempt, args=(srv.port, "wrong%d" % i, results, i))
               for i in range(10)]
    threads.append(threading.Thread(target=attempt, args=(srv.port, "right", results, 10)))
    for t in threads:
        t.start()
    rtts = []
    while any(t.is_alive() for t in threads):
        t0 = time.monotonic()
        before_pong = bystander.sync(timeout=30)
        # A storm on a loaded machine can outlast the first server PING (2 s after CONNECT on
        # both servers): that PING is protocol, answered like a client library would.
        for _ in range(before_pong.count(b"PING\r\n")):
            bystander.send(b"PONG\r\n")
        assert before_pong.replace(b"PING\r\n", b"") == b""
        rtts.append(time.monotonic() - t0)
        time.sleep(0.005)
    for t in threads:
        t.join()
    assert results[:10] == [b"-ERR 'Authorization Violation'\r\n"] * 10, results
    assert results[10] == b"PONG\r\n"
    print("bystander rtt during the storm: median %.1f ms, max %.1f ms (%d pings)"
          % (statistics.median(rtts) * 1000, max(rtts) * 1000, len(rtts)))


def test_pipelined_commands_wait_for_the_check(any_server, tmp_path):
    """SUB/PUB/PING sent right behind a CONNECT whose password takes a while are handled after
    it, in order."""
    srv = any_server("-c", config(tmp_path))
    c = RawClient(srv.port, timeout=30)
    c.send(b'CONNECT {"verbose":false,"user":"u","pass":"right"}\r\nSUB x 1\r\nPUB x 2\r\nhi\r\nPING\r\n')
    assert c.read_until(b"PONG\r\n", 30) == b"MSG x 1 2\r\nhi\r\nPONG\r\n"
    c.close()
