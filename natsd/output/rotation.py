"""The log file, rotated by size as nats-server rotates it (`log_size_limit`,
`logfile_max_num`).

When a write takes the file past the limit, the file is renamed to
`<name>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` (local time, nanoseconds), a new file is opened and
its first line says `Rotated log, backup saved as "<backup>"`.  With `logfile_max_num` N the
oldest backups are removed until N-1 remain, each removal logged as `Purged log file`.  The
lines the rotation writes itself end in CRLF, as nats-server's do.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time

_BACKUP_STAMP = re.compile(r"\d{4}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{1,9}")


def backup_name(path: str, now_ns: int) -> str:
    seconds, nanos = divmod(now_ns, 1_000_000_000)
    tm = time.localtime(seconds)
    return "%s.%04d.%02d.%02d.%02d.%02d.%02d.%09d" % (
        path, tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanos)


class RotatingLogFile(logging.Handler):
    """A logging handler on one file, appended to, rotated at `size_limit` bytes (0: never)."""

    def __init__(self, path: str, size_limit: int = 0, max_files: int = 0):
        super().__init__()
        self.path = path
        self.limit = self.size_limit = size_limit
        self.max_files = max_files
        self._lock = threading.Lock()
        self._file = open(path, "ab")
        self.written = self._file.tell()

    def over_limit(self) -> bool:
        """True when the file is already past its limit when opened (nats-server then logs
        `Rotating logfile...`, and that line rotates it)."""
        return self.size_limit > 0 and self.written > self.size_limit

    def emit(self, record):
        try:
            self.write((self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)

    def write(self, data: bytes):
        with self._lock:
            if self._file is None:
                return
            self._file.write(data)
            self._file.flush()
            self.written += len(data)
            if self.size_limit > 0 and self.written > self.limit:
                self._rotate()

    def _direct(self, tag: str, text: str) -> int:
        """A line of the rotation's own, written past the formatter (CRLF, as nats-server)."""
        fmt = self.formatter
        line = fmt.direct_line(tag, text) if hasattr(fmt, "direct_line") else f"[{tag}] {text}"
        data = (line + "\r\n").encode("utf-8", "replace")
        self._file.write(data)
        self._file.flush()
        return len(data)

    def _rotate(self):
        try:
            self._file.close()
        except OSError as e:
            self.limit *= 2
            self._direct("ERR", "Unable to close logfile for rotation (%s), will attempt next rotation "
                                "at size %d" % (e, self.limit))
            return
        bak = backup_name(self.path, time.time_ns())
        try:
            os.rename(self.path, bak)
        except OSError:
            pass                                  # nats-server ignores a failed rename too
        self._file = open(self.path, "ab")
        self.written = self._direct("INF", 'Rotated log, backup saved as "%s"' % bak)
        self.limit = self.size_limit
        if self.max_files > 0:
            self._purge()

    def _purge(self):
        directory = os.path.dirname(self.path) or "."
        base = os.path.basename(self.path)
        try:
            names = sorted(os.listdir(directory))
        except OSError as e:
            self._direct("ERR", 'Unable to read directory "%s" for log purge (%s), will attempt next '
                                "rotation" % (directory, e))
            return
        backups = [n for n in names if n.startswith(base + ".")
                   and _BACKUP_STAMP.fullmatch(n[len(base) + 1:])
                   and not os.path.isdir(os.path.join(directory, n))]
        for name in backups[:max(0, len(backups) - (self.max_files - 1))]:
            try:
                os.remove(os.path.join(directory, name))
            except OSError as e:
                self._direct("ERR", 'Unable to remove backup log file "%s" (%s), will attempt next '
                                    "rotation" % (name, e))
                return
            self._direct("INF", 'Purged log file "%s"' % name)

    def close(self):
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        super().close()
