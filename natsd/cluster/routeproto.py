"""RouteProtocol: the control side of route connections, called from the Cython parser.

CONNECT (the soliciting server's, checked for the cluster's name and credentials), INFO (the
peer's identity, pool index and pinned account; later ones gossip other servers, or say the
peer entered lame duck mode), and RS+/RS-/LS+/LS- (the peer's interest, which becomes
subscriptions of our accounts whose `conn` is the route). Errors are nats-server's: the same
-ERR texts and log lines, the route closed.
"""
import logging
import time

from natsd._core.sublist import Subscription
from natsd.net.compression import NOT_SUPPORTED, OFF, CompressionError, codec, compresses
from natsd.gofmt import go_quote
from natsd.cluster.serverlink import ServerLinkHandler
from natsd.protocol import info_line, proto_number

log = logging.getLogger("natsd")

# nats-server's connectInfo for routes: the Go type of each CONNECT field
ROUTE_CONNECT = {"echo": "bool", "verbose": "bool", "pedantic": "bool", "user": "string",
                 "pass": "string", "tls_required": "bool", "headers": "bool", "name": "string",
                 "cluster": "string", "cluster_dynamic": "bool", "lnoc": "bool", "lnocu": "bool",
                 "gateway": "string"}
ERR_CLIENT_ON_ROUTE_PORT = "attempted to connect to route port"


