"""bench/scenarios.py: one throughput scenario run in-process with the bench client, as a dict.

Owns: the scenario modes shared by tools/corpus.py, spark/throughput.py (--generate) and
bench/test_bench_e2e.py:
  pub      N publishers, no subscriber                (rate = published msgs/s)
  pubsub   N publishers and N subscribers, 1:N fan-out (rate = received msgs/s, all subscribers)
  reqrep   N synchronous requesters, one responder     (rate = replies/s, latency = round trip)
  jspub    N JetStream async publishers into a memory stream created for the run
Returns {"msgs", "bytes", "seconds", "msgs_per_sec", "mb_per_sec", "latencies" (seconds, list),
"partial", "error"}. Nothing is printed.
"""
import threading
import types

from bench import fastclient as fc
from bench.cli import msgs_per_client

MODES = ("pub", "pubsub", "reqrep", "jspub")


def _totals(results):
    done = [r for r in results if r.start is not None and r.end is not None and r.msgs]
    if not done:
        return 0, 0, 0.0
    return (sum(r.msgs for r in done), sum(r.bytes for r in done),
            max(max(r.end for r in done) - min(r.start for r in done), 1e-9))


def _outcome(results, extra_errors=()):
    msgs, nbytes, secs = _totals(results)
    lat = [x for r in results for x in r.latencies]
    errors = [r.error for r in results if r.error] + [e for e in extra_errors if e]
    return {"msgs": msgs, "bytes": nbytes, "seconds": secs,
            "msgs_per_sec": msgs / secs if secs else 0.0,
            "mb_per_sec": nbytes / secs / 1e6 if secs else 0.0,
            "latencies": lat,
            "partial": any(r.partial for r in results) or (bool(errors) and msgs < sum(r.expected for r in results)),
            "error": errors[0] if errors else None}


def run_scenario(url, mode, size=128, clients=1, msgs=100_000, subject=None, timeout=30.0):
    subject = subject or "bench.%s" % mode
    counts = msgs_per_client(msgs, clients)
    if mode == "pub":
        ev = threading.Event()
        ev.set()
        res = fc.run_threads(fc.run_publisher, [dict(url=url, client=i + 1, subject=subject, count=n, size=size,
                                                     start_event=ev) for i, n in enumerate(counts)])
        return _outcome(res)
    if mode == "pubsub":
        ready = threading.Semaphore(0)
        box = {}
        subs_kw = [dict(url=url, client=i + 1, subject=subject, count=msgs, ready=lambda _c: ready.release(),
                        idle_timeout=timeout) for i in range(clients)]
        t = threading.Thread(target=lambda: box.setdefault("subs", fc.run_threads(fc.run_subscriber, subs_kw)),
                             daemon=True)
        t.start()
        for _ in range(clients):
            ready.acquire()
        ev = threading.Event()
        ev.set()
        pubs = fc.run_threads(fc.run_publisher, [dict(url=url, client=i + 1, subject=subject, count=n, size=size,
                                                      start_event=ev) for i, n in enumerate(counts)])
        if any(p.error for p in pubs):
            t.join(min(timeout, 5.0))
        else:
            t.join(timeout + 5)
        subs = box.get("subs")
        if subs is None:        # still waiting: the publishers failed; report what they did
            return _outcome(pubs, ["subscribers did not finish"])
        out = _outcome(subs, [p.error for p in pubs])
        return out
    if mode == "reqrep":
        stop = threading.Event()
        ready = threading.Semaphore(0)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("srv", fc.run_server(url, 1, subject, stop=stop,
                                                                                 ready=lambda _c: ready.release())),
                             daemon=True)
        t.start()
        ready.acquire()
        ev = threading.Event()
        ev.set()
        res = fc.run_threads(fc.run_requester, [dict(url=url, client=i + 1, subject=subject, count=n, size=size,
                                                     start_event=ev, timeout=min(timeout, 5.0))
                                                for i, n in enumerate(counts)])
        stop.set()
        t.join(5)
        return _outcome(res)
    if mode == "jspub":
        from bench import jsmodes
        from bench.cli import Printer
        a = types.SimpleNamespace(server=url, subject=subject, stream="BENCH_" + subject.replace(".", "_"),
                                  bucket="benchbucket", create=True, purge=True, storage="memory", replicas=1,
                                  maxbytes=1024 ** 3, dedupwindow=120.0, multisubject=False,
                                  multisubjectmax=100_000, deduplication=False, batch=500, timeout=5.0, sleep=0.0,
                                  size=size, clients=clients, acks="explicit", doubleack=False,
                                  consumer="nats-bench", randomize=0, _bench_id="c")
        try:
            jsmodes.prepare(a, "js-pub-async", Printer(None), counts)
        except fc.BenchError as e:
            r = fc.ClientResult(1, msgs)
            r.fail(e)
            return _outcome([r])
        res = jsmodes.run(a, "js-pub-async", counts, lambda _c, _n: None, threading.Event())
        return _outcome(res)
    raise ValueError("unknown scenario mode %r (known: %s)" % (mode, ", ".join(MODES)))
