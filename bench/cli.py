"""bench/cli.py: `natsd-bench`, a `nats bench` compatible benchmark tool (console script).

Owns: argument parsing and the run of every mode: `pub`, `sub`, `service serve`,
`service request` (raw-socket client, bench/fastclient.py), `js pub sync|async|batch`,
`js ordered`, `js consume`, `js fetch`, `js get sync|batch`, `kv put`, `kv get` (nats-py,
bench/jsmodes.py). Output is `nats bench`'s (bench/report.py). Exit status: 0 when every client
finished, 1 when the server could not be reached or a client failed mid-run (the stats of what
was done are still printed, marked `partial`), 2 for usage errors.

Library use: `execute(argv_list)` returns an Outcome (kind, params, results, error) and prints
nothing unless `out` is given; tools/corpus.py and spark/throughput.py use bench/scenarios.py.
"""
import argparse
import os
import re
import signal
import sys
import threading
import time

from bench import fastclient as fc
from bench import report

DEFAULT_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")

KINDS = {
    "pub": "Core NATS publisher",
    "sub": "Core NATS subscriber",
    "serve": "Core NATS service server",
    "request": "Core NATS service requester",
    "js-pub-sync": "JetStream synchronous publisher",
    "js-pub-async": "JetStream asynchronous publisher",
    "js-pub-batch": "JetStream batched publisher",
    "js-pub-counter": "JetStream counter incrementer",
    "js-ordered": "JetStream ordered ephemeral consumer",
    "js-consume": "JetStream durable consumer (callback)",
    "js-push": "JetStream durable push consumer",
    "js-fetch": "JetStream durable consumer (fetch)",
    "js-get-sync": "JetStream synchronous getter",
    "js-get-batch": "JetStream batched direct getter",
    "kv-put": "JetStream KV putter",
    "kv-get": "JetStream KV getter",
}
# per-client start verb: publishing / expecting / requesting / trying to get
VERBS = {"pub": "publishing", "request": "requesting", "js-pub-sync": "publishing", "js-pub-async": "publishing",
         "js-pub-batch": "publishing", "js-pub-counter": "publishing", "kv-put": "publishing", "kv-get": "trying to get"}
# modes where every client gets all --msgs (fan-out) instead of a share
FANOUT = {"sub", "js-ordered", "js-get-batch"}
SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.I)
DUR_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
DUR_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class UsageError(Exception):
    pass


