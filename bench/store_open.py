"""Opening a nats-server store directory: nats-server's own start on it against natsd's first
start (which converts it), natsd's later starts, and the way back (`natsd-store export`) with
nats-server's start on what it wrote. Times to "Server is ready", peak memory of each process.

    python -m bench.store_open --messages 10000000 --size 100 [--dir /tmp/store-bench]

The store is made once (the messages written by natsd's nats-server-format writer, then opened
and closed by nats-server so that its index.db is its own) and reused when --dir already holds
one of that shape. A benchmark, not a test: it asserts nothing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, ".venv", "bin")


def nats_server():
    return shutil.which("nats-server", path=BIN + os.pathsep + os.environ.get("PATH", ""))


def natsd():
    return shutil.which("natsd", path=BIN + os.pathsep + os.environ.get("PATH", ""))


def start_until_ready(cmd, timeout=3600):
    """(seconds to 'Server is ready', peak RSS in MB) of a server started on a store; stopped after."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = None
    peak = 0
    for line in p.stdout:
        if "Server is ready" in line:
            ready = time.monotonic() - t0
            peak = peak_rss(p.pid)
            break
        if "[FTL]" in line:
            break
    p.terminate()
    p.wait(timeout)
    if ready is None:
        raise SystemExit("%s never became ready" % cmd)
    return ready, peak


def peak_rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0


def make_store(directory, messages, size):
    from natsd.jetstream.nsfs.image import StreamImage
    from natsd.jetstream.nsfs.writer import write_stream_dir
    stream = os.path.join(directory, "jetstream", "$G", "streams", "BENCH")
    os.makedirs(os.path.dirname(stream), exist_ok=True)
    payload = b"x" * size
    t0 = time.time_ns()

    def records():
        for i in range(1, messages + 1):
            yield i, t0 + i, b"bench.%d" % (i % 1000), None, payload
    cfg = {"name": "BENCH", "subjects": ["bench.>"], "retention": "limits", "storage": "file",
           "max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0,
           "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old", "num_replicas": 1,
           "duplicate_window": 120000000000, "compression": "none"}
    write_stream_dir(stream, StreamImage(cfg, t0, 1, messages, t0 + messages, records, []))
    start_until_ready([nats_server(), "-js", "-sd", directory, "-p", "-1"])   # its index.db
    with open(os.path.join(directory, "shape.json"), "w") as f:
        json.dump({"messages": messages, "size": size}, f)


def du(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--dir", default="/tmp/natsd-store-bench")
    ap.add_argument("--runs", type=int, default=3, help="starts of each server on its own store")
    args = ap.parse_args(argv)
    source = os.path.join(args.dir, "nats-server")
    shape = {"messages": args.messages, "size": args.size}
    try:
        with open(os.path.join(source, "shape.json")) as f:
            made = json.load(f) == shape
    except (OSError, ValueError):
        made = False
    if not made:
        shutil.rmtree(source, ignore_errors=True)
        t = time.monotonic()
        make_store(source, args.messages, args.size)
        print("made a %d-message store (%.0f MB) in %.1fs" % (args.messages, du(source) / 1e6,
                                                             time.monotonic() - t))
    ns = [nats_server(), "-js", "-p", "-1", "-sd"]
    nd = [natsd(), "-js", "-p", "-1", "-sd"]
    rows = []
    best = min(start_until_ready(ns + [source]) for _ in range(args.runs))
    rows.append(("nats-server start on its store", best))
    converted = os.path.join(args.dir, "natsd")
    shutil.rmtree(converted, ignore_errors=True)
    shutil.copytree(source, converted, ignore=shutil.ignore_patterns("shape.json"))
    rows.append(("natsd first start (converts)", start_until_ready(nd + [converted])))
    rows.append(("natsd later start", min(start_until_ready(nd + [converted]) for _ in range(args.runs))))
    back = os.path.join(args.dir, "back")
    shutil.rmtree(back, ignore_errors=True)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "natsd.jetstream.storetool", "export", converted, back],
                       capture_output=True, text=True)
    import resource
    rows.append(("natsd-store export", (time.monotonic() - t,
                                        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)))
    if r.returncode:
        raise SystemExit(r.stderr)
    rows.append(("nats-server start on the export", start_until_ready(ns + [back])))
    print("%d messages of %d bytes, store %.0f MB" % (args.messages, args.size, du(source) / 1e6))
    for what, (secs, mb) in rows:
        print("  %-34s %8.3f s   peak %7.0f MB" % (what, secs, mb))
    ratio = rows[1][1][0] / rows[0][1][0]
    print("natsd's converting start / nats-server's start: %.1fx" % ratio)


if __name__ == "__main__":
    main()
