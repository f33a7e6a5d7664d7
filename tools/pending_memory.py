#!/usr/bin/env python3
"""tools/pending_memory.py: memory per pending (unacknowledged) message, natsd vs nats-server.

Owns: the figures for issue 10 item 10 ("a consumer with 100,000 unacknowledged messages").
For each server and each of two consumer kinds it starts a fresh process with JetStream on a
temp store dir, creates a file stream with N messages (16-byte core publishes, paced by a
JetStream publish every 1000) and has a pull consumer (ack wait 1 h, no max_ack_pending limit)
fetch all N in requests of 10,000 (one at a time), then waits for the RSS to settle. The consumer is "explicit" (nothing acked: N pending acks,
checked with CONSUMER.INFO) or "none" (the same reads, buffers and caches, but no pending
state). Reported: (RSS explicit - RSS none) / N, the memory attributable to the pending
state, median over --reps pairs; and the explicit run's RSS growth during the fetch (which
also counts the read caches and transient buffers of the fetch itself).

Unless --no-structure, it also reports, in this process, the bytes of the pending
state itself for N in-order deliveries: natsd's natsd/jetstream/engine/pending.pyx (its own count of the
bytes it allocated) next to the dict-of-lists + heap it replaced (tracemalloc).

usage:
  python tools/pending_memory.py [--msgs 100000] [--only natsd|nats-server] [--json OUT]
      [--natsd-cmd '{python} -m natsd -a 127.0.0.1 -p {port} -js -sd {sd}']
      [--nats-server-cmd 'nats-server -a 127.0.0.1 -p {port} -js -sd {sd}']
"""
import argparse
import asyncio
import heapq
import json
import os
import shutil
import sys
import tempfile
import time
import tracemalloc

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402


def structure_figures(n):
    """Bytes per pending message of the old and the new in-memory pending state."""
    from natsd.jetstream.engine.pending import Pending
    ts = time.time_ns()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    pending, heap = {}, []
    for s in range(1, n + 1):
        pending[s] = [s, ts + s]        # distinct ints, as time_ns() per delivery gives
        heapq.heappush(heap, s)
    old = tracemalloc.get_traced_memory()[0] - base
    del pending, heap
    tracemalloc.stop()
    p = Pending()
    for s in range(1, n + 1):
        p.add(s, s, ts + s)
    return {"old_dict_bytes_per_msg": old / n, "pending_pyx_bytes_per_msg": p.nbytes / n}


async def _scenario(url, n, rss, ack_policy):
    import nats
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="PM", subjects=["pm.>"])
    payload = b"x" * 16
    for i in range(n):                  # every 1000th waits for its store ack: paced
        if i % 1000 == 999:
            await js.publish("pm.%d" % (i % 16), payload)
        else:
            await nc.publish("pm.%d" % (i % 16), payload)
    await nc.flush()
    for _ in range(600):
        si = await js.stream_info("PM")
        if si.state.messages >= n:
            break
        await asyncio.sleep(0.1)
    else:
        raise RuntimeError("stream has %d of %d messages" % (si.state.messages, n))

    async def fetch_all(durable, ack_policy):  # noqa: C901
        cfg = {"durable_name": durable, "ack_policy": ack_policy, "deliver_policy": "all",
               "ack_wait": 3600 * 10**9, "max_ack_pending": -1, "max_waiting": 512}
        r = await nc.request("$JS.API.CONSUMER.CREATE.PM.%s" % durable,
                             json.dumps({"stream_name": "PM", "config": cfg}).encode(), timeout=10)
        if "error" in json.loads(r.data):
            raise RuntimeError(r.data)
        inbox = nc.new_inbox()
        got = 0
        want = 0
        step = asyncio.Event()

        async def cb(m):
            nonlocal got
            if m.headers and m.headers.get("Status"):
                return
            got += 1
            if got >= want:
                step.set()
        sub = await nc.subscribe(inbox, cb=cb, pending_msgs_limit=4 * n,
                                 pending_bytes_limit=1 << 30)
        while want < n:                 # one request of 10,000 at a time: no slow consumer
            b = min(10000, n - want)
            want += b
            step.clear()
            await nc.publish("$JS.API.CONSUMER.MSG.NEXT.PM.%s" % durable,
                             json.dumps({"batch": b, "expires": 120 * 10**9}).encode(), reply=inbox)
            await asyncio.wait_for(step.wait(), 120)
        await sub.unsubscribe()
        return got

    await asyncio.sleep(1)
    before = rss()
    got = await fetch_all("PEND", ack_policy)
    want = n if ack_policy == "explicit" else 0
    for _ in range(100):
        ci = json.loads((await nc.request("$JS.API.CONSUMER.INFO.PM.PEND", b"", timeout=10)).data)
        if ci.get("num_ack_pending") == want:
            break
        await asyncio.sleep(0.1)
    else:
        raise RuntimeError("num_ack_pending %s, want %d" % (ci.get("num_ack_pending"), want))
    last = rss()
    for _ in range(10):                 # let transient buffers go, state.json get written
        await asyncio.sleep(1)
        cur = rss()
        if abs(cur - last) < 64 * 1024:
            break
        last = cur
    after = rss()
    await nc.close()
    return {"fetched": got, "num_ack_pending": ci.get("num_ack_pending"), "rss_before": before,
            "rss_after": after}