def parse_size(text):
    """'128', '16kb', '16KiB', '1mb', '2GB' -> bytes (k = 1024, as nats bench)."""
    m = SIZE_RE.match(str(text))
    if not m:
        raise argparse.ArgumentTypeError("can not parse the message size: %s" % text)
    mult = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def parse_duration(text):
    """Go durations ('10ms', '1s', '1m30s'); a bare number is seconds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = DUR_RE.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise argparse.ArgumentTypeError("invalid duration: %s" % text)
    return sum(float(a) * DUR_UNITS[b] for a, b in parts)


def msgs_per_client(total, clients):
    """nats bench's MsgsPerClient: an even split, the remainder to the first clients."""
    base, rem = divmod(total, clients)
    return [base + (1 if i < rem else 0) for i in range(clients)]


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("connection and run")
    g.add_argument("-s", "--server", default=DEFAULT_URL, help="NATS server url (default %(default)s)")
    g.add_argument("--clients", type=int, default=1, help="number of concurrent clients")
    g.add_argument("--msgs", type=int, default=100_000, help="number of messages")
    g.add_argument("--size", type=parse_size, default=128, help="message size, e.g. 128, 16kb, 1mb")
    g.add_argument("--sleep", type=parse_duration, default=0.0, help="sleep between publications, e.g. 10ms")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="disable the progress bar")
    g.add_argument("--csv", default=None, help="save per-client metrics in this CSV file")
    g.add_argument("--multisubject", action="store_true", help="publish to subject.<n> (subscribe subject.*)")
    g.add_argument("--multisubjectmax", type=int, default=100_000, help="max n for --multisubject")
    g.add_argument("--stream", default="benchstream", help="stream name")
    g.add_argument("--bucket", default="benchbucket", help="KV bucket name")
    g.add_argument("--create", action="store_true", help="create the stream/bucket if needed")
    g.add_argument("--purge", action="store_true", help="purge the stream/bucket before the run")
    g.add_argument("--storage", choices=["file", "memory"], default="file")
    g.add_argument("--replicas", type=int, default=1)
    g.add_argument("--maxbytes", type=parse_size, default=1024 ** 3)
    g.add_argument("--dedup", dest="deduplication", action="store_true", help="set Nats-Msg-Id on publications")
    g.add_argument("--dedupwindow", type=parse_duration, default=120.0)
    g.add_argument("--batch", type=int, default=None, help="batch size (js pub async/batch, fetch, consume, get)")
    g.add_argument("--acks", choices=["none", "explicit", "all"], default="explicit")
    g.add_argument("--doubleack", action="store_true")
    g.add_argument("--consumer", default="nats-bench")
    g.add_argument("--randomize", type=int, default=0, help="kv get: random keys in [0, N)")
    g.add_argument("--timeout", type=parse_duration, default=5.0, help="request / fetch timeout")
    g.add_argument("--prioritized", action="store_true",
                   help="fetch: a prioritized priority-group consumer, client n asking with priority n %% 10")

    ap = argparse.ArgumentParser(prog="natsd-bench", description="nats bench compatible benchmarks (natsd)")
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("pub", parents=[common], help="Core NATS publisher")
    p.add_argument("subject")
    p = sp.add_parser("sub", parents=[common], help="Core NATS subscriber")
    p.add_argument("subject")
    svc = sp.add_parser("service", help="Core NATS request/reply").add_subparsers(dest="svc", required=True)
    p = svc.add_parser("serve", parents=[common])
    p.add_argument("subject")
    p = svc.add_parser("request", parents=[common])
    p.add_argument("subject")
    js = sp.add_parser("js", help="JetStream").add_subparsers(dest="js", required=True)
    p = js.add_parser("pub", parents=[common])
    p.add_argument("how", choices=["sync", "async", "batch", "counter"])
    p.add_argument("subject")
    for name in ("ordered", "consume", "fetch", "push"):
        js.add_parser(name, parents=[common])
    p = js.add_parser("get", parents=[common])
    p.add_argument("how", choices=["sync", "batch"])
    kv = sp.add_parser("kv", help="JetStream KV").add_subparsers(dest="kv", required=True)
    kv.add_parser("put", parents=[common])
    kv.add_parser("get", parents=[common])
    return ap


def mode_of(a):
    if a.cmd in ("pub", "sub"):
        return a.cmd
    if a.cmd == "service":
        return a.svc
    if a.cmd == "js":
        if a.js == "pub":
            return "js-pub-" + a.how
        if a.js == "get":
            return "js-get-" + a.how
        return "js-" + a.js
    return "kv-" + a.kv


