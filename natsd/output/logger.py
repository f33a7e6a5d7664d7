"""Logging in nats-server's format: `[pid] 2006/01/02 15:04:05.000000 [INF] message`.

Levels map to nats-server's tags: TRC (protocol trace, -V), DBG (-D), INF, WRN, ERR, FTL.
Launchers read these lines (`Server is ready`, `[FTL]`), so the format is part of the interface.
"""
import logging
import os
import sys
import time

from natsd.output.rotation import RotatingLogFile
from natsd.output.syslog import SyslogError, SyslogHandler

TRACE = 5
FATAL = logging.CRITICAL
logging.addLevelName(TRACE, "TRC")

_TAGS = {TRACE: "TRC", logging.DEBUG: "DBG", logging.INFO: "INF", logging.WARNING: "WRN",
         logging.ERROR: "ERR", logging.CRITICAL: "FTL"}

log = logging.getLogger("natsd")


class NatsFormatter(logging.Formatter):
    def __init__(self, logtime=True, utc=False):
        super().__init__()
        self.logtime = logtime
        self.utc = utc
        self.prefix = "[%d] " % os.getpid()

    def format(self, record):
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return self._line(_TAGS.get(record.levelno, "INF"), msg, record.created)

    def direct_line(self, tag, msg):
        """A line the log file writes of its own (rotation): the same prefix, stamped now."""
        return self._line(tag, msg, time.time())

    def _line(self, tag, msg, t):
        if not self.logtime:
            return "%s[%s] %s" % (self.prefix, tag, msg)
        tm = time.gmtime(t) if self.utc else time.localtime(t)
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", tm) + ".%06d" % int((t % 1) * 1e6)
        return "%s%s [%s] %s" % (self.prefix, stamp, tag, msg)


def _destination(opts):
    """nats-server's ConfigureLogger order: a log file (rotated), remote syslog, local
    syslog, else stderr.  Raises SyslogError / OSError when the destination cannot be opened."""
    if opts.log_file:
        return RotatingLogFile(opts.log_file, max(0, opts.log_size_limit), max(0, opts.log_max_num))
    if opts.remote_syslog:
        return SyslogHandler(opts.remote_syslog)
    if opts.syslog:
        return SyslogHandler()
    return logging.StreamHandler(sys.stderr)


def configure(opts):
    """(Re)configure the natsd logger from Options: level, time stamps, destination.

    Raises LogDestinationError (nats-server's fatal text) when the destination cannot be
    opened; the logger then keeps its old destination."""
    level = logging.INFO
    if opts.debug:
        level = logging.DEBUG
    if opts.trace:
        level = TRACE
    try:
        handler = _destination(opts)
    except SyslogError as e:
        raise LogDestinationError(str(e)) from None
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise LogDestinationError("error opening file: open %s: %s" % (opts.log_file, why)) from None
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    handler.setFormatter(NatsFormatter(opts.logtime, opts.logtime_utc))
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False
    if isinstance(handler, RotatingLogFile) and handler.over_limit():
        log.info("Rotating logfile...")
    return log


class LogDestinationError(Exception):
    """The log destination could not be opened (nats-server exits with log.Fatalf)."""


_rate_limited: dict[str, float] = {}


def rate_limited_warning(text):
    """nats-server's RateLimitWarnf: a warning logged once, then not again while the same
    text came less than a second ago."""
    now = time.monotonic()
    last = _rate_limited.get(text)
    if last is not None and now - last < 1.0:
        return
    if len(_rate_limited) > 1000:
        _rate_limited.clear()
    _rate_limited[text] = now
    log.warning("%s", text)
