#!/usr/bin/env python3
"""tools/memory_check.py: natsd's memory footprint next to nats-server's.

Owns: the memory numbers quoted in the README and the issue's targets (natsd idle RSS <= 40 MB;
10,000 idle client connections <= 150 MB). For each server it starts a fresh process on a free
port (fd limit raised with setrlimit in preexec_fn), waits for "Server is ready" in its log,
measures idle RSS (psutil), then opens N raw-socket clients that each read INFO, send
CONNECT + PING and wait for PONG, lets them sit idle, measures RSS again, checks with one more
PING round that every connection is still alive, and stops the server by PID. The tool's own
fd limit is raised too. Server logs are scanned for [ERR]/[FTL]/tracebacks.

usage:
  python tools/memory_check.py [--conns 10000] [--settle 5] [--only natsd|nats-server] [--json OUT]
      [--natsd-cmd '{python} -m natsd -a 127.0.0.1 -p {port}']
      [--nats-server-cmd 'nats-server -a 127.0.0.1 -p {port}']
"""
import argparse
import json
import os
import resource
import selectors
import shutil
import socket
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402

IDLE_TARGET_MB = 40.0
CONNS_TARGET_MB = 150.0
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"lang":"python","version":"memcheck","protocol":1}\r\nPING\r\n'


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n if hard == resource.RLIM_INFINITY else min(n, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def mb(n):
    return n / (1024.0 * 1024.0)


class Server(ServerProcess):
    def __init__(self, kind, tmpl, nofile, logdir):
        self.port = free_port()
        super().__init__(kind, tmpl.format(port=self.port, python=sys.executable),
                         os.path.join(logdir, f"{kind}.log"), preexec_fn=lambda: raise_nofile(nofile))
        self.ps = psutil.Process(self.pid)

    def rss(self):
        return self.ps.memory_info().rss


class Clients:
    """N raw NATS client sockets: INFO in, CONNECT+PING out, PONG in; then idle."""

    def __init__(self, port):
        self.port = port
        self.socks = []
        self.sel = selectors.DefaultSelector()
        self.failed = 0

    def _handshake(self, socks, payload, until, timeout):
        """Send `payload` to every socket once `until`-gating bytes arrived; wait for PONG."""
        state = {}
        for s in socks:
            state[s] = bytearray()
            self.sel.register(s, selectors.EVENT_READ)
        pending = set(socks)
        sent = set()
        if until is None:
            for s in socks:
                s.sendall(payload)
                sent.add(s)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for key, _ in self.sel.select(0.5):
                s = key.fileobj
                try:
                    d = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if not d:
                    pending.discard(s)
                    self.sel.unregister(s)
                    self.failed += 1
                    continue
                buf = state[s]
                buf += d
                if s not in sent and until in buf:
                    s.sendall(payload)
                    sent.add(s)
                if s in sent and b"PONG\r\n" in buf:
                    pending.discard(s)
                    self.sel.unregister(s)
                    if b"PING\r\n" in buf:          # answer a server ping that raced in
                        s.sendall(b"PONG\r\n")
        for s in pending:
            self.sel.unregister(s)
        self.failed += len(pending)
        return len(socks) - len(pending)

    def open(self, n, batch=250, timeout=30.0):
        ok = 0
        for start in range(0, n, batch):
            socks = []
            for _ in range(min(batch, n - start)):
                s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
                s.setblocking(False)
                socks.append(s)
            self.socks.extend(socks)
            ok += self._handshake(socks, CONNECT, b"\r\n", timeout)
        return ok

    def ping_all(self, batch=1000, timeout=30.0):
        """One more PING/PONG round: how many connections are still alive."""
        ok = 0
        for start in range(0, len(self.socks), batch):
            ok += self._handshake(self.socks[start:start + batch], b"PING\r\n", None, timeout)
        return ok

    def close(self):
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.socks = []
        self.sel.close()


def measure(kind, tmpl, a, logdir):
    r = {"server": kind, "conns": a.conns}
    srv = Server(kind, tmpl, a.conns + 1000, logdir)
    r["cmd"] = srv.cmd
    cl = None
    try:
        srv.wait_ready()
        time.sleep(a.idle_wait)
        r["idle_rss_mb"] = round(mb(srv.rss()), 1)
        t0 = time.monotonic()
        cl = Clients(srv.port)
        r["connected"] = cl.open(a.conns)
        r["connect_secs"] = round(time.monotonic() - t0, 1)
        r["rss_after_connect_mb"] = round(mb(srv.rss()), 1)
        time.sleep(a.settle)
        r["conns_rss_mb"] = round(mb(srv.rss()), 1)
        r["alive_after_settle"] = cl.ping_all()
        r["rss_after_ping_mb"] = round(mb(srv.rss()), 1)
        r["per_conn_kb"] = round((r["conns_rss_mb"] - r["idle_rss_mb"]) * 1024 / max(r["connected"], 1), 2)
        r["server_fds"] = srv.ps.num_fds()
    finally:
        if cl is not None:
            cl.close()
        r["server_rc"] = srv.stop()
        r["log"] = srv.logpath
        r["log_problems"] = srv.bad_lines()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conns", type=int, default=10_000)
    ap.add_argument("--idle-wait", type=float, default=2.0, help="seconds after ready before the idle RSS sample")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds connections sit idle before the sample")
    ap.add_argument("--only", default="", help="natsd or nats-server")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--natsd-cmd", default="{python} -m natsd -a 127.0.0.1 -p {port}")
    ap.add_argument("--nats-server-cmd", default=(shutil.which("nats-server") or "nats-server") + " -a 127.0.0.1 -p {port}")
    a = ap.parse_args()
    have = raise_nofile(a.conns + 1000)
    if have < a.conns + 100:
        sys.exit(f"fd limit {have} is too low for {a.conns} connections (hard limit); raise it or use --conns")
    logdir = tempfile.mkdtemp(prefix="memory-check-")
    servers = [("natsd", a.natsd_cmd), ("nats-server", a.nats_server_cmd)]
    if a.only:
        servers = [s for s in servers if s[0] == a.only]
    rows = []
    for kind, tmpl in servers:
        r = measure(kind, tmpl, a, logdir)
        rows.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "log_problems"}), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1)

    print()
    print(f"{'server':12s} {'idle RSS':>10s} {'RSS w/ ' + str(a.conns) + ' conns':>20s} {'per conn':>10s} "
          f"{'after PING':>11s} {'connected':>10s} {'alive':>7s}")
    for r in rows:
        print(f"{r['server']:12s} {r.get('idle_rss_mb', 0):8.1f}MB {r.get('conns_rss_mb', 0):18.1f}MB "
              f"{r.get('per_conn_kb', 0):8.2f}KB {r.get('rss_after_ping_mb', 0):9.1f}MB {r.get('connected', 0):>10} {r.get('alive_after_settle', 0):>7}")
    rc = 0
    nd = next((r for r in rows if r["server"] == "natsd"), None)
    if nd:
        idle_ok = nd.get("idle_rss_mb", 1e9) <= IDLE_TARGET_MB
        conns_ok = nd.get("conns_rss_mb", 1e9) <= CONNS_TARGET_MB
        scale = "" if a.conns == 10_000 else f" (target is for 10,000 conns; measured {a.conns})"
        print(f"\nnatsd idle RSS {nd.get('idle_rss_mb')} MB vs target <= {IDLE_TARGET_MB:.0f} MB: "
              f"{'PASS' if idle_ok else 'FAIL'}")
        print(f"natsd RSS with conns {nd.get('conns_rss_mb')} MB vs target <= {CONNS_TARGET_MB:.0f} MB: "
              f"{'PASS' if conns_ok else 'FAIL'}{scale}")
        if nd.get("alive_after_settle") != a.conns:
            print(f"natsd: only {nd.get('alive_after_settle')} of {a.conns} connections answered the final PING")
            rc = 1
        if not (idle_ok and conns_ok):
            rc = 1
    for r in rows:
        for p in r["log_problems"]:
            print(f"--- {r['server']} log problem:\n{p}")
    print(f"(server logs: {logdir})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
