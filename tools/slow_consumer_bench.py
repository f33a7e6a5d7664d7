#!/usr/bin/env python3
"""tools/slow_consumer_bench.py: what slow consumers cost a publisher and an unrelated fast
subscriber, natsd and nats-server side by side (interleaved, best of --reps).

One publisher streams --msgs messages of --size bytes to `flood` as fast as it can; a fast
subscriber reads everything. Undisturbed: nobody else. Disturbed: --slow subscribers of the
same subject stop reading one after another (at evenly spaced points of the stream) and are cut
as slow consumers. Reported per server: the fast subscriber's rate undisturbed and disturbed,
their ratio, the longest gap the fast subscriber saw, and how many slow consumers were cut.

usage: python tools/slow_consumer_bench.py [--reps 3] [--msgs 400000] [--size 128] [--slow 5]
           [--max-pending 4MB] [--natsd-cmd ...] [--nats-server-cmd ...]
"""
import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402


class Subscriber(threading.Thread):
    """Counts `flood` messages; stops reading after stop_after of them when given (the socket
    stays open: the server must cut it)."""

    def __init__(self, port, stop_after=None):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        if stop_after is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB flood 1\r\nPING\r\n')
        self.stop_after = stop_after
        self.count = 0
        self.first = self.last = None
        self.max_gap = 0.0
        self.ready = threading.Event()

    def run(self):
        # payloads are all 'x', so counting "MSG " (across chunk edges too) counts messages
        tail = b""
        self.sock.settimeout(60)
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    return
                now = time.monotonic()
                data = tail + chunk
                if not self.ready.is_set():
                    i = data.find(b"PONG\r\n")
                    if i < 0:
                        tail = data[-8:]
                        continue
                    data = data[i + 6:]
                    self.ready.set()
                n = data.count(b"MSG ")
                tail = data[-3:]
                if n:
                    self.count += n
                    if self.first is None:
                        self.first = now
                    elif self.last is not None:
                        self.max_gap = max(self.max_gap, now - self.last)
                    self.last = now
                if self.stop_after is not None and self.count >= self.stop_after:
                    return
        except OSError:
            return


def run_once(port, http_port, msgs, size, slow):
    fast = Subscriber(port)
    slows = [Subscriber(port, stop_after=(k + 1) * msgs // (slow + 2)) for k in range(slow)]
    for s in [fast] + slows:
        s.start()
        s.ready.wait(10)
    pub = socket.create_connection(("127.0.0.1", port))
    pub.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
    frame = b"PUB flood %d\r\n%s\r\n" % (size, b"x" * size)
    batch = frame * 1000
    t0 = time.monotonic()
    for _ in range(msgs // 1000):
        pub.sendall(batch)
    pub.sendall(b"PING\r\n")
    pub.settimeout(120)
    got = b""
    while b"PONG" not in got:
        got += pub.recv(4096)
    t_pub = time.monotonic() - t0
    deadline = time.monotonic() + 60
    while fast.count < msgs and time.monotonic() < deadline:
        time.sleep(0.01)
    with urllib.request.urlopen("http://127.0.0.1:%d/varz" % http_port, timeout=5) as r:
        cut = json.loads(r.read())["slow_consumers"]
    for s in [fast] + slows:
        s.sock.close()
    pub.close()
    span = (fast.last - fast.first) if fast.last and fast.first else float("nan")
    return {"fast_rate": fast.count / span if span else 0, "pub_rate": msgs / t_pub,
            "received": fast.count, "max_gap": fast.max_gap, "slow_cut": cut}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=400000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--slow", type=int, default=5)
    ap.add_argument("--max-pending", default="4MB")
    ap.add_argument("--natsd-cmd", default="{python} -m natsd -a 127.0.0.1 -p {port} -m {http} -c {conf}")
    ap.add_argument("--nats-server-cmd", default="{nats_server} -a 127.0.0.1 -p {port} -m {http} -c {conf}")
    args = ap.parse_args()
    nats_server = shutil.which("nats-server") or os.path.join(os.path.dirname(sys.executable), "nats-server")
    tmp = tempfile.mkdtemp(prefix="scbench-")
    conf = os.path.join(tmp, "sc.conf")
    with open(conf, "w") as f:
        f.write('max_pending: %s\nmax_payload: 64KB\nwrite_deadline: "10s"\n' % args.max_pending)
    results = {"natsd": {"calm": [], "slow": []}, "nats-server": {"calm": [], "slow": []}}
    for rep in range(args.reps):
        for kind, tmpl in (("nats-server", args.nats_server_cmd), ("natsd", args.natsd_cmd)):
            for mode, slow in (("calm", 0), ("slow", args.slow)):
                port, http = free_port(), free_port()
                cmd = tmpl.format(python=sys.executable, nats_server=nats_server, port=port,
                                  http=http, conf=conf)
                srv = ServerProcess(kind, cmd, os.path.join(tmp, "%s-%d-%s.log" % (kind, rep, mode)))
                try:
                    srv.wait_ready()
                    r = run_once(port, http, args.msgs, args.size, slow)
                finally:
                    srv.stop()
                results[kind][mode].append(r)
                print("rep %d %-11s %-5s fast %9.0f msgs/s  pub %9.0f msgs/s  gap %6.3f s  cut %d  got %d"
                      % (rep, kind, mode, r["fast_rate"], r["pub_rate"], r["max_gap"], r["slow_cut"],
                         r["received"]), flush=True)
    print()
    print("%-11s %14s %14s %7s %10s %5s" % ("server", "fast calm", "fast w/ slow", "ratio", "max gap", "cut"))
    for kind in ("natsd", "nats-server"):
        calm = max(r["fast_rate"] for r in results[kind]["calm"])
        slow = max(r["fast_rate"] for r in results[kind]["slow"])
        gap = min(r["max_gap"] for r in results[kind]["slow"])
        cut = min(r["slow_cut"] for r in results[kind]["slow"])
        print("%-11s %14.0f %14.0f %7.2f %9.3fs %5d" % (kind, calm, slow, slow / calm, gap, cut))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
