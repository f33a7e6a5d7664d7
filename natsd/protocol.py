"""ProtocolHandler: the one interface through which the Cython core calls Python, and what
every connection kind's handler does the same way.

The loop, parser and router (natsd/_core) call `c.handler.<method>` on the handler of the
connection's kind (clients in natsd/client.py, routes in natsd/cluster/routeproto.py, leaf
nodes in natsd/leafnodes/leafnode.py) and on nothing else. Every method they call is declared here:
the shared ones are implemented here (error replies, protocol violations, TLS, tracing,
write-readiness), the kind-specific ones are declared and each kind implements those its
parser can reach. Methods marked @per_message run for single messages (only on the paths
their docstrings name: the plain PUB/MSG path never enters Python); the rest run once per
protocol operation or connection event. tests/core/test_handler_interface.py checks that
the core calls nothing undeclared.
"""
import json
import logging
import socket

from natsd._core.conn import monotonic, totals
from natsd.gofmt import go_json, go_quote, go_seconds, json_kind
from natsd.output.logger import TRACE
from natsd.net.tls import go_tls_error, peer_cert_details

log = logging.getLogger("natsd")

# Connection.kind, as natsd/_core/conn.pxd numbers the kinds (its enum is C-level only)
# nats-server's outbound buffers hold up to 64 KiB each: its slow-consumer line counts
# "chunks" of that size.
OUT_CHUNK = 65536

KIND_CLIENT = 0
KIND_LEAF = 1
KIND_ROUTE = 2
KIND_GATEWAY = 3


def per_message(method):
    """Mark a handler method the core may call once per message (keep it cheap)."""
    method.per_message = True
    return method