def measure(kind, tmpl, n, logdir, ack_policy):
    sd = tempfile.mkdtemp(prefix="pending-memory-sd-")
    port = free_port()
    srv = ServerProcess(kind, tmpl.format(port=port, python=sys.executable, sd=sd),
                        os.path.join(logdir, kind + ".log"))
    try:
        srv.wait_ready(30)
        proc = psutil.Process(srv.pid)
        res = asyncio.run(_scenario("nats://127.0.0.1:%d" % port, n,
                                    lambda: proc.memory_info().rss, ack_policy))
    finally:
        srv.stop()
        shutil.rmtree(sd, ignore_errors=True)
    res["server"] = kind
    res["ack_policy"] = ack_policy
    bad = srv.bad_lines()
    if bad:
        res["log_errors"] = bad
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msgs", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=1, help="explicit/none pairs per server")
    ap.add_argument("--only", choices=["natsd", "nats-server"])
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--no-structure", action="store_true", help="skip the in-process figures")
    ap.add_argument("--natsd-cmd", default="{python} -m natsd -a 127.0.0.1 -p {port} -js -sd {sd}")
    venv_ns = os.path.join(os.path.dirname(sys.executable), "nats-server")
    ns = venv_ns if os.path.exists(venv_ns) else (shutil.which("nats-server") or "nats-server")
    ap.add_argument("--nats-server-cmd", default=ns + " -a 127.0.0.1 -p {port} -js -sd {sd}")
    a = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="pending-memory-logs-")
    out = []
    for kind, tmpl in (("natsd", a.natsd_cmd), ("nats-server", a.nats_server_cmd)):
        if a.only and a.only != kind:
            continue
        diffs = []
        for rep in range(a.reps):
            pair = {}
            for ap_ in ("none", "explicit"):
                r = measure(kind, tmpl, a.msgs, logdir, ap_)
                r["rep"] = rep
                out.append(r)
                pair[ap_] = r
                print("%-12s ack %-8s %6d pending: RSS %.1f MB before the fetch, %.1f MB after"
                      % (kind, ap_, r["num_ack_pending"] or 0, r["rss_before"] / 2**20,
                         r["rss_after"] / 2**20), flush=True)
                for line in r.get("log_errors", []):
                    print("   log: " + line)
            diffs.append((pair["explicit"]["rss_after"] - pair["none"]["rss_after"]) / a.msgs)
            grow = (pair["explicit"]["rss_after"] - pair["explicit"]["rss_before"]) / a.msgs
            print("%-12s rep %d: explicit - none = %.1f bytes/pending; growth during the "
                  "explicit fetch %.1f bytes/pending" % (kind, rep, diffs[-1], grow), flush=True)
        diffs.sort()
        med = diffs[len(diffs) // 2]
        out.append({"server": kind, "bytes_per_pending_median": med, "all": diffs})
        print("%-12s median attributable to pending state: %.1f bytes/pending (%.2f MB for %d)"
              % (kind, med, med * a.msgs / 2**20, a.msgs), flush=True)
    if not a.no_structure:
        s = structure_figures(a.msgs)
        out.append(dict(s, server="structure"))
        print("structure    %d pending: natsd/jetstream/engine/pending.pyx %.1f bytes/pending; the dict of "
              "[dseq, ts] + heap it replaced %.1f bytes/pending"
              % (a.msgs, s["pending_pyx_bytes_per_msg"], s["old_dict_bytes_per_msg"]))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
