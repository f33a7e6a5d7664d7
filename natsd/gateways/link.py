"""GatewayProtocol: the control side of gateway connections, called from the Cython parser.

An inbound connection gets our INFO, then the remote's CONNECT (checked for a gateway name,
credentials and, with `reject_unknown_cluster`, a configured cluster) and INFO, and then
carries RMSG/HMSG to us and our RS+/RS- (and INFO commands) back. An outbound connection
waits for the remote's INFO, answers with CONNECT and our INFO, and then carries our
messages there and the remote's interest to us: RS+/RS- become subscriptions of our accounts
whose `conn` is the outbound connection, so the router finds them as it finds a route's.
Errors are nats-server's: the same -ERR texts and log lines, the link closed.
"""
import base64
import logging

from natsd._core.sublist import Subscription
from natsd.gofmt import go_quote
from natsd.cluster.serverlink import ServerLinkHandler
from natsd.protocol import proto_number

log = logging.getLogger("natsd")

GATEWAY_CONNECT = {"echo": "bool", "verbose": "bool", "pedantic": "bool", "user": "string",
                   "pass": "string", "tls_required": "bool", "headers": "bool", "name": "string",
                   "cluster": "string", "cluster_dynamic": "bool", "lnoc": "bool", "lnocu": "bool",
                   "gateway": "string"}
CMD_GOSSIP, CMD_ALL_SUBS_START, CMD_ALL_SUBS_COMPLETE = 1, 2, 3
ERR_WRONG_PORT = "attempted to connect to gateway port"