class ProtocolHandler:
    def __init__(self, server):
        self.server = server

    # ---- kind-specific operations (each kind implements those its parser reaches) ----

    def connect(self, c, payload):
        """CONNECT with its JSON `payload` (bytes)."""
        raise NotImplementedError

    def info(self, c, payload):
        """INFO from the peer, its JSON `payload` (bytes)."""
        raise NotImplementedError

    def auth_pending(self, c):
        """A command arrived before CONNECT: True when it must be refused (and was)."""
        raise NotImplementedError

    def send_connect_info(self, c):
        """The first PING after CONNECT was answered: send what follows it (INFO updates)."""
        raise NotImplementedError

    def pong(self, c):
        """PONG on a route (a pooled route opens its next connection after it)."""
        raise NotImplementedError

    def client_error(self, c, text):
        """-ERR from the peer, its text (bytes); the core then closes the connection."""
        raise NotImplementedError

    def sub(self, c, subject, queue, sid):
        """SUB (queue is None without a queue group)."""
        raise NotImplementedError

    def unsub(self, c, sid, max_msgs):
        """UNSUB, with max_msgs 0 for at once."""
        raise NotImplementedError

    def leaf_sub(self, c, subject, queue, weight):
        """LS+ from a leaf node (or a route's leaf-origin interest)."""
        raise NotImplementedError

    def leaf_unsub(self, c, subject, queue):
        """LS- from a leaf node (or a route's leaf-origin interest)."""
        raise NotImplementedError

    def route_interest(self, c, leaf, plus, args):
        """RS+/RS-/LS+/LS- on a route: `args` is the rest of the line, checked by the handler."""
        raise NotImplementedError

    def unknown_account(self, c, account, subject):
        """A routed message names an account this route has no sublist for: return the
        account's sublist (registering it), or None to drop the message."""
        raise NotImplementedError

    def codec_head(self, c):
        """An HTTP upgrade request head arrived (WebSocket): answer it."""
        raise NotImplementedError

    def codec_error(self, c, error):
        """The connection's codec (WebSocket framing, S2) failed with `error`."""
        raise NotImplementedError

    def close(self, c):
        """The connection closed: release everything it held."""
        raise NotImplementedError

    def raw_data(self, c, data):
        """A connection that does not speak NATS (`c.raw_reader`: MQTT) read `data` (after
        TLS and codecs); the handler parses it."""
        raise NotImplementedError

    @per_message
    def publish_mapped(self, c, subject, reply, hdr, payload):
        """A PUB in an account with subject mappings: map, then deliver."""
        raise NotImplementedError

    @per_message
    def remote_message(self, c, subject, reply, hdr, payload, queues):
        """An RMSG/LMSG in an account with mappings: map, filter queues, deliver."""
        raise NotImplementedError

    @per_message
    def no_responders(self, c, subject, reply):
        """A request (headers on) found no subscribers: answer the 503 status."""
        raise NotImplementedError

    @per_message
    def reserved_reply(self, c, reply):
        """A client's PUB names a reply in a reserved prefix: refused as nats-server."""
        raise NotImplementedError

    def account_interest(self, c, plus, account):
        """A+/A- on a gateway link: the remote's interest in a whole account."""
        raise NotImplementedError

    @per_message
    def publish_denied(self, c, subject):
        """A client published where it may not (a gateway's `_GR_.` subjects): -ERR."""
        raise NotImplementedError

    @per_message
    def gateway_reply(self, c, routed, reply, hdr, payload):
        """A client answers a request that came through a gateway: `routed` is the
        `_GR_.` subject the answer goes back to."""
        self.server.gateway.send_reply(c, routed, reply, hdr, payload)

    @per_message
    def latency_reply(self, c, reply):
        """A client answers a measured request that came from another server (its reply is
        in `c.latency_replies`): the responder's half of the latency goes back there."""
        self.server.remote_latency.replied(c, reply)

    @per_message
    def routed_reply(self, c, account, subject, reply, hdr, payload):
        """A route or gateway link brought a message for a `_GR_.` subject (a reply routed
        back to a cluster): delivered here or passed to the server it names."""
        self.server.gateway.routed_reply(c, account, subject, reply, hdr, payload)

    @per_message
    def message_trace(self, c, subject, hdr, size):
        """A client's message carries a trace header: its trace for the router, None when it
        is not traced, False when it is to be dropped, or the header block to send it with
        untraced (natsd/msgtrace.py)."""
        raise NotImplementedError

    @per_message
    def check_publish(self, c, subject):
        """Publish permission for a subject not yet in c.pub_allowed: decide (and cache)."""
        raise NotImplementedError

    @per_message
    def delivery_denied(self, c, sub, subject):
        """A subscription with a deny filter matched `subject`: True to skip the delivery."""
        raise NotImplementedError

    @per_message
    def auto_unsubscribed(self, c, sub):
        """A subscription reached its UNSUB max with this delivery: remove it."""
        raise NotImplementedError

    def _prefix(self, c):
        raise NotImplementedError

    def peer_name(self, c):
        """The name a message trace gives the connection: a client's `name`, a route's
        server."""
        return getattr(c.state, "name", "") or ""

    def send_err(self, c, text):
        """Send nats-server's `-ERR '<text>'` (the connection stays open)."""
        c.send_bytes(b"-ERR '" + text.encode() + b"'\r\n")
        if log.isEnabledFor(TRACE):
            log.log(TRACE, "%s->> [-ERR '%s']", self._prefix(c), text)

    def fail(self, c, text, reason):
        """-ERR then close: the error reaches the peer before the socket goes."""
        self.send_err(c, text)
        c.schedule_close(reason)

    def parse_json_op(self, c, payload, struct="ClientOpts", fields=None):
        """The JSON object of a CONNECT/INFO line, or None after closing the connection with
        nats-server's reaction to bad JSON or a wrongly typed field (logged, closed, no -ERR).
        `fields` gives the Go types of `struct`'s fields (see unmarshal_error)."""
        try:
            info = json.loads(payload)
        except (ValueError, RecursionError) as e:
            err = str(e)
        else:
            if not isinstance(info, dict):
                err = "json: cannot unmarshal %s into Go value of type server.%s" % (
                    json_kind(info), struct)
            else:
                err = unmarshal_error(info, struct, fields) if fields else None
                if err is None:
                    return info
        log.error("%s%s", self._prefix(c), err)
        c.schedule_close("Protocol Violation")
        return None

    def protocol_error(self, c, text, send_err):
        """A protocol violation: logged, -ERR when `send_err`, the connection closed."""
        log.error("%s%s", self._prefix(c), text)
        if send_err:
            self.send_err(c, text)
        c.schedule_close("Protocol Violation")

    def control_line_exceeded(self, c):
        """A control line longer than max_control_line: -ERR and close."""
        log.error("%smaximum control line exceeded", self._prefix(c))
        self.fail(c, "maximum control line exceeded", "Maximum Control Line Exceeded")

    def max_payload_exceeded(self, c, size):
        """A PUB/HPUB/MSG larger than max_payload: -ERR and close."""
        log.error("%smaximum payload exceeded: %d vs %d", self._prefix(c), size, c.max_payload)
        self.fail(c, "Maximum Payload Violation", "Maximum Payload Exceeded")

    def arg_error(self, c, what, arg):
        """Malformed arguments of a command: nats-server logs `<what>: <arg>` (client ops
        quote the arguments as Go's %q, leaf ops as '%s') and closes without an -ERR."""
        if what.startswith(("processLeaf", "processRouted", "processRemote")):
            words = arg.decode("utf-8", "replace")
            if what.endswith(("Parse Error", "Missing Size")):
                words = "[%s]" % " ".join(words.split())       # Go prints the split arguments
            text = "%s: '%s'" % (what, words)
        else:
            text = "%s: %s" % (what, go_quote(arg))
        self.protocol_error(c, text, False)

    # ---- allow_responses: replies a connection may publish to once it got a request ----

    @per_message
    def allow_reply(self, c, reply):
        """A message with `reply` was delivered to c, whose permissions have allow_responses:
        c may publish to `reply` (max_msgs times, until expires), as nats-server tracks it."""
        st = c.state
        resp = st.perms.response
        if st.replies is None:
            st.replies = {}
        if len(st.replies) > 65536:
            st.replies.clear()
        expires = monotonic() + resp.expires if resp.expires else 0
        st.replies[reply] = [resp.max_msgs or 1, expires]

    @staticmethod
    def use_reply(st, subject):
        """Publishing to `subject` uses one tracked response permission; False if none."""
        entry = st.replies.get(subject)
        if entry is None:
            return False
        remaining, expires = entry
        if expires and monotonic() > expires:
            del st.replies[subject]
            return False
        if remaining <= 1:
            del st.replies[subject]
        else:
            entry[0] = remaining - 1
        return True

    # ---- TLS (the loop calls these; natsd/net/tls.py has the settings) ----
    # A handler whose connections can be TLS defines tls_server(c) (the ServerTls of an
    # accepted connection, None for one we solicited), tls_plaintext_ok(c) and tls_ready(c).

    tls_kind = ""                       # "leafnode", ...: in nats-server's log lines

    def tls_not_offered(self, c):
        """The peer's first bytes are not a TLS handshake: plaintext goes on only where the
        handler allows it (allow_non_tls)."""
        c.state.tls_timer.cancel()
        if self.tls_plaintext_ok(c):
            return True
        log.debug("%sTLS %shandshake error: tls: first record does not look like a TLS handshake",
                  self._prefix(c), self.tls_kind + " " if self.tls_kind else "")
        c.schedule_close("TLS Handshake Failure")
        return False

    def tls_failed(self, c, reason):
        """The TLS handshake failed (or the peer's certificate was refused): logged, closed."""
        log.error("%sTLS %shandshake error: %s", self._prefix(c),
                  self.tls_kind + " " if self.tls_kind else "", go_tls_error(reason))
        c.schedule_close("TLS Handshake Failure")

    def tls_established(self, c):
        """The TLS handshake finished: check the peer, record version and cipher, go on."""
        st = c.state
        if st.tls_timer is not None:
            st.tls_timer.cancel()
        port = self.tls_server(c)
        refused = port.check_peer(c) if port is not None else self.tls_check_remote(c)
        if refused:
            self.tls_failed(c, refused)
            return
        st.tls = {"tls_version": c.tls.version(), "tls_cipher_suite": c.tls.cipher()}
        chain = c.tls.peer_chain()
        if chain:
            st.tls["tls_peer_certs"] = peer_cert_details(chain)
            st.tls["peer_chain"] = chain                    # DER, for an auth callout
            st.tls["verified_chain"] = c.tls.verified_chain()
        if st.info_due:
            st.tls["tls_first"] = True
        log.debug("%sTLS handshake complete", self._prefix(c))
        log.debug("%sTLS version %s, cipher suite %s", self._prefix(c), st.tls["tls_version"],
                  st.tls["tls_cipher_suite"])
        self.tls_ready(c)

    def tls_check_remote(self, c):
        return None

    def tls_timeout(self, c):
        """The handshake did not finish in time: closed (nats-server's -ERR for it is written
        into the TLS connection that never came up, so nothing reaches the peer)."""
        if c.closed or c.closing or c.tls is None or c.tls.established:
            return
        log.debug("%sTLS handshake timeout", self._prefix(c))
        c.schedule_close("TLS Handshake Failure")

    # ---- tracing (-V) ----

    @per_message
    def trace_in(self, c, line):
        """-V: a received protocol line (every one, PUBs included)."""
        log.log(TRACE, '%s<<- [%s]', self._prefix(c), line.decode("utf-8", "replace"))

    @per_message
    def trace_payload(self, c, payload, hsize=0):
        """-V: a received message payload (see `traced_payload`)."""
        text = traced_payload(self.server.opts, payload, hsize)
        if text is not None:
            log.log(TRACE, '%s<<- MSG_PAYLOAD: [%s]', self._prefix(c), text)

    @per_message
    def trace_out(self, c, line):
        """-V: a delivered MSG/HMSG line."""
        log.log(TRACE, '%s->> [%s]', self._prefix(c), line.rstrip(b"\r\n").decode("utf-8", "replace"))

    # ---- calls from the connection ----

    def want_write(self, c, on):
        """Output is queued (on) or drained: EPOLLOUT, and the write-deadline watch list."""
        self.server.loop.set_writable(c.fd, on)
        if on:
            self.server.blocked.add(c)
        else:
            self.server.blocked.discard(c)
            self.server.write_slow.discard(c)

    # What nats-server does when a write deadline passes: clients close by default, routes
    # and leaf nodes retry (`write_timeout: default|close|retry` in each block).
    CLOSE_BY_DEFAULT = True
    STATS_KIND = None          # the slow_consumer_links key this kind counts in (None: clients)

    def write_policy(self):
        """(write deadline, whether passing it closes the connection even when bytes moved)."""
        opts = self.server.opts
        return opts.write_deadline, self._closes(opts.write_timeout)

    def _closes(self, policy):
        return policy == "close" or policy == "default" and self.CLOSE_BY_DEFAULT

    def write_stalled(self, c, now):
        """nats-server's handleWriteTimeout: output queued since c.blocked_since.  Past the
        deadline (and one more write) the connection is a slow consumer, closed unless its
        policy is retry and the socket took bytes meanwhile (then it is watched again from now)."""
        deadline, closes = self.write_policy()
        if now - c.blocked_since <= deadline:
            return
        # Write once more, as nats-server's timed-out write is retried: the kernel takes
        # bytes as soon as it has room, long before it reports the socket writable again.
        c.flush_now()
        if not c.blocked_since or c.closing:
            return
        server = self.server
        pending = c.pending_bytes()
        state = "State" if c in server.write_slow else "Detected"
        log.info("%sSlow Consumer %s: WriteDeadline of %s exceeded with %d chunks of %d total bytes.",
                 self._prefix(c), state, go_seconds(deadline), -(-pending // OUT_CHUNK), pending)
        totals.slow_consumers += 1
        if self.STATS_KIND:
            links = server.slow_consumer_links
            links["events"] += 1
            if state == "Detected" or self.STATS_KIND != "routes":   # a route counts once
                links[self.STATS_KIND] += 1
        if closes or c.last_sent <= c.blocked_since:
            server.blocked.discard(c)
            server.write_slow.discard(c)
            c.schedule_close("Slow Consumer (Write Deadline)")
        else:
            server.write_slow.add(c)
            c.blocked_since = now

    def slow_consumer(self, c):
        """Output beyond max_pending: logged and closed as nats-server's slow consumer."""
        log.info("%sSlow Consumer Detected: MaxPending of %d Exceeded", self._prefix(c), c.max_pending)
        c.schedule_close("Slow Consumer (Pending Bytes)")


# The order of nats-server's Info struct fields, which is the order of keys in every INFO it
# sends (clients, leaf nodes, routes).
INFO_KEYS = (
    "server_id", "server_name", "version", "proto", "git_commit", "go", "host", "port",
    "headers", "auth_required", "tls_required", "tls_verify", "tls_available", "max_payload",
    "jetstream", "ip", "client_id", "client_ip", "nonce", "cluster", "cluster_dynamic",
    "domain", "connect_urls", "ws_connect_urls", "ldm", "compression", "connect_info",
    "remote_account", "acc_is_sys", "api_lvl", "import", "export", "lnoc", "lnocu",
    "info_on_connect", "route_pool_size", "route_pool_idx", "route_account",
    "route_acc_add_reqid", "gossip_mode", "gateway", "gateway_urls", "gateway_url",
    "gateway_cmd", "gateway_cmd_payload", "gateway_nrp", "gateway_iom", "leafnode_urls", "xkey")
_INFO_RANK = {k: i for i, k in enumerate(INFO_KEYS)}


def unmarshal_error(obj, struct, fields):
    """The error Go's json.Unmarshal gives for the first field of `obj` whose JSON type does
    not fit `fields` (name -> "bool" | "string" | "int"), or None. null fits everything."""
    for key, v in obj.items():
        want = fields.get(key)
        if want is None or v is None:
            continue
        kind = json_kind(v)
        if want == "int":
            if kind == "number" and (isinstance(v, int) or float(v).is_integer()) \
                    and -2**63 <= v < 2**63:
                continue
            if kind == "number":
                kind = "number %s" % json.dumps(v)
        elif kind == want:
            continue
        return "json: cannot unmarshal %s into Go struct field %s.%s of type %s" % (
            kind, struct, key, want)
    return None


def info_line(info):
    """An INFO protocol line: keys in nats-server's order, JSON as its json.Marshal writes it."""
    ordered = dict(sorted(info.items(), key=lambda kv: _INFO_RANK.get(kv[0], len(INFO_KEYS))))
    return b"INFO " + go_json(ordered) + b" \r\n"


def release_connection(loop, c, *timers):
    """The socket side of a final close (every kind): off the loop, buffers dropped, the fd
    closed, the connection's timers cancelled."""
    import os
    loop.remove_handler(c.fd)
    c.mark_closed()
    os.close(c.fd)
    for t in timers:
        if t is not None:
            t.cancel()


def prepare_accepted(sock):
    """An accepted socket as the loop wants it: non-blocking, Nagle off."""
    sock.setblocking(False)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def traced_payload(opts, payload, hsize=0):
    """What a MSG_PAYLOAD trace shows of a message (nats-server's traceMsg): the payload
    Go-quoted; past max_traced_msg_len cut, with "..."; None for an empty payload. With
    `trace_headers` only the header block is (without its closing blank line), and None for a
    message without headers."""
    if opts.trace_headers:
        payload = payload[:hsize - 4] if hsize >= 4 else b""
    if not payload:
        return None
    limit = opts.max_traced_msg_len
    if 0 < limit < len(payload):
        return '"%s..."' % go_quote(payload[:limit])[1:-1]
    return go_quote(payload)


def proto_number(v) -> int:
    """A peer's INFO `proto` or CONNECT `protocol`: 0 when absent or not a whole number."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
