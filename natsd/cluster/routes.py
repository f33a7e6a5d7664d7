"""Routes: the cluster subsystem of one Server, wire-compatible with nats-server's route.go.

Every server has routes to every other (a full mesh): those configured (`cluster { routes }`,
`--routes`, explicit), and those learned by gossip (implicit: a server that registers a new
route forwards its peer's INFO to the others, who connect to it). Between two servers there
are `pool_size` routes (3 by default), each carrying the accounts that hash to it, plus one
per pinned account (`cluster { accounts }` and the system account). Connections that turn out
to duplicate a registered one are closed; solicited ones come back with a delay when lost.

The opening, as nats-server has it: the soliciting side sends CONNECT at once and, on a
pooled route, its INFO only after it has the peer's (with the pool index it chose); the
accepting side sends its INFO at once. Either side registers the route when it has the
peer's INFO, then sends its interest for the accounts the route carries.
"""
import logging
import random
import time
from urllib.parse import urlsplit, unquote


from natsd import VERSION, SERVER_PROTO
from natsd.client import ClientState
from natsd.net.dialer import Dialer, go_dial_error, host_label, report_connect_error
from natsd.gofmt import go_float, go_json, go_quote, omitempty
from natsd.protocol import KIND_ROUTE, info_line, prepare_accepted, release_connection
from natsd.net.compression import NOT_SUPPORTED, S2_FAST, Compression
from natsd.cluster.connecturls import ConnectUrls
from natsd.net.listener import connect_urls, stop_links
from natsd.auth.permissions import Permissions
from natsd.cluster.interest import RouteInterest
from natsd.cluster.pool import DEFAULT_POOL_SIZE, pool_index
from natsd.cluster.routeproto import RouteProtocol
from natsd.cluster.serverlink import link_connection
from natsd.net.tls import cert_not_after, default_auth_timeout

log = logging.getLogger("natsd")

EXPLICIT, IMPLICIT = "explicit", "implicit"
GOSSIP_DEFAULT, GOSSIP_DISABLED, GOSSIP_OVERRIDE = 0, 1, 2
CONNECT_DELAY = 1.0                     # nats-server DEFAULT_ROUTE_CONNECT (between attempts)
RECONNECT_DELAY = 1.0                   # DEFAULT_ROUTE_RECONNECT (after a configured one drops)
DIAL_TIMEOUT = 1.0                      # DEFAULT_ROUTE_DIAL
FIRST_PING = 1.0
MAX_PING_INTERVAL = 30.0                # routes ping at least this often (RTT for compression)


class RouteState(ClientState):
    """What the Python side knows about one route connection (/routez reads it)."""
    __slots__ = ("did_solicit", "route_type", "url", "remote_id", "remote_name", "pool_idx",
                 "route_account", "no_pool", "gossip_mode", "info_received", "connect_received",
                 "connect_urls", "ws_connect_urls", "leafnode_url", "compression", "retry",
                 "start_new_route", "lnocu", "jetstream", "no_reconnect", "registered",
                 "remote_domain", "comp_negotiated", "peer_proto", "gateway_url")

    def __init__(self, host, port, url=None, route_type=IMPLICIT, account=None, gossip_mode=0):
        super().__init__(host, port)
        self.kind = "Router"
        self.did_solicit = url is not None
        self.route_type = route_type
        self.url = url                      # RouteUrl we dialed (or learned)
        self.remote_id = ""
        self.remote_name = ""
        self.peer_proto = 0                 # the peer's INFO proto (3: it traces messages)
        self.pool_idx = -1
        self.route_account = account or ""  # pinned account ("" for pooled routes)
        self.no_pool = False
        self.gossip_mode = gossip_mode
        self.info_received = False
        self.connect_received = False
        self.connect_urls = []
        self.ws_connect_urls = []
        self.leafnode_url = ""
        self.compression = "off"
        self.retry = False
        self.start_new_route = None         # (url, type, gossip) after the first PONG
        self.lnocu = False
        self.gateway_url = ""               # the peer's gateway URL (its INFO), counted once
        self.jetstream = False
        self.no_reconnect = False
        self.registered = False
        self.remote_domain = ""
        self.comp_negotiated = False

    @property
    def is_configured(self):
        return self.route_type == EXPLICIT


