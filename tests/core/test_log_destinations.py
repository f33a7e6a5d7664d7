"""Where the log goes, on natsd and nats-server alike: the log file rotated at
`log_size_limit` with `logfile_max_num` backups kept, and syslog (`remote_syslog` over udp,
tcp and a unix socket; `syslog`), including the start-up failures and a syslog that goes away."""
import os
import re
import socket
import stat
import threading

import pytest

from tests.support.rawclient import RawClient
from tests.support.waiting import poll

BACKUP = re.compile(r"^s\.log\.\d{4}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{9}$")
REMOTE_LINE = re.compile(rb"^<(\d+)>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d) (\S+) ([\w.-]+)\[(\d+)\]: (.*)\n$")
LOCAL_LINE = re.compile(rb"^<(\d+)>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ([\w.-]+)\[(\d+)\]: (.*)\n$")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf(tmp_path, text):
    p = tmp_path / "s.conf"
    p.write_text(text)
    return str(p)


def _ready(port):
    def up():
        try:
            with RawClient(port) as c:
                c.connect()
            return True
        except (OSError, AssertionError):
            return False
    assert poll(up, timeout=15)


def test_log_file_rotates_and_keeps_the_newest_backups(any_server, tmp_path):
    log = tmp_path / "s.log"
    port = _free_port()
    srv = any_server("-c", _conf(tmp_path, f'logfile: "{log}"\nlog_size_limit: 1500\n'
                                           f'logfile_max_num: 3\ntrace: true\n'),
                     "-p", str(port), wait=False)
    _ready(port)
    with RawClient(port).connect() as c:
        for _ in range(60):
            c.send(b"PUB foo 2\r\nhi\r\n")
            c.sync()
    srv.stop()
    names = sorted(os.listdir(tmp_path))
    backups = [n for n in names if BACKUP.match(n)]
    assert len(backups) == 2, names                      # logfile_max_num - 1
    current = log.read_bytes()
    first = current.split(b"\r\n", 1)[0].decode()
    assert re.search(r'\[INF\] Rotated log, backup saved as "%s\.[\d.]+"$' % re.escape(str(log)), first)
    assert b'[INF] Purged log file "s.log.' in current
    for b in backups:                                    # each backup was cut near the limit
        assert 1500 < (tmp_path / b).stat().st_size < 1500 + 400
    assert srv.log == ""                                 # nothing on stderr


def test_a_log_file_already_past_its_limit_is_rotated_at_start(any_server, tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"x" * 9000 + b"\n")
    port = _free_port()
    srv = any_server("-c", _conf(tmp_path, f'logfile: "{log}"\nlog_size_limit: 8000\n'),
                     "-p", str(port), wait=False)
    _ready(port)
    srv.stop()
    backups = [n for n in os.listdir(tmp_path) if BACKUP.match(n)]
    assert len(backups) == 1
    old = (tmp_path / backups[0]).read_bytes()
    assert old.startswith(b"x" * 9000) and old.rstrip().endswith(b"[INF] Rotating logfile...")


class _Collector:
    """A syslog server the test owns: udp, tcp or a unix stream socket; lines it received."""

    def __init__(self, kind, path=None):
        self.lines = []
        if kind == "udp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind(("127.0.0.1", 0))
            self.url = "udp://127.0.0.1:%d" % self.sock.getsockname()[1]
        elif kind == "tcp":
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(4)
            self.url = "tcp://127.0.0.1:%d" % self.sock.getsockname()[1]
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(path)
            self.sock.listen(4)
            self.url = "unix://" + path
        self.kind = kind
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            if self.kind == "udp":
                while True:
                    self.lines.append(self.sock.recv(65536))
            while True:
                c, _ = self.sock.accept()
                self.conns.append(c)
                threading.Thread(target=self._read, args=(c,), daemon=True).start()
        except OSError:
            pass

    def _read(self, c):
        buf = b""
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.lines.append(line + b"\n")
        except OSError:
            pass

    def wait_for(self, text):
        return poll(lambda: next((ln for ln in list(self.lines) if text in ln), None), timeout=15)

    def close(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


@pytest.mark.parametrize("kind", ["udp", "tcp", "unix"])
def test_remote_syslog_lines(any_server, tmp_path, kind):
    col = _Collector(kind, str(tmp_path / "syslog.sock"))
    try:
        port = _free_port()
        srv = any_server("-c", _conf(tmp_path, f'remote_syslog: "{col.url}"\ndebug: true\n'),
                         "-p", str(port), wait=False)
        _ready(port)
        ready = col.wait_for(b"Server is ready")
        assert ready is not None
        expected_tag = b"nats-server" if "nats-server" in srv.argv[0] else b"natsd"
        if kind == "unix":       # a unix socket is local: Go's short stamp, no host name
            m = LOCAL_LINE.match(ready)
            pri, tag, pid, msg = m.group(1), m.group(2), m.group(3), m.group(4)
        else:
            m = REMOTE_LINE.match(ready)
            pri, host, tag, pid, msg = m.group(1), m.group(3), m.group(4), m.group(5), m.group(6)
            assert host == socket.gethostname().encode()
        assert (pri, tag, int(pid), msg) == (b"5", expected_tag, srv.proc.pid, b"Server is ready")
        # severities: notice 5, debug 7 (facility kern: nats-server dials with LOG_DEBUG)
        with RawClient(port) as c:
            c.connect()
        assert col.wait_for(b"Client connection created").startswith(b"<7>")
        assert srv.log == ""
    finally:
        col.close()


def test_a_syslog_server_that_goes_away_does_not_stop_the_server(any_server, tmp_path):
    col = _Collector("tcp")
    port = _free_port()
    srv = any_server("-c", _conf(tmp_path, f'remote_syslog: "{col.url}"\ndebug: true\n'),
                     "-p", str(port), wait=False)
    _ready(port)
    assert col.wait_for(b"Server is ready")
    col.close()
    for _ in range(20):                    # logs debug lines into a dead connection
        with RawClient(port) as c:
            c.connect()
            c.send(b"SUB a 1\r\nPUB a 1\r\nx\r\n")
            assert c.sync() == b"MSG a 1 1\r\nx\r\n"
    assert srv.proc.poll() is None


@pytest.mark.parametrize("url, error", [
    ("tcp://127.0.0.1:{closed}", 'error connecting to syslog: "dial tcp 127.0.0.1:{closed}: connect: connection refused"'),
    ("foo://127.0.0.1:514", 'error invalid network type: "foo"'),
])
def test_remote_syslog_that_cannot_be_reached_is_fatal(any_server, tmp_path, url, error):
    closed = _free_port()
    srv = any_server("-r", url.format(closed=closed), wait=False)
    assert srv.proc.wait(15) == 1
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d " + re.escape(error.format(closed=closed)), srv.log)


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


@pytest.mark.skipif(any(_is_socket(p) for p in ("/dev/log", "/var/run/syslog", "/var/run/log")),
                    reason="a local syslog socket exists here")
def test_local_syslog_missing_is_fatal(any_server):
    srv = any_server("-s", wait=False)
    assert srv.proc.wait(15) == 1
    assert srv.log.endswith(' error connecting to syslog: "Unix syslog delivery error"')
