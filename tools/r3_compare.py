#!/usr/bin/env python3
"""tools/r3_compare.py: replicated JetStream on a three-server cluster, natsd against
nats-server (default, and with `sync_interval: always`), interleaved, best of --reps
(gobench on nats.go).

- pub-async: an R3 file stream, async publishes with 256 in flight (`js pub --replicas 3`).
- pub-sync: one publisher waiting for each PubAck.
- pull: an R3 durable pull consumer (explicit acks, Fetch batch 100) reading a filled R3 stream
  (`js pull`); both replicate the consumer's state through the consumer's own Raft group.
- kv-put: sequential puts (each waits for its PubAck) to an R3 KV bucket.
- kv-put-16: the same from 16 connections at once (16 puts in flight, as many clients of
  one bucket have).
- failover: kill -9 of the stream's leader under a waiting publisher; the time from the kill
  to the first PubAck from the new leader (a client on a surviving server retrying with
  0.25 s timeouts).
- handoff: lame duck mode (SIGUSR2) of the stream's leader under a waiting publisher; the
  longest wait for a PubAck in the 5 s after the signal (the same client). Both servers hand
  their leaderships to other members before their JetStream stops; natsd forwards the
  publishes its old leader receives meanwhile to the new one.

natsd acknowledges a message once its Raft entry is on the disks (fdatasync) of a quorum;
nats-server by default acknowledges before any fsync.

--without-fdatasync adds a diagnostic run of natsd with tools/nosync.c preloaded (fdatasync and
fsync return at once): not a valid configuration, but the difference to natsd's own column is
the time its PubAcks spend waiting for the disk, which here every replica shares.

usage: python tools/r3_compare.py [--reps 3] [--msgs 20000] [--without-fdatasync]
                                  [--only pub-async,pub-sync,pull,kv-put,kv-put-16,failover,handoff]
"""
import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.cluster_bench import GOBENCH, NATS_SERVER  # noqa: E402
from tools.serverproc import ServerProcess, free_port  # noqa: E402



class Cluster:
    """Three servers of one kind, each routed to all, with JetStream."""

    def __init__(self, kind, tmp, tag, always=False, env=None):
        self.kind = kind
        self.env = env
        self.members = {}
        names = "ABC"
        ports = {n: (free_port(), free_port()) for n in names}
        routes = ", ".join("nats://127.0.0.1:%d" % ports[n][1] for n in names)
        self.confs = {}
        for n in names:
            conf = os.path.join(tmp, "%s-%s-%s.conf" % (kind, tag, n))
            with open(conf, "w") as f:
                f.write('server_name: %s\nport: %d\nhost: 127.0.0.1\n'
                        'jetstream { store_dir: "%s"%s }\n'
                        'cluster { name: R, port: %d, host: 127.0.0.1, routes: [%s] }\n'
                        % (n, ports[n][0], os.path.join(tmp, "%s-%s-%s" % (kind, tag, n)),
                           ", sync_interval: always" if always else "", ports[n][1], routes))
            self.confs[n] = conf
        self.urls = {n: "nats://127.0.0.1:%d" % ports[n][0] for n in names}
        self.tmp, self.tag = tmp, tag
        for n in names:
            self.start(n)
        for p in self.members.values():
            p.wait_ready()

    def start(self, name):
        if self.kind == "natsd":
            cmd = "%s -m natsd -c %s" % (sys.executable, self.confs[name])
        else:
            cmd = "%s -c %s" % (NATS_SERVER, self.confs[name])
        self.members[name] = ServerProcess(self.kind, cmd, os.path.join(self.tmp, "%s-%s-%s.log"
                                                                        % (self.kind, self.tag, name)),
                                           env=self.env)

    def stop(self):
        for p in self.members.values():
            p.stop()


async def _request(url, subject, body, timeout=2.0):
    import nats
    nc = await nats.connect(url)
    try:
        return json.loads((await nc.request(subject, body, timeout=timeout)).data)
    finally:
        await nc.close()


