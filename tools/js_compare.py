#!/usr/bin/env python3
"""tools/js_compare.py: every JetStream mode, natsd against nats-server, in one run.

Runs `natsd-bench` (nats-py) against a fresh natsd, a fresh nats-server in its default mode and
a fresh nats-server with `jetstream { sync_interval: always }`, interleaved, best of --reps:

  pub-file, pub-mem   async publish (100 in flight, then wait), file and memory storage
  pub-sync            one publisher waiting for each PubAck (bound by the disk's sync latency)
  ordered             ordered push consumer over a filled stream
  push                durable push consumer, every message acked explicitly
  pull                durable pull consumer, fetch 100, explicit acks
  kv-put, kv-get      sequential KV put; KV get over the filled bucket
  counter             counter increments one at a time; counter100 with 100 in flight
  batch               atomic batch publish, batches of 100
  prio                prioritized pulls, two clients asking with different priorities
  go-ordered, go-push, the ordered and the push consumer, prioritized pulls and KV get again
  go-prio, go-kv-get  with nats.go (tools/goclient/jsbench, built by `sh tools/goclient/build.sh
                      jsbench`; --go-msgs messages, or keys in the bucket, and 20,000 gets),
                      where nats-py is the limit
  go-counter,         counter increments with nats.go, one and 100 waiting at once (--msgs
  go-counter100       increments)

natsd runs in its default durable mode (fdatasync before every PubAck). The disk's append +
fdatasync latency is measured first and printed beside the table: it is the floor of the
sequential modes for a durable server. With --lazy a natsd with `sync_interval: 2m` runs too:
nats-server's default contract (acknowledged before any sync) on both sides.

usage: python tools/js_compare.py [--reps 3] [--msgs 20000] [--only pub-file,kv-put,...]
       [--no-always] [--lazy] [--go-msgs 200000]
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
JSBENCH = "/tmp/natsd-goclient/jsbench"      # sh tools/goclient/build.sh jsbench
GO_RATE = re.compile(r"RESULT .* rate=(\d+)")

# name -> (natsd-bench argv, argv that fills the stream first or None)
FILL = ["js", "pub", "async", "bench.f", "--stream", "bf", "--create", "--purge"]
MODES = {
    "pub-file": (["js", "pub", "async", "bench.a", "--stream", "ba", "--create", "--purge", "--batch", "100"],
                 None),
    "pub-mem": (["js", "pub", "async", "bench.a", "--stream", "ba", "--create", "--purge", "--batch", "100",
                 "--storage", "memory"], None),
    "pub-sync": (["js", "pub", "sync", "bench.s", "--stream", "bs", "--create", "--purge"], None),
    "ordered": (["js", "ordered", "--stream", "bf"], FILL),
    "push": (["js", "push", "--stream", "bf", "--batch", "100"], FILL),
    "pull": (["js", "fetch", "--stream", "bf", "--batch", "100"], FILL),
    "kv-put": (["kv", "put", "--bucket", "bk", "--create", "--purge"], None),
    "kv-get": (["kv", "get", "--bucket", "bk"], ["kv", "put", "--bucket", "bk", "--create", "--purge"]),
    "counter": (["js", "pub", "counter", "bench.c", "--stream", "bc", "--create", "--purge"], None),
    "counter100": (["js", "pub", "counter", "bench.c", "--stream", "bc", "--create", "--purge",
                    "--batch", "100"], None),
    "batch": (["js", "pub", "batch", "bench.b", "--stream", "bb", "--create", "--purge", "--batch", "100"],
              None),
    "prio": (["js", "fetch", "--stream", "bp", "--prioritized", "--clients", "2", "--batch", "100"],
             ["js", "pub", "async", "bench.p", "--stream", "bp", "--create", "--purge"]),
    "go-ordered": ([JSBENCH, "--mode", "ordered"], None),
    "go-push": ([JSBENCH, "--mode", "push"], None),
    "go-prio": ([JSBENCH, "--mode", "prio"], None),
    "go-kv-get": ([JSBENCH, "--mode", "kvget"], None),
    "go-counter": ([JSBENCH, "--mode", "counter"], None),
    "go-counter100": ([JSBENCH, "--mode", "counter", "--inflight", "100"], None),
}
GO_COUNTED_BY_MSGS = ("go-counter", "go-counter100")     # --msgs increments, not --go-msgs


def start(kind, tmp, tag, sync=None, env=None):
    """kind: natsd or nats-server; sync: None (the server's default), "always" or a duration;
    env: variables added to the server's environment."""
    port = free_port()
    store = os.path.join(tmp, "%s-%s" % (kind, tag))
    exe = [sys.executable, "-m", "natsd"] if kind == "natsd" else [NATS_SERVER]
    cmd = exe + ["-js", "-sd", store, "-p", str(port)]
    if sync:
        conf = os.path.join(tmp, "%s-%s.conf" % (kind, tag))
        with open(conf, "w") as f:
            f.write('jetstream { store_dir: "%s", sync_interval: %s }\n' % (store, sync))
        cmd = exe + ["-c", conf, "-p", str(port)]
    if env:
        cmd = ["env"] + ["%s=%s" % kv for kv in sorted(env.items())] + cmd
    p = ServerProcess(kind, shlex.join(cmd), os.path.join(tmp, "%s-%s.log" % (kind, tag)))
    p.port = port
    p.wait_ready()
    return p


def go_bench(port, argv, msgs):
    """tools/goclient/jsbench (it fills its own stream first) -> messages per second."""
    cmd = argv + ["--msgs", str(msgs), "--server", "nats://127.0.0.1:%d" % port]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = GO_RATE.search(out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), (out.stdout + out.stderr)[-1500:]))
    return int(m.group(1))


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
    ap.add_argument("--only", default=",".join(m for m in MODES if not m.startswith("go-") or os.path.exists(JSBENCH)))
    ap.add_argument("--go-msgs", type=int, default=200000, help="messages of the go-* modes")
    ap.add_argument("--no-always", dest="always", action="store_false",
                    help="skip nats-server with sync_interval: always")
    ap.add_argument("--lazy", action="store_true",
                    help="also natsd with sync_interval: 2m (nats-server's default contract)")
    a = ap.parse_args()
    if any(m.startswith("go-") for m in a.only.split(",")) and not os.path.exists(JSBENCH):
        sys.exit("js_compare: %s is not built (sh tools/goclient/build.sh jsbench)" % JSBENCH)
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        lat = sync_latency(tmp)
        print("disk: append + fdatasync median %.1f µs (at most %s durable PubAcks/s for one "
              "waiting publisher)" % (lat * 1e6, "{:,}".format(int(1 / lat))))
        for rep in range(a.reps):
            for name in a.only.split(","):
                argv, fill = MODES[name]
                kinds = ([("natsd", None), ("nats-server", None)] + ([("natsd", "2m")] if a.lazy else [])
                         + ([("nats-server", "always")] if a.always else []))
                for kind, sync in kinds:
                    srv = start(kind, tmp, "%s-%d%s" % (name, rep, "-" + sync if sync else ""), sync)
                    try:
                        if argv[0] == JSBENCH:
                            rate = go_bench(srv.port, argv,
                                            a.msgs if name in GO_COUNTED_BY_MSGS else a.go_msgs)
                        else:
                            if fill:
                                bench(srv.port, fill, a.msgs)
                            rate = bench(srv.port, argv, a.msgs)
                    finally:
                        srv.stop()
                    key = (name, kind, sync)
                    best[key] = max(best.get(key, 0), rate)
    lazy_cols = (" natsd lazy |", " lazy / default |") if a.lazy else ("", "")
    print("| mode | natsd | nats-server | nats-server always |%s natsd / default | natsd / always |%s"
          % lazy_cols)
    print("| --- | ---: | ---: | ---: |%s ---: | ---: |%s" % ((" ---: |",) * 2 if a.lazy else ("", "")))
    for name in a.only.split(","):
        ours, theirs = best.get((name, "natsd", None)), best.get((name, "nats-server", None))
        always, lazy = best.get((name, "nats-server", "always")), best.get((name, "natsd", "2m"))
        print("| %s | %s | %s | %s |%s %.2fx | %s |%s" % (
            name, "{:,}".format(ours), "{:,}".format(theirs), "{:,}".format(always) if always else "-",
            " %s |" % "{:,}".format(lazy) if lazy else "", ours / theirs,
            "%.2fx" % (ours / always) if always else "-", " %.2fx |" % (lazy / theirs) if lazy else ""))


if __name__ == "__main__":
    main()
