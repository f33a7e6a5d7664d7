"""Outbound TCP connects on the loop (leaf node remotes, routes): non-blocking, bounded in
time, the outcome reported once to a callback; and the HTTP CONNECT tunnel through a proxy
that a leaf node remote's WebSocket connections may take (HttpTunnel)."""
import base64
import errno
import os
import socket

from natsd.gofmt import go_quote

DIAL_TIMEOUT = 2.0


class _LoopStep:
    """A step on a socket, run by the loop, bounded in time, reported once:
    `done(sock, None)` or `done(None, reason)`."""

    def _release(self):
        self.finished = True
        if self.timer is not None:
            self.timer.cancel()
        try:
            self.loop.remove_handler(self.fd)
        except (OSError, KeyError):
            pass

    def _report(self, sock, reason):
        self.finished = True
        # a failure found before the loop ran (bad address) is reported from the loop too,
        # so callers see one order of events
        self.loop.call_soon(self.done, sock, reason)


class Dialer(_LoopStep):
    """One connect attempt to host:port. `done(sock, None)` on success (the socket is
    non-blocking with Nagle off), `done(None, reason)` on failure or timeout."""

    def __init__(self, loop, host, port, done, timeout=DIAL_TIMEOUT):
        self.loop = loop
        self.done = done
        self.finished = False
        self.sock = None
        self.fd = -1
        self.timer = None
        dial = host
        if host in ("0.0.0.0", ""):
            dial = "127.0.0.1"
        elif host == "::":
            dial = "::1"
        try:
            family, stype, proto, _, addr = socket.getaddrinfo(dial, port, 0, socket.SOCK_STREAM)[0]
            sock = socket.socket(family, stype, proto)
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            err = sock.connect_ex(addr)
        except OSError as e:
            self._report(None, e.strerror or str(e))
            return
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            sock.close()
            self._report(None, os.strerror(err))
            return
        self.sock = sock
        self.fd = sock.fileno()
        self.timer = loop.call_later(timeout, self._timeout)
        loop.add_handler(self.fd, self, True)

    def on_event(self, events):
        if not self.finished:
            self._finish(self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))

    def _timeout(self):
        if not self.finished:
            self._finish(errno.ETIMEDOUT)

    def _finish(self, err):
        self._release()
        if err:
            self.sock.close()
            self._report(None, os.strerror(err))
        else:
            self._report(self.sock, None)

    def cancel(self):
        if not self.finished:
            self._release()
            if self.sock is not None:
                self.sock.close()


class HttpTunnel(_LoopStep):
    """HTTP CONNECT to `target` ("host:port") over `sock`, a connection to an HTTP proxy, as
    nats-server's establishHTTPProxyTunnel asks: `done(sock, None)` once the proxy answered
    200, `done(None, error)` with nats-server's words otherwise, all within `timeout`."""

    def __init__(self, loop, sock, target, username, password, timeout, done):
        self.loop = loop
        self.sock = sock
        self.done = done
        self.buf = b""
        self.finished = False
        self.fd = sock.fileno()
        self.timer = None
        head = "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\n" % (target, target)
        if username and password:
            token = base64.b64encode(("%s:%s" % (username, password)).encode()).decode()
            head += "Proxy-Authorization: Basic %s\r\n" % token
        try:
            sock.send((head + "\r\n").encode())     # a few hundred bytes into an empty buffer
        except OSError as e:
            self._report(None, "failed to write CONNECT request: %s" % (e.strerror or e))
            return
        self.timer = loop.call_later(timeout, self._timeout)
        loop.add_handler(self.fd, self)

    def on_event(self, events):
        if self.finished:
            return
        try:
            chunk = self.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._finish(None, "failed to read proxy response: %s" % (e.strerror or e))
            return
        if not chunk:
            self._finish(None, "failed to read proxy response: unexpected EOF")
            return
        self.buf += chunk
        if b"\r\n\r\n" not in self.buf:
            return
        line = self.buf.split(b"\r\n", 1)[0].decode("latin-1")
        proto, _, status = line.partition(" ")
        code = status.split(" ", 1)[0]
        if not proto.startswith("HTTP/") or not code.isdigit() or len(code) != 3:
            self._finish(None, "failed to read proxy response: malformed HTTP response %s" % go_quote(line))
        elif code != "200":
            self._finish(None, "proxy CONNECT failed: %s" % status)
        else:
            self._finish(self.sock, None)

    def _timeout(self):
        if not self.finished:
            try:
                local, peer = self.sock.getsockname(), self.sock.getpeername()
                where = "read tcp %s->%s: " % (host_label(local[0], local[1]), host_label(peer[0], peer[1]))
            except OSError:
                where = ""
            self._finish(None, "failed to read proxy response: %si/o timeout" % where)

    def _finish(self, sock, reason):
        self._release()
        if sock is None:
            self.sock.close()
        self._report(sock, reason)

    def cancel(self):
        if not self.finished:
            self._finish(None, "canceled")


def host_label(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def go_dial_error(reason):
    """Go's words for a failed dial (the tail of `dial tcp HOST:PORT: ...`)."""
    r = reason.lower()
    if "refused" in r:
        return "connect: connection refused"
    if "timed out" in r:
        return "i/o timeout"
    return r


def report_connect_error(opts, first_connect, attempts):
    """nats-server's shouldReportConnectErr: a failed dial of a route or leaf node remote is
    logged as an error on the first attempt and every `connect_error_reports` attempts
    (`reconnect_error_reports` once it had connected before); at debug level otherwise."""
    every = opts.connect_error_reports if first_connect else opts.reconnect_error_reports
    return attempts == 1 or every > 0 and attempts % every == 0