class RouteUrl:
    """A route URL: where to dial, and the credentials its CONNECT carries."""

    def __init__(self, raw):
        self.raw = raw
        u = urlsplit(raw if "://" in raw else "nats-route://" + raw)
        self.host = u.hostname or ""
        self.port = u.port or 6222
        self.user = unquote(u.username) if u.username is not None else None
        self.password = unquote(u.password) if u.password is not None else None

    @property
    def label(self):
        return host_label(self.host, self.port)

    def redacted(self):
        if self.user is None:
            return self.raw
        return self.raw.replace("%s@" % urlsplit(self.raw).netloc.rpartition("@")[0], "%s:xxxxx@" % self.user, 1)

    def same_place(self, other):
        return self.host.lower() == other.host.lower() and self.port == other.port


class Routes:
    """The route subsystem of one Server."""

    def __init__(self, server):
        self.server = server
        self.loop = server.loop
        self.opts = co = server.opts.cluster
        self.proto = RouteProtocol(self)
        self.interest = RouteInterest(self)
        # cluster { permissions }: import = the interest we ask routes for, export = the
        # interest of routes we take (nats-server's canImport / canExport)
        self.perms = Permissions.from_config(co.permissions)
        self.connect_urls = ConnectUrls(server)
        self.listener = None
        self.stopped = False
        self.name = co.name
        self.dynamic = not co.name
        if self.dynamic:
            from natsd.ids import random_token
            self.name = random_token(22)
        # pooling: -1 turns it off (one route per server, accounts named in every message)
        self.pool_size = co.pool_size if co.pool_size else DEFAULT_POOL_SIZE
        self.effective_pool = max(self.pool_size, 1)
        self.pinned = list(co.accounts or []) if self.pool_size > 0 else []
        sys_name = server.accounts.system_name
        if self.pool_size > 0 and sys_name and sys_name not in self.pinned:
            self.pinned.append(sys_name)
        self.routes = {}                # remote server id -> [Connection or None] * pool
        self.acc_routes = {a: {} for a in self.pinned}  # account -> remote id -> Connection
        self.remote_pool_size = {}
        self.no_pool_count = 0
        self.pending = {}               # cid -> route connection not registered yet
        self.sublists = {}              # account name (bytes) -> Sublist, read by the parser
        self.explicit = [RouteUrl(r) for r in co.routes]
        self.dialers = set()
        self.self_addrs = set()         # host:port strings that reach this very server
        auth = co.authorization or {}
        self.username = _get(auth, "user", "username")
        self.password = _get(auth, "password", "pass")
        auth_timeout = float(_get(auth, "timeout") or 0)
        self.ping_interval = min(co.ping_interval or server.opts.ping_interval, MAX_PING_INTERVAL)
        self.ping_max = co.ping_max or server.opts.ping_max
        self.tls = RouteTls(co.tls, self.explicit) if co.tls else None
        self.auth_timeout = auth_timeout or default_auth_timeout(
            self.tls.timeout if self.tls is not None else None)
        self.compression = Compression.parse(co.compression, S2_FAST)

    # ---- lifecycle ----

    def start(self):
        from natsd.net.listener import Listener
        s = self.server
        for acc in s.accounts:
            self.add_account(acc)
        s.accounts.on_add.append(self.add_account)      # operator mode makes accounts later
        log.info("Cluster name is %s", self.name)
        if self.dynamic:
            log.warning("Cluster name was dynamically generated, consider setting one")
        if self.tls is not None and self.tls.insecure:
            log.warning("TLS certificate chain and hostname of solicited routes will not be "
                        "verified. DO NOT USE IN PRODUCTION!")
        co = self.opts
        port = 0 if co.port < 0 else co.port
        self.listener = Listener(self.loop, co.host, port, self._accept)
        log.info("Listening for route connections on %s", host_label(co.host or "0.0.0.0", self.listener.port))
        self._find_self_addrs()
        if not co.no_advertise:
            opts = s.opts
            ws = s.websocket.connect_urls() if s.websocket is not None else []
            self.connect_urls.add_own(connect_urls(opts.client_advertise, opts.host, s.port), ws)
        for u in self.explicit:
            self.loop.call_soon(self.connect, u, EXPLICIT, True, GOSSIP_DEFAULT, "")
            for acc in self.pinned:
                self.loop.call_soon(self.connect, u, EXPLICIT, True, GOSSIP_DEFAULT, acc)

    def _find_self_addrs(self):
        """Every ip:port of this machine's route port, so seeds naming us are skipped."""
        import psutil
        port = self.listener.port
        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                ip = a.address.split("%")[0]
                if ":" in ip or ip.count(".") == 3:
                    self.self_addrs.add(host_label(ip, port))

    def add_account(self, acc):
        """An account the routes carry (all of them; accounts created later call this)."""
        self.sublists[acc.name.encode()] = acc.sublist
        self.interest.hook(acc)

    def shutdown(self):
        self.stopped = True
        stop_links(self.listener, self.dialers, self.all_connections())
        self.listener = None

    def all_connections(self):
        return list(self.pending.values()) + list(self.server.routes.values())

    @property
    def port(self):
        return self.listener.port if self.listener is not None else 0

    def prefix(self, c):
        st = c.state
        return "%s - rid:%d - " % (host_label(st.host, st.port), c.cid)

    # ---- route INFO ----

    def info_dict(self, account="", pool_idx=0, gossip_mode=0, nonce=True, compression=None):
        """The INFO a route gets from us (nats-server's routeInfo); `compression` is the
        mode it announces (our configured one by default)."""
        s = self.server
        co = self.opts
        info = {"server_id": s.id, "server_name": s.name, "version": VERSION, "proto": SERVER_PROTO,
                "go": "python", "host": co.host or "0.0.0.0", "port": self.port,
                "headers": not s.opts.no_header_support}
        if self.username:
            info["auth_required"] = True
        if self.tls is not None:
            info["tls_required"] = info["tls_verify"] = True
        info["max_payload"] = s.opts.max_payload
        if s.jetstream_enabled():
            info["jetstream"] = True
        if co.advertise:
            host, port = _host_port(co.advertise, self.port)
            info["host"], info["port"] = host, port
            info["ip"] = "nats-route://%s/" % host_label(host, port)
        if nonce:
            from natsd.net.listener import new_nonce
            info["nonce"] = new_nonce()
        info["cluster"] = self.name
        if self.dynamic:
            info["cluster_dynamic"] = True
        domain = s.jetstream_domain()
        if domain:
            info["domain"] = domain
        if not co.no_advertise:
            info["connect_urls"] = list(self.connect_urls.own_client())
            ws = self.connect_urls.own_ws()
            if ws:
                info["ws_connect_urls"] = ws
        mode = compression or self.compression.mode
        if mode != NOT_SUPPORTED:
            info["compression"] = mode
        info["lnoc"] = True
        info["lnocu"] = True
        if self.pool_size > 0:
            info["route_pool_size"] = self.pool_size
        if pool_idx:
            info["route_pool_idx"] = pool_idx
        if account:
            info["route_account"] = account
        perms = co.permissions
        if perms is not None:
            for key, sp in (("import", perms.publish), ("export", perms.subscribe)):
                if sp is not None:
                    info[key] = omitempty(("allow", list(sp.allow or [])), ("deny", list(sp.deny or [])))
        if gossip_mode:
            info["gossip_mode"] = gossip_mode
        if s.gateway is not None:
            info["gateway_url"] = s.gateway.url
        ln = s.leafnodes
        if ln is not None and ln.port and not ln.opts.no_advertise:
            if ln.opts.advertise:
                info["leafnode_urls"] = [ln.opts.advertise]
            else:
                info["leafnode_urls"] = [host_label(ln.opts.host or "0.0.0.0", ln.port)]
        return info

    def can_import(self, subject):
        """Do we tell routes of our interest in `subject` (bytes)?"""
        return self.perms is None or self.perms.can_publish(subject.decode("utf-8", "surrogateescape"))

    def can_export(self, subject):
        """Do we take a route's interest in `subject` (bytes)?"""
        return self.perms is None or self.perms.can_subscribe(subject.decode("utf-8", "surrogateescape"))

    def announced_compression(self, c):
        """The mode our later INFOs on route `c` announce (nats-server's
        compressionModeForInfoProtocol)."""
        if not self.compression.negotiates:
            return None
        return self.compression.info_mode(c.state.compression)

    def send_info(self, c, **kw):
        c.send_bytes(info_line(self.info_dict(**kw)))

    # ---- accepting ----

    def _accept(self, sock, addr):
        if self.stopped or self.server.shutting_down:
            sock.close()
            return
        prepare_accepted(sock)
        self.create_route(sock, addr, None, IMPLICIT, GOSSIP_DEFAULT, "")

    # ---- soliciting ----

    def connect(self, url, route_type, first_connect, gossip_mode, account, attempts=0, delay=CONNECT_DELAY):
        """Dial a route; configured routes are tried until they answer, gossiped ones
        `connect_retries` times."""
        s = self.server
        if self.stopped or s.shutting_down:
            return
        if route_type == EXPLICIT and not any(u.same_place(url) for u in self.explicit):
            log.debug("Not attempting to connect to explicit route %s, no longer part of configured routes",
                      go_quote(url.redacted()))
            return
        if url.label in self.self_addrs:
            return                          # a seed that is this server
        log.debug("Trying to connect to route on %s (%s)", url.label, url.label)

        def done(sock, reason):
            self.dialers.discard(dialer)
            if self.stopped or s.shutting_down:
                if sock is not None:
                    sock.close()
                return
            if sock is not None:
                self.create_route(sock, sock.getpeername(), url, route_type, gossip_mode, account)
                return
            n = attempts + 1
            text = "Error trying to connect to route (attempt %d): dial tcp %s: %s" % (
                n, url.label, go_dial_error(reason))
            if report_connect_error(s.opts, first_connect, n):
                log.error("%s", text)
            else:
                log.debug("%s", text)
            if route_type != EXPLICIT and (self.opts.connect_retries <= 0 or n > self.opts.connect_retries):
                return
            nxt = min(delay * 2, 30.0) if self.opts.connect_backoff else delay
            self.loop.call_later(delay, self.connect, url, route_type, first_connect, gossip_mode,
                                 account, n, nxt)
        dialer = Dialer(self.loop, url.host, url.port, done, DIAL_TIMEOUT)
        self.dialers.add(dialer)

    def create_route(self, sock, addr, url, route_type, gossip_mode, account):
        """A new route connection, accepted (url None) or solicited."""
        s = self.server
        st = RouteState(addr[0], addr[1], url, route_type, account, gossip_mode)
        c = link_connection(s, sock, KIND_ROUTE, self.proto, st, self.sublists)
        if account:
            c.route_account = account.encode()
        self.pending[c.cid] = c
        if url is not None:
            c.connected = True          # our own connection: no CONNECT expected back
        if self.tls is not None:
            # routes do TLS first, both ways, before INFO and CONNECT
            if url is not None:
                c.tls = self.tls.client_session(url)
                c.tls_active = True
            else:
                self.tls.server.begin(c)
            st.tls_timer = self.loop.call_later(self.tls.timeout, self.proto.tls_timeout, c)
            if url is not None and c.tls.start() < 0:
                self.proto.tls_failed(c, c.tls.error)
            c.flush_now()
        else:
            self.opening(c)
        log.info("%sRoute connection created", self.prefix(c))
        if not self.compression.negotiates:
            self.start_pings(c)         # else once compression is agreed (no PING in between)
        return c

    def start_pings(self, c):
        c.state.ping_timer = self.loop.call_later(FIRST_PING, self.ping, c)

    def opening(self, c):
        """What a new route sends first (after TLS when there is TLS): the soliciting side
        its CONNECT, and its INFO unless the route is pooled (then it waits for the peer's);
        the accepting side its INFO."""
        st = c.state
        if st.did_solicit:
            self.send_connect(c, st.url)
            log.debug("%sRoute connect msg sent", self.prefix(c))
            if not self.compression.negotiates and (st.route_account or self.pool_size < 1):
                self.send_info(c, account=st.route_account, gossip_mode=st.gossip_mode)
        else:
            self.send_info(c, gossip_mode=st.gossip_mode)
            if self.username:
                st.auth_timer = self.loop.call_later(self.auth_timeout, self.proto.auth_timeout, c)

    def send_connect(self, c, url):
        s = self.server
        connect = {"echo": True, "verbose": False, "pedantic": False}
        if url.user is not None:
            connect["user"] = url.user
            if url.password:
                connect["pass"] = url.password
        elif self.username and c.state.route_type == IMPLICIT:
            connect["user"], connect["pass"] = self.username, self.password
        connect["tls_required"] = self.tls is not None
        connect["headers"] = not s.opts.no_header_support
        connect["name"] = s.id
        connect["cluster"] = self.name
        if self.dynamic:
            connect["cluster_dynamic"] = True
        connect["lnoc"] = True
        c.send_bytes(b"CONNECT " + go_json(connect) + b"\r\n")

    # ---- keepalive ----

    def ping(self, c):
        if c.closed or c.closing:
            return
        st = c.state
        if c.pings_out + 1 > self.ping_max:
            log.debug("%sStale Client Connection - Closing", self.prefix(c))
            self.proto.fail(c, "Stale Connection", "Stale Connection")
            return
        c.send_ping()
        st.ping_timer = self.loop.call_later(self.ping_interval, self.ping, c)

    def pong(self, c):
        """A PONG on a route: a pooled route that waited for it opens the next one."""
        nxt = c.state.start_new_route
        if nxt is not None:
            c.state.start_new_route = None
            self.connect(nxt[0], nxt[1], True, nxt[2], "")

    # ---- registration (nats-server's addRoute) ----

    def register(self, c, info, send_delayed_info, gossip_mode):
        """The peer's INFO arrived: file the route, or refuse it as a duplicate. Returns
        False when `c` must close as a duplicate."""
        s = self.server
        st = c.state
        rid = info["server_id"]
        account = st.route_account
        if self.stopped or s.shutting_down:
            return False
        remote_pool = _int(info.get("route_pool_size"))
        pool = remote_pool > 0
        effective = max(self.effective_pool, remote_pool)
        if remote_pool <= 0 or self.pool_size < 0:
            if account:
                st.no_reconnect = True
                return self.proto.refuse(c, "Not possible to have a dedicated route for account %s "
                                         "between those servers" % go_quote(account))
            pool = False
            st.pool_idx = 0
            st.no_pool = True
            self.no_pool_count += 1
        elif st.did_solicit:
            if _int(info.get("route_pool_idx")) != 0:
                return self.proto.refuse(c, "Route pool index should not be set but is set to %d"
                                         % _int(info.get("route_pool_idx")))
        else:
            idx = _int(info.get("route_pool_idx"))
            if idx < 0 or idx >= effective:
                return self.proto.refuse(c, "Invalid route pool index: %d - pool size is %d"
                                         % (idx, remote_pool))
        if account:
            return self._register_pinned(c, info, account, send_delayed_info, gossip_mode)
        conns = self.routes.get(rid)
        idx = -1
        size = 0
        exists = conns is not None
        if not exists:
            conns = self.routes[rid] = [None] * (effective if pool else 1)
            idx = _int(info.get("route_pool_idx"))
        elif pool:
            if len(conns) < effective:
                conns.extend([None] * (effective - len(conns)))
            if not st.did_solicit:
                idx = _int(info.get("route_pool_idx"))
                if conns[idx] is not None:
                    _duplicate(conns[idx], c)
                    return False
                for r in conns:
                    if r is not None and r.state.did_solicit:
                        _upgrade_to_solicited(c, r.state.url, r.state.route_type)
                        break
            else:
                for r in conns:
                    _upgrade_to_solicited(r, st.url, st.route_type)
            for i, r in enumerate(conns):
                if idx == -1 and r is None:
                    idx = i
                elif r is not None:
                    size += 1
        else:
            _duplicate(conns[0], c, st.no_pool)
            return False
        if idx < 0:
            log.debug("%sRoute pool size reached, closing extra connection to %s", self.prefix(c),
                      go_quote(rid))
            st.no_reconnect = True
            return False
        st.pool_idx = idx
        st.connect_urls = info.get("connect_urls") or []
        st.ws_connect_urls = info.get("ws_connect_urls") or []
        if send_delayed_info:
            self.send_info(c, pool_idx=idx, gossip_mode=gossip_mode,
                           compression=self.announced_compression(c))
        if pool and idx == 0:
            self.remote_pool_size[rid] = remote_pool
        conns[idx] = c
        size += 1
        self._registered(c)
        if not pool or size == 1:
            if len(self.routes) > 1:
                self.forward_new_route_info(info, st.route_type, st.did_solicit, gossip_mode)
            if not self.opts.no_advertise:
                self.connect_urls.add(st.connect_urls, st.ws_connect_urls)
            if st.leafnode_url and s.leafnodes is not None:
                s.leafnodes.cluster_urls_changed()
        accounts = [a.name for a in s.accounts if a.name not in self.acc_routes
                    and (st.no_pool or pool_index(a.name, self.effective_pool) == idx)]
        if st.no_pool:
            accounts = [a.name for a in s.accounts]
        self.interest.send_all(c, accounts)
        if pool and st.did_solicit and size != effective:
            st.start_new_route = (st.url, st.route_type, gossip_mode)
            c.send_ping()
        return True

    def _register_pinned(self, c, info, account, send_delayed_info, gossip_mode):
        st = c.state
        rid = info["server_id"]
        conns = self.acc_routes.get(account)
        if conns is None:
            return self.proto.refuse(c, "No route for account %s" % go_quote(account))
        if self.server.accounts.get(account) is None:
            self.proto.fail(c, "Unable to lookup account %s: account not found" % go_quote(account),
                            "Missing Account")
            return False
        existing = conns.get(rid)
        if existing is not None:
            _duplicate(existing, c, True)
            return False
        conns[rid] = c
        if send_delayed_info:
            self.send_info(c, account=account, gossip_mode=gossip_mode,
                           compression=self.announced_compression(c))
        c.sublist = self.server.accounts.get(account).sublist
        self._registered(c)
        if len(conns) > 1:
            self.forward_new_route_info(info, st.route_type, st.did_solicit, gossip_mode)
        self.interest.send_all(c, [account])
        return True

    def _registered(self, c):
        st = c.state
        st.registered = True
        self.pending.pop(c.cid, None)
        self.server.routes[c.cid] = c
        if st.route_account:
            log.debug("%sRegistering remote route %s for account %s", self.prefix(c),
                      go_quote(st.remote_id), go_quote(st.route_account))
        else:
            log.debug("%sRegistering remote route %s", self.prefix(c), go_quote(st.remote_id))

    def routes_for_account(self, name):
        """The routes that carry `name`'s interest and messages: one per remote server."""
        pinned = self.acc_routes.get(name)
        out = []
        if pinned is not None:
            out.extend(pinned.values())
            if self.no_pool_count:
                out.extend(r[0] for r in self.routes.values() if r[0] is not None and r[0].state.no_pool)
            return out
        idx = pool_index(name, self.effective_pool)
        for conns in self.routes.values():
            r = conns[idx] if idx < len(conns) else None
            if r is None and self.no_pool_count and conns[0] is not None and conns[0].state.no_pool:
                r = conns[0]
            if r is not None:
                out.append(r)
        return out

    # ---- gossip ----

    def forward_new_route_info(self, info, route_type, did_solicit, gossip_mode):
        """Tell the servers we know about a new one, so they connect to it (nats-server's
        forwardNewRouteInfoToKnownServers)."""
        from_gossip = did_solicit and route_type == IMPLICIT
        if (from_gossip and gossip_mode != GOSSIP_OVERRIDE) or _int(info.get("gossip_mode")) == GOSSIP_DISABLED:
            return
        info = dict(info)
        info.pop("nonce", None)
        rid = info["server_id"]
        cache = {}

        def line(r):
            if (not did_solicit and r.state.route_type == EXPLICIT) or (did_solicit and route_type == EXPLICIT):
                mode = GOSSIP_OVERRIDE
            elif not did_solicit:
                mode = GOSSIP_DISABLED
            else:
                mode = GOSSIP_DEFAULT
            if mode not in cache:
                info["gossip_mode"] = mode
                if not mode:
                    info.pop("gossip_mode")
                cache[mode] = info_line(info)
            return cache[mode]
        account = info.get("route_account") or ""
        done = set()
        if account:
            for remote, r in self.acc_routes.get(account, {}).items():
                if remote != rid and not r.state.no_pool:
                    r.send_bytes(line(r))
                    done.add(remote)
        for remote, conns in self.routes.items():
            if remote == rid or remote in done:
                continue
            r = next((x for x in conns if x is not None), None)
            if r is not None and (not account or not r.state.no_pool):
                r.send_bytes(line(r))

    def implicit_route(self, info, no_pool):
        """An INFO about another server came over a route: connect to it unless we know it
        (nats-server's processImplicitRoute)."""
        rid = info.get("server_id")
        if not rid or rid == self.server.id:
            return
        account = info.get("route_account") or ""
        if account:
            if self.pool_size <= 0 or rid in self.acc_routes.get(account, {}):
                return
        elif rid in self.routes:
            return
        if self._configured(info):
            return
        ip = info.get("ip") or ""
        url = RouteUrl(ip or "nats-route://%s/" % host_label(str(info.get("host") or ""), _int(info.get("port"))))
        if info.get("auth_required"):
            url.user, url.password = self.username, self.password
        gossip = _int(info.get("gossip_mode"))
        self.connect(url, IMPLICIT, True, gossip, account)
        if no_pool and not account:
            for acc in self.pinned:
                self.connect(url, IMPLICIT, True, gossip, acc)

    def _configured(self, info):
        port = _int(info.get("port"))
        places = {host_label(str(info.get("host") or ""), port).lower()}
        ip = info.get("ip")
        if ip:
            places.add(host_label(urlsplit(ip).hostname or "", port).lower())
        return any(u.label.lower() in places for u in self.explicit)

    # ---- closing ----

    def closed(self, c):
        """A route connection is gone: its interest leaves the accounts, its server's URLs
        leave the clients' lists with its last route, and a solicited one is dialed again."""
        s = self.server
        st = c.state
        if c.closed:
            return
        release_connection(self.loop, c, st.auth_timer, st.ping_timer, st.tls_timer)
        removed = {}
        for sub in list(c.subs.values()):
            sub.closed = True
            acc = sub.data
            if acc is not None and acc.sublist.remove(sub):
                removed[acc.name] = removed.get(acc.name, 0) + 1
        c.subs.clear()
        for name, n in removed.items():
            log.debug("%sRemoving %d subscriptions for account %s", self.prefix(c), n, go_quote(name))
        self.pending.pop(c.cid, None)
        last = self._unregister(c)
        if s.gateway is not None:
            s.gateway.route_closed(c)
        st.stop = time.time()
        st.reason = c.close_reason or ""
        if st.remote_name:
            log.info("%sRouter connection closed: %s - Remote: %s", self.prefix(c), st.reason, st.remote_name)
        else:
            log.info("%sRouter connection closed: %s", self.prefix(c), st.reason)
        s.remember_closed(c)
        if last:
            if not self.opts.no_advertise:
                self.connect_urls.remove(st.connect_urls, st.ws_connect_urls)
            if st.leafnode_url and s.leafnodes is not None:
                s.leafnodes.cluster_urls_changed()
        self._maybe_reconnect(c)

    def _unregister(self, c):
        """Remove c from the registries; True if it was the last route to its server."""
        st = c.state
        self.server.routes.pop(c.cid, None)
        if not st.registered:
            return False
        if st.route_account:
            conns = self.acc_routes.get(st.route_account, {})
            if conns.get(st.remote_id) is c:
                del conns[st.remote_id]
            return False
        if st.no_pool:
            self.no_pool_count -= 1
        conns = self.routes.get(st.remote_id)
        if conns is None or st.pool_idx < 0 or st.pool_idx >= len(conns) or conns[st.pool_idx] is not c:
            return False
        conns[st.pool_idx] = None
        if any(r is not None for r in conns):
            return False
        del self.routes[st.remote_id]
        self.remote_pool_size.pop(st.remote_id, None)
        if st.no_pool and st.url is not None:
            if self.pool_size > 1:
                self.connect(st.url, st.route_type, True, GOSSIP_DEFAULT, "")
            for acc in self.pinned:
                self.connect(st.url, st.route_type, True, GOSSIP_DEFAULT, acc)
        return True

    def _maybe_reconnect(self, c):
        """nats-server's reconnect(): solicited routes come back unless a route to the same
        server is still up (no pool) or the peer was ourselves."""
        st = c.state
        s = self.server
        if st.no_reconnect or self.stopped or s.shutting_down or st.url is None:
            return
        retry_implicit = st.retry or (st.did_solicit and st.route_type == IMPLICIT)
        if not (st.did_solicit or retry_implicit):
            return
        if not st.route_account and self.pool_size < 1 and st.remote_id and st.remote_id in self.routes:
            log.debug("Not attempting reconnect for solicited route, already connected to %s",
                      go_quote(st.remote_id))
            return
        if st.remote_id == s.id:
            log.debug("Detected route to self, ignoring %s", go_quote(st.url.redacted()))
            return
        if st.route_type == IMPLICIT and not retry_implicit:
            return
        log.debug("Attempting reconnect for solicited route %s", go_quote(st.url.redacted()))
        delay = random.random() * 0.1 + (RECONNECT_DELAY if st.route_type == EXPLICIT else 0)
        self.loop.call_later(delay, self.connect, st.url, st.route_type, False, GOSSIP_DEFAULT,
                             st.route_account)

    # ---- lame duck ----

    def lame_duck(self):
        """Tell the other servers we are leaving: they drop our client URLs."""
        info = self.info_dict(nonce=False)
        info["ldm"] = True
        line = info_line(info)
        for c in list(self.server.routes.values()):
            c.send_bytes(line)

    # ---- monitoring ----

    def varz(self):
        co = self.opts
        v = {"name": self.name, "addr": co.host or "0.0.0.0", "cluster_port": self.port,
             "auth_timeout": go_float(self.auth_timeout)}
        if self.explicit:
            v["urls"] = [u.label for u in self.explicit]
        v["tls_timeout"] = go_float(self.tls.timeout) if self.tls is not None else 2
        if self.tls is not None:
            v["tls_required"] = v["tls_verify"] = True
        v["pool_size"] = self.pool_size
        not_after = cert_not_after(self.tls.server.settings) if self.tls is not None else None
        if not_after:
            v["tls_cert_not_after"] = not_after
        return v


