#!/usr/bin/env python3
"""tools/s2_bench.py: S2 figures.

1. The codec: MB/s of natsd's S2 stream encoder (each level) and decoder on protocol-like and
   random data, beside cramjam's Snappy (a Rust implementation) on the same data, best of
   --reps.
2. A compressed link: gobench pub+sub 1:1 128 B across a leaf node link (publisher on the hub,
   subscriber on the leaf) with `compression: s2_fast` on both sides, natsd pair against
   nats-server pair, interleaved, best of --reps; and the same across a route.

usage: python tools/s2_bench.py [--reps 3] [--only codec,leaf,route] [--msgs 500000]
"""
import argparse
import os
import random
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
NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")


def corpora():
    rnd = random.Random(1)
    proto = b"".join(b"RMSG $G orders.%d.created _INBOX.%08x 128\r\n%s\r\n"
                     % (rnd.randint(0, 99), rnd.getrandbits(32), bytes(rnd.choice(b"abcdefgh") for _ in range(128)))
                     for _ in range(20000))
    return {"protocol": proto, "random": os.urandom(len(proto))}


def best_rate(fn, size, reps):
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = max(best, size / dt / 1e6)
    return best


def codec(reps):
    from natsd._core.s2 import S2Codec
    try:
        import cramjam
    except ImportError:
        cramjam = None
    print("%-10s %-22s %10s %10s %8s" % ("data", "codec", "enc MB/s", "dec MB/s", "ratio"))
    for name, data in corpora().items():
        chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
        for level in ("uncompressed", "fast", "better", "best"):
            enc = S2Codec(level)
            wire = b"".join(enc.encode_bytes(c) for c in chunks)
            e = best_rate(lambda: [S2Codec(level).encode_bytes(c) for c in chunks], len(data), reps)
            d = best_rate(lambda: S2Codec().decode_bytes(wire), len(data), reps)
            print("%-10s %-22s %10.0f %10.0f %8.2f" % (name, "natsd s2 " + level, e, d, len(wire) / len(data)))
        if cramjam is not None:
            wire = b"".join(bytes(cramjam.snappy.compress(c)) for c in chunks)
            e = best_rate(lambda: [cramjam.snappy.compress(c) for c in chunks], len(data), reps)
            d = best_rate(lambda: [cramjam.snappy.decompress(w) for w in
                                   [bytes(cramjam.snappy.compress(c)) for c in chunks]], len(data), reps)
            print("%-10s %-22s %10.0f %10s %8.2f" % (name, "cramjam snappy (framed)", e,
                                                     "%.0f*" % d, len(wire) / len(data)))
    print("* cramjam's decode figure includes re-encoding (its objects are not reusable)")


def _gobench(args, url, wait=True):
    cmd = [GOBENCH] + args + ["--server", url, "--quiet"]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout


def _rate(out):
    m = re.search(r"RESULT .*", out)
    fields = dict(kv.split("=", 1) for kv in m.group(0).split()[1:])
    return float(fields.get("sub_rate") or fields.get("pub_rate"))


def _server(kind, tmp, name, text):
    conf = os.path.join(tmp, "%s-%s.conf" % (kind, name))
    with open(conf, "w") as f:
        f.write(text)
    cmd = ("%s -m natsd -c %s" % (sys.executable, conf) if kind == "natsd" else "%s -c %s" % (NATS_SERVER, conf))
    p = ServerProcess(kind, cmd, os.path.join(tmp, "%s-%s.log" % (kind, name)))
    p.wait_ready()
    return p


def link(kind, tmp, how, msgs):
    a_port, b_port, link_port = free_port(), free_port(), free_port()
    if how == "leaf":
        a = _server(kind, tmp, "hub", "port: %d\nleafnodes { port: %d, compression: s2_fast }\n" % (a_port, link_port))
        b = _server(kind, tmp, "leaf", 'port: %d\nleafnodes { remotes [ { url: "nats://127.0.0.1:%d", '
                    'compression: s2_fast } ] }\n' % (b_port, link_port))
    else:
        a = _server(kind, tmp, "a", "server_name: A\nport: %d\ncluster { name: c, port: %d, compression: s2_fast }\n"
                    % (a_port, link_port))
        b = _server(kind, tmp, "b", 'server_name: B\nport: %d\ncluster { name: c, port: %d, routes: ["nats://127.0.0.1:%d"], '
                    'compression: s2_fast }\n' % (b_port, free_port(), link_port))
    try:
        time.sleep(2.0)
        sub = _gobench(["sub", "s2.link", "--sub", "1", "--msgs", str(msgs), "--size", "128"],
                       "nats://127.0.0.1:%d" % b_port, wait=False)
        time.sleep(1.0)
        _gobench(["pub", "s2.link", "--pub", "1", "--msgs", str(msgs), "--size", "128"],
                 "nats://127.0.0.1:%d" % a_port)
        return _rate(sub.communicate(timeout=300)[0])
    finally:
        a.stop()
        b.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=500000)
    ap.add_argument("--only", default="codec,leaf,route")
    a = ap.parse_args()
    only = a.only.split(",")
    if "codec" in only:
        codec(a.reps)
    for how in ("leaf", "route"):
        if how not in only:
            continue
        best = {}
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(a.reps):
                for kind in ("natsd", "nats-server"):
                    best[kind] = max(best.get(kind, 0), link(kind, tmp, how, a.msgs))
        print("%s link, s2_fast, pub+sub 128 B: natsd %.0f msgs/s, nats-server %.0f msgs/s, %.2fx"
              % (how, best["natsd"], best["nats-server"], best["natsd"] / best["nats-server"]))


if __name__ == "__main__":
    main()
