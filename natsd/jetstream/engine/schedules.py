"""Message schedules (`allow_msg_schedules`, nats-server 2.12+): a message with
`Nats-Schedule: <pattern>` and `Nats-Schedule-Target: <subject>` is stored as a schedule; when
it is due the stream publishes its payload and headers to the target, with `Nats-Scheduler`
(the schedule's subject) and `Nats-Schedule-Next` (the next time, or `purge` for a one-shot,
whose schedule message is then purged). Patterns: `@at <RFC 3339>`, `@every <duration>` (1 s or
more), the `@hourly`-style names and six-field cron (seconds first, names for months and days,
`*`, `?`, ranges, lists and steps) in UTC or `Nats-Schedule-Time-Zone`. Optional headers:
`Nats-Schedule-TTL` (the produced message's Nats-TTL), `Nats-Schedule-Rollup: sub`,
`Nats-Schedule-Source` (publish the last message of that subject instead).

Owns: the publish-time checks (nats-server's errors 10188-10192 and the scheduler rules), the
pattern arithmetic, the per-stream timetable (rebuilt from the stored schedules at start, so
schedules survive a restart) and the production of due messages.
"""
import datetime
import heapq
import logging
import time
import zoneinfo

from natsd.jetstream.engine import errors as E
from natsd.gofmt import go_time, parse_go_duration
from natsd.jetstream.engine.gojson import go_parse_rfc3339
from natsd.jetstream.engine.headers import build_headers, header_lines, parse_headers, parse_ttl
from natsd.subject import is_valid_literal_subject, subjects_overlap

log = logging.getLogger("natsd")

NS = 1_000_000_000
REPLICA_RECHECK = 0.5           # seconds between two looks of a replica that does not fire
PATTERN = "Nats-Schedule"
TARGET = "Nats-Schedule-Target"
SOURCE = "Nats-Schedule-Source"
TTL = "Nats-Schedule-TTL"
ROLLUP = "Nats-Schedule-Rollup"
TIME_ZONE = "Nats-Schedule-Time-Zone"
SCHEDULER = "Nats-Scheduler"
NEXT = "Nats-Schedule-Next"
PURGE = "purge"
_NAMED = {"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
          "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *",
          "@hourly": "0 0 * * * *"}


class BadPattern(ValueError):
    pass


# ---- patterns ----

def location(headers):
    """The schedule's time zone (None: UTC); raises ApiError 10193-style TimeZoneInvalid."""
    if TIME_ZONE not in headers:
        return None
    name = headers[TIME_ZONE]
    try:
        if not name:
            raise ValueError(name)
        return zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise E.error("JSMessageSchedulesTimeZoneInvalidErr")


def next_time(pattern, loc, ts_ns):
    """nats-server's parseMsgSchedule -> (next ns, repeats); BadPattern when not a pattern."""
    if pattern.startswith("@at "):
        if loc is not None:
            raise BadPattern(pattern)
        try:
            return go_parse_rfc3339(pattern[4:]), False
        except ValueError:
            raise BadPattern(pattern)
    if pattern.startswith("@every "):
        if loc is not None:
            raise BadPattern(pattern)
        try:
            every = parse_go_duration(pattern[7:])
        except ValueError:
            raise BadPattern(pattern)
        if every < NS:
            raise BadPattern(pattern)
        nxt = _round_second(ts_ns) + every
        now = time.time_ns()
        if nxt < now:                   # missed (a restart): fire once, then keep the rhythm
            nxt = _round_second(now) + every
        return nxt, True
    cron = Cron(_NAMED.get(pattern, pattern))
    nxt = cron.after(ts_ns, loc)
    now = time.time_ns()
    if nxt < now:
        nxt = cron.after(_round_second(now), loc)
    return nxt, True