class RouteTls:
    """TLS on routes, as nats-server has it: both sides present certificates and verify the
    other's against the block's CA (it acts as server and as client), TLS before anything
    else, and solicited routes check the host name of the URL (or, for an IP, of the first
    configured route with a host name) unless `insecure`."""

    def __init__(self, cfg, explicit):
        from natsd.net.tls import ServerTls, TlsSettings
        settings = TlsSettings(cfg)
        settings.verify = True
        settings.handshake_first, settings.fallback_delay = True, 0
        self.server = ServerTls(settings)
        self.timeout = settings.timeout
        client = TlsSettings(cfg, server=False)
        self.insecure = client.insecure
        self.pinned = client.pinned
        self.map = settings.verify_and_map                  # identity = cluster user
        self.known_urls = settings.verify_known_urls        # DNS name = a configured route's host
        self.explicit = explicit
        self.client_ctx = client.context()
        self.server_name = client.server_name
        self.tls_name = next((u.host for u in explicit if u.host and not _is_ip(u.host)), "")

    @property
    def authorizes(self):
        return self.map or self.known_urls

    def authorized(self, der, username):
        """nats-server's isRouterAuthorized with a certificate: a DNS name of the peer's
        certificate naming a configured route (verify_cert_and_check_known_urls), or an
        identity equal to the cluster user (verify_and_map)."""
        from natsd.net.tls import cert_identity
        if der is None:
            return False
        names, _ = cert_identity(der)
        dns = set(certificate_dns(der))
        for name in names:
            if self.known_urls and name in dns and any(_dns_matches(name, u.host) for u in self.explicit):
                return True
            if self.map and username and name == username:
                return True
        return False

    def client_session(self, url):
        host = self.server_name or url.host
        if _is_ip(host) and self.tls_name:
            host = self.tls_name
        return self.client_ctx.session(host or None, check_host=not self.insecure)


