"""A server process for the comparison tools: started from a command template on a free port,
ready once "Server is ready" is in its log, stopped by PID, its log scanned for errors.
Used by compare_gobench.py, memory_check.py and corpus.py (natsd and nats-server alike)."""
import os
import shlex
import signal
import socket
import subprocess
import time


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS_FROM = 10000
_next_port = None


def free_port():
    """A free TCP port below the kernel's ephemeral range. A port from that range can be
    taken, while its server restarts, as the source port of some outbound connection (a
    route dialling, a client), and the restart then fails with "address already in use".
    Ports are handed out in turn from an offset derived from the process id, so one run
    does not hand out the same port twice and concurrent runs start apart."""
    global _next_port
    low = _ephemeral_low()
    span = max(low - _PORTS_FROM, 1000)
    if _next_port is None:
        _next_port = (os.getpid() * 7919) % span
    for _ in range(span):
        port = _PORTS_FROM + _next_port % span
        _next_port += 1
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free TCP port in %d-%d" % (_PORTS_FROM, _PORTS_FROM + span - 1))


class ServerProcess:
    def __init__(self, kind, cmd, logpath, preexec_fn=None, env=None):
        self.kind = kind
        self.cmd = cmd
        self.logpath = logpath
        self.log = open(logpath, "wb")
        self.proc = subprocess.Popen(shlex.split(cmd), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=preexec_fn, env=env)
        self.pid = self.proc.pid

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.logpath, "rb") as f:
                if b"Server is ready" in f.read():
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited rc={self.proc.returncode}: {self.cmd}\n"
                                   f"{self.log_text()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.kind} not ready after {timeout}s: {self.cmd}\n{self.log_text()}")

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def log_text(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def bad_lines(self):
        """[ERR]/[FTL] lines and whole tracebacks, verbatim."""
        out, lines, i = [], self.log_text().splitlines(), 0
        while i < len(lines):
            if lines[i].startswith("Traceback (most recent call last)"):
                j = i + 1
                while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                    j += 1
                out.append("\n".join(lines[i:j + 1]))
                i = j + 1
                continue
            if "[ERR]" in lines[i] or "[FTL]" in lines[i]:
                out.append(lines[i])
            i += 1
        return out