class RouteProtocol(ServerLinkHandler):
    def __init__(self, routes):
        super().__init__(routes.server)
        self.routes = routes

    def _prefix(self, c):
        return self.routes.prefix(c)

    STATS_KIND = "routes"

    def write_policy(self):
        opts = self.server.opts
        return opts.cluster.write_deadline or opts.write_deadline, self._closes(opts.cluster.write_timeout)

    def refuse(self, c, text):
        """-ERR and an error line, the route closed (nats-server's sendErrAndErr)."""
        log.error("%s%s", self._prefix(c), text)
        self.fail(c, text, "Protocol Violation")
        return False

    # ---- CONNECT (the accepting side) ----

    def auth_pending(self, c):
        if c.state.did_solicit or not self.routes.username:
            return False
        log.error("%sAuthorization Error", self._prefix(c))
        self.fail(c, "Authorization Violation", "Authentication Failure")
        return True

    def auth_timeout(self, c):
        if not c.connected and not c.closed and not c.closing:
            log.error("%sAuthentication Timeout", self._prefix(c))
            self.fail(c, "Authentication Timeout", "Authentication Timeout")

    def connect(self, c, payload):
        st = c.state
        if st.did_solicit:
            return                          # nats-server ignores a CONNECT on its own route
        info = self.parse_json_op(c, payload, "connectInfo", ROUTE_CONNECT)
        if info is None:
            return
        if info.get("lang"):
            log.error("%s%s", self._prefix(c), ERR_CLIENT_ON_ROUTE_PORT)
            self.fail(c, ERR_CLIENT_ON_ROUTE_PORT, "Incorrect Port")
            log.error("%s%s", self._prefix(c), ERR_CLIENT_ON_ROUTE_PORT)   # and as a parse error
            return
        routes = self.routes
        if routes.tls is not None and routes.tls.authorizes:
            refused = not routes.tls.authorized(c.tls.peer_certificate() if c.tls else None,
                                                routes.username)
        else:
            refused = bool(routes.username) and (
                info.get("user") != routes.username
                or not self.server.authenticator.check_secret(routes.password or "",
                                                              info.get("pass") or "", False))
        if refused:
            user = info.get("user")
            log.error("%sauthentication error%s", self._prefix(c),
                      " - User %s" % go_quote(str(user)) if user else "")
            self.fail(c, "Authorization Violation", "Authentication Failure")
            return
        if st.auth_timer is not None:
            st.auth_timer.cancel()
            st.auth_timer = None
        if info.get("gateway"):
            text = "Rejecting connection from gateway %s on the Route port" % go_quote(str(info["gateway"]))
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Wrong Gateway")
            return
        cluster = str(info.get("cluster") or "")
        if cluster != routes.name:
            if routes.dynamic and (not info.get("cluster_dynamic") or routes.name < cluster):
                self.adopt_cluster_name(cluster, str(info.get("name") or ""))
            else:
                text = "Rejecting connection, cluster name %s does not match %s" % (
                    go_quote(cluster), go_quote(routes.name))
                log.error("%s%s", self._prefix(c), text)
                self.fail(c, text, "Cluster Name Conflict")
                log.error("%scluster name from remote server conflicts", self._prefix(c))
                return
        c.connected = True
        st.connect = info
        st.connect_received = True
        st.remote_id = str(info.get("name") or "")
        c.lnoc = bool(info.get("lnoc"))
        st.lnocu = bool(info.get("lnocu"))
        c.headers = bool(info.get("headers")) and not self.server.opts.no_header_support

    def adopt_cluster_name(self, name, keep_remote):
        """A dynamically named cluster takes a configured (or greater) name; routes to the
        others close and come back under the new name."""
        routes = self.routes
        routes.name = name
        routes.dynamic = False
        for r in routes.all_connections():
            if r.state.remote_id != keep_remote:
                r.schedule_close("Cluster Name Conflict")

    # ---- INFO ----

    def info(self, c, payload):
        info = self.parse_info(c, payload)
        if info is None:
            return
        st = c.state
        routes = self.routes
        rid = str(info.get("server_id") or "")
        if rid == self.server.id:
            st.remote_id = rid
            st.no_reconnect = True
            c.schedule_close("Duplicate Route")
            return
        cluster = str(info.get("cluster") or "")
        if cluster and cluster != routes.name:
            if routes.dynamic and (not info.get("cluster_dynamic") or routes.name < cluster):
                self.adopt_cluster_name(cluster, rid)
            else:
                c.schedule_close("Cluster Name Conflict")
                return
        if st.info_received:
            self._async_info(c, info)
            return
        if not st.did_solicit and info.get("server_name") == self.server.name:
            log.error("%sRemote server has a duplicate name: %s", self._prefix(c),
                      go_quote(str(info.get("server_name"))))
            st.no_reconnect = True
            c.schedule_close("Duplicate Server Name")
            return
        comp = routes.compression
        if comp.negotiates:
            if not st.comp_negotiated and self._negotiate(c, info):
                return                  # compressed from here: registered on the next INFO
            send_delayed_info = st.did_solicit
        else:
            st.compression = (NOT_SUPPORTED if not info.get("compression") or comp.mode == NOT_SUPPORTED
                              else OFF)
            send_delayed_info = st.did_solicit and not st.route_account and routes.pool_size >= 1
        st.info_received = True
        c.headers = bool(info.get("headers")) and not self.server.opts.no_header_support
        st.remote_id = rid
        st.remote_name = str(info.get("server_name") or "")
        st.name = st.remote_name
        st.peer_proto = proto_number(info.get("proto"))
        st.version = str(info.get("version") or "")
        c.lnoc = bool(info.get("lnoc"))
        st.lnocu = bool(info.get("lnocu"))
        st.jetstream = bool(info.get("jetstream"))
        st.remote_domain = str(info.get("domain") or "")
        lurls = info.get("leafnode_urls")
        if isinstance(lurls, list) and len(lurls) == 1:
            st.leafnode_url = lurls[0]
        if not info.get("ip"):
            from natsd.net.dialer import host_label
            info["ip"] = "nats-route://%s/" % host_label(st.host, _int(info.get("port")))
        if st.did_solicit and st.route_account:
            info["route_account"] = st.route_account
        elif not st.did_solicit and info.get("route_account"):
            st.route_account = str(info["route_account"])
            c.route_account = st.route_account.encode()
        gossip = st.gossip_mode
        st.gossip_mode = 0
        if not routes.register(c, info, send_delayed_info, gossip):
            if not c.closing:
                log.debug("%sDetected duplicate remote route %s", self._prefix(c), go_quote(rid))
                c.schedule_close("Duplicate Route")
        elif self.server.gateway is not None:
            self.server.gateway.route_info(c, info)

    def _negotiate(self, c, info):
        """nats-server's negotiateRouteCompression on the peer's first INFO. When the route
        compresses, both sides send a new INFO announcing the mode (the soliciting side before
        switching, the accepting side after) and return True: the route is registered on the
        INFO that follows, compressed."""
        st = c.state
        routes = self.routes
        st.comp_negotiated = True
        try:
            cm = routes.compression.select(str(info.get("compression") or ""), time.time() - st.start)
        except CompressionError as e:
            self.refuse(c, str(e))
            return True
        st.compression = cm
        routes.start_pings(c)
        if not compresses(cm):
            return False
        line = info_line(routes.info_dict(account=st.route_account,
                                          compression=routes.compression.info_mode(cm)))
        if st.did_solicit:
            c.start_codec(codec(cm), line)          # our INFO in clear, then S2 both ways
        else:
            c.start_codec(codec(cm))
            c.send_bytes(line)
        return True

    def _async_info(self, c, info):
        """An INFO on a registered route: news of another server (gossip), or the peer
        entering lame duck mode."""
        st = c.state
        if info.get("gateway"):
            gw = self.server.gateway
            if gw is not None:
                gw.route_info(c, info)
            elif info.get("gateway_cmd"):
                log.error("Received information about gateway %s from %s, but gateway is not configured",
                          go_quote(str(info["gateway"])), st.remote_id)
            return
        if info.get("route_acc_add_reqid"):
            return
        rid = str(info.get("server_id") or "")
        if st.remote_id and rid != st.remote_id:
            self.routes.implicit_route(info, st.no_pool)
            return
        if info.get("ldm") and not self.routes.opts.no_advertise:
            self.routes.connect_urls.remove(st.connect_urls, st.ws_connect_urls)
            st.connect_urls, st.ws_connect_urls = [], []

    # ---- the peer's interest ----

    def route_interest(self, c, leaf, plus, args):
        """RS+/RS- `[acc ]subject[ queue[ weight]]`; LS+ `origin [acc ]subject[ queue weight]`,
        LS- `[origin ]acc subject[ queue]` (origin when the peer said lnocu)."""
        st = c.state
        if not st.info_received and not c.connected:
            self.fail(c, "Authorization Violation", "Protocol Violation")
            return
        fields = args.split()
        origin = None
        i = 0
        if leaf and (plus or st.lnocu):
            if not fields:
                return self._interest_error(c, leaf, plus, args)
            origin = fields[0]
            i = 1
        if c.route_account is None:
            if len(fields) <= i:
                return self._interest_error(c, leaf, plus, args)
            account = fields[i].decode("utf-8", "replace")
            i += 1
        else:
            account = st.route_account
        rest = fields[i:]
        if plus:
            if len(rest) == 1:
                queue, weight = None, 1
            elif len(rest) == 3:
                queue, weight = rest[1], _size(rest[2])
            else:
                return self._interest_error(c, leaf, plus, args)
        else:
            if len(rest) not in (1, 2):
                return self._interest_error(c, leaf, plus, args)
            queue, weight = (rest[1] if len(rest) == 2 else None), 0
        subject = rest[0]
        acc = self.server.account_named(account)
        if acc is None:
            if plus:
                log.error("%sUnknown account %s for remote subject %s", self._prefix(c),
                          go_quote(account), go_quote(subject))
            return
        if acc.name not in self.routes.interest.hooked:
            self.routes.add_account(acc)
        key = (b"L" if leaf else b"R", origin if leaf else None, account, subject, queue)
        if plus and not self.routes.can_export(subject):
            log.debug("%sCan not export %s, ignoring remote subscription request", self._prefix(c),
                      go_quote(subject.decode("utf-8", "replace")))
            return
        if plus:
            self._add(c, acc, key, subject, queue, max(weight, 1), origin)
        else:
            self._remove(c, acc, key)

    def _interest_error(self, c, leaf, plus, args):
        if plus:
            text = "processRemoteSub Parse Error: '%s %s'" % ("L" if leaf else "R",
                                                              args.decode("utf-8", "replace"))
        else:
            text = "processRemoteUnsub parse error: '%s'" % args.decode("utf-8", "replace")
        self.protocol_error(c, text, False)

    def _add(self, c, acc, key, subject, queue, weight, origin):
        old = c.subs.get(key)
        if old is not None:
            if queue is not None and old.weight != weight:
                delta = weight - old.weight
                acc.sublist.set_weight(old, weight)
                ln = self.server.leafnodes
                if ln is not None:
                    ln.propagate(acc, old, delta)
            return
        limit = self.server.opts.max_subscriptions
        if limit > 0 and len(c.subs) >= limit:
            log.error("%sMaximum Subscriptions Exceeded", self._prefix(c))
            self.send_err(c, "maximum subscriptions exceeded")
            return
        sub = Subscription(c, subject, b" ".join(x for x in (key[1], subject, queue) if x), queue)
        sub.weight = weight
        sub.origin = origin
        sub.data = acc
        c.subs[key] = sub
        acc.sublist.insert(sub)

    def _remove(self, c, acc, key):
        sub = c.subs.pop(key, None)
        if sub is None and key[1] is None and key[0] == b"L":
            # a peer that does not send the origin in LS-: any leaf sub of that subject
            for k in list(c.subs):
                if k[0] == b"L" and k[2:] == key[2:]:
                    sub = c.subs.pop(k)
                    break
        if sub is None:
            return
        sub.closed = True
        acc.sublist.remove(sub)

    @property
    def links(self):
        return self.routes

    def solicited(self, c):
        return c.state.did_solicit

    def codec_error(self, c, error):
        """The peer's S2 stream is broken."""
        log.error("%sError reading from client: %s", self._prefix(c), error)
        c.schedule_close("Read Error")

    # ---- other operations ----

    def pong(self, c):
        self.routes.pong(c)

    def close(self, c):
        self.routes.closed(c)


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _size(b):
    return int(b) if b.isdigit() and len(b) <= 9 else -1
