#!/usr/bin/env python3
"""tools/sync_floor.py: how close a durable natsd comes to the disk for one waiting publisher.

A publisher that waits for each PubAck (gobench `js pub --sync`, nats.go) cannot go faster,
on a server that syncs before answering, than its round trip plus one fdatasync. This tool
measures both parts on this machine, in the same sitting, interleaved, median latencies:

  natsd durable     natsd's default: the PubAck after the fdatasync (group commit)
  natsd lazy        natsd with `sync_interval: 2m`: the same path without the sync, that is
                    the round trip
  fdatasync         the syncs natsd durable made during its run, timed inside the server by
                    an LD_PRELOAD wrapper around fdatasync (compiled here with gcc)
  nats-server, nats-server always   its default mode and `sync_interval: always`

and prints what the sync costs natsd (durable - lazy) against what the disk took (the timed
fdatasync), and nats-server's cost the same way (always - default).

usage: python tools/sync_floor.py [--reps 3] [--msgs 10000]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.js_compare import start  # noqa: E402

GOBENCH = "/tmp/gobench/gobench"        # sh ../shared/tools/gobench/build.sh
P50 = re.compile(r"lat_p50_us=([\d.]+)")

TIMER_C = r"""
/* Times every fdatasync of the process; at exit writes the median in ns to $SYNC_STATS. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CAP 1000000
static long long took[CAP];
static int n;
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    long long t0 = now();
    int r = real(fd);
    if (n < CAP) took[n++] = now() - t0;
    return r;
}
static int cmp(const void* a, const void* b) {
    long long x = *(const long long*)a, y = *(const long long*)b;
    return x < y ? -1 : x > y;
}
__attribute__((destructor)) static void report(void) {
    const char* path = getenv("SYNC_STATS");
    if (!path || !n) return;
    qsort(took, n, sizeof took[0], cmp);
    FILE* f = fopen(path, "w");
    if (f) { fprintf(f, "%d %lld\n", n, took[n / 2]); fclose(f); }
}
"""


def build_timer(tmp):
    src, lib = os.path.join(tmp, "synctimer.c"), os.path.join(tmp, "synctimer.so")
    with open(src, "w") as f:
        f.write(TIMER_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl"], check=True)
    return lib


# name -> (js_compare.start's kind, its sync_interval)
KINDS = {"natsd durable": ("natsd", None), "natsd lazy": ("natsd", "2m"),
         "nats-server": ("nats-server", None), "nats-server always": ("nats-server", "always")}


def run(kind, tmp, tag, msgs, timer):
    """One server, one gobench run -> (publish p50 µs, fdatasync p50 µs or None); natsd
    durable runs with the fdatasync timer."""
    stats = os.path.join(tmp, tag + ".sync")
    env = {"SYNC_STATS": stats, "LD_PRELOAD": timer} if kind == "natsd durable" else None
    server, sync = KINDS[kind]
    srv = start(server, tmp, tag, sync, env)
    try:
        out = subprocess.run([GOBENCH, "js", "pub", "bench.s", "--stream", "bs", "--sync", "--size", "128",
                              "--msgs", str(msgs), "--server", "nats://127.0.0.1:%d" % srv.port],
                             capture_output=True, text=True, timeout=600)
    finally:
        srv.stop()
    m = P50.search(out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError("gobench failed against %s:\n%s" % (kind, (out.stdout + out.stderr)[-1500:]))
    synced = None
    if os.path.exists(stats):
        with open(stats) as f:
            count, median_ns = (int(x) for x in f.read().split())
        if count >= msgs // 2:
            synced = median_ns / 1000
    return float(m.group(1)), synced


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=10000)
    a = ap.parse_args()
    if not os.path.exists(GOBENCH):
        sys.exit("sync_floor: %s is not built (sh ../shared/tools/gobench/build.sh)" % GOBENCH)
    kinds = tuple(KINDS)
    best, syncs = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        timer = build_timer(tmp)
        for rep in range(a.reps):
            for i, kind in enumerate(kinds):
                p50, synced = run(kind, tmp, "r%d-%d" % (rep, i), a.msgs, timer)
                best[kind] = min(best.get(kind, p50), p50)
                if synced is not None:
                    syncs.append(synced)
    if not syncs:
        sys.exit("sync_floor: the fdatasync timer reported nothing (was LD_PRELOAD honoured?)")
    disk = sorted(syncs)[len(syncs) // 2]
    print("| one waiting publisher, p50 (best of %d) | µs |" % a.reps)
    print("| --- | ---: |")
    for kind in kinds:
        print("| %s | %.1f |" % (kind, best[kind]))
    print("| fdatasync inside natsd durable (median of the runs' medians) | %.1f |" % disk)
    ours, theirs = best["natsd durable"] - best["natsd lazy"], best["nats-server always"] - best["nats-server"]
    print()
    print("natsd: the sync adds %.1f µs = %.2fx the disk's fdatasync; natsd durable = %.2fx (round trip + "
          "fdatasync)" % (ours, ours / disk, best["natsd durable"] / (best["natsd lazy"] + disk)))
    print("nats-server: `always` adds %.1f µs = %.2fx natsd's measured fdatasync" % (theirs, theirs / disk))


if __name__ == "__main__":
    main()
