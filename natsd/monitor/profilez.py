"""`$SYS.REQ.SERVER.PING.PROFILEZ` / `$SYS.REQ.SERVER.<id>.PROFILEZ`: profiles of the server.

nats-server answers `{"profile": <bytes>, "error": ""}` with a Go pprof profile. natsd answers
with its own (monitor/profiling.py): `cpu` for `duration` is a cProfile of the event loop in
the pstats format, answered once the duration has passed; `goroutine` is the text of every
thread's stack. nats-server's errors are kept: no name, a cpu duration out of range, a CPU
profile already running, and any other name (Go's heap, allocs, ...) not found, each with
`profile: null`.
"""
import base64
from dataclasses import dataclass

from natsd.gofmt import go_duration, go_quote
from natsd.monitor import params as P, profiling, stacksz

MAX_CPU_NANOS = 15 * 10 ** 9


@dataclass
class ProfilezOptions:
    name: str = ""
    debug: int = 0
    duration: int = 0                   # nanoseconds (Go time.Duration)


options_from_query, options_from_json = P.plain_options(ProfilezOptions)


def handler(server, opts):
    if not opts.name:
        return _failed("Profile name not specified")
    if opts.name == "cpu":
        if opts.duration <= 0 or opts.duration > MAX_CPU_NANOS:
            return _failed("Duration %s should be between 0s and 15s" % go_duration(opts.duration))

        def start(done):
            def finished(data, error):
                done(_failed("Failed to start CPU profile: %s" % error) if error else _profile(data))
            profiling.profiler(server).profile(opts.duration / 1e9, finished)
        return profiling.Later(start)
    if opts.name == "goroutine":
        return _profile(stacksz.stacks().encode())
    return _failed("Profile %s not found" % go_quote(opts.name))


def _failed(error):
    return {"profile": None, "error": error}


def _profile(data):
    return {"profile": base64.b64encode(data).decode(), "error": ""}
