#!/usr/bin/env python3
"""tools/cluster_bench.py: a three-server cluster on this machine, natsd-only against
nats-server-only, interleaved, best of --reps (gobench on nats.go).

- route_pubsub128: publisher on A, subscriber on B, 128 B: every message crosses a route.
- fanout128: publisher on A, four subscribers over three servers (A 1, B 2, C 1).
- route_request: requester on A, responder on B (latency-bound: one request at a time).

With --gateways the three servers are three one-server clusters joined by gateways (a
super-cluster): every message above crosses a gateway instead of a route. With --mixed a
third kind joins the comparison: B is nats-server, A and C natsd.

For each, the messages per second the subscribers received, and the route's CPU cost: the
CPU time the servers spent (user + system, from /proc) per message delivered, for the
publisher's server and the others apart.

usage: python tools/cluster_bench.py [--reps 3] [--msgs 1000000] [--only route_pubsub128,...]
                                    [--gateways] [--mixed]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402

GOBENCH = os.environ.get("GOBENCH", "/tmp/gobench/gobench")
VENV_BIN = os.path.dirname(sys.executable)
NATS_SERVER = os.path.join(VENV_BIN, "nats-server")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Cluster:
    """Three servers of one kind ("mixed": natsd, nats-server, natsd), meshed by routes or,
    with `gateways`, three one-server clusters joined by gateways, on free ports."""

    def __init__(self, kind, tmp, gateways=False):
        self.kind = kind
        self.gateways = gateways
        self.members = []
        ports = [(free_port(), free_port()) for _ in range(3)]
        seed = "nats://127.0.0.1:%d" % ports[0][1]
        kinds = ["natsd", "nats-server", "natsd"] if kind == "mixed" else [kind] * 3
        for name, (cport, rport), k in zip("ABC", ports, kinds):
            conf = os.path.join(tmp, "%s-%s.conf" % (kind, name))
            with open(conf, "w") as f:
                f.write('server_name: %s\nport: %d\nhost: 127.0.0.1\n' % (name, cport))
                if gateways:
                    others = ", ".join('{ name: %s, url: "nats://127.0.0.1:%d" }' % (n, p[1])
                                       for n, p in zip("ABC", ports) if n != name)
                    f.write('gateway { name: %s, port: %d, gateways: [%s] }\n' % (name, rport, others))
                else:
                    f.write('cluster { name: bench, port: %d, routes: ["%s"] }\n' % (rport, seed))
            cmd = ("%s -m natsd -c %s" % (sys.executable, conf) if k == "natsd"
                   else "%s -c %s" % (NATS_SERVER, conf))
            p = ServerProcess(k, cmd, os.path.join(tmp, "%s-%s.log" % (kind, name)))
            p.url = "nats://127.0.0.1:%d" % cport
            self.members.append(p)
        for p in self.members:
            p.wait_ready()
        self._wait_gateways() if gateways else self._wait_mesh()

    def _wait_gateways(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(len(re.findall(r"Outbound gateway connection to .* registered", p.log_text())) >= 2
                   for p in self.members):
                time.sleep(0.5)
                return
            time.sleep(0.1)
        raise RuntimeError("gateways never formed")

    def _wait_mesh(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(len(re.findall(r"Registering remote route", p.log_text())) >= 2 * 4 - 2
                   or p.log_text().count("Route connection created") >= 8 for p in self.members):
                time.sleep(1.0)         # let the pools settle
                return
            time.sleep(0.1)

    def stop(self):
        for p in self.members:
            p.stop()


def gobench(args, url, wait=True):
    cmd = [GOBENCH] + args + ["--server", url, "--quiet"]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return _result(subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout)


def _result(out):
    m = re.search(r"RESULT .*", out)
    if not m:
        raise RuntimeError("gobench: %s" % out)
    return dict(kv.split("=", 1) for kv in m.group(0).split()[1:])


def _rate(fields, key="sub_rate"):
    for k in (key, "rate", "pub_rate"):
        if k in fields:
            return float(fields[k])
    raise RuntimeError("no rate in %r" % fields)


def run_subs_then_pub(cluster, subject, subs, msgs, size):
    """Subscribers on the given members (index -> count), then the publisher on A."""
    before = [cpu_seconds(p.pid) for p in cluster.members]
    procs = [gobench(["sub", subject, "--sub", str(n), "--msgs", str(msgs), "--size", str(size)],
                     cluster.members[i].url, wait=False) for i, n in subs.items()]
    time.sleep(1.0)                     # interest crosses the routes
    t0 = time.monotonic()
    gobench(["pub", subject, "--pub", "1", "--msgs", str(msgs), "--size", str(size)],
            cluster.members[0].url)
    results = [_result(p.communicate(timeout=300)[0]) for p in procs]
    elapsed = time.monotonic() - t0
    after = [cpu_seconds(p.pid) for p in cluster.members]
    delivered = msgs * sum(subs.values())
    cpu = [a - b for a, b in zip(after, before)]
    rate = min(_rate(r) for r in results)
    return {"rate": rate, "delivered": delivered, "elapsed": elapsed,
            "cpu_us_per_msg_pub_server": cpu[0] * 1e6 / msgs,
            "cpu_us_per_msg_other_servers": sum(cpu[1:]) * 1e6 / msgs}


def route_request(cluster, msgs):
    before = [cpu_seconds(p.pid) for p in cluster.members]
    responder = gobench(["reply", "rr", "--sub", "1", "--msgs", str(msgs)], cluster.members[1].url,
                        wait=False)
    time.sleep(1.0)
    res = gobench(["request", "rr", "--pub", "1", "--sub", "0", "--msgs", str(msgs)],
                  cluster.members[0].url)
    responder.communicate(timeout=60)
    after = [cpu_seconds(p.pid) for p in cluster.members]
    cpu = sum(a - b for a, b in zip(after, before))
    return {"rate": _rate(res, "rate"), "cpu_us_per_msg_all_servers": cpu * 1e6 / msgs}


SCENARIOS = {
    "route_pubsub128": lambda c, a: run_subs_then_pub(c, "bench.route", {1: 1}, a.msgs, 128),
    "fanout128": lambda c, a: run_subs_then_pub(c, "bench.fan", {0: 1, 1: 2, 2: 1}, a.msgs // 4, 128),
    "route_request": lambda c, a: route_request(c, a.req_msgs),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=1000000)
    ap.add_argument("--req-msgs", type=int, default=20000)
    ap.add_argument("--only", default="")
    ap.add_argument("--gateways", action="store_true", help="three clusters joined by gateways")
    ap.add_argument("--mixed", action="store_true", help="also a natsd/nats-server/natsd setup")
    a = ap.parse_args()
    kinds = ("natsd", "nats-server", "mixed") if a.mixed else ("natsd", "nats-server")
    only = [x for x in a.only.split(",") if x] or list(SCENARIOS)
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for kind in kinds:                              # interleaved
                cluster = Cluster(kind, tmp, a.gateways)
                try:
                    for name in only:
                        r = SCENARIOS[name](cluster, a)
                        print("rep %d %-11s %-16s %s" % (rep, kind, name,
                              " ".join("%s=%.3g" % kv for kv in r.items())), flush=True)
                        if r["rate"] > best.get((kind, name), {"rate": 0})["rate"]:
                            best[(kind, name)] = r
                finally:
                    cluster.stop()
    print("\n%-16s %14s %14s %7s" % ("scenario", "natsd", "nats-server", "ratio"))
    for name in only:
        n, g = best[("natsd", name)], best[("nats-server", name)]
        print("%-16s %14.0f %14.0f %6.2fx" % (name, n["rate"], g["rate"], n["rate"] / g["rate"]))
    if a.mixed:
        for name in only:
            m = best[("mixed", name)]
            print("%-16s mixed %14.0f (%.2fx nats-server)" % (name, m["rate"],
                  m["rate"] / best[("nats-server", name)]["rate"]))
    print("\nCPU per message (microseconds, best run):")
    for name in only:
        for kind in kinds:
            r = best[(kind, name)]
            print("  %-16s %-11s %s" % (name, kind, " ".join(
                "%s=%.2f" % (k, v) for k, v in r.items() if k.startswith("cpu_"))))


if __name__ == "__main__":
    main()