def banner_params(mode, a):
    """The banner's keys for each mode, as nats bench prints them (003:4313-4837)."""
    p = {"clients": a.clients, "msg-size": report.ibytes(a.size), "msgs": a.msgs, "sleep": report.go_duration(a.sleep)}
    subj = getattr(a, "subject", None)
    if mode == "pub":
        p.update({"subject": subj, "multi-subject": a.multisubject, "multi-subject-max": a.multisubjectmax})
    elif mode == "sub":
        p.update({"subject": subj + ".*" if a.multisubject else subj, "multi-subject": a.multisubject})
        del p["sleep"]
    elif mode in ("request", "serve"):
        p["subject"] = subj
    elif mode.startswith("js-pub"):
        p.update({"subject": subj, "multi-subject": a.multisubject, "multi-subject-max": a.multisubjectmax,
                  "batch": a.batch, "stream": a.stream, "purge": a.purge})
    elif mode == "js-ordered":
        p.update({"stream": a.stream, "purge": a.purge})
    elif mode in ("js-consume", "js-fetch", "js-push"):
        p.update({"stream": a.stream, "purge": a.purge, "consumer": a.consumer, "acks": a.acks,
                  "double-acked": a.doubleack, "batch": a.batch})
        if a.prioritized:
            p["priority-policy"] = "prioritized"
    elif mode == "js-get-sync":
        p["stream"] = a.stream
    elif mode == "js-get-batch":
        p.update({"stream": a.stream, "batch": a.batch, "filter": ">"})
    elif mode == "kv-put":
        p.update({"bucket": a.bucket, "purge": a.purge})
    elif mode == "kv-get":
        p["bucket"] = a.bucket
        if a.randomize:
            p["randomize"] = a.randomize
    if a.create and (mode.startswith("js-") or mode.startswith("kv-")):
        p.update({"storage": a.storage, "max-bytes": a.maxbytes, "replicas": a.replicas,
                  "deduplication": a.deduplication, "dedup-window": report.go_duration(a.dedupwindow)})
    return p


def default_batch(mode):
    if mode in ("js-pub-sync", "js-pub-counter"):
        return 0
    if mode == "js-pub-batch":
        return 100
    return 500


class Outcome:
    def __init__(self, mode, kind, params):
        self.mode = mode
        self.kind = kind
        self.params = params
        self.results = []
        self.error = None

    @property
    def partial(self):
        return any(r.partial for r in self.results)

    @property
    def failed(self):
        return self.error is not None or any(r.error for r in self.results)

    def totals(self):
        done = [r for r in self.results if r.start is not None and r.end is not None and r.msgs]
        if not done:
            return 0, 0, 0.0
        start = min(r.start for r in done)
        end = max(r.end for r in done)
        return sum(r.msgs for r in done), sum(r.bytes for r in done), max(end - start, 1e-9)


class Printer:
    def __init__(self, out):
        self.out = out

    def log(self, line):
        if self.out is not None:
            report.log(line, self.out)

    def write(self, text):
        if self.out is not None:
            self.out.write(text)
            self.out.flush()


def execute(argv, out=None, stop=None):
    """Parse argv and run the benchmark; returns an Outcome. Raises UsageError on bad flags."""
    ap = build_parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        raise UsageError(str(e)) from None
    return run_args(a, out=out, stop=stop)