def create_stream(cluster, name, subject):
    """An R3 stream, retried until the cluster has its meta leader; -> the stream leader."""
    body = json.dumps({"name": name, "subjects": [subject], "num_replicas": 3}).encode()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            r = asyncio.run(_request(cluster.urls["A"], "$JS.API.STREAM.CREATE." + name, body))
            if "error" not in r or r["error"].get("err_code") == 10058:
                info = asyncio.run(_request(cluster.urls["A"], "$JS.API.STREAM.INFO." + name, b""))
                leader = info.get("cluster", {}).get("leader")
                if leader:
                    return leader
        except Exception:
            pass
        time.sleep(0.25)
    raise RuntimeError("%s: no R3 stream leader" % cluster.kind)


def gobench(args, url, rate="pub", counts=True):
    """counts=False: the stream keeps fewer messages than were published (a KV bucket keeps
    the last per key), so gobench's count check is not a loss; errors still fail the run."""
    out = subprocess.run([GOBENCH] + args + ["--server", url, "--quiet"], capture_output=True, text=True,
                         timeout=600)
    m = re.search(r"RESULT .*?%s_rate=([\d.]+)" % rate, out.stdout + out.stderr)
    ok = out.returncode == 0 or (not counts and m and " errors=0 async_errors=0 " in out.stdout)
    if not ok or not m:
        raise RuntimeError("gobench %s failed:\n%s%s" % (" ".join(args), out.stdout[-1500:], out.stderr[-1500:]))
    return float(m.group(1))


def pub_async(cluster, msgs):
    leader = create_stream(cluster, "RA", "ra.x")
    other = next(n for n in "ABC" if n != leader)
    return gobench(["js", "pub", "ra.x", "--stream", "RA", "--replicas", "3", "--msgs", str(msgs),
                    "--size", "128", "--purge"], cluster.urls[other])


