"""ServerLinkHandler: what the handlers of server-to-server links (routes, gateways) answer
alike: a client's SUB/UNSUB and leaf interest ignored, every subject publishable, a linked
message routed (through the account's mappings when the parser asks), traced as the hop it
is, nothing of a client's own replies or no-responders."""
import json
import logging

from natsd import msgtrace
from natsd._core.conn import Connection
from natsd._core.router import route_remote
from natsd._core.sublist import Sublist
from natsd.gofmt import go_quote
from natsd.protocol import ProtocolHandler

log = logging.getLogger("natsd")
LINK_MAX_PAYLOAD = 1 << 62              # links carry messages of any size (mpay -1), a Raft catch-up too
_EMPTY = Sublist()


def link_connection(server, sock, kind, handler, state, sublists):
    """A new route or gateway connection on the loop: messages of any size, a deep outbound
    queue, never paused, no echo, and each message's account looked up in `sublists`."""
    fd = sock.detach()
    server.next_cid += 1
    c = Connection(fd, kind)
    c.cid = server.next_cid
    c.handler = handler
    c.state = state
    opts = server.opts
    c.max_payload = LINK_MAX_PAYLOAD
    c.max_control_line = opts.max_control_line
    c.max_pending = max(opts.max_pending, 64 * 1024 * 1024)
    c.stall_limit = 1 << 62
    c.trace = opts.trace
    c.echo = False
    c.verbose = False
    c.pedantic = False
    c.headers = not opts.no_header_support
    c.sublist = _EMPTY
    c.route_sublists = sublists
    server.loop.add_handler(fd, c)
    return c


class ServerLinkHandler(ProtocolHandler):
    """A subclass names its subsystem (`links`: its `tls`, `opening(c)`, `add_account(acc)`)
    and which of its connections it dialed (`solicited`)."""
    CLOSE_BY_DEFAULT = False          # nats-server: links retry at their write deadline
    LINK = "Route"                    # how nats-server's log lines name the link ("Gateway")
    MESSAGE_WORD = "routed"           # "Unknown account ... for <routed|gateway> message"

    @property
    def links(self):
        raise NotImplementedError

    def solicited(self, c):
        raise NotImplementedError

    def unknown_account(self, c, account, subject):
        """A message for an account we do not have here (yet): created ones join the links."""
        acc = self.server.account_named(account.decode("utf-8", "replace"))
        if acc is None:
            log.debug("%sUnknown account %s for %s message on subject: %s", self._prefix(c),
                      go_quote(account), self.MESSAGE_WORD, go_quote(subject))
            return None
        self.links.add_account(acc)
        return acc.sublist

    # ---- TLS (shared steps in ProtocolHandler): certificates both ways, TLS first ----

    @property
    def tls_kind(self):
        return self.LINK.lower()

    def tls_server(self, c):
        return None if self.solicited(c) else self.links.tls.server

    def tls_plaintext_ok(self, c):
        return False

    def tls_check_remote(self, c):
        from natsd.net.tls import pinning_refusal
        # pinned_certs are the link block's own (a gateway remote's `tls {}` has none of its own)
        return pinning_refusal(c, self.links.tls.pinned if self.links.tls is not None else None)

    def tls_ready(self, c):
        self.links.opening(c)

    def client_error(self, c, text):
        """-ERR from the peer: logged, the link closed (nats-server's processErr)."""
        log.error("%s%s Error %s", self._prefix(c), self.LINK, text.decode("utf-8", "replace"))
        c.schedule_close("Parse Error")

    def parse_info(self, c, payload):
        """The peer's INFO as a dict; None (closed as a protocol violation after invalid JSON)
        otherwise."""
        try:
            info = json.loads(payload)
        except ValueError:
            log.error("%s%s", self._prefix(c), "invalid INFO")
            c.schedule_close("Protocol Violation")
            return None
        return info if isinstance(info, dict) else None

    def sub(self, c, subject, queue, sid):
        pass                                # nats-server ignores a client SUB on a link

    def unsub(self, c, sid, max_msgs):
        pass

    def leaf_sub(self, c, subject, queue, weight):
        pass

    def leaf_unsub(self, c, subject, queue):
        pass

    def check_publish(self, c, subject):
        return True

    def remote_message(self, c, subject, reply, hdr, payload, queues):
        route_remote(c, c.sublist, subject, reply, hdr, payload, queues if queues else [])

    def reserved_reply(self, c, reply):
        pass

    def message_trace(self, c, subject, hdr, size):
        return msgtrace.start(self.server, c, subject, hdr, size)

    def publish_mapped(self, c, subject, reply, hdr, payload):
        pass

    def no_responders(self, c, subject, reply):
        pass

    def send_connect_info(self, c):
        pass

    def delivery_denied(self, c, sub, subject):
        return False

    def auto_unsubscribed(self, c, sub):
        pass
