#!/usr/bin/env python3
"""tools/compare_gobench.py: natsd vs nats-server on the gobench scenarios, in one run.

Owns: the side-by-side throughput/latency comparison quoted in the README. For each rep and
each scenario (pub16, pub128, pubsub128, fanout4_128, reqrep128, and the JetStream scenarios
jspub128 / jspull128) it starts a fresh nats-server,
runs the scenario with `--server-pid` (so gobench reports the server's CPU), stops it by PID,
then does the same with a fresh natsd. Servers get a free port each time and are considered up
once "Server is ready" appears in their log. Prints a table of medians and the ratio
natsd/nats-server; `--json OUT` writes every raw run. Server logs are scanned for `[ERR]`,
`[FTL]` and Python tracebacks, which are reported verbatim.

JetStream scenarios (jspub128: async file-storage publish, 128 B, max-pending 256, purge;
jspull128: pull consumer Fetch(100) with explicit acks; gobench fills the stream first) start
both servers with `-js -sd <fresh temp dir>`, removed after the run. `--natsd-extra ARGS` is
appended to the natsd command line (e.g. `-c lazy.conf` with `jetstream { sync_interval: "1m" }`
for the lazy-sync figure: natsd acks after fsync (group commit) unless a sync interval other
than the 2m default is configured, see natsd/jetstream/engine/jetstream.py).

usage:
  python tools/compare_gobench.py [--reps 3] [--only pub128,reqrep128] [--json OUT]
      [--natsd-cmd '{python} -m natsd -a 127.0.0.1 -p {port}']
      [--nats-server-cmd 'nats-server -a 127.0.0.1 -p {port}']
      [--gobench /tmp/gobench/gobench] [--logdir DIR] [--natsd-extra '-c lazy.conf']
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402

GOBENCH = os.environ.get("GOBENCH", "/tmp/gobench/gobench")

# name -> (gobench argv, headline metric, label)
SCENARIOS = [
    ("pub16", ["pub", "bench.pub", "--msgs", "1000000", "--size", "16", "--max-time", "10s"], "pub_rate", "msgs/s"),
    ("pub128", ["pub", "bench.pub", "--msgs", "1000000", "--size", "128", "--max-time", "10s"], "pub_rate", "msgs/s"),
    ("pubsub128", ["pubsub", "bench.ps", "--pub", "1", "--sub", "1", "--msgs", "1000000", "--size", "128",
                   "--max-time", "10s"], "sub_rate", "msgs/s recv"),
    ("fanout4_128", ["pubsub", "bench.fo", "--pub", "1", "--sub", "4", "--msgs", "1000000", "--size", "128",
                     "--max-time", "10s"], "sub_rate", "msgs/s recv"),
    ("reqrep128", ["request", "bench.rr", "--pub", "1", "--sub", "1", "--msgs", "50000", "--size", "128",
                   "--max-time", "10s"], "pub_rate", "req/s"),
    ("jspub128", ["js", "pub", "bench.js", "--msgs", "200000", "--size", "128", "--purge",
                  "--max-pending", "256", "--storage", "file", "--max-time", "20s"], "pub_rate", "msgs/s"),
    ("jspull128", ["js", "pull", "bench.js", "--msgs", "200000", "--size", "128", "--batch", "100",
                   "--ack", "explicit", "--max-time", "20s"], "sub_rate", "msgs/s recv"),
]
JS_SCENARIOS = {"jspub128", "jspull128"}
EXTRA = {"reqrep128": ["lat_p50_us", "lat_p99_us"], "pubsub128": ["pub_rate"], "fanout4_128": ["pub_rate"],
         "jspub128": ["rss_end_mb"]}

BAD_LINE = re.compile(r"\[(ERR|FTL)\]|Traceback \(most recent call last\)|^\S*Error: |Exception", re.M)


def busy_pct(window=0.5):
    """Machine busy time over `window`, in percent of one core."""
    def rd():
        with open("/proc/stat") as f:
            v = [float(x) for x in f.readline().split()[1:]]
        return sum(v[:8]) - v[3] - v[4], sum(v[:8])
    b0, t0 = rd()
    time.sleep(window)
    b1, t1 = rd()
    return 100.0 * (os.cpu_count() or 1) * (b1 - b0) / max(t1 - t0, 1)


class Server(ServerProcess):
    def __init__(self, kind, tmpl, logdir, tag, js=False):
        self.port = free_port()
        self.sd = None
        if js:
            # a fresh store per run: no state carried between servers or reps
            self.sd = tempfile.mkdtemp(prefix=f"{tag}-{kind}-sd-", dir=logdir)
            tmpl = tmpl + " -js -sd {sd}"
        super().__init__(kind, tmpl.format(port=self.port, python=sys.executable, sd=self.sd),
                         os.path.join(logdir, f"{tag}-{kind}.log"))

    def rss_mb(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return None

    def stop(self):
        rc = super().stop(10)
        if self.sd:
            shutil.rmtree(self.sd, ignore_errors=True)
        return rc


def parse_result(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            d = {}
            for tok in shlex.split(line[7:]):
                k, _, v = tok.partition("=")
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
            return d
    return None


def run_one(a, kind, tmpl, name, argv, rep, logdir):
    tag = f"rep{rep}-{name}"
    srv = Server(kind, tmpl, logdir, tag, js=name in JS_SCENARIOS)
    res = {"server": kind, "scenario": name, "rep": rep, "server_cmd": srv.cmd}
    try:
        srv.wait_ready()
        res["rss_start_mb"] = srv.rss_mb()
        res["pre_busy"] = round(busy_pct(0.3), 1)
        cmd = [a.gobench] + argv + ["--server", f"nats://127.0.0.1:{srv.port}", "--server-pid", str(srv.pid)]
        t0 = time.time()
        try:
            pr = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            out, rc = pr.stdout + pr.stderr, pr.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), -9
        res["wall"] = round(time.time() - t0, 2)
        res["rc"] = rc
        res.update(parse_result(out) or {})
        res["rss_end_mb"] = srv.rss_mb()
        res["cmd"] = " ".join(cmd)
        if rc != 0:
            res["output_tail"] = out[-2000:]
    finally:
        res["server_rc"] = srv.stop()
        res["log"] = srv.logpath
        res["log_problems"] = srv.bad_lines()
    return res


def fmt(v, metric=""):
    if v is None:
        return "-"
    if "lat" in metric:
        return f"{v:,.0f}us"
    return f"{v:,.0f}"


def median_of(rows, metric):
    vals = [r[metric] for r in rows if isinstance(r.get(metric), float)]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--json", dest="json_out", default=None, help="write raw results (a JSON list) here")
    ap.add_argument("--natsd-cmd", default="{python} -m natsd -a 127.0.0.1 -p {port}")
    ap.add_argument("--nats-server-cmd", default=(shutil.which("nats-server") or "nats-server") + " -a 127.0.0.1 -p {port}")
    ap.add_argument("--natsd-extra", default="", help="appended to the natsd command (e.g. '-c lazy.conf')")
    ap.add_argument("--gobench", default=GOBENCH)
    ap.add_argument("--logdir", default=None, help="server logs (default: a new temp dir)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per gobench run")
    a = ap.parse_args()
    if not os.path.exists(a.gobench):
        sys.exit(f"gobench not found at {a.gobench}: sh /work/shared/tools/gobench/build.sh")
    only = [x for x in a.only.split(",") if x]
    scen = [s for s in SCENARIOS if not only or s[0] in only]
    if only and len(scen) != len(only):
        sys.exit(f"unknown scenario in {only}; known: {[s[0] for s in SCENARIOS]}")
    logdir = a.logdir or tempfile.mkdtemp(prefix="compare-gobench-")
    os.makedirs(logdir, exist_ok=True)
    natsd_cmd = a.natsd_cmd + (" " + a.natsd_extra if a.natsd_extra else "")
    servers = [("nats-server", a.nats_server_cmd), ("natsd", natsd_cmd)]
    print(f"logs: {logdir}", flush=True)

    rows = []
    for rep in range(1, a.reps + 1):
        for name, argv, metric, _ in scen:
            for kind, tmpl in servers:
                r = run_one(a, kind, tmpl, name, argv, rep, logdir)
                rows.append(r)
                print(f"rep {rep} {name:12s} {kind:11s} rc={r.get('rc')} {metric}={fmt(r.get(metric))} "
                      f"server_cpu={r.get('server_cpu', '-')} lost={r.get('lost', '-')} "
                      f"status={r.get('status', '-')} rss_end={r.get('rss_end_mb') or 0:.0f}MB "
                      f"pre_busy={r.get('pre_busy')}%" +
                      (f"  LOG PROBLEMS: {len(r['log_problems'])}" if r["log_problems"] else ""), flush=True)
                if r.get("rc") not in (0, None) and r.get("output_tail"):
                    print("   gobench output tail:\n   " + r["output_tail"].strip().replace("\n", "\n   "), flush=True)

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1)

    print()
    hdr = f"{'scenario':12s} {'metric':12s} {'natsd':>12s} {'nats-server':>12s} {'ratio':>7s} {'cpu natsd':>10s} {'cpu nats-srv':>12s}  notes"
    print(hdr)
    print("-" * len(hdr))
    for name, _, metric, label in scen:
        rs = {k: [r for r in rows if r["scenario"] == name and r["server"] == k] for k, _ in servers}
        for m in [metric] + EXTRA.get(name, []):
            nd, ns = median_of(rs["natsd"], m), median_of(rs["nats-server"], m)
            ratio = f"{nd / ns:.2f}" if nd is not None and ns else "-"
            notes = []
            if m == metric:
                for k in ("natsd", "nats-server"):
                    bad = [r["rep"] for r in rs[k] if r.get("rc") != 0]
                    lost = sum(r.get("lost", 0) or 0 for r in rs[k] if isinstance(r.get("lost"), float))
                    if bad:
                        notes.append(f"{k} FAILED reps {bad}")
                    if lost:
                        notes.append(f"{k} lost {lost:,.0f} msgs")
                cpu_nd, cpu_ns = median_of(rs["natsd"], "server_cpu"), median_of(rs["nats-server"], "server_cpu")
                cpu = f"{fmt(cpu_nd)}%".rjust(10) + " " + f"{fmt(cpu_ns)}%".rjust(12)
                label_m = f"{m}"
            else:
                cpu = " " * 23
                label_m = m
            print(f"{name:12s} {label_m:12s} {fmt(nd, m):>12s} {fmt(ns, m):>12s} {ratio:>7s} {cpu}  {'; '.join(notes)}")
    print("(medians over", a.reps, "reps; ratio = natsd / nats-server; cpu = server CPU, % of one core)")

    problems = [(r["server"], r["scenario"], r["rep"], p) for r in rows for p in r["log_problems"]]
    if problems:
        print("\nserver log problems (verbatim):")
        for kind, name, rep, p in problems:
            print(f"--- {kind} rep {rep} {name}:\n{p}")
    else:
        print("\nno [ERR]/[FTL]/traceback lines in any server log")
    failed = [r for r in rows if r.get("rc") != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
