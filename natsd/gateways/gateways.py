"""Gateways: the gateway subsystem of one Server (nats-server's gateway.go, same wire).

The listener takes inbound connections; a second after start the configured remote
clusters are dialed (nats-server's solicit delay, so the cluster forms first), one outbound
connection per cluster, retried until it answers; clusters learned from an inbound's INFO,
from gossip or from our routes are dialed too (implicit: `connect_retries` times). An
outbound connection registers when the remote's INFO came and our CONNECT and INFO went; an
inbound one when the remote's CONNECT and INFO came: then it gets our queue interest, every
account switched to interest-only (INFO start, RS+ for each subject, INFO complete), and the
other clusters we know (gossip). The cluster's gateway URLs travel in route INFOs.
"""
import logging
import random
import time
from urllib.parse import urlsplit, unquote

from natsd import VERSION, SERVER_PROTO
from natsd._core import parser as _parser
from natsd._core import router as _router
from natsd.client import ClientState
from natsd.gofmt import go_float, go_json, go_quote
from natsd.cluster.serverlink import link_connection
from natsd.gateways.interest import GatewayInterest
from natsd.gateways.link import CMD_GOSSIP, GatewayProtocol
from natsd.gateways.replies import RoutedReplies, gw_hash
from natsd.net.dialer import Dialer, go_dial_error, host_label, report_connect_error
from natsd.net.listener import Listener, non_local_ips, stop_links
from natsd.protocol import KIND_GATEWAY, info_line, prepare_accepted, release_connection
from natsd.net.tls import default_auth_timeout

log = logging.getLogger("natsd")

SOLICIT_DELAY = 1.0             # nats-server's defaultSolicitGatewaysDelay
CONNECT_DELAY = 1.0             # between attempts (defaultGatewayConnectDelay)
CONNECT_MAX_DELAY = 30.0
RECONNECT_DELAY = 1.0           # after a configured one drops (defaultGatewayReconnectDelay)
DIAL_TIMEOUT = 1.0
FIRST_PING = 1.0
MAX_PING_INTERVAL = 15.0        # gwMaxPingInterval


class _Host:
    """What RouteTls reads of a URL: its host."""
    __slots__ = ("host",)

    def __init__(self, host):
        self.host = host


def _link_tls(block, remotes):
    """RouteTls of a `tls {}` block, its host names taken from `remotes`' URLs (a URL naming an
    IP is checked against one of them)."""
    from natsd.cluster.routes import RouteTls
    hosts = [_Host(urlsplit(u if "://" in u else "nats://" + u).hostname or "")
             for r in remotes for u in r.urls]
    return RouteTls(block, hosts)


class GatewayState(ClientState):
    """What the Python side knows about one gateway connection (/gatewayz reads it)."""
    __slots__ = ("outbound", "gw_name", "cfg", "url", "remote_id", "remote_name", "peer_proto",
                 "info_received", "registered", "no_reconnect")

    def __init__(self, host, port, cfg=None, url=None):
        super().__init__(host, port)
        self.kind = "Gateway"
        self.outbound = cfg is not None
        self.gw_name = cfg.name if cfg is not None else ""     # the remote cluster
        self.cfg = cfg
        self.url = url
        self.remote_id = self.remote_name = ""
        self.peer_proto = 0
        self.info_received = False
        self.registered = False
        self.no_reconnect = False


class RemoteGateway:
    """A remote cluster we connect to (nats-server's gatewayCfg): configured, or learned."""

    def __init__(self, name, urls, implicit, tls):
        self.name = name
        self.urls = {}                  # host:port -> URL text
        self.implicit = implicit
        self.tls = tls                  # RouteTls for dialing it (None: plaintext)
        self.hash = gw_hash(name)
        self.attempts = 0
        self.add_urls(urls)

    def add_urls(self, urls):
        for u in urls:
            if not isinstance(u, str):
                continue
            parts = urlsplit(u if "://" in u else "nats://" + u)
            try:
                port = parts.port
            except ValueError:
                continue
            if parts.hostname and port:
                self.urls.setdefault(host_label(parts.hostname, port), u)

    def addresses(self):
        """(host, port, user, password) of each URL, in random order."""
        out = []
        for u in self.urls.values():
            parts = urlsplit(u if "://" in u else "nats://" + u)
            out.append((parts.hostname, parts.port, unquote(parts.username) if parts.username else None,
                        unquote(parts.password) if parts.password else None))
        random.shuffle(out)
        return out