def certificate_dns(der):
    from cryptography import x509
    cert = x509.load_der_x509_certificate(der)
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName) \
            .value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        return []


def _dns_matches(name, host):
    """nats-server's dnsAltNameMatches: label by label, `*` only as the leftmost label."""
    want = name.lower().split(".")
    have = host.lower().split(".")
    if len(want) != len(have):
        return False
    start = 1 if want[0] == "*" else 0
    return want[start:] == have[start:]


def _is_ip(host):
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _duplicate(remote, c, no_reconnect=False):
    """nats-server's handleDuplicateRoute: c goes (for good with `no_reconnect`); the
    registered one keeps what c knew."""
    st = c.state
    if no_reconnect:
        st.no_reconnect = True
    rs = remote.state
    if st.did_solicit and not rs.did_solicit:
        rs.did_solicit = True
        rs.url = st.url
    if st.route_type == EXPLICIT:
        rs.route_type = EXPLICIT
    rs.retry = True


def _upgrade_to_solicited(r, url, route_type):
    if r is None:
        return
    st = r.state
    if not st.did_solicit or (route_type == EXPLICIT and st.route_type != EXPLICIT):
        st.url = url
    st.did_solicit = True
    if route_type == EXPLICIT:
        st.route_type = EXPLICIT


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _get(d, *keys):
    for k in keys:
        for dk, v in d.items():
            if dk.lower() == k:
                return v
    return None


def _host_port(hp, default_port):
    host, sep, port = hp.rpartition(":")
    if not sep or not port.isdigit():
        return hp.strip("[]"), default_port
    return host.strip("[]"), int(port)
