"""Profiles of natsd itself: the profiling port (`prof_port`, nats-server's net/http/pprof
listener) and the CPU profile of `$SYS.REQ.SERVER.<id>.PROFILEZ`.

nats-server serves Go's pprof. natsd is a Python process, so its profiles are Python's:

- `cpu` (`/debug/pprof/profile?seconds=N`, PROFILEZ `{"name": "cpu", "duration": ...}`): the
  event loop's thread profiled by cProfile for the duration, in the `pstats` format (the file
  `pstats.Stats(path)` reads, as `python -m cProfile -o` writes it; snakeviz and gprof2dot read
  it too). Go's `go tool pprof` does not: this is the one difference an operator sees. The
  Cython core appears as the calls into it, not inside it.
- `goroutine` (`/debug/pprof/goroutine`): the stack of every thread, as text (what Go prints
  with `debug=2`).
- `/debug/vars`: the same figures as `/debug/vars` on the monitoring port (monitor/expvarz.py).

Go's other profiles (heap, allocs, block, mutex, threadcreate) have no counterpart here and
are answered as unknown profiles.
"""
from __future__ import annotations

import logging
import marshal

from natsd.monitor import expvarz, stacksz

log = logging.getLogger("natsd")

DEFAULT_SECONDS = 30                    # net/http/pprof's default `seconds`


class Later:
    """An answer that comes after a while (a CPU profile): `start(done)` begins the work and
    calls done(...) with the answer."""

    def __init__(self, start):
        self.start = start


class CpuProfiler:
    """One CPU profile at a time of the event loop's thread (cProfile)."""

    def __init__(self, loop):
        self.loop = loop
        self.running = None

    def profile(self, seconds, done):
        """Profile for `seconds`, then done(pstats bytes, None); done(None, error) when a
        profile is already being taken."""
        if self.running is not None:
            done(None, "cpu profiling already in use")
            return
        import cProfile                 # (loaded when a profile is asked for)
        prof = cProfile.Profile()
        prof.enable()
        self.running = prof
        log.debug("CPU profile of the event loop started for %ds", seconds)
        self.loop.call_later(seconds, self._finish, prof, done)

    def _finish(self, prof, done):
        prof.disable()
        self.running = None
        import pstats
        stats = pstats.Stats(prof)
        done(marshal.dumps(stats.stats), None)


def profiler(server):
    """The server's CPU profiler (made when first asked for)."""
    p = getattr(server, "cpu_profiler", None)
    if p is None:
        p = server.cpu_profiler = CpuProfiler(server.loop)
    return p


# -- the profiling port ---------------------------------------------------------------

_INDEX = b"""<html><head><title>/debug/pprof/</title></head><body>
/debug/pprof/ (natsd: Python profiles)<br>
<a href="profile?seconds=30">profile</a>: CPU profile of the event loop, pstats format<br>
<a href="goroutine?debug=2">goroutine</a>: stacks of all threads<br>
<a href="/debug/vars">/debug/vars</a>: process figures<br>
</body></html>
"""


def routes(server):
    """Path -> handler(query) for the profiling listener (monitor/http.py serves them)."""
    def index(query):
        return 200, _INDEX, "text/html; charset=utf-8"

    def cpu(query):
        try:
            seconds = int(query.get("seconds") or DEFAULT_SECONDS)
        except ValueError:
            seconds = DEFAULT_SECONDS
        seconds = max(1, seconds)

        def start(done):
            def finished(data, error):
                if error:
                    done(500, ("Could not enable CPU profiling: %s\n" % error).encode(),
                         "text/plain; charset=utf-8")
                else:
                    done(200, data, "application/octet-stream")
            profiler(server).profile(seconds, finished)
        return Later(start)

    def goroutine(query):
        return 200, stacksz.stacks().encode(), "text/plain; charset=utf-8"

    def variables(query):
        return expvarz.expvarz(server)

    return {"/debug/pprof": index, "/debug/pprof/profile": cpu,
            "/debug/pprof/goroutine": goroutine, "/debug/vars": variables}