class Gateways:
    """The gateway subsystem of one Server."""

    def __init__(self, server):
        self.server = server
        self.loop = server.loop
        self.opts = go = server.opts.gateway
        self.name = go.name
        self.proto = GatewayProtocol(self)
        self.username = go.username
        self.password = go.password
        self.reject_unknown = go.reject_unknown
        self.remotes = {}               # cluster name -> RemoteGateway
        self.own_cfg_urls = []
        self.out = {}                   # cluster name -> registered outbound Connection
        self.inbound = {}               # cid -> registered inbound Connection
        self.pending = {}               # cid -> connection not registered yet
        self.cluster_urls = {}          # gateway URL of each server of our cluster -> refs
        self.url = ""
        self.host, self.port_advertised = "", 0
        self.listener = None
        self.dialers = set()
        self.stopped = False
        self.ping_interval = min(server.opts.ping_interval, MAX_PING_INTERVAL)
        self.interest = GatewayInterest(self)
        self.replies = None
        # TLS, as on routes: both sides present certificates and verify the other's, TLS
        # before anything else; a URL naming an IP is checked against a configured host name.
        # The gateway's `tls {}` is what inbound links require and what every remote is
        # dialed with, unless a configured remote has a `tls {}` of its own (nats-server's
        # gatewayCfg.TLSConfig): that one dials it, with the gateway's timeout when it names none.
        self.tls = _link_tls(go.tls, go.gateways) if go.tls else None
        for r in go.gateways:
            if r.name == self.name:
                self.own_cfg_urls = list(r.urls)
                continue
            tls = self.tls
            if r.tls:
                tls = _link_tls(r.tls, [r])
                if "timeout" not in {k.lower() for k in r.tls} and self.tls is not None:
                    tls.timeout = self.tls.timeout
            self.remotes[r.name] = RemoteGateway(r.name, r.urls, False, tls)
        if self.tls is None:
            self.auth_timeout = go.auth_timeout or default_auth_timeout(None)
        else:
            self.auth_timeout = go.auth_timeout or default_auth_timeout(self.tls.timeout)

    # ---- lifecycle ----

    def start(self):
        s = self.server
        go = self.opts
        port = 0 if go.port < 0 else go.port
        self.listener = Listener(self.loop, go.host, port, self._accept)
        log.info("Gateway name is %s", self.name)
        if any(t is not None and t.insecure for t in [self.tls] + [r.tls for r in self.remotes.values()]):
            log.warning("TLS certificate chain and hostname of solicited gateways will not be "
                        "verified. DO NOT USE IN PRODUCTION!")
        log.info("Listening for gateways connections on %s",
                 host_label(go.host or "0.0.0.0", self.listener.port))
        self._set_address()
        self.replies = RoutedReplies(self)
        for acc in s.accounts:
            self.add_account(acc)
        s.accounts.on_add.append(self.add_account)
        _router.set_gateways(self)
        _parser.set_gateway_routing(True)
        self.loop.call_later(SOLICIT_DELAY, self._solicit_configured)

    def _set_address(self):
        """The URL this server gives the other clusters (nats-server's setGatewayInfoHostPort)."""
        go = self.opts
        if go.advertise:
            host, _, port = go.advertise.rpartition(":")
            if not host:
                host, port = go.advertise, self.listener.port
            self.host, self.port_advertised = host.strip("[]"), int(port)
        else:
            self.host, self.port_advertised = go.host or "0.0.0.0", self.listener.port
            if self.host in ("0.0.0.0", "::", ""):
                ips = non_local_ips(self.host)
                if ips:
                    self.host = ips[0]
                else:
                    log.error("Could not find any non-local IP for gateway %s with listen "
                              "specification %s", go_quote(self.name), go_quote(go.host or "0.0.0.0"))
        self.url = host_label(self.host, self.port_advertised)
        if go.advertise:
            log.info("Advertise address for gateway %s is set to %s", go_quote(self.name), self.url)
        else:
            log.info("Address for gateway %s is %s", go_quote(self.name), self.url)
        self.cluster_urls[self.url] = self.cluster_urls.get(self.url, 0) + 1

    def add_account(self, acc):
        self.interest.hook(acc)

    def shutdown(self):
        self.stopped = True
        _router.set_gateways(None)
        _parser.set_gateway_routing(False)
        stop_links(self.listener, self.dialers, self.all_connections())
        self.listener = None

    def all_connections(self):
        return list(self.pending.values()) + list(self.out.values()) + list(self.inbound.values())

    @property
    def port(self):
        return self.listener.port if self.listener is not None else 0

    def prefix(self, c):
        st = c.state
        return "%s - gid:%d - " % (host_label(st.host, st.port), c.cid)

    def configured_names(self):
        return {n for n, r in self.remotes.items() if not r.implicit}

    def duplicate_name(self, name):
        """nats-server's isDuplicateServerName: ours, or one of our cluster's."""
        if not name:
            return False
        if name == self.server.name:
            return True
        return any(r.state.remote_name == name for r in self.server.routes.values())

    # ---- INFO and CONNECT ----

    def info_dict(self):
        s = self.server
        info = {"server_id": s.id, "server_name": s.name, "version": VERSION, "proto": SERVER_PROTO,
                "go": "python", "host": self.host, "port": self.port_advertised,
                "headers": not s.opts.no_header_support}
        if self.username:
            info["auth_required"] = True
        if self.tls is not None:
            info["tls_required"] = info["tls_verify"] = True
        info["max_payload"] = s.opts.max_payload
        info["gateway"] = self.name
        info["gateway_urls"] = sorted(self.cluster_urls)
        info["gateway_url"] = self.url
        info["gateway_nrp"] = True
        info["gateway_iom"] = True
        return info

    def send_connect(self, c):
        st = c.state
        user, password = st.url[2], st.url[3]
        if user is None:
            user, password = self.username, self.password
        connect = {"echo": False, "verbose": False, "pedantic": False}
        if user:
            connect["user"] = user
        if password:
            connect["pass"] = password
        connect.update({"tls_required": st.cfg.tls is not None, "headers": False, "name": self.server.id,
                        "cluster": "", "gateway": self.name})
        c.send_bytes(b"CONNECT " + go_json(connect) + b"\r\n")
        c.send_bytes(info_line(self.info_dict()))

    # ---- accepting ----

    def _accept(self, sock, addr):
        if self.stopped or self.server.shutting_down:
            sock.close()
            return
        prepare_accepted(sock)
        self._create(sock, addr, None, None)

    # ---- soliciting ----

    def _solicit_configured(self):
        for cfg in list(self.remotes.values()):
            if not cfg.implicit:
                self.solicit(cfg, True)

    def solicit(self, cfg, first_connect, attempts=0, delay=CONNECT_DELAY):
        """Dial the cluster `cfg` at its URLs in turn; configured ones until one answers,
        learned ones `connect_retries` times."""
        s = self.server
        if self.stopped or s.shutting_down or cfg.name in self.out or self.remotes.get(cfg.name) is not cfg:
            return
        addrs = cfg.addresses()
        if not addrs:
            return
        kind = "implicit" if cfg.implicit else "explicit"
        n = attempts + 1
        report = report_connect_error(s.opts, first_connect, n)

        def attempt(i):
            if self.stopped or s.shutting_down:
                return
            if i >= len(addrs):
                self._retry(cfg, first_connect, n, delay)
                return
            host, port, user, password = addrs[i]
            label = host_label(host, port)
            text = "Connecting to %s gateway %s (%s) at %s (attempt %d)" % (
                kind, go_quote(cfg.name), label, label, n)
            log.info("%s", text) if report else log.debug("%s", text)

            def done(sock, reason):
                self.dialers.discard(dialer)
                if self.stopped or s.shutting_down:
                    if sock is not None:
                        sock.close()
                    return
                if sock is not None:
                    self._create(sock, sock.getpeername(), cfg, (host, port, user, password))
                    return
                err = "Error connecting to %s gateway %s (%s) at %s (attempt %d): dial tcp %s: %s" % (
                    kind, go_quote(cfg.name), label, label, n, label, go_dial_error(reason))
                log.error("%s", err) if report else log.debug("%s", err)
                attempt(i + 1)
            dialer = Dialer(self.loop, host, port, done, DIAL_TIMEOUT)
            self.dialers.add(dialer)
        attempt(0)

    def _retry(self, cfg, first_connect, attempts, delay):
        retries = self.opts.connect_retries
        if cfg.implicit and (retries == 0 or attempts > retries):
            if any(c.state.gw_name == cfg.name for c in self.inbound.values()):
                # that cluster reached us meanwhile: keep trying (after the delay, not in a spin)
                self.loop.call_later(delay, self.solicit, cfg, first_connect, attempts, delay)
                return
            if self.remotes.get(cfg.name) is cfg:
                del self.remotes[cfg.name]
            return
        nxt = min(delay * 2, CONNECT_MAX_DELAY) if self.opts.connect_backoff else delay
        self.loop.call_later(delay, self.solicit, cfg, first_connect, attempts, nxt)

    def implicit(self, name, urls):
        """A cluster we heard of (an inbound's INFO, gossip): dial it unless we know it."""
        if name == self.name:
            return
        cfg = self.remotes.get(name)
        if cfg is not None:
            cfg.add_urls(urls)
            return
        cfg = RemoteGateway(name, urls, True, self.tls)
        if not cfg.urls:
            return
        self.remotes[name] = cfg
        self.loop.call_soon(self.solicit, cfg, True)

    # ---- connections ----

    def _create(self, sock, addr, cfg, url):
        st = GatewayState(addr[0], addr[1], cfg, url)
        c = link_connection(self.server, sock, KIND_GATEWAY, self.proto, st, self.interest.sublists)
        self.pending[c.cid] = c
        if cfg is not None:
            c.connected = True
            cfg.attempts += 1
            log.info("%sCreating outbound gateway connection to %s", self.prefix(c), go_quote(cfg.name))
        else:
            log.info("%sProcessing inbound gateway connection", self.prefix(c))
        tls = cfg.tls if cfg is not None else self.tls
        if tls is not None:
            # TLS first, both ways, before INFO and CONNECT
            if cfg is not None:
                c.tls = tls.client_session(_Host(url[0]))
                c.tls_active = True
            else:
                tls.server.begin(c)
            st.tls_timer = self.loop.call_later(tls.timeout, self.proto.tls_timeout, c)
            if cfg is not None and c.tls.start() < 0:
                self.proto.tls_failed(c, c.tls.error)
        else:
            self.opening(c)
        c.flush_now()
        return c

    def opening(self, c):
        """What a new gateway connection does first (after TLS when there is TLS): an
        outbound one waits for the remote's INFO (its stale check running), an inbound one
        sends our INFO and expects the CONNECT within the auth timeout."""
        st = c.state
        if st.outbound:
            self.start_pings(c)
        else:
            c.send_bytes(info_line(self.info_dict()))
            st.auth_timer = self.loop.call_later(self.auth_timeout, self.proto.auth_timeout, c)

    def start_pings(self, c):
        if c.state.ping_timer is None:
            c.state.ping_timer = self.loop.call_later(FIRST_PING, self._ping, c)

    def _ping(self, c):
        if c.closed or c.closing:
            return
        if c.pings_out + 1 > self.server.opts.ping_max:
            log.debug("%sStale Client Connection - Closing", self.prefix(c))
            self.proto.fail(c, "Stale Connection", "Stale Connection")
            return
        if c.state.registered or not c.state.outbound:
            c.send_ping()
        c.state.ping_timer = self.loop.call_later(self.ping_interval, self._ping, c)

    def register_outbound(self, c):
        st = c.state
        name = st.gw_name
        if name in self.out:
            st.no_reconnect = True
            c.schedule_close("Wrong Gateway")
            return
        self.pending.pop(c.cid, None)
        self.out[name] = c
        st.registered = True
        st.cfg.attempts = 0
        log.info("%sOutbound gateway connection to %s (%s) registered", self.prefix(c),
                 go_quote(name), st.remote_id)

    def register_inbound(self, c, info):
        st = c.state
        self.pending.pop(c.cid, None)
        self.inbound[c.cid] = c
        st.registered = True
        log.info("%sInbound gateway connection from %s (%s) registered", self.prefix(c),
                 go_quote(st.gw_name), st.remote_id)
        self.interest.send_all(c)
        urls = info.get("gateway_urls") or []
        if not (self.reject_unknown and st.gw_name not in self.configured_names()):
            self.implicit(st.gw_name, urls if isinstance(urls, list) else [])
        self._gossip_to(c)

    def _gossip_to(self, c):
        """Tell an inbound connection's cluster of every other cluster we know."""
        for name, cfg in self.remotes.items():
            if name == c.state.gw_name or not cfg.urls:
                continue
            info = {"server_id": self.server.id, "server_name": "", "version": "", "proto": 0,
                    "go": "", "host": "", "port": 0, "headers": False, "max_payload": 0,
                    "gateway": name, "gateway_urls": sorted(cfg.urls.values()), "gateway_cmd": CMD_GOSSIP}
            c.send_bytes(info_line(info))

    def forward_to_cluster(self, name, urls):
        """A cluster our outbound reached: the servers of our cluster connect to it too."""
        routes = self.server.cluster
        if routes is None or not urls:
            return
        info = {"server_id": "GW" + self.server.id, "server_name": self.server.name, "version": "",
                "proto": 0, "go": "", "host": "", "port": 0, "headers": False, "max_payload": 0,
                "gateway": name, "gateway_urls": list(urls), "gateway_cmd": CMD_GOSSIP}
        line = info_line(info)
        for r in list(self.server.routes.values()):
            r.send_bytes(line)

    def route_info(self, route, info):
        """A route's INFO: the server's gateway URL joins ours; a gossiped gateway is dialed."""
        if info.get("gateway") and info.get("gateway_cmd") == CMD_GOSSIP:
            urls = info.get("gateway_urls")
            self.implicit(str(info["gateway"]), urls if isinstance(urls, list) else [])
            return
        url = info.get("gateway_url")
        if isinstance(url, str) and url and route.state.gateway_url != url:
            route.state.gateway_url = url
            self.cluster_urls[url] = self.cluster_urls.get(url, 0) + 1
            for name, c in self.out.items():
                cfg = c.state.cfg
                if cfg is not None and cfg.urls:
                    self._send_gossip_route(route, name, cfg)

    def _send_gossip_route(self, route, name, cfg):
        info = {"server_id": "GW" + self.server.id, "server_name": "", "version": "", "proto": 0,
                "go": "", "host": "", "port": 0, "headers": False, "max_payload": 0,
                "gateway": name, "gateway_urls": sorted(cfg.urls.values()), "gateway_cmd": CMD_GOSSIP}
        route.send_bytes(info_line(info))

    def route_closed(self, route):
        url = getattr(route.state, "gateway_url", "")
        if url and url in self.cluster_urls:
            self.cluster_urls[url] -= 1
            if self.cluster_urls[url] <= 0:
                del self.cluster_urls[url]

    def closed(self, c):
        s = self.server
        st = c.state
        if c.closed:
            return
        release_connection(self.loop, c, st.auth_timer, st.ping_timer, st.tls_timer)
        for sub in list(c.subs.values()):
            sub.closed = True
            acc = sub.data
            if acc is not None and acc.sublist.remove(sub):
                acc.gateway_subs -= 1
        c.subs.clear()
        self.pending.pop(c.cid, None)
        self.inbound.pop(c.cid, None)
        if st.outbound and self.out.get(st.gw_name) is c:
            del self.out[st.gw_name]
        st.stop = time.time()
        st.reason = c.close_reason or ""
        if st.remote_name:
            log.info("%sGateway connection closed: %s - Remote: %s", self.prefix(c), st.reason,
                     st.remote_name)
        else:
            log.info("%sGateway connection closed: %s", self.prefix(c), st.reason)
        s.remember_closed(c)
        if st.outbound and not st.no_reconnect and not self.stopped and not s.shutting_down:
            cfg = st.cfg
            delay = random.random() * 0.1 + (0 if cfg.implicit else RECONNECT_DELAY)
            self.loop.call_later(delay, self.solicit, cfg, False)

    # ---- sending outside the router (routed replies) ----

    def outbound_by_hash(self, cluster_hash):
        for c in self.out.values():
            if c.state.cfg.hash == cluster_hash:
                return c
        return None

    def route_by_hash(self, server_hash, account):
        routes = self.server.cluster
        if routes is None:
            return None
        for r in routes.routes_for_account(account.decode("utf-8", "replace")):
            if gw_hash(r.state.remote_id) == server_hash:
                return r
        return None

    @staticmethod
    def is_gateway(c):
        return c.kind == KIND_GATEWAY

    @staticmethod
    def send_message(c, account, subject, reply, hdr, payload):
        """RMSG (HMSG with headers) `account subject [reply] size` on link `c`."""
        head = [b"HMSG" if hdr and c.headers else b"RMSG"]
        if c.route_account is None:
            head.append(account)
        head.append(subject)
        if reply:
            head.append(reply)
        if hdr and c.headers:
            head.append(b"%d" % len(hdr))
            body = hdr + payload
        else:
            body = payload
        head.append(b"%d" % len(body))
        c.send_bytes(b" ".join(head) + b"\r\n" + body + b"\r\n")

    # the router's hooks (natsd/_core/router.pyx set_gateways)

    @property
    def account_replies(self):
        return self.replies.account_replies

    def track_reply(self, c, account, routed):
        self.replies.track(c, account, routed)

    def reply_for(self, account, reply):
        return self.replies.reply_for(account, reply)

    def answer(self, account, routed, reply, hdr, payload):
        self.replies.send_back(account, routed, reply, hdr, payload)

    def send_reply(self, c, routed, reply, hdr, payload):
        self.replies.send_back(c.state.account.name.encode(), routed, reply, hdr, payload)

    def routed_reply(self, c, account, subject, reply, hdr, payload):
        self.replies.arrived(c, account, subject, reply, hdr, payload)

    # ---- monitoring ----

    def varz(self):
        go = self.opts
        v = {"name": self.name, "host": go.host or "0.0.0.0", "port": self.port,
             "auth_timeout": go_float(self.auth_timeout),
             "tls_timeout": go_float(self.tls.timeout) if self.tls is not None else 2}
        if self.tls is not None:
            v["tls_required"] = v["tls_verify"] = True
        if go.advertise:
            v["advertise"] = go.advertise
        if go.connect_retries:
            v["connect_retries"] = go.connect_retries
        gws = []
        for r in go.gateways:
            g = {"name": r.name}
            cfg = self.remotes.get(r.name)
            if cfg is not None and cfg.urls:
                g["urls"] = list(cfg.urls)      # host:port, learned ones included
            gws.append(g)
        if gws:
            v["gateways"] = gws
        if self.reject_unknown:
            v["reject_unknown"] = True
        return {k: val for k, val in v.items() if val not in ("", 0) or k == "tls_timeout"}
