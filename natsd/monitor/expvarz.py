"""`/debug/vars` (Go's expvar handler) and `$SYS.REQ.SERVER.PING.EXPVARZ`: `cmdline`, `memstats`.

nats-server publishes Go's `runtime.MemStats`. natsd is a Python process: under the same names
it reports the figures that mean the same for it, and 0 (or an empty `BySize`) for those of the
Go allocator and collector that have no counterpart (spans, mcaches, size classes, the heap
goal, released pages, cumulative malloc/free counts, which CPython does not keep):
  - `Sys`: the process's virtual memory size; `HeapSys`, `HeapInuse`, `HeapAlloc`, `Alloc`:
    its resident set size; `HeapObjects`: CPython's live allocated blocks;
  - `NumGC`, `PauseTotalNs`, `PauseNs`, `PauseEnd` (Go's 256-entry circular buffers), `LastGC`:
    the cyclic garbage collector's runs, timed by a `gc.callbacks` hook that `install()` adds
    when monitoring or the system account starts; `GCCPUFraction`: their share of the time
    available since then (elapsed time x cores); `EnableGC`, `DebugGC`: the `gc` module's state.
"""
import gc
import os
import sys
import time
from dataclasses import dataclass

from natsd.monitor import params as P

_PAUSES = 256


class _GcTimer:
    def __init__(self):
        self.installed_at = time.monotonic()
        self.num = 0
        self.total_ns = 0
        self.last_end_ns = 0
        self.pause_ns = [0] * _PAUSES
        self.pause_end = [0] * _PAUSES
        self._start = 0

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter_ns()
            return
        pause = time.perf_counter_ns() - self._start
        end = time.time_ns()
        i = self.num % _PAUSES
        self.pause_ns[i] = pause
        self.pause_end[i] = end
        self.num += 1
        self.total_ns += pause
        self.last_end_ns = end


_timer = None


def install():
    """Start timing garbage collections (once per process)."""
    global _timer
    if _timer is None:
        _timer = _GcTimer()
        gc.callbacks.append(_timer)


@dataclass
class ExpvarzOptions:
    pass


def options_from_query(q):
    return ExpvarzOptions()


def options_from_json(body):
    P.j_body(body)
    return ExpvarzOptions()


def memstats():
    from natsd.monitor.varz import this_process
    mem = this_process().memory_info()
    t = _timer or _GcTimer()
    elapsed = max(time.monotonic() - t.installed_at, 1e-9)
    cores = os.cpu_count() or 1
    return {
        "Alloc": mem.rss, "TotalAlloc": 0, "Sys": mem.vms, "Lookups": 0, "Mallocs": 0,
        "Frees": 0, "HeapAlloc": mem.rss, "HeapSys": mem.rss, "HeapIdle": 0,
        "HeapInuse": mem.rss, "HeapReleased": 0, "HeapObjects": sys.getallocatedblocks(),
        "StackInuse": 0, "StackSys": 0, "MSpanInuse": 0, "MSpanSys": 0, "MCacheInuse": 0,
        "MCacheSys": 0, "BuckHashSys": 0, "GCSys": 0, "OtherSys": 0, "NextGC": 0,
        "LastGC": t.last_end_ns, "PauseTotalNs": t.total_ns, "PauseNs": list(t.pause_ns),
        "PauseEnd": list(t.pause_end), "NumGC": t.num, "NumForcedGC": 0,
        "GCCPUFraction": t.total_ns / 1e9 / (elapsed * cores), "EnableGC": gc.isenabled(),
        "DebugGC": gc.get_debug() != 0, "BySize": [],
    }


def expvarz(server):
    from natsd.monitor.varz import this_process
    return {"memstats": memstats(), "cmdline": this_process().cmdline()}


def handler(server, opts):
    return expvarz(server)


def http_handler(server, opts):
    """Go's expvar.Handler: the variables sorted by name, its own content type."""
    import json
    v = expvarz(server)
    body = "{\n%s\n}\n" % ",\n".join("%s: %s" % (json.dumps(k), json.dumps(v[k], separators=(",", ":")))
                                      for k in sorted(v))
    return 200, body.encode(), "application/json; charset=utf-8"