def _round_second(ns):
    return (ns + NS // 2) // NS * NS


class Cron:
    """Six fields: second minute hour day-of-month month day-of-week."""
    FIELDS = ((0, 59, None), (0, 59, None), (0, 23, None), (1, 31, None),
              (1, 12, {m: i + 1 for i, m in enumerate(
                  ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
              (0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}))

    def __init__(self, pattern):
        fields = pattern.split()
        if len(fields) != 6:
            raise BadPattern(pattern)
        parsed = [self._field(f, *b) for f, b in zip(fields, self.FIELDS)]
        (self.sec, _), (self.min, _), (self.hour, _), (self.dom, self.dom_star), \
            (self.month, _), (self.dow, self.dow_star) = parsed

    @staticmethod
    def _field(text, lo, hi, names):
        values, star = set(), False
        for expr in [e for e in text.split(",") if e]:
            rng, _, step_text = expr.partition("/")
            parts = rng.split("-")
            if parts[0] in ("*", "?"):
                start, end, star = lo, hi, True
            else:
                start = Cron._number(parts[0], names)
                if len(parts) == 1:
                    end = start
                elif len(parts) == 2:
                    end = Cron._number(parts[1], names)
                else:
                    raise BadPattern(expr)
            step = 1
            if "/" in expr:
                step = Cron._number(step_text, None)
                if len(parts) == 1:
                    end = hi
                if step > 1:
                    star = False
            if start < lo or end > hi or start > end or step == 0:
                raise BadPattern(expr)
            values.update(range(start, end + 1, step))
        return values, star

    @staticmethod
    def _number(text, names):
        if names and text.lower() in names:
            return names[text.lower()]
        if not text.isdigit():
            raise BadPattern(text)
        return int(text)

    def _day_ok(self, t):
        dom = t.day in self.dom
        dow = (t.isoweekday() % 7) in self.dow
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def after(self, ts_ns, loc):
        """The first time strictly after ts_ns (whole seconds) the pattern matches."""
        tz = loc or datetime.timezone.utc
        t = datetime.datetime.fromtimestamp(ts_ns // NS, tz) + datetime.timedelta(seconds=1)
        limit = t.year + 5
        while t.year <= limit:
            if t.month not in self.month:
                t = (t.replace(day=1, hour=0, minute=0, second=0) + datetime.timedelta(days=32)).replace(day=1)
                continue
            if not self._day_ok(t):
                t = t.replace(hour=0, minute=0, second=0) + datetime.timedelta(days=1)
                continue
            if t.hour not in self.hour:
                t = t.replace(minute=0, second=0) + datetime.timedelta(hours=1)
                continue
            if t.minute not in self.min:
                t = t.replace(second=0) + datetime.timedelta(minutes=1)
                continue
            if t.second not in self.sec:
                t += datetime.timedelta(seconds=1)
                continue
            return int(t.timestamp()) * NS
        raise BadPattern("pattern exceeds maximum range")


# ---- publish-time checks ----

def check(stream, subject, hdr, headers, sourced):
    """nats-server's scheduling checks of a publish -> the headers to store (a schedule gains
    `Nats-Rollup: sub`); raises the ApiError to answer."""
    if sourced:
        return hdr
    cfg = stream.config
    allowed = cfg.get("allow_msg_schedules")
    pattern = headers.get(PATTERN)
    if pattern:
        try:
            loc = location(headers)
            next_time(pattern, loc, time.time_ns())
        except BadPattern:
            raise E.error("JSMessageSchedulesDisabledErr" if not allowed
                          else "JSMessageSchedulesPatternInvalidErr")
        except E.ApiError:
            if not allowed:
                raise E.error("JSMessageSchedulesDisabledErr")
            raise
        if not allowed:
            raise E.error("JSMessageSchedulesDisabledErr")
        ttl = headers.get(TTL, "")
        if ttl and not _valid_ttl(ttl):
            raise E.error("JSMessageSchedulesTTLInvalidErr")
        rollup = headers.get(ROLLUP, "")
        if rollup and rollup != "sub":
            raise E.error("JSMessageSchedulesRollupInvalidErr")
        if ttl and not cfg.get("allow_msg_ttl"):
            raise E.error("JSMessageTTLDisabledErr")
        target = headers.get(TARGET, "")
        subj = subject.decode("utf-8", "surrogateescape")
        if not target or not is_valid_literal_subject(target) or target == subj:
            raise E.error("JSMessageSchedulesTargetInvalidErr")
        source = headers.get(SOURCE, "")
        if source and (source in (target, subj) or not is_valid_literal_subject(source)):
            raise E.error("JSMessageSchedulesSourceInvalidErr")
        subjects = cfg.get("subjects") or []
        if not any(subjects_overlap(s, target) for s in subjects):
            raise E.error("JSMessageSchedulesTargetInvalidErr")
        if source and not any(subjects_overlap(s, source) for s in subjects):
            raise E.error("JSMessageSchedulesSourceInvalidErr")
        have = headers.get("Nats-Rollup", "")
        if not have:
            return hdr[:-2] + b"Nats-Rollup: sub\r\n\r\n"
        if have != "sub":
            raise E.error("JSMessageSchedulesRollupInvalidErr")
        return hdr
    if NEXT in headers:
        scheduler = headers.get(SCHEDULER, "")
        if headers[NEXT] != PURGE or not scheduler or scheduler == subject.decode(
                "utf-8", "surrogateescape") or not is_valid_literal_subject(scheduler):
            raise E.error("JSMessageSchedulesSchedulerInvalidErr")
        if not allowed:
            raise E.error("JSMessageSchedulesDisabledErr")
        last = stream.store.load_last(scheduler)
        if last is not None and not parse_headers(last.hdr).get(PATTERN):
            raise E.error("JSMessageSchedulesSchedulerInvalidErr")
    elif headers.get(SCHEDULER):
        raise E.error("JSMessageSchedulesSchedulerInvalidErr")
    return hdr


def _valid_ttl(v):
    try:
        parse_ttl(v)
        return True
    except ValueError:
        return False


# ---- the timetable ----

class Timetable:
    """The schedules of one stream: subject -> (seq, due ns), fired from the event loop."""

    def __init__(self, stream):
        self.stream = stream
        self.due = {}                   # schedule subject -> (seq, due ns)
        self.heap = []                  # (due ns, seq, subject); stale entries skipped
        self.inflight = set()           # fired, waiting for the produced message to be stored
        self.timer = None

    def stored(self, seq, subject, headers, ts, replay=False):
        """After a message is stored: a schedule is (re)timed, a plain message on a schedule's
        subject ends it, a produced message re-times or purges its schedule (`replay`: reading
        the stream back at start, where the purge already happened)."""
        if headers.get(PATTERN):
            try:
                nxt, _ = next_time(headers[PATTERN], location(headers), ts)
                self._set(subject, seq, nxt)
            except (BadPattern, E.ApiError):
                pass
        elif not headers.get(SCHEDULER):
            self.cancel(subject)
        scheduler, nxt = headers.get(SCHEDULER), headers.get(NEXT)
        if scheduler and nxt:
            if nxt == PURGE:
                self.cancel(scheduler)
                if not replay:
                    self.stream.purge(subject=scheduler)
            else:
                try:
                    when = go_parse_rfc3339(nxt)
                except ValueError:
                    return
                entry = self.due.get(scheduler)
                if entry is not None:
                    self._set(scheduler, entry[0], when)

    def _set(self, subject, seq, when):
        self.due[subject] = (seq, when)
        self.inflight.discard(subject)
        heapq.heappush(self.heap, (when, seq, subject))
        self._arm()

    def cancel(self, subject):
        self.due.pop(subject, None)
        self.inflight.discard(subject)

    def _arm(self):
        if self.stream.closed:
            return
        while self.heap and self.due.get(self.heap[0][2]) != (self.heap[0][1], self.heap[0][0]):
            heapq.heappop(self.heap)            # superseded
        if not self.heap:
            return
        delay = max(0.0, (self.heap[0][0] - time.time_ns()) / NS)
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.stream.loop.call_later(delay + 0.001, self._fire)

    def _fire(self):
        self.timer = None
        now = time.time_ns()
        st = self.stream
        replica = st.replica
        if replica is not None and not replica.copies_here():
            # a replicated stream's leader fires: its entry stores the message on every copy.
            # Here (a follower, or a leader not ready yet) look again later: leaders change.
            if self.heap and not st.closed:
                self.timer = st.loop.call_later(REPLICA_RECHECK, self._fire)
            return
        while self.heap and self.heap[0][0] <= now and not st.closed:
            when, seq, subject = heapq.heappop(self.heap)
            if self.due.get(subject) != (seq, when) or subject in self.inflight:
                continue
            produced = self._produce(seq, subject, when)
            if produced is None:
                self.cancel(subject)
                continue
            self.inflight.add(subject)
            target, hdr, payload = produced
            if replica is not None:
                if not replica.propose_sourced(target.encode(), hdr, payload, 0, None):
                    self.inflight.discard(subject)
                continue
            try:
                st.process(target.encode(), None, hdr, payload, sourced=True)
            except E.ApiError as err:
                log.warning("scheduled message of '%s > %s' on %s not stored: %s",
                            st.jsa.name, st.name, subject, err.description)
                self.inflight.discard(subject)
        self._arm()

    def _produce(self, seq, subject, when):
        """The message a due schedule publishes, or None when the schedule is no longer valid."""
        sm = self.stream.store.load(seq)
        if sm is None:
            return None
        hdr, payload = sm.hdr, sm.msg
        h = parse_headers(hdr)
        pattern, target = h.get(PATTERN), h.get(TARGET)
        if not pattern or not target:
            return None
        try:
            nxt, repeats = next_time(pattern, location(h), when)
        except (BadPattern, E.ApiError):
            return None
        ttl, rollup, source = h.get(TTL, ""), h.get(ROLLUP, ""), h.get(SOURCE, "")
        if ttl and not _valid_ttl(ttl):
            return None
        if source:
            last = self.stream.store.load_last(source)
            if last is not None:                # else the schedule's own content
                hdr, payload = last.hdr, last.msg
        keep = [(k, v) for k, v in header_lines(hdr)
                if not k.startswith("Nats-Schedule") and not k.startswith("Nats-Expected-")
                and k not in ("Nats-Msg-Id", "Nats-TTL", "Nats-Rollup")]
        keep.append((SCHEDULER, subject))
        keep.append((NEXT, PURGE if not repeats else go_time(nxt)))
        if ttl:
            keep.append(("Nats-TTL", ttl))
        if rollup:
            keep.append(("Nats-Rollup", rollup))
        return target, build_headers(keep), payload

    def close(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