class GatewayProtocol(ServerLinkHandler):
    def __init__(self, gateways):
        super().__init__(gateways.server)
        self.gateways = gateways

    STATS_KIND = "gateways"
    LINK = "Gateway"
    MESSAGE_WORD = "gateway"

    def _prefix(self, c):
        return self.gateways.prefix(c)

    def write_policy(self):
        """The gateway block's write_deadline (else the server's) and write_timeout (its
        default: retry), as nats-server's initClient for a GATEWAY connection."""
        opts = self.server.opts
        return opts.gateway.write_deadline or opts.write_deadline, self._closes(opts.gateway.write_timeout)

    # ---- CONNECT (inbound) ----

    def auth_pending(self, c):
        return False                        # checked when the CONNECT comes

    def auth_timeout(self, c):
        if not c.connected and not c.closed and not c.closing:
            log.error("%sAuthentication Timeout", self._prefix(c))
            self.fail(c, "Authentication Timeout", "Authentication Timeout")

    def connect(self, c, payload):
        st = c.state
        if st.outbound:
            return
        info = self.parse_json_op(c, payload, "connectInfo", GATEWAY_CONNECT)
        if info is None:
            return
        gws = self.gateways
        if gws.username and (info.get("user") != gws.username or not self.server.authenticator.check_secret(
                gws.password or "", info.get("pass") or "", False)):
            user = info.get("user")
            log.error("%sauthentication error%s", self._prefix(c),
                      " - User %s" % go_quote(str(user)) if user else "")
            self.fail(c, "Authorization Violation", "Authentication Failure")
            return
        if not info.get("gateway"):
            log.error("%s%s", self._prefix(c), ERR_WRONG_PORT)
            self.fail(c, ERR_WRONG_PORT, "Incorrect Port")
            return
        name = str(info["gateway"])
        if gws.reject_unknown and name not in gws.configured_names():
            log.error("%sRejecting connection from gateway %s", self._prefix(c), go_quote(name))
            self.send_err(c, "Connection to gateway %s rejected" % go_quote(gws.name))
            c.schedule_close("Wrong Gateway")
            return
        if st.auth_timer is not None:
            st.auth_timer.cancel()
            st.auth_timer = None
        c.connected = True
        st.connect = info
        gws.start_pings(c)

    # ---- INFO ----

    def info(self, c, payload):
        info = self.parse_info(c, payload)
        if info is None:
            return
        st = c.state
        gws = self.gateways
        first = not st.info_received
        st.info_received = True
        name = str(info.get("gateway") or "")
        if first:
            st.remote_id = str(info.get("server_id") or "")
            st.remote_name = str(info.get("server_name") or "")
            st.name = st.remote_name
            st.peer_proto = proto_number(info.get("proto"))
            if not st.outbound:
                st.gw_name = name
        if st.outbound:
            self._outbound_info(c, info, first, name)
        elif first:
            if gws.duplicate_name(st.remote_name):
                log.error("%sRemote server has a duplicate name: %s", self._prefix(c),
                          go_quote(st.remote_name))
                c.schedule_close("Duplicate Server Name")
                return
            gws.register_inbound(c, info)

    def _outbound_info(self, c, info, first, name):
        st = c.state
        gws = self.gateways
        if not name:
            text = "Attempt to connect to gateway %s using wrong port" % go_quote(st.gw_name)
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Incorrect Port")
            return
        if name != st.gw_name:
            if not first and info.get("gateway_cmd") == CMD_GOSSIP:
                if not (gws.reject_unknown and name not in gws.configured_names()):
                    gws.implicit(name, info.get("gateway_urls") or [])
                return
            log.error("%sFailing connection to gateway %s, remote gateway name is %s",
                      self._prefix(c), go_quote(st.gw_name), go_quote(name))
            self.send_err(c, "Connection from %s rejected, wanted to connect to %s, this is %s" % (
                go_quote(gws.name), go_quote(st.gw_name), go_quote(name)))
            c.schedule_close("Wrong Gateway")
            return
        if first and gws.duplicate_name(st.remote_name):
            log.error("%sRemote server has a duplicate name: %s", self._prefix(c), go_quote(st.remote_name))
            c.schedule_close("Duplicate Server Name")
            return
        urls = info.get("gateway_urls")
        if isinstance(urls, list) and st.cfg is not None:
            st.cfg.add_urls(urls)
        if first:
            if not info.get("gateway_iom"):
                # a peer before nats-server 2.9 expects optimistic sends, which natsd has not
                log.warning("%sGateway %s does not announce interest-only mode (nats-server "
                            "before 2.9): natsd sends it only what it says it subscribes to",
                            self._prefix(c), go_quote(name))
            c.headers = bool(info.get("headers")) and not self.server.opts.no_header_support
            gws.send_connect(c)
            gws.register_outbound(c)
        else:
            cmd = info.get("gateway_cmd")
            if cmd:
                if cmd in (CMD_ALL_SUBS_START, CMD_ALL_SUBS_COMPLETE):
                    if _cmd_account(info) is None:
                        what = "start" if cmd == CMD_ALL_SUBS_START else "complete"
                        text = "Account absent from receive-all-subscriptions-%s command" % what
                        log.error("%s%s", self._prefix(c), text)
                        self.fail(c, text, "Protocol Violation")
                    return                  # interest-only from the start: nothing to switch
                log.warning("Received unknown command %s from gateway %s", cmd, go_quote(st.gw_name))
                return
        gws.forward_to_cluster(name, info.get("gateway_urls") or [])

    # ---- the remote's interest (outbound connections) ----

    def route_interest(self, c, leaf, plus, args):
        """RS+ `acc subject[ queue weight]`, RS- `acc subject[ queue]`."""
        st = c.state
        if not st.outbound:
            text = "Received RS%s from gateway on inbound connection" % ("+" if plus else "-")
            log.error("%s%s", self._prefix(c), text)
            c.schedule_close("Protocol Violation")
            return
        fields = args.split()
        if plus and len(fields) not in (2, 4) or not plus and len(fields) not in (2, 3):
            if plus:
                text = "processGatewaySubjectSub Parse Error: '%s'" % args.decode("utf-8", "replace")
            else:
                text = "processGatewaySubjectUnsub processRemoteUnsub parse error: '%s'" % (
                    args.decode("utf-8", "replace"))
            self.protocol_error(c, text, False)
            return
        account, subject = fields[0].decode("utf-8", "replace"), fields[1]
        queue = fields[2] if len(fields) >= 3 else None
        acc = self.server.account_named(account)
        if acc is None:
            return
        key = (fields[0], subject, queue)
        if plus:
            if key in c.subs:
                return
            sub = Subscription(c, subject, b" ".join(fields[:3]), queue)
            sub.data = acc
            c.subs[key] = sub
            acc.sublist.insert(sub)
            acc.gateway_subs += 1
        else:
            sub = c.subs.pop(key, None)
            if sub is not None:
                sub.closed = True
                if acc.sublist.remove(sub):
                    acc.gateway_subs -= 1

    def account_interest(self, c, plus, account):
        """A+/A- (optimistic mode's account interest): nothing to do in interest-only mode."""
        if not c.state.outbound:
            log.error("%sReceived A%s from gateway on inbound connection", self._prefix(c),
                      "+" if plus else "-")
            c.schedule_close("Protocol Violation")

    @property
    def links(self):
        return self.gateways

    def solicited(self, c):
        return c.state.outbound

    # ---- other operations ----

    def pong(self, c):
        pass

    def close(self, c):
        self.gateways.closed(c)


def _cmd_account(info):
    """The account of an INFO command (Go marshals its []byte payload as base64)."""
    payload = info.get("gateway_cmd_payload")
    if not isinstance(payload, str) or not payload:
        return None
    try:
        return base64.b64decode(payload).decode("utf-8", "replace")
    except ValueError:
        return None