def run_args(a, out=None, stop=None):
    mode = mode_of(a)
    if a.batch is None:
        a.batch = default_batch(mode)
    if a.clients < 1 or a.msgs < 1 or a.size < 0:
        raise UsageError("--clients and --msgs must be > 0, --size >= 0")
    kind = KINDS[mode]
    a._bench_id = "%x" % int(time.time() * 1000)
    o = Outcome(mode, kind, banner_params(mode, a))
    pr = Printer(out)
    pr.log(report.banner(kind, o.params))
    stop = stop or threading.Event()
    try:                    # fail fast, before any per-client line, when the server is down
        fc.RawConn(a.server, timeout=min(a.timeout, 5.0)).close()
    except fc.BenchError as e:
        o.error = str(e)
        return o
    if mode == "serve":
        return _serve(a, o, pr, stop)
    counts = [a.msgs] * a.clients if mode in FANOUT else msgs_per_client(a.msgs, a.clients)
    if mode.startswith("js-") or mode.startswith("kv-"):
        from bench import jsmodes
        try:
            counts = jsmodes.prepare(a, mode, pr, counts)
        except fc.BenchError as e:
            o.error = str(e)
            return o
    verb = VERBS.get(mode, "expecting")
    starts = ["[%d] Starting %s, %s %s messages" % (i, kind, verb, report.commas(n)) for i, n in enumerate(counts, 1)]
    if mode != "sub":       # subscribers print theirs once every subscription is registered
        for line in starts:
            pr.log(line)
    running = {"kv-put": "Putting", "js-pub-sync": "Publishing"}.get(mode, "Running")
    prog = report.Progress(a.clients, counts, running=running, width=60 if mode == "sub" else 64,
                           enabled=a.progress and out is not None, out=out)
    if mode == "pub":
        start = threading.Event()
        kw = [dict(url=a.server, client=i + 1, subject=a.subject, count=n, size=a.size, sleep=a.sleep,
                   multisubject=a.multisubject, multisubject_max=a.multisubjectmax, offset=sum(counts[:i]),
                   start_event=start, progress=prog.update, stop=stop) for i, n in enumerate(counts)]
        start.set()
        o.results = fc.run_threads(fc.run_publisher, kw)
    elif mode == "sub":
        subj = a.subject + ".*" if a.multisubject else a.subject
        ready = threading.Semaphore(0)
        kw = [dict(url=a.server, client=i + 1, subject=subj, count=n, progress=prog.update, stop=stop,
                   ready=lambda _c: ready.release()) for i, n in enumerate(counts)]
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", fc.run_threads(fc.run_subscriber, kw)), daemon=True)
        t.start()
        for _ in counts:
            ready.acquire()
        for line in starts:
            pr.log(line)
        while t.is_alive():
            t.join(0.2)
        o.results = box["r"]
    elif mode == "request":
        start = threading.Event()
        kw = [dict(url=a.server, client=i + 1, subject=a.subject, count=n, size=a.size, sleep=a.sleep,
                   start_event=start, progress=prog.update, stop=stop, timeout=a.timeout)
              for i, n in enumerate(counts)]
        start.set()
        o.results = fc.run_threads(fc.run_requester, kw)
    else:
        from bench import jsmodes
        o.results = jsmodes.run(a, mode, counts, prog.update, stop)
    prog.finish()
    _finish(a, o, pr)
    return o


def _finish(a, o, pr):
    errors = [(r.client, r.error) for r in o.results if r.error]
    connect_failed = errors and all(r.msgs == 0 and r.error and r.error.startswith("cannot connect")
                                    for r in o.results)
    if connect_failed:
        o.error = errors[0][1]
        return
    pr.write("\n" + report.summary(o.kind, o.results) + "\n")
    if a.csv:
        report.write_csv(a.csv, o.results, "%x" % int(time.time() * 1000))
        pr.write("Saved metric data in csv file %s\n" % a.csv)
    if errors:
        o.error = "client %d: %s" % errors[0]


def _serve(a, o, pr, stop):
    ready = threading.Semaphore(0)
    kw = [dict(url=a.server, client=i + 1, subject=a.subject, ready=lambda _c: ready.release(), stop=stop,
               sleep=a.sleep) for i in range(a.clients)]
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fc.run_threads(fc.run_server, kw)), daemon=True)
    t.start()
    for _ in range(a.clients):
        ready.acquire()
    for i in range(a.clients):
        pr.log("[%d] Starting %s, serving requests on %s" % (i + 1, o.kind, a.subject))
    while t.is_alive():
        t.join(0.2)
    o.results = box.get("r", [])
    _finish(a, o, pr)
    return o


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    stop = threading.Event()

    def on_signal(_sig, _frm):
        stop.set()

    prev = signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        o = execute(argv, out=sys.stdout, stop=stop)
    except UsageError as e:
        msg = str(e)
        if msg not in ("0", "2", "None"):
            sys.stderr.write("natsd-bench: error: %s\n" % msg)
        return 0 if msg == "0" else 2
    finally:
        signal.signal(signal.SIGINT, prev)
    if o.mode == "serve" and stop.is_set() and not any(r.error and "interrupted" not in r.error for r in o.results):
        return 0
    if o.error:
        sys.stderr.write("natsd-bench: error: %s\n" % o.error)
        if o.partial and any(r.msgs for r in o.results):
            sys.stderr.write("natsd-bench: results are partial: %s of %s messages\n" % (
                report.commas(sum(r.msgs for r in o.results)), report.commas(sum(r.expected for r in o.results))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
