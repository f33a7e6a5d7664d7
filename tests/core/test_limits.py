"""Limits and slow consumers. The cheap ones run against both servers (`any_server`)."""
import socket
import threading


from tests.support.rawclient import RawClient, parse_msgs
from tests.support.waiting import poll
from tests.support.servers import http_json


def config(tmp_path, text):
    p = tmp_path / "limits.conf"
    p.write_text(text)
    return str(p)


def test_max_connections(any_server, tmp_path):
    srv = any_server("-c", config(tmp_path, "max_connections: 2\n"))
    with RawClient(srv.port).connect() as a, RawClient(srv.port).connect() as b:
        with RawClient(srv.port) as c:
            c.try_send(b'CONNECT {"verbose":false}\r\nPING\r\n')
            assert c.read_until_eof() == b"-ERR 'maximum connections exceeded'\r\n"
        assert a.sync() == b"" and b.sync() == b""
    # the slots are given back when clients leave
    assert poll(lambda: _can_connect(srv.port), timeout=5)


def _can_connect(port):
    try:
        with RawClient(port) as c:
            c.connect()
            return True
    except (AssertionError, OSError):      # refused or closed while slots are still taken
        return False


def test_max_subscriptions(any_server, tmp_path):
    srv = any_server("-c", config(tmp_path, "max_subscriptions: 3\n"))
    with RawClient(srv.port).connect() as c:
        c.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n")
        assert c.sync() == b""
        c.send(b"SUB d 4\r\n")
        assert c.sync() == b"-ERR 'maximum subscriptions exceeded'\r\n"
        # still connected; the first three work, the fourth was not created
        c.send(b"PUB c 1\r\nx\r\nPUB d 1\r\ny\r\n")
        assert c.sync() == b"MSG c 3 1\r\nx\r\n"
        # unsubscribing frees a slot
        c.send(b"UNSUB 1\r\nSUB d 4\r\nPUB d 1\r\nz\r\n")
        assert c.sync() == b"MSG d 4 1\r\nz\r\n"


def test_max_sub_tokens(any_server, tmp_path):
    """max_sub_tokens refuses a subscription of more tokens as a permissions violation (the
    connection stays); a subscription at the limit, and a publish of any length, are fine."""
    srv = any_server("-c", config(tmp_path, "max_sub_tokens: 3\n"))
    with RawClient(srv.port).connect() as c:
        c.send(b"SUB a.b.c 1\r\nSUB a.*.> 2\r\n")
        assert c.sync() == b""
        c.send(b"SUB a.b.c.d 3\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Subscription to \"a.b.c.d\", too many tokens'\r\n"
        c.send(b"PUB a.b.c 1\r\nx\r\nPUB a.b.c.d 1\r\ny\r\n")
        assert sorted(m[:2] for m in parse_msgs(c.sync())) == [(b"a.b.c", b"1"), (b"a.b.c", b"2"), (b"a.b.c.d", b"2")]
    assert srv.wait_log('Subscription Violation Too Many Tokens - Subject "a.b.c.d", SID 3')


def test_max_payload_from_config(any_server, tmp_path):
    srv = any_server("-c", config(tmp_path, "max_payload: 100\n"))
    with RawClient(srv.port) as c:
        assert c.info["max_payload"] == 100
        c.connect()
        c.send(b"SUB a 1\r\nPUB a 100\r\n" + b"x" * 100 + b"\r\n")
        assert len(parse_msgs(c.sync())[0][3]) == 100
        c.send(b"PUB a 101\r\n" + b"x" * 101 + b"\r\n")
        assert c.read_until_eof() == b"-ERR 'Maximum Payload Violation'\r\n"


def test_stale_connection(any_server, tmp_path):
    srv = any_server("-c", config(tmp_path, 'ping_interval: "1s"\nping_max: 1\n'))
    with RawClient(srv.port) as silent, RawClient(srv.port) as polite:
        silent.connect()
        polite.connect()
        polite.read_until(b"PING\r\n", timeout=10)
        polite.send(b"PONG\r\n")
        out = silent.read_until_eof(timeout=15)
        assert out == b"PING\r\n-ERR 'Stale Connection'\r\n"
        # the client that answers stays
        assert polite.sync() in (b"", b"PING\r\n")


def test_slow_consumer_is_cut_off_alone(any_server, tmp_path):
    srv = any_server("-m", "-1", "-c", config(tmp_path, 'max_pending: 1MB\nwrite_deadline: "2s"\n'))
    # the slow one: a tiny receive buffer and it never reads
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", srv.port))
    slow.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')

    good = RawClient(srv.port).connect()
    good.send(b"SUB flood 2\r\n")
    good.sync()
    # wait until the server has the slow subscription (its PONG is in our never-read buffer)
    assert poll(lambda: _varz(srv)["subscriptions"] >= 2, timeout=5)

    received = {"bytes": 0}
    stop = threading.Event()

    def drain():
        good.sock.settimeout(0.2)
        while not stop.is_set():
            try:
                chunk = good.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            received["bytes"] += len(chunk)
    t = threading.Thread(target=drain, daemon=True)
    t.start()

    pub = RawClient(srv.port, timeout=30).connect()
    payload = b"p" * 65536
    frame = b"PUB flood %d\r\n" % len(payload) + payload + b"\r\n"
    try:
        for _ in range(320):                    # 20 MB
            pub.send(frame)
        pub.sync(timeout=30)
        assert poll(lambda: _varz(srv)["slow_consumers"] >= 1, timeout=10), _varz(srv)
        # the slow connection was closed by the server
        slow.settimeout(10)
        try:
            while slow.recv(1 << 20):
                pass
        except ConnectionResetError:
            pass
        srv.wait_log(r"Slow Consumer Detected")
        # everyone else keeps working
        assert poll(lambda: received["bytes"] >= 320 * len(frame), timeout=20), received
    finally:
        stop.set()
        t.join(5)
        slow.close()
    with RawClient(srv.port).connect() as check:
        check.send(b"SUB after 1\r\n")
        check.sync()
        pub.send(b"PUB after 2\r\nok\r\n")
        pub.sync()
        assert check.sync() == b"MSG after 1 2\r\nok\r\n"
    v = _varz(srv)
    assert v["slow_consumers"] >= 1
    assert v.get("slow_consumer_stats", {}).get("clients", 1) >= 1
    pub.close()
    good.close()


def _varz(srv):
    return http_json(srv.http_port, "/varz")


def test_slow_consumer_cut_at_max_pending(natsd, tmp_path):
    srv = natsd("-c", config(tmp_path, 'max_pending: 1MB\nwrite_deadline: "3s"\n'))
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", srv.port))
    slow.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\n')
    pub = RawClient(srv.port, timeout=30).connect()
    frame = b"PUB flood 65536\r\n" + b"p" * 65536 + b"\r\n"
    try:
        for _ in range(160):
            pub.send(frame)
        pub.sync(timeout=30)
        line = srv.wait_log(r"Slow Consumer Detected.*", timeout=20).group(0)
        assert "MaxPending of 1048576 Exceeded" in line, line
    finally:
        slow.close()
        pub.close()
