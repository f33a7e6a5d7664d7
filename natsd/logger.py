"""Logging in nats-server's format: `[pid] 2006/01/02 15:04:05.000000 [INF] message`.

Levels map to nats-server's tags: TRC (protocol trace, -V), DBG (-D), INF, WRN, ERR, FTL.
Launchers read these lines (`Server is ready`, `[FTL]`), so the format is part of the interface.
"""
import logging
import os
import sys
import time

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
        tag = _TAGS.get(record.levelno, "INF")
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if not self.logtime:
            return "%s[%s] %s" % (self.prefix, tag, msg)
        t = record.created
        tm = time.gmtime(t) if self.utc else time.localtime(t)
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", tm) + ".%06d" % int((t % 1) * 1e6)
        return "%s%s [%s] %s" % (self.prefix, stamp, tag, msg)


def configure(opts):
    """(Re)configure the natsd logger from Options: level, time stamps, destination."""
    level = logging.INFO
    if opts.debug:
        level = logging.DEBUG
    if opts.trace:
        level = TRACE
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    if opts.log_file:
        handler = logging.FileHandler(opts.log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NatsFormatter(opts.logtime, opts.logtime_utc))
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False
    return log
