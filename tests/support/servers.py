"""Servers of both kinds as processes: the command lines of natsd (this project) and of the
reference nats-server, ServerProcess (a started server whose log is collected line by line),
start_server (a ready server on ports the kernel chose) and the monitoring port's HTTP
answers (http_get, http_json, http_status_json, get_json).

Servers are started with `-p -1` (a free port chosen by the kernel) and the port is read from
the "Listening for client connections on HOST:PORT" log line, exactly as launchers do. Whoever
starts one kills it by its PID (the fixtures in tests/support/fixtures.py do it at teardown).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

from tests.support.waiting import poll

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LISTEN_RE = re.compile(r"Listening for client connections on (\S+):(\d+)")
MONITOR_RE = re.compile(r"Starting http monitor on (\S+):(\d+)")
# the environment of a server started in another directory: natsd importable from the checkout
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def natsd_cmd():
    return [sys.executable, "-m", "natsd"]


def nats_server_cmd():
    local = os.path.join(os.path.dirname(sys.executable), "nats-server")
    path = local if os.path.exists(local) else shutil.which("nats-server")
    return [path] if path else None


class ServerProcess:
    """A server process whose log is collected line by line in a background thread."""

    def __init__(self, argv, cwd=None, env=None):
        self.argv = argv
        self.lines = []
        self.port = None
        self.http_port = None
        self.ready = threading.Event()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     cwd=cwd or ROOT, env=env, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            m = LISTEN_RE.search(line)
            if m:
                self.port = int(m.group(2))
            m = MONITOR_RE.search(line)
            if m:
                self.http_port = int(m.group(2))
            if "Server is ready" in line:
                self.ready.set()
        self.ready.set()

    def wait_ready(self, timeout=15):
        if not self.ready.wait(timeout) or self.port is None:
            self.kill()
            raise RuntimeError("server did not start: %s\n%s" % (self.argv, "\n".join(self.lines)))
        return self

    @property
    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    @property
    def log(self):
        """What the server wrote so far; all of it once it exited (the reader may still be
        taking its last lines off the pipe when the process is already gone)."""
        if self.proc.poll() is not None:
            self.reader.join(5)
        return "\n".join(self.lines)

    def wait_log(self, pattern, timeout=10):
        """Poll the log for a regex until the deadline; returns the match."""
        rx = re.compile(pattern)

        def first_match():
            return next((m for m in map(rx.search, list(self.lines)) if m), None)
        m = poll(first_match, timeout, 0.02)
        if m is None:
            raise AssertionError("log never matched %r:\n%s" % (pattern, self.log))
        return m

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def server_cmd(kind):
    """The command of a server of `kind` ("natsd" or "nats-server"); skips the test when
    nats-server is not installed."""
    cmd = natsd_cmd() if kind == "natsd" else nats_server_cmd()
    if cmd is None:
        import pytest
        pytest.skip("nats-server is not installed")
    return cmd


def recv_until_quiet(sock, quiet):
    """What `sock` receives until the peer closes it or stays quiet for `quiet` seconds."""
    sock.settimeout(quiet)
    got = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:                     # socket.timeout included
        pass
    return got


def start_server(cmd, *args, cwd=None, env=None, wait=True):
    argv = list(cmd) + list(args)
    if "-p" not in args and "--port" not in args:
        argv += ["-p", "-1"]
    if "-a" not in args and "--addr" not in args:
        argv += ["-a", "127.0.0.1"]
    p = ServerProcess(argv, cwd=cwd, env=env)
    return p.wait_ready() if wait else p


def http_get(port, path, timeout=5):
    """(status, content type, body text) of a GET on a monitoring port."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def http_json(port, path, timeout=5):
    """The decoded JSON of a GET on a monitoring port (an HTTP error status raises HTTPError)."""
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return json.loads(r.read())


def http_status_json(port, path, timeout=5):
    """(status, decoded JSON body) of a GET on a monitoring port, error statuses included
    (an empty body is None)."""
    status, _, body = http_get(port, path, timeout)
    return status, json.loads(body or "null")


def get_json(port, path):
    """http_json for the monitoring tests: the answer must be 200 and application/json."""
    status, ctype, body = http_get(port, path)
    assert status == 200, (path, status, body)
    assert ctype.startswith("application/json"), (path, ctype)
    return json.loads(body)