def pub_sync(cluster, msgs):
    leader = create_stream(cluster, "RS", "rs.x")
    other = next(n for n in "ABC" if n != leader)
    return gobench(["js", "pub", "rs.x", "--stream", "RS", "--replicas", "3", "--sync", "--msgs",
                    str(max(msgs // 10, 500)), "--size", "128", "--purge"], cluster.urls[other])


def pull(cluster, msgs):
    leader = create_stream(cluster, "RP", "rp.x")
    other = next(n for n in "ABC" if n != leader)
    return gobench(["js", "pull", "rp.x", "--stream", "RP", "--replicas", "3", "--msgs", str(msgs),
                    "--size", "128", "--batch", "100"], cluster.urls[other], rate="sub")


def kv_put(cluster, msgs, clients=1):
    """Sequential puts to an R3 bucket (a put is a publish to $KV.<bucket>.<key>), from
    `clients` connections at once."""
    import nats

    async def bucket():
        nc = await nats.connect(cluster.urls["A"])
        deadline = time.monotonic() + 60
        while True:
            try:
                await nc.jetstream().create_key_value(bucket="RK", replicas=3)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)
        await nc.close()
    asyncio.run(bucket())
    return gobench(["js", "pub", "$KV.RK.key", "--stream", "KV_RK", "--sync", "--msgs",
                    str(max(msgs // 10, 500) * clients), "--size", "128", "--pub", str(clients)],
                   cluster.urls["B"], counts=False)


def kv_put_16(cluster, msgs):
    """kv_put's puts from 16 connections at once, each waiting for its PubAck."""
    return kv_put(cluster, msgs, clients=16)


def failover(cluster, msgs):
    """Seconds from kill -9 of the stream leader to the first PubAck after it."""
    import nats
    leader = create_stream(cluster, "RF", "rf.x")
    other = next(n for n in "ABC" if n != leader)

    async def run():
        nc = await nats.connect(cluster.urls[other])
        js = nc.jetstream(timeout=0.25)
        for _ in range(50):
            await js.publish("rf.x", b"before")
        os.kill(cluster.members[leader].pid, signal.SIGKILL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            try:
                await js.publish("rf.x", b"after")
                break
            except Exception:
                await asyncio.sleep(0.01)
        took = time.monotonic() - t0
        await nc.close()
        return took
    took = asyncio.run(run())
    cluster.members[leader].proc.wait(5)
    return took


def handoff(cluster, msgs):
    """The longest wait for a PubAck in the 5 s after the stream leader enters lame duck mode."""
    import nats
    leader = create_stream(cluster, "RH", "rh.x")
    other = next(n for n in "ABC" if n != leader)

    async def run():
        nc = await nats.connect(cluster.urls[other])
        js = nc.jetstream(timeout=0.25)
        for _ in range(50):
            await js.publish("rh.x", b"before")
        os.kill(cluster.members[leader].pid, signal.SIGUSR2)
        t0 = last = time.monotonic()
        longest = 0.0
        while time.monotonic() - t0 < 5:
            try:
                await js.publish("rh.x", b"after")
            except Exception:
                continue
            now = time.monotonic()
            longest, last = max(longest, now - last), now
        await nc.close()
        return longest
    return asyncio.run(run())


MODES = {"pub-async": (pub_async, "msgs/s", max), "pub-sync": (pub_sync, "msgs/s", max),
         "pull": (pull, "msgs/s", max), "kv-put": (kv_put, "puts/s", max),
         "kv-put-16": (kv_put_16, "puts/s", max),
         "failover": (failover, "s", min), "handoff": (handoff, "s", min)}


def nosync_env(tmp):
    """The environment of a natsd whose fdatasync and fsync return at once (tools/nosync.c,
    compiled into `tmp`)."""
    lib = os.path.join(tmp, "libnosync.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, os.path.join(ROOT, "tools", "nosync.c")],
                   check=True)
    return dict(os.environ, LD_PRELOAD=lib)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=20000)
    ap.add_argument("--only", default=",".join(MODES))
    ap.add_argument("--without-fdatasync", action="store_true",
                    help="also run natsd with fdatasync turned off (a diagnostic, not a valid configuration)")
    a = ap.parse_args()
    modes = [m for m in a.only.split(",") if m]
    # (kind, variant): "always" is nats-server with sync_interval: always
    kinds = [("natsd", ""), ("nats-server", ""), ("nats-server", "always")]
    if a.without_fdatasync:
        kinds.append(("natsd", "without fdatasync"))
    results = {(m, k, v): [] for m in modes for k, v in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        env = nosync_env(tmp) if a.without_fdatasync else None
        for rep in range(a.reps):
            for mode in modes:
                for kind, variant in kinds:
                    tag = "%s%d%s" % (mode, rep, variant[:1])
                    c = Cluster(kind, tmp, tag, variant == "always",
                                env if variant == "without fdatasync" else None)
                    try:
                        v = MODES[mode][0](c, a.msgs)
                    finally:
                        c.stop()
                    results[(mode, kind, variant)].append(v)
                    print("rep %d %-9s %-11s %s %.3f" % (rep + 1, mode, kind, variant, v), flush=True)
    extra = a.without_fdatasync
    print("| mode | natsd | nats-server | nats-server always | natsd / default | natsd / always |%s"
          % (" natsd without fdatasync (diagnostic) |" if extra else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: |%s" % (" ---: |" if extra else ""))
    for mode in modes:
        unit, best = MODES[mode][1], MODES[mode][2]
        n, d, al = (best(results[(mode, k, x)]) for k, x in kinds[:3])
        fmt = "%.2f" if unit == "s" else "%.0f"
        ratios = (d / n, al / n) if unit == "s" else (n / d, n / al)
        row = "| %s (%s%s) | %s | %s | %s | %.2fx | %.2fx |" % (
            mode, unit, ", lower is better" if unit == "s" else "", fmt % n, fmt % d, fmt % al, *ratios)
        if extra:
            row += " %s |" % (fmt % best(results[(mode, "natsd", "without fdatasync")]))
        print(row)
    # the best of a few runs hides how far they spread on this machine: the means too
    for mode in modes:
        n, d = (sum(results[(mode, k, "")]) / a.reps for k in ("natsd", "nats-server"))
        print("%s: means natsd %.2f, nats-server %.2f, natsd / nats-server %.2fx"
              % (mode, n, d, (d / n) if MODES[mode][1] == "s" else (n / d)))


if __name__ == "__main__":
    main()
