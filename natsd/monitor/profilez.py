"""`$SYS.REQ.SERVER.PING.PROFILEZ` / `$SYS.REQ.SERVER.<id>.PROFILEZ`: Go runtime profiles.

nats-server answers `{"profile": <bytes>, "error": ""}` with a pprof profile (cpu for a
duration, or goroutine, heap, allocs, ...). natsd has no Go runtime to profile: it answers with
nats-server's errors (no name given, a cpu duration out of range) and otherwise says that the
profile does not exist (or, for cpu, cannot be started), with `profile: null`, as nats-server
does for any failure.
"""
from dataclasses import dataclass

from natsd.gofmt import go_duration
from natsd.monitor import params as P

MAX_CPU_NANOS = 15 * 10 ** 9


@dataclass
class ProfilezOptions:
    name: str = ""
    debug: int = 0
    duration: int = 0                   # nanoseconds (Go time.Duration)


options_from_query, options_from_json = P.plain_options(ProfilezOptions)


def handler(server, opts):
    if not opts.name:
        error = "Profile name not specified"
    elif opts.name == "cpu":
        if opts.duration <= 0 or opts.duration > MAX_CPU_NANOS:
            error = "Duration %s should be between 0s and 15s" % go_duration(opts.duration)
        else:
            error = "Failed to start CPU profile: natsd has no Go runtime to profile"
    else:
        error = 'Profile "%s" not found' % opts.name
    return {"profile": None, "error": error}
