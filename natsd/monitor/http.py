"""The monitoring HTTP listener, on the server's own loop.

HTTP/1.1 framing is h11's (a well-kept sans-IO parser); this module only moves bytes between
sockets and h11 and routes a path to an endpoint handler. Handlers return a JSON-able value
(or raise HttpError), or `(status, body bytes, content type)` for non-JSON bodies such as
/metrics, or a profiling.Later whose answer comes after a while (a CPU profile); JSON
responses are pretty-printed JSON like nats-server's, with JSONP support.
"""
import logging
from urllib.parse import parse_qs, urlsplit

import h11

from natsd.gofmt import go_json
from natsd.monitor.params import HttpError
from natsd.monitor.profiling import Later

log = logging.getLogger("natsd")


COMPACT_PATHS = {"/healthz"}         # nats-server answers these without indentation


class MonitorServer:
    def __init__(self, server, host, port, tls=None, routes=None):
        """The monitoring endpoints, or `routes` (path -> handler) for another listener on
        the same machinery (the profiling port)."""
        from natsd.net.listener import Listener
        from natsd.monitor import endpoints
        self.server = server
        self.routes = endpoints.routes(server) if routes is None else routes
        self.base = server.opts.http_base_path.rstrip("/") if routes is None else ""
        self.listener = Listener(server.loop, host, port, self._accept)
        self.port = self.listener.port
        self.conns = set()
        self.requests = {}          # path -> count (varz http_req_stats)
        self.tls = tls              # natsd.net.tls.ServerTls for HTTPS

    def _accept(self, sock, addr):
        sock.setblocking(False)
        conn = _HttpConn(self, sock, self.tls.ctx.session() if self.tls is not None else None)
        self.conns.add(conn)
        self.server.loop.add_handler(sock.fileno(), conn)

    def close(self):
        self.listener.close()
        for conn in list(self.conns):
            conn.close()

    def handle(self, target):
        """Route one request target to (status, body bytes, content type)."""
        parts = urlsplit(target)
        path = parts.path
        if self.base:
            # under http_base_path only: the endpoints are not served at their plain paths
            if path != self.base and not path.startswith(self.base + "/"):
                return 404, b"404 page not found\n", "text/plain; charset=utf-8"
            path = path[len(self.base):] or "/"
        if len(path) > 1:
            path = path.rstrip("/")
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        handler = self.routes.get(path)
        if handler is None:
            return 404, b"404 page not found\n", "text/plain; charset=utf-8"
        self.requests[path] = self.requests.get(path, 0) + 1
        try:
            result = handler(query)
        except HttpError as e:
            # nats-server writes the bare error text (no newline) for 400s
            return e.status, e.message.encode(), "text/plain; charset=utf-8"
        except Exception:
            log.exception("monitoring endpoint %s failed", path)
            return 500, b"internal error\n", "text/plain; charset=utf-8"
        if isinstance(result, Later) or isinstance(result, tuple) and len(result) == 3:
            return result                       # answered later / (status, bytes, content type)
        if isinstance(result, tuple):           # (status, body) for endpoints like /healthz
            status, result = result
        else:
            status = 200
        if isinstance(result, (bytes, str)):
            body = result.encode() if isinstance(result, str) else result
            return status, body, "text/html; charset=utf-8"
        if path in COMPACT_PATHS:
            body = go_json(result)
        else:
            body = go_json(result, indent=2)
        callback = query.get("callback")
        if callback:
            return status, b"%s(%s)" % (callback.encode(), body), "application/javascript"
        return status, body, "application/json"


class _HttpConn:
    """One monitoring connection: bytes between the socket and h11 (through TLS for HTTPS;
    monitoring is off the message path, so the session is driven from Python)."""

    def __init__(self, monitor, sock, tls=None):
        self.monitor = monitor
        self.sock = sock
        self.tls = tls
        self.h11 = h11.Connection(h11.SERVER)
        self.out = bytearray()

    def on_event(self, events):
        if events & 0x001 or events & 0x018:     # EPOLLIN / EPOLLERR|EPOLLHUP
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self.close()
                return
            if data is not None and self.tls is not None and data:
                data = self._decrypt(data)
                if data is None:
                    return
            if data is not None:
                self.h11.receive_data(data)
                if not data:
                    self.close()
                    return
                self._process()
        if events & 0x004:
            self._flush()

    def _decrypt(self, data):
        """Ciphertext in, plaintext out (None: nothing yet, or the connection is gone)."""
        tls = self.tls
        tls.feed_bytes(data)
        if tls.do_handshake() < 0:
            self.close()
            return None
        plain = b""
        while tls.established:
            chunk = tls.read_bytes()
            if chunk is None:
                self.close()
                return None
            if not chunk:
                break
            plain += chunk
        self.out += tls.out_bytes()
        self._flush()
        return plain or None

    def _process(self):
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError:
                self._send_simple(400, b"bad request\n")
                self.close()
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Request):
                result = self.monitor.handle(event.target.decode("latin-1"))
                if isinstance(result, Later):
                    result.start(self._answer_later)
                    return                      # h11 holds what came after until we answer
                self._respond(*result)
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                self.close()
                return
            self._process()
        elif self.h11.our_state is h11.MUST_CLOSE:
            self._flush()
            self.close()

    def _answer_later(self, status, body, ctype):
        if self.sock is None:
            return
        self._respond(status, body, ctype)
        self._process()

    def _respond(self, status, body, ctype):
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body))),
                   ("Access-Control-Allow-Origin", "*")]
        data = (self.h11.send(h11.Response(status_code=status, headers=headers))
                + self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage()))
        if self.tls is not None:
            self.tls.write_bytes(data)
            data = self.tls.out_bytes()
        self.out += data
        self._flush()

    def _send_simple(self, status, body):
        try:
            self._respond(status, body, "text/plain; charset=utf-8")
        except h11.LocalProtocolError:
            pass

    def _flush(self):
        if self.sock is None:
            return
        while self.out:
            try:
                n = self.sock.send(self.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.close()
                return
            del self.out[:n]
        if self.sock is not None:
            self.monitor.server.loop.set_writable(self.sock.fileno(), bool(self.out))

    def close(self):
        if self.sock is not None:
            self.monitor.server.loop.remove_handler(self.sock.fileno())
            self.sock.close()
            self.sock = None
            self.monitor.conns.discard(self)
