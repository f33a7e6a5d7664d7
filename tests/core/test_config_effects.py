"""Settings whose effect shows in what a server writes or keeps, natsd against nats-server:
`logtime: false`, `logtime_utc`, `max_closed_clients`, `no_header_support`,
`max_traced_msg_len`, `trace_verbose`."""
import os
import re
import time

from tests.support.rawclient import RawClient
from tests.support.servers import http_json
from tests.support.waiting import poll


def _conf(tmp_path, text):
    p = tmp_path / "e.conf"
    p.write_text(text)
    return str(p)


def test_logtime_false_drops_the_time_stamp(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "logtime: false\n"))
    line = srv.wait_log(r"\[INF\] Server is ready").string
    assert re.fullmatch(r"\[\d+\] \[INF\] Server is ready", line), line


def test_logtime_utc(any_server, tmp_path):
    """With the process in a zone far from UTC, the stamps are UTC only with logtime_utc."""
    env = dict(os.environ, TZ="Asia/Kathmandu")          # UTC+05:45: no hour-only confusion
    stamps = {}
    for name, extra in (("local", ""), ("utc", "logtime_utc: true\n")):
        srv = any_server("-c", _conf(tmp_path, extra), env=env)
        line = srv.wait_log(r"\[INF\] Server is ready").string
        stamp = re.search(r"\] (\d{4}/\d\d/\d\d \d\d:\d\d):\d\d\.\d{6} \[INF\]", line).group(1)
        stamps[name] = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M"))
        srv.kill()
    utc_now = time.mktime(time.gmtime())
    assert abs(stamps["utc"] - utc_now) < 120
    assert abs(stamps["local"] - utc_now - (5 * 3600 + 45 * 60)) < 120


def test_max_closed_clients(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "max_closed_clients: 2\n"), "-m", "-1")
    for name in ("a", "b", "c", "d"):
        with RawClient(srv.port) as c:
            c.connect(name=name)
    closed = poll(lambda: len(http_json(srv.http_port, "/connz?state=closed")["connections"]) == 2
                  and http_json(srv.http_port, "/connz?state=closed")["connections"], timeout=10)
    assert sorted(c["name"] for c in closed) == ["c", "d"]


def test_no_header_support(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "no_header_support: true\n"))
    with RawClient(srv.port) as c:
        assert c.info["headers"] is False
        c.send(b'CONNECT {"verbose":false,"headers":true}\r\nSUB h 1\r\nPUB h 2\r\nok\r\n')
        assert c.sync() == b"MSG h 1 2\r\nok\r\n"
        c.send(b"HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
        assert c.read_until_eof() == b""         # the connection is dropped, no -ERR


def test_max_traced_msg_len(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "trace: true\nmax_traced_msg_len: 5\n"))
    with RawClient(srv.port) as c:
        c.connect()
        c.send(b"PUB t 11\r\nhello world\r\nPUB u 3\r\na\tc\r\nPUB v 7\r\n\"q\"ab\xffz\r\n")
        c.sync()
    assert srv.wait_log(r'<<- MSG_PAYLOAD: \["hello\.\.\."\]')
    assert srv.wait_log(r'<<- MSG_PAYLOAD: \["a\\tc"\]')             # Go's %q escapes
    assert srv.wait_log(r'<<- MSG_PAYLOAD: \["\\"q\\"ab\.\.\."\]')


def test_trace_headers(any_server, tmp_path):
    """`trace_headers`: a traced message shows its header block only; one without headers
    shows no payload line."""
    srv = any_server("-c", _conf(tmp_path, "trace_headers: true\n"))
    with RawClient(srv.port) as c:
        c.connect()
        hdr = b"NATS/1.0\r\nA: b\r\nC: d\r\n\r\n"
        c.send(b"HPUB h %d %d\r\n%shello\r\nPUB p 5\r\nplain\r\nPING\r\n" % (len(hdr), len(hdr) + 5, hdr))
        c.read_until(b"PONG\r\n")
    srv.wait_log(r'<<- MSG_PAYLOAD: \["NATS/1\.0\\r\\nA: b\\r\\nC: d"\]')
    srv.wait_log(r"<<- \[PUB p 5\]")
    assert "plain" not in srv.log and "hello" not in srv.log


_SYS_CONF = "accounts { SYS { users [{user: sys, password: p}] } }\nsystem_account: SYS\n"


def _ping_the_servers(port):
    with RawClient(port) as c:
        c.connect(user="sys", **{"pass": "p"})
        c.send(b"SUB answers 1\r\nPUB $SYS.REQ.SERVER.PING answers 0\r\n\r\n")
        c.read_until(b"MSG answers 1 ")


def test_trace_verbose_traces_the_system_client(any_server, tmp_path):
    """`trace_verbose` (-VV): the system account's own client is traced too, its
    subscriptions and what it publishes (here the answer to a PING); -V alone does not."""
    srv = any_server("-c", _conf(tmp_path, _SYS_CONF + "trace_verbose: true\n"))
    srv.wait_log(r"\[TRC\] SYSTEM - <<- \[SUB \$SYS\.REQ\.SERVER\.PING  \d+\]$")
    _ping_the_servers(srv.port)
    srv.wait_log(r"\[TRC\] SYSTEM - <<- \[PUB answers  \d+\]$")
    srv.wait_log(r'\[TRC\] SYSTEM - <<- MSG_PAYLOAD: \["\{\\"server\\":\{\\"name\\":')
    srv.kill()
    plain = any_server("-c", _conf(tmp_path, _SYS_CONF), "-V")
    _ping_the_servers(plain.port)
    plain.wait_log(r"->> \[MSG answers 1 ")
    assert "SYSTEM - " not in plain.log


def test_disable_sublist_cache(natsd, tmp_path):
    """natsd's matches are cached (/subsz num_cache) unless `disable_sublist_cache`. (Not
    compared: nats-server's /subsz shows no cache entries for client publishes either way,
    its clients keeping their own per-connection results.)"""
    cached = {}
    for name, extra in (("default", ""), ("off", "disable_sublist_cache: true\n")):
        srv = natsd("-c", _conf(tmp_path, extra), "-m", "-1")
        with RawClient(srv.port).connect() as c:
            c.send(b"SUB s.* 1\r\n" + b"".join(b"PUB s.%d 1\r\nx\r\n" % i for i in range(5)))
            c.sync()
        cached[name] = http_json(srv.http_port, "/subsz")["num_cache"]
        srv.kill()
    assert cached["default"] > 0 and cached["off"] == 0, cached
