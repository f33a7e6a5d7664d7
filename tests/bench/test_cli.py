"""natsd-bench (bench/cli.py) end to end: run as a subprocess against a server the test starts.

Owns: the output format (banner with sorted keys, per-client start lines, progress lines,
stats / per-client / aggregated lines, regexes on each), the core modes (pub, sub fan-out,
service serve + request), flags (--size units, --csv, --multisubject, --no-progress), error
handling (server down -> clear message + exit 1; server killed mid-run -> exit 1 and the
partial results marked), and the JetStream/KV modes (small counts; against nats-server and, for
the publish path, natsd).
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TIME = r"\d\d:\d\d:\d\d"
NUM = r"[\d,]+"
SIZE = r"[\d.]+ (?:B|KiB|MiB|GiB)"
STATS_RE = re.compile(r"^NATS (?P<kind>.+) stats: (?P<rate>%s) msgs/sec ~ %s/sec ~ [\d.]+us$" % (NUM, SIZE))
CLIENT_RE = re.compile(r"^  \[(\d+)\] %s msgs/sec ~ %s/sec ~ [\d.]+us \((%s) msgs\)$" % (NUM, SIZE, NUM))
AGG_RE = re.compile(r"^ NATS (.+) aggregated stats: %s msgs/sec ~ %s/sec$" % (NUM, SIZE))
RATES_RE = re.compile(r"^ message rates min %s \| avg %s \| max %s \| stddev %s msgs$" % ((NUM,) * 4))
LATS_RE = re.compile(r"^ avg latencies min [\d.]+us \| avg [\d.]+us \| max [\d.]+us \| stddev [\d.]+us$")
PROGRESS_RE = re.compile(r"^Finished +\d+s \[=+\] 100%$")


def bench(*args, timeout=60, **kw):
    return subprocess.run([sys.executable, "-m", "bench.cli"] + list(args), cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **kw)


class Bench:
    """natsd-bench in the background; its stdout is collected line by line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.cli"] + list(args), cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()

    def wait_for(self, pattern, count=1, timeout=20):
        """Wait until `count` stdout lines match (start lines are printed once the client is ready)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for l in list(self.lines) if rx.search(l)) >= count:
                return
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError("no %r in %s" % (pattern, "".join(self.lines)))

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def communicate(self, timeout):
        self.proc.wait(timeout)
        self.reader.join(5)
        return "".join(self.lines), self.proc.stderr.read()

    @property
    def returncode(self):
        return self.proc.returncode


def start_bench(*args):
    return Bench(*args)


def banner(out):
    m = re.search(r"^%s Starting (.+) benchmark \[(.*)\]$" % TIME, out, re.M)
    assert m, out
    pairs = [kv.split("=", 1) for kv in m.group(2).split(", ")]
    return m.group(1), dict(pairs), [k for k, _ in pairs]


def test_pub_output_format(natsd):
    s = natsd()
    r = bench("pub", "foo", "--msgs", "20000", "--size", "16", "-s", s.url)
    assert r.returncode == 0, r.stderr
    kind, params, keys = banner(r.stdout)
    assert kind == "Core NATS publisher"
    assert keys == sorted(keys)
    assert params == {"clients": "1", "msg-size": "16 B", "msgs": "20,000", "multi-subject": "false",
                      "multi-subject-max": "100,000", "sleep": "0s", "subject": "foo"}
    lines = r.stdout.splitlines()
    assert re.match(r"^%s \[1\] Starting Core NATS publisher, publishing 20,000 messages$" % TIME, lines[1])
    assert PROGRESS_RE.match(lines[2]), lines[2]
    assert lines[3] == ""
    m = STATS_RE.match(lines[4])
    assert m and m.group("kind") == "Core NATS publisher", lines[4]
    assert int(m.group("rate").replace(",", "")) > 0


def test_sub_fanout_and_pub_clients_aggregated(natsd):
    s = natsd()
    sub = start_bench("sub", "fan", "--clients", "2", "--msgs", "6000", "--size", "1kb", "-s", s.url)
    sub.wait_for(r"Starting Core NATS subscriber, expecting", 2)    # printed once subscribed
    pub = bench("pub", "fan", "--clients", "3", "--msgs", "6000", "--size", "1KB", "--no-progress", "-s", s.url)
    out, err = sub.communicate(timeout=30)
    assert pub.returncode == 0, pub.stderr
    assert sub.returncode == 0, err
    kind, params, _ = banner(out)
    assert kind == "Core NATS subscriber"
    assert params["msg-size"] == "1.0 KiB" and params["clients"] == "2" and "sleep" not in params
    assert len(re.findall(r"^%s \[\d\] Starting Core NATS subscriber, expecting 6,000 messages$" % TIME, out, re.M)) == 2
    assert len([l for l in out.splitlines() if PROGRESS_RE.match(l)]) == 2
    clients = [CLIENT_RE.match(l) for l in out.splitlines() if CLIENT_RE.match(l)]
    assert [(c.group(1), c.group(2)) for c in clients] == [("1", "6,000"), ("2", "6,000")]
    assert any(AGG_RE.match(l) and AGG_RE.match(l).group(1) == "Core NATS subscriber" for l in out.splitlines())
    assert any(RATES_RE.match(l) for l in out.splitlines())
    assert any(LATS_RE.match(l) for l in out.splitlines())
    # the publisher: 6,000 split 2,000 x 3, no progress lines
    assert re.findall(r"publishing ([\d,]+) messages", pub.stdout) == ["2,000"] * 3
    assert not any(PROGRESS_RE.match(l) for l in pub.stdout.splitlines())
    assert len([l for l in pub.stdout.splitlines() if CLIENT_RE.match(l)]) == 3


def test_service_serve_and_request(natsd, tmp_path):
    s = natsd()
    srv = start_bench("service", "serve", "svc", "--clients", "2", "-s", s.url)
    srv.wait_for(r"Starting Core NATS service server, serving", 2)
    csv = tmp_path / "req.csv"
    r = bench("service", "request", "svc", "--msgs", "300", "--clients", "2", "--size", "16", "--csv", str(csv),
              "-s", s.url)
    srv.send_signal(signal.SIGINT)
    out, _ = srv.communicate(timeout=15)
    assert r.returncode == 0, r.stderr
    kind, params, _ = banner(r.stdout)
    assert kind == "Core NATS service requester"
    assert params == {"clients": "2", "msg-size": "16 B", "msgs": "300", "sleep": "0s", "subject": "svc"}
    assert re.findall(r"requesting ([\d,]+) messages", r.stdout) == ["150", "150"]
    assert "Saved metric data in csv file %s" % csv in r.stdout
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("#RunID") and len(rows) == 3
    assert srv.returncode == 0
    assert "Core NATS service server" in out
    served = [int(m.replace(",", "")) for m in re.findall(r"\(([\d,]+) msgs\)", out)]
    assert sum(served) == 300


def test_multisubject(natsd):
    s = natsd()
    sub = start_bench("sub", "ms", "--multisubject", "--msgs", "500", "--no-progress", "-s", s.url)
    sub.wait_for(r"Starting Core NATS subscriber")
    pub = bench("pub", "ms", "--multisubject", "--multisubjectmax", "7", "--msgs", "500", "-s", s.url)
    out, err = sub.communicate(timeout=30)
    assert pub.returncode == 0 and sub.returncode == 0, (pub.stderr, err)
    assert banner(out)[1]["subject"] == "ms.*"
    assert banner(pub.stdout)[1]["multi-subject-max"] == "7"


def test_server_down_clear_message():
    import socket
    so = socket.socket()
    so.bind(("127.0.0.1", 0))
    port = so.getsockname()[1]
    so.close()
    r = bench("pub", "foo", "--msgs", "10", "-s", "nats://127.0.0.1:%d" % port, timeout=30)
    assert r.returncode == 1
    assert "natsd-bench: error: cannot connect to nats://127.0.0.1:%d" % port in r.stderr
    assert "Traceback" not in r.stderr
    r = bench("js", "pub", "async", "foo", "--msgs", "10", "-s", "nats://127.0.0.1:%d" % port, timeout=30)
    assert r.returncode == 1 and "cannot connect" in r.stderr and "Traceback" not in r.stderr


def test_server_goes_away_mid_run(natsd):
    s = natsd()
    p = start_bench("pub", "away", "--msgs", "2000", "--sleep", "5ms", "--size", "64", "-s", s.url)
    p.wait_for(r"Starting Core NATS publisher, publishing")
    time.sleep(1.5)
    s.kill()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1, (out, err)
    m = re.search(r"^\(partial: ([\d,]+) of 2,000 msgs\)$", out, re.M)
    assert m, out
    assert 0 < int(m.group(1).replace(",", "")) < 2000
    assert "natsd-bench: error:" in err and "results are partial" in err
    assert "Traceback" not in err


def test_usage_errors():
    r = bench("pub")
    assert r.returncode == 2
    r = bench("pub", "x", "--size", "12zz")
    assert r.returncode == 2 and "message size" in r.stderr


def test_units():
    from bench.cli import msgs_per_client, parse_duration, parse_size
    from bench.report import go_duration, ibytes
    assert parse_size("16kb") == 16384 and parse_size("1MB") == 1 << 20 and parse_size("128") == 128
    assert parse_size("16KiB") == 16384
    assert parse_duration("10ms") == pytest.approx(0.01) and parse_duration("1m30s") == 90
    assert go_duration(120) == "2m0s" and go_duration(0) == "0s" and go_duration(0.01) == "10ms"
    assert ibytes(16) == "16 B" and ibytes(16384) == "16 KiB" and ibytes(2.4 * 2 ** 20) == "2.4 MiB"
    assert ibytes(5) == "5 B" and ibytes(3.5 * 2 ** 30) == "3.5 GiB"
    assert msgs_per_client(10, 3) == [4, 3, 3]


def _js_sequence(url):
    r = bench("js", "pub", "async", "jsfoo", "--msgs", "2000", "--create", "--storage", "memory", "--purge",
              "-s", url)
    assert r.returncode == 0, r.stdout + r.stderr
    kind, params, keys = banner(r.stdout)
    assert kind == "JetStream asynchronous publisher" and keys == sorted(keys)
    assert params["batch"] == "500" and params["dedup-window"] == "2m0s" and params["storage"] == "memory"
    assert params["max-bytes"] == "1,073,741,824" and params["stream"] == "benchstream"
    assert "Purging the stream" in r.stdout
    assert STATS_RE.search(r.stdout.splitlines()[-1]) or any(STATS_RE.match(l) for l in r.stdout.splitlines())
    r = bench("js", "pub", "sync", "jsfoo", "--msgs", "200", "-s", url)
    assert r.returncode == 0, r.stderr
    assert "Using stream: benchstream" in r.stdout and banner(r.stdout)[1]["batch"] == "0"
    r = bench("js", "ordered", "--msgs", "2200", "-s", url)
    assert r.returncode == 0, r.stderr
    assert banner(r.stdout)[0] == "JetStream ordered ephemeral consumer"
    r = bench("js", "fetch", "--msgs", "1000", "--clients", "2", "--acks", "explicit", "-s", url)
    assert r.returncode == 0, r.stderr
    assert banner(r.stdout)[1]["consumer"] == "nats-bench"
    r = bench("js", "push", "--msgs", "1000", "--batch", "100", "--consumer", "pushed", "-s", url)
    assert r.returncode == 0, r.stderr
    assert banner(r.stdout)[0] == "JetStream durable push consumer"
    r = bench("js", "push", "--msgs", "10", "--clients", "2", "--consumer", "pushed2", "-s", url)
    assert r.returncode == 1 and "js push delivers to one subscriber: use --clients 1" in r.stderr
    r = bench("js", "get", "sync", "--msgs", "100", "-s", url)
    assert r.returncode == 0, r.stderr
    r = bench("js", "get", "batch", "--msgs", "1000", "--batch", "100", "-s", url)
    assert r.returncode == 0, r.stderr
    assert banner(r.stdout)[1]["filter"] == ">"
    r = bench("kv", "put", "--msgs", "200", "-s", url)
    assert r.returncode == 0, r.stderr
    assert banner(r.stdout)[0] == "JetStream KV putter"
    r = bench("kv", "get", "--msgs", "200", "--clients", "2", "--randomize", "200", "--no-progress", "-s", url)
    assert r.returncode == 0, r.stderr
    assert re.findall(r"trying to get ([\d,]+) messages", r.stdout) == ["100", "100"]


def test_jetstream_modes_reference(reference, tmp_path):
    s = reference("-js", "-sd", str(tmp_path))
    _js_sequence(s.url)


def test_jetstream_modes_natsd(natsd, tmp_path):
    s = natsd("-js", "-sd", str(tmp_path))
    _js_sequence(s.url)


def test_js_stream_missing(reference, tmp_path):
    s = reference("-js", "-sd", str(tmp_path))
    r = bench("js", "pub", "async", "nostream", "--msgs", "10", "--stream", "nope", "-s", s.url)
    assert r.returncode == 1
    assert "stream 'nope' does not exist, create it with --create" in r.stderr
