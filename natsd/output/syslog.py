"""Logging to syslog as nats-server does (`syslog`, `remote_syslog`, `-s`, `-r`).

nats-server writes through Go's log/syslog, so the datagrams and lines are Go's:

- local (`syslog: true`): the first of /dev/log, /var/run/syslog, /var/run/log that takes a
  unixgram or unix connection; facility daemon; `<PRI>Jan _2 15:04:05 TAG[PID]: MSG\\n`;
- remote (`remote_syslog: "udp://host:514"`, `tcp://...`, `unix:///path`): facility kern
  (priority LOG_DEBUG, as nats-server dials it); `<PRI>RFC3339 HOSTNAME TAG[PID]: MSG\\n`, with
  no host name for a unix socket.

TAG is the executable's name.  The message carries no `[INF]`-style label; traces go out at
severity notice, as in nats-server.  A write that fails reconnects once and is otherwise dropped:
the server keeps serving when the syslog daemon goes away.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from urllib.parse import urlsplit

from natsd.output.program import program_name

LOG_DAEMON = 3 << 3

# Go syslog severities for nats-server's levels (Tracef logs at notice).
_SEVERITY = {5: 5, logging.DEBUG: 7, logging.INFO: 5, logging.WARNING: 4, logging.ERROR: 3,
             logging.CRITICAL: 2}

_LOCAL_PATHS = ("/dev/log", "/var/run/syslog", "/var/run/log")


class SyslogError(Exception):
    """Why syslog could not be reached, in the words nats-server's log.Fatalf prints."""


def tag() -> str:
    """nats-server's GetSysLoggerTag: the executable's name."""
    return program_name()


def _unix(path: str, kinds=(socket.SOCK_DGRAM, socket.SOCK_STREAM)) -> socket.socket:
    last = None
    for kind in kinds:
        s = socket.socket(socket.AF_UNIX, kind)
        try:
            s.connect(path)
            return s
        except OSError as e:
            s.close()
            last = e
    raise last


def _go_dial_error(network: str, addr: str, e: OSError) -> str:
    reason = e.strerror.lower() if e.strerror else str(e)
    return "dial %s %s: connect: %s" % (network, addr, reason)


class SyslogHandler(logging.Handler):
    """One syslog connection: local when `url` is empty, else nats-server's remote_syslog URL."""

    def __init__(self, url: str = ""):
        super().__init__()
        self.tag = tag()
        self.pid = os.getpid()
        self.hostname = socket.gethostname()
        self._lock = threading.Lock()
        if url:
            u = urlsplit(url)
            self.network = u.scheme
            if self.network in ("udp", "tcp"):
                self.addr = u.netloc
            elif self.network == "unix":
                self.addr = u.path
            else:
                raise SyslogError('error invalid network type: "%s"' % u.scheme)
            self.facility = 0              # syslog.Dial(..., LOG_DEBUG, ...): kern
        else:
            self.network, self.addr, self.facility = "", "", LOG_DAEMON
        self.local = self.network in ("", "unix")
        self._sock = None
        try:
            self._connect()
        except OSError as e:
            raise SyslogError('error connecting to syslog: "%s"' % self._why(e)) from None

    def _why(self, e: OSError) -> str:
        if self.network == "":
            return "Unix syslog delivery error"
        return _go_dial_error(self.network, self.addr, e)

    def _connect(self):
        if self.network == "":
            last = None
            for path in _LOCAL_PATHS:
                try:
                    self._sock = _unix(path)
                    return
                except OSError as e:
                    last = e
            raise last or OSError("no syslog socket")
        if self.network == "unix":
            self._sock = _unix(self.addr, (socket.SOCK_STREAM,))
            return
        host, _, port = self.addr.rpartition(":")
        if not port.isdigit():
            raise OSError(0, "missing port in address")
        kind = socket.SOCK_DGRAM if self.network == "udp" else socket.SOCK_STREAM
        family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
        s = socket.socket(family, kind)
        try:
            s.connect((host.strip("[]") or "localhost", int(port)))
        except OSError:
            s.close()
            raise
        self._sock = s

    def line(self, record) -> bytes:
        pri = self.facility | _SEVERITY.get(record.levelno, 5)
        msg = record.getMessage()
        nl = "" if msg.endswith("\n") else "\n"
        now = record.created
        if self.local:
            stamp = time.strftime("%b ", time.localtime(now)) + "%2d" % time.localtime(now).tm_mday + \
                time.strftime(" %H:%M:%S", time.localtime(now))
            text = "<%d>%s %s[%d]: %s%s" % (pri, stamp, self.tag, self.pid, msg, nl)
        else:
            text = "<%d>%s %s %s[%d]: %s%s" % (pri, _rfc3339(now), self.hostname, self.tag,
                                               self.pid, msg, nl)
        return text.encode("utf-8", "replace")

    def emit(self, record):
        data = self.line(record)
        with self._lock:
            for attempt in (0, 1):
                try:
                    if self._sock is None:
                        self._connect()
                    self._sock.sendall(data)
                    return
                except OSError:
                    if self._sock is not None:
                        self._sock.close()
                        self._sock = None
            # both tries failed: dropped, as Go's syslog.Writer drops it

    def close(self):
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
        super().close()


def _rfc3339(t: float) -> str:
    """Go's time.RFC3339 in local time: 2006-01-02T15:04:05-07:00 (Z for UTC)."""
    tm = time.localtime(t)
    off = tm.tm_gmtoff
    if off == 0:
        zone = "Z"
    else:
        sign = "+" if off > 0 else "-"
        off = abs(off)
        zone = "%s%02d:%02d" % (sign, off // 3600, off % 3600 // 60)
    return time.strftime("%Y-%m-%dT%H:%M:%S", tm) + zone
