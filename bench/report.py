"""bench/report.py: natsd-bench's output, formatted exactly as `nats bench` prints it.

Owns: the banner (`HH:MM:SS Starting <kind> benchmark [k=v, ...]`, keys sorted), the per-client
start lines, the progress bar, the `NATS <kind> stats:` line, the per-client and aggregated
(min/avg/max/stddev) lines, and the CSV file (`--csv`). Numbers use thousands separators,
sizes are IEC (humanize.IBytes: `16 B`, `16 KiB`, `2.4 MiB`), durations are Go-style (`0s`,
`2m0s`, `10ms`), latency is the average time per message in microseconds (`0.07us`).
"""
import math
import sys
import threading
import time

SIZES = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]


def commas(n):
    return "{:,}".format(int(round(n)))


def ibytes(n):
    """humanize.IBytes: '128 B', '16 KiB', '3.5 GiB', '558 KiB', '2.4 MiB'."""
    n = float(n)
    if n < 10:
        return "%d B" % n
    e = int(math.floor(math.log(n) / math.log(1024)))
    e = min(e, len(SIZES) - 1)
    val = math.floor(n / (1024 ** e) * 10 + 0.5) / 10
    return ("%.1f %s" if val < 10 else "%.0f %s") % (val, SIZES[e])


def go_duration(seconds):
    """Go's time.Duration.String() for the common cases."""
    if seconds == 0:
        return "0s"
    ns = int(round(seconds * 1e9))
    if ns < 1000:
        return "%dns" % ns
    if ns < 1_000_000:
        return ("%.3f" % (ns / 1e3)).rstrip("0").rstrip(".") + "µs"
    if ns < 1_000_000_000:
        return ("%.6f" % (ns / 1e6)).rstrip("0").rstrip(".") + "ms"
    total = ns / 1e9
    h, rem = divmod(int(total), 3600)
    m, _ = divmod(rem, 60)
    s = total - h * 3600 - m * 60
    s_txt = ("%.9f" % s).rstrip("0").rstrip(".") + "s"
    if h:
        return "%dh%dm%s" % (h, m, s_txt)
    if m:
        return "%dm%s" % (m, s_txt)
    return s_txt


def fmt_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return commas(v)
    return str(v)


def stamp():
    return time.strftime("%H:%M:%S")


def log(line, out=None):
    out = out or sys.stdout
    out.write("%s %s\n" % (stamp(), line))
    out.flush()


def banner(kind, params):
    """`Starting <kind> benchmark [k=v, ...]` with keys sorted."""
    body = ", ".join("%s=%s" % (k, fmt_value(params[k])) for k in sorted(params))
    return "Starting %s benchmark [%s]" % (kind, body)


def rate_line(msgs, nbytes, seconds):
    """'1,013,938 msgs/sec ~ 124 MiB/sec ~ 0.99us'."""
    seconds = max(seconds, 1e-9)
    rate = msgs / seconds
    lat_us = (seconds / msgs * 1e6) if msgs else 0.0
    return "%s msgs/sec ~ %s/sec ~ %.2fus" % (commas(rate), ibytes(nbytes / seconds), lat_us)


def pstdev(vals):
    if len(vals) < 2:
        return 0.0
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))


def summary(kind, results):
    """The stats block printed after the run (nats bench's Benchmark.Report())."""
    done = [r for r in results if r.msgs > 0 and r.start is not None and r.end is not None]
    lines = []
    if len(results) == 1:
        r = results[0]
        lines.append("NATS %s stats: %s" % (kind, rate_line(r.msgs, r.bytes, r.duration if done else 0)))
        if r.partial:
            lines.append("(partial: %s of %s msgs)" % (commas(r.msgs), commas(r.expected)))
        return "\n".join(lines)
    for r in results:
        line = "  [%d] %s (%s msgs)" % (r.client, rate_line(r.msgs, r.bytes, r.duration), commas(r.msgs))
        if r.partial:
            line += " (partial: expected %s)" % commas(r.expected)
        lines.append(line)
    lines.append("")
    if done:
        start = min(r.start for r in done)
        end = max(r.end for r in done)
        total = sum(r.msgs for r in done)
        tbytes = sum(r.bytes for r in done)
        secs = max(end - start, 1e-9)
        lines.append(" NATS %s aggregated stats: %s msgs/sec ~ %s/sec" % (kind, commas(total / secs), ibytes(tbytes / secs)))
        rates = [r.msgs / r.duration for r in done]
        lats = [r.duration / r.msgs * 1e6 for r in done]
    else:
        lines.append(" NATS %s aggregated stats: 0 msgs/sec ~ 0 B/sec" % kind)
        rates, lats = [0.0], [0.0]
    lines.append(" message rates min %s | avg %s | max %s | stddev %s msgs" % (
        commas(min(rates)), commas(sum(rates) / len(rates)), commas(max(rates)), commas(pstdev(rates))))
    lines.append(" avg latencies min %.2fus | avg %.2fus | max %.2fus | stddev %.2fus" % (
        min(lats), sum(lats) / len(lats), max(lats), pstdev(lats)))
    return "\n".join(lines)


def write_csv(path, results, run_id):
    """nats bench's CSV: one row per client."""
    with open(path, "w") as f:
        f.write("#RunID, ClientID, MsgCount, MsgBytes, MsgsPerSec, BytesPerSec, DurationSecs\n")
        for r in results:
            d = r.duration
            f.write("%s,%d,%d,%d,%d,%d,%f\n" % (run_id, r.client, r.msgs, r.bytes, int(r.msgs / d) if d else 0,
                                                 int(r.bytes / d) if d else 0, d))


class Progress:
    """One bar per client. On a terminal the bars are redrawn in place twice a second; otherwise
    (pipes, tests) only the final lines are printed, once, when the run ends."""

    def __init__(self, clients, totals, label="Finished", running="Publishing", width=64, enabled=True, out=None):
        self.out = out or sys.stdout
        self.enabled = enabled
        self.tty = enabled and hasattr(self.out, "isatty") and self.out.isatty()
        self.totals = totals
        self.done = [0] * clients
        self.label = label
        self.running = running
        self.width = width
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._drawn = False
        self._thread = None
        if self.tty:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def update(self, client, n):
        self.done[client - 1] = n

    def _line(self, i, final):
        total = self.totals[i] or 1
        frac = min(1.0, self.done[i] / total)
        if final:
            frac = 1.0 if self.done[i] >= total else frac
        fill = int(frac * self.width)
        bar = "=" * fill + ("" if fill >= self.width else ">" + " " * (self.width - fill - 1))
        if fill >= self.width:
            bar = "=" * self.width
        label = self.label if (final and frac >= 1.0) else self.running
        el = "%ds" % int(time.monotonic() - self.t0)
        return "%-13s%3s [%s] %3d%%" % (label, el, bar[:self.width], int(frac * 100))

    def _draw(self, final=False):
        if self._drawn:
            self.out.write("\x1b[%dA" % len(self.totals))
        for i in range(len(self.totals)):
            if self.tty:
                self.out.write("\r" + self._line(i, final) + "\x1b[K\n")
            else:
                self.out.write(self._line(i, final) + "\n")
        self._drawn = True
        self.out.flush()

    def _loop(self):
        while not self._stop.wait(0.5):
            self._draw()

    def finish(self):
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._draw(final=True)
