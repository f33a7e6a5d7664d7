#!/usr/bin/env python3
"""tools/multicore_proto.py: the multicore prototype of docs/multicore.md, measured.

natsd runs one event loop, so one core. The prototype puts N natsd processes behind one
client port: each opens it with SO_REUSEPORT (NATSD_REUSE_PORT=1), so the kernel spreads new
client connections over them, and the N processes are joined by routes on the loopback, a
full mesh, so a message published to one reaches subscribers on the others (one route hop).

Setups, interleaved per rep, the same gobench load for each:
  natsd x1        one natsd, as today
  natsd xN        N natsd processes sharing the port (--procs, default 2)
  nats-server     one nats-server (it uses every core by itself)

Scenarios (128 B messages):
  pub8      8 publishers, nobody subscribed: the parse-and-route cost only; shards perfectly.
  pairs4    4 subjects, each with 1 publisher and 1 subscriber (separate gobench processes):
            a pair split over two processes pays a route hop.
  fanout4   1 publisher, 4 subscribers on one subject: the publisher's process forwards each
            message once per other process holding subscribers; delivery is shared.
  connect8  8 client threads connect, subscribe, PING, close on the PONG, over and over
            (connections/s; --msgs/200 each): more of the work is the server's.

Subscribers start first; publishing starts once every server lists them, in /subsz or in
/routez (a route's interest must have arrived, or the first messages would find nobody).

Reports per setup the best aggregate rate of --reps runs, the servers' CPU in that run (all
processes, % of one core) and that CPU per message (or connection), then xN/x1 and
xN/nats-server. On a machine with fewer cores than server processes plus load generator
the rate cannot scale; the CPU per message still shows what the sharding costs.

usage: python tools/multicore_proto.py [--reps 3] [--procs 2] [--only pub8,pairs4,fanout4]
       [--gobench /tmp/gobench/gobench]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.compare_gobench import GOBENCH, parse_result  # noqa: E402
from tools.serverproc import ServerProcess, free_port  # noqa: E402

NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
SIZE = "128"


class Setup:
    """One natsd, N natsd processes sharing the client port, or one nats-server."""

    def __init__(self, kind, procs, workdir):
        self.kind, self.port, self.servers, self.monitors = kind, free_port(), [], []
        env = dict(os.environ, NATSD_REUSE_PORT="1")
        clusters = [free_port() for _ in range(procs)] if procs > 1 else []
        for i in range(procs):
            mport = free_port()
            if kind == "nats-server":
                cmd = "%s -a 127.0.0.1 -p %d -m %d" % (NATS_SERVER, self.port, mport)
            else:
                cmd = "%s -m natsd -a 127.0.0.1 -p %d -m %d -n s%d" % (sys.executable, self.port, mport, i)
            if clusters:
                others = ",".join("nats://127.0.0.1:%d" % c for j, c in enumerate(clusters) if j != i)
                cmd += " --cluster nats://127.0.0.1:%d --cluster_name proto --routes %s" % (clusters[i], others)
            log = os.path.join(workdir, "%s-%d.log" % (kind, i))
            self.servers.append(ServerProcess(kind, cmd, log, env=env))
            self.monitors.append(mport)
        for s in self.servers:
            s.wait_ready()
        self._wait(lambda z: z.get("num_routes", 0) >= procs - 1, "routez")

    def _wait(self, ok, endpoint, timeout=20.0):
        deadline = time.monotonic() + timeout
        for m in self.monitors:
            while not ok(self.get(m, endpoint)):
                if time.monotonic() > deadline:
                    raise RuntimeError("%s: %s not as wanted on :%d" % (self.kind, endpoint, m))
                time.sleep(0.05)

    @staticmethod
    def get(mport, endpoint):
        with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (mport, endpoint), timeout=5) as r:
            return json.loads(r.read())

    def wait_subscriptions(self, subjects):
        """Every server knows every subscription: its own clients' (subsz) or a route's."""
        for m in self.monitors:
            deadline = time.monotonic() + 20
            while not subjects <= self.known_subjects(m):
                if time.monotonic() > deadline:
                    raise RuntimeError("%s: :%d does not see %s" % (self.kind, m, sorted(subjects)))
                time.sleep(0.05)

    def known_subjects(self, mport):
        local = self.get(mport, "subsz?subs=1&limit=100000").get("subscriptions_list", [])
        routes = self.get(mport, "routez?subs=1").get("routes") or []
        return {s["subject"] for s in local} | {s for r in routes for s in r.get("subscriptions_list", [])}

    def cpu_seconds(self):
        total = 0.0
        for s in self.servers:
            with open("/proc/%d/stat" % s.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self):
        for s in self.servers:
            s.stop()


def gobench(a, setup, *argv):
    return subprocess.Popen([a.gobench] + list(argv) + ["--server", "nats://127.0.0.1:%d" % setup.port,
                                                        "--size", SIZE, "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def results(procs):
    out = []
    for p in procs:
        text = p.communicate(timeout=180)[0]
        r = parse_result(text)
        if p.returncode != 0 or r is None:
            raise RuntimeError("gobench failed rc=%s:\n%s" % (p.returncode, text[-1500:]))
        out.append(r)
    return out


def pub8(a, setup):
    r, = results([gobench(a, setup, "pub", "bench.pub", "--pub", "8", "--msgs", str(a.msgs * 2),
                          "--max-time", "10s")])
    return r["pub_rate"]


def _subs_then_pubs(a, setup, subjects, subs_each):
    subs = [gobench(a, setup, "sub", s, "--sub", str(subs_each), "--msgs", str(a.msgs), "--timeout", "20s")
            for s in subjects]
    setup.wait_subscriptions(set(subjects))
    pubs = [gobench(a, setup, "pub", s, "--pub", "1", "--msgs", str(a.msgs), "--max-time", "10s")
            for s in subjects]
    results(pubs)
    return sum(r["sub_rate"] for r in results(subs))


def pairs4(a, setup):
    return _subs_then_pubs(a, setup, ["bench.pair.%d" % i for i in range(4)], 1)


def fanout4(a, setup):
    return _subs_then_pubs(a, setup, ["bench.fo"], 4)


def connect8(a, setup):
    """8 threads connect, subscribe, PING, and on the PONG close, over and over: connections a
    second. The server's share of the work is larger here than in the message rows."""
    n = a.msgs // 200
    done = []

    def worker():
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", setup.port))
            s.sendall(b'CONNECT {"verbose":false}\r\nSUB churn 1\r\nPING\r\n')
            buf = b""
            while b"PONG" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    raise RuntimeError("closed before PONG: %r" % buf)
                buf += chunk
            s.close()
        done.append(n)
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - t0)


