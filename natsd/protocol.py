"""ProtocolHandler: what every connection kind's handler does the same way.

The Cython parser and router call a handler object per connection kind (clients in
natsd/client.py, leaf nodes in natsd/leafnode.py). Error replies, protocol violations,
tracing and write-readiness are identical for all kinds and live here.
"""
import json
import logging
import socket

from natsd.logger import TRACE

log = logging.getLogger("natsd")


class ProtocolHandler:
    def __init__(self, server):
        self.server = server

    def _prefix(self, c):
        raise NotImplementedError

    def send_err(self, c, text):
        c.send_bytes(b"-ERR '" + text.encode() + b"'\r\n")
        if log.isEnabledFor(TRACE):
            log.log(TRACE, "%s->> [-ERR '%s']", self._prefix(c), text)

    def fail(self, c, text, reason):
        """-ERR then close: the error reaches the peer before the socket goes."""
        self.send_err(c, text)
        c.schedule_close(reason)

    def parse_json_op(self, c, payload, op="CONNECT"):
        """The JSON object of a CONNECT/INFO line, or None after closing the connection with
        nats-server's reaction to bad JSON (logged, closed, no -ERR)."""
        try:
            info = json.loads(payload)
            if not isinstance(info, dict):
                raise ValueError("%s must be a JSON object" % op)
            return info
        except ValueError as e:
            log.error("%s%s", self._prefix(c), e)
            c.schedule_close("Protocol Violation")
            return None

    def protocol_error(self, c, text, send_err):
        log.error("%s%s", self._prefix(c), text)
        if send_err:
            self.send_err(c, text)
        c.schedule_close("Protocol Violation")

    def control_line_exceeded(self, c):
        log.error("%smaximum control line exceeded", self._prefix(c))
        self.fail(c, "maximum control line exceeded", "Maximum Control Line Exceeded")

    def max_payload_exceeded(self, c, size):
        log.error("%sMaximum Payload Violation", self._prefix(c))
        self.fail(c, "Maximum Payload Violation", "Maximum Payload Exceeded")

    # ---- tracing (-V) ----

    def trace_in(self, c, line):
        log.log(TRACE, '%s<<- [%s]', self._prefix(c), line.decode("utf-8", "replace"))

    def trace_payload(self, c, payload):
        log.log(TRACE, '%s<<- MSG_PAYLOAD: ["%s"]', self._prefix(c),
                payload[:self.server.opts.max_traced_msg_len or None].decode("utf-8", "replace"))

    def trace_out(self, c, line):
        log.log(TRACE, '%s->> [%s]', self._prefix(c), line.rstrip(b"\r\n").decode("utf-8", "replace"))

    # ---- calls from the connection ----

    def want_write(self, c, on):
        """Output is queued (on) or drained: EPOLLOUT, and the write-deadline watch list."""
        self.server.loop.set_writable(c.fd, on)
        if on:
            self.server.blocked.add(c)
        else:
            self.server.blocked.discard(c)

    def slow_consumer(self, c):
        log.info("%sSlow Consumer Detected: MaxPending of %d Exceeded", self._prefix(c), c.max_pending)
        c.schedule_close("Slow Consumer (Pending Bytes)")


def prepare_accepted(sock):
    """An accepted socket as the loop wants it: non-blocking, Nagle off."""
    sock.setblocking(False)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
