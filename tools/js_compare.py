#!/usr/bin/env python3
"""tools/js_features_bench.py: the 2.12+ JetStream modes, natsd against nats-server.

Runs `natsd-bench` (nats-py) against a fresh natsd and a fresh nats-server, interleaved, best
of --reps, for: counter increments (`js pub counter`: `counter` one at a time, each waiting for
its PubAck, so natsd is bound by the disk's sync latency; `counter100` with 100 increments in
flight, as an application with many writers), atomic batch publish (`js pub batch`, batches of 100) and prioritized pulls (`js fetch
--prioritized`, two clients asking with different priorities, explicit acks). natsd runs in
its default durable mode (fsync before every PubAck); nats-server in its default mode, and with
`sync_interval: always` for the modes bound by one publisher's round trips.

usage: python tools/js_features_bench.py [--reps 3] [--msgs 20000] [--only counter,counter100,batch,prio]
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402

BIN = os.path.dirname(sys.executable)
NATS_SERVER = os.path.join(BIN, "nats-server")
BENCH = os.path.join(BIN, "natsd-bench")
RATE = re.compile(r"stats: ([\d,]+) msgs/sec")

# name -> (natsd-bench argv before the common flags, argv that fills the stream first or None)
MODES = {
    "counter": (["js", "pub", "counter", "bench.c", "--stream", "bc", "--create", "--purge"], None, True),
    "counter100": (["js", "pub", "counter", "bench.c", "--stream", "bc", "--create", "--purge",
                    "--batch", "100"], None, True),
    "batch": (["js", "pub", "batch", "bench.b", "--stream", "bb", "--create", "--purge", "--batch", "100"],
              None, False),
    "prio": (["js", "fetch", "--stream", "bp", "--prioritized", "--clients", "2", "--batch", "100"],
             ["js", "pub", "async", "bench.p", "--stream", "bp", "--create", "--purge"], False),
}


def start(kind, tmp, tag, always=False):
    port = free_port()
    store = os.path.join(tmp, "%s-%s" % (kind, tag))
    if kind == "natsd":
        cmd = [sys.executable, "-m", "natsd", "-js", "-sd", store, "-p", str(port)]
    else:
        cmd = [NATS_SERVER, "-js", "-sd", store, "-p", str(port)]
        if always:
            conf = os.path.join(tmp, "always.conf")
            with open(conf, "w") as f:
                f.write('jetstream { store_dir: "%s", sync_interval: always }\n' % store)
            cmd = [NATS_SERVER, "-c", conf, "-p", str(port)]
    p = ServerProcess(kind, shlex.join(cmd), os.path.join(tmp, "%s-%s.log" % (kind, tag)))
    p.port = port
    p.wait_ready()
    return p


def bench(port, argv, msgs):
    cmd = [BENCH] + argv + ["--msgs", str(msgs), "--no-progress", "-s", "nats://127.0.0.1:%d" % port]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    rates = [int(m.replace(",", "")) for m in RATE.findall(text)]
    if out.returncode != 0 or not rates:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), text[-1500:]))
    return rates[-1]        # the aggregated figure comes last


def sync_latency(tmp, n=200):
    """The median time of a 100-byte append plus fdatasync in the store's directory: the floor
    of one publisher that waits for each durable PubAck."""
    import time
    path = os.path.join(tmp, "sync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 100)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=20000)
    ap.add_argument("--only", default=",".join(MODES))
    a = ap.parse_args()
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        lat = sync_latency(tmp)
        print("disk: append + fdatasync median %.1f µs (at most %s durable PubAcks/s for one "
              "waiting publisher)" % (lat * 1e6, "{:,}".format(int(1 / lat))))
        for rep in range(a.reps):
            for name in a.only.split(","):
                argv, fill, with_always = MODES[name]
                kinds = [("natsd", False), ("nats-server", False)] + ([("nats-server", True)] if with_always else [])
                for kind, always in kinds:
                    srv = start(kind, tmp, "%s-%d%s" % (name, rep, "-always" if always else ""), always)
                    try:
                        if fill:
                            bench(srv.port, fill, a.msgs)
                        rate = bench(srv.port, argv, a.msgs)
                    finally:
                        srv.stop()
                    key = (name, kind + (" (sync always)" if always else ""))
                    best[key] = max(best.get(key, 0), rate)
    print("%-10s %-28s %12s" % ("mode", "server", "msgs/s"))
    for (name, kind), rate in best.items():
        print("%-10s %-28s %12s" % (name, kind, "{:,}".format(rate)))
    for name in a.only.split(","):
        ours, theirs = best.get((name, "natsd")), best.get((name, "nats-server"))
        line = "%s: natsd/nats-server %.2fx" % (name, ours / theirs)
        always = best.get((name, "nats-server (sync always)"))
        if always:
            line += ", against nats-server with sync_interval: always %.2fx" % (ours / always)
        print(line)


if __name__ == "__main__":
    main()