SCENARIOS = {"pub8": pub8, "pairs4": pairs4, "fanout4": fanout4, "connect8": connect8}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--msgs", type=int, default=1_000_000, help="per publisher subject")
    ap.add_argument("--only", default="")
    ap.add_argument("--gobench", default=GOBENCH)
    a = ap.parse_args()
    if not os.path.exists(a.gobench):
        sys.exit("gobench not found at %s: sh ../shared/tools/gobench/build.sh" % a.gobench)
    names = [n for n in SCENARIOS if not a.only or n in a.only.split(",")]
    setups = [("natsd x1", "natsd", 1), ("natsd x%d" % a.procs, "natsd", a.procs), ("nats-server", "nats-server", 1)]
    best = {}
    for rep in range(a.reps):
        for name in names:
            order = setups if rep % 2 == 0 else setups[::-1]
            for label, kind, procs in order:
                with tempfile.TemporaryDirectory() as d:
                    setup = Setup(kind, procs, d)
                    try:
                        c0, t0 = setup.cpu_seconds(), time.monotonic()
                        rate = SCENARIOS[name](a, setup)
                        cpu = 100.0 * (setup.cpu_seconds() - c0) / (time.monotonic() - t0)
                    finally:
                        setup.stop()
                print("rep %d %-8s %-12s %12.0f msgs/s  server cpu %4.0f%%" % (rep + 1, name, label, rate, cpu),
                      flush=True)
                if rate > best.get((name, label), (0, 0))[0]:
                    best[(name, label)] = (rate, cpu)
    n = setups[1][0]
    print("\nbest rate (server CPU in % of one core; server CPU time per message or connection)")
    print("%-8s %26s %26s %26s %7s %7s" % ("scenario", "natsd x1", n, "nats-server", "xN/x1", "xN/nats"))
    for name in names:
        cells = [best[(name, label)] for label, _, _ in setups]
        print("%-8s" % name + "".join(" %11.0f %4.0f%% %6.2fus" % (r, c, c / 100 / r * 1e6) for r, c in cells)
              + " %6.2fx %6.2fx" % (cells[1][0] / cells[0][0], cells[1][0] / cells[2][0]))

if __name__ == "__main__":
    main()
