"""Server: owns the loop, the listeners, the accounts and the connections; start and stop.

Subsystems (monitoring, the system account, JetStream, leaf nodes, WebSocket, routes) hang off
the Server and run on its single loop. Startup prints the lines launchers wait for ("Listening for client connections
on HOST:PORT", "Server is ready").
"""
import gc
import logging
import os
import random
import time

from natsd import VERSION, PROTO
from natsd._core.conn import Connection, totals
from natsd._core import parser, sublist
from natsd._core.loop import Loop
from natsd._core.router import current_trace, publish, set_latency_hook
from natsd.accounts.registry import AccountRegistry
from natsd.accounts.imports import ResponseRouter, install_import, install_imports
from natsd.accounts.latency import RemoteLatency
from natsd.auth.authenticator import Authenticator, ERR_AUTH_TIMEOUT, RESERVED_REPLY_PREFIXES
from natsd.auth.offloop import AuthWorkers
from natsd.client import ClientProtocol, ClientState
from natsd.auth import nkey
from natsd.conf import ConfigError, load_file
from natsd.conf.flags import reapply_flags
from natsd.conf.reloadable import reload_refusal
from natsd.net.listener import Listener, host_port, new_nonce
from natsd.ids import InternalClient, get_hash
from natsd.jetstream.engine import corehooks
from natsd.jetstream.engine.apilevel import API_LEVEL
from natsd.options import set_baseline
from natsd.output import ports_file
from natsd.protocol import info_line, prepare_accepted, release_connection
from natsd.net.tls import RateCounter, default_auth_timeout

log = logging.getLogger("natsd")

# Python's collector of reference cycles, as the server runs it: a young-generation pass once
# GC_YOUNG container objects were allocated, not Python's default 700. The message paths
# allocate tuples and lists by the thousand, nearly all freed by reference counting at once;
# at 700 the passes took about 7% of the loop (perf, MQTT QoS 1 publishing) and about 0 here.
GC_YOUNG = 20_000
GIT_COMMIT = ""
GO_VERSION = "python"


INBOX_PREFIX = b"_INBOX."                 # clients' one-off reply subjects
# subjects each used once (not worth caching a match), with the tokens their matches are kept under
ONE_OFF_PREFIXES = ((INBOX_PREFIX, 0), corehooks.ONE_OFF)
FIRST_CLIENT_PING = 2.0                 # seconds: nats-server's firstClientPingInterval
LEADER_HAND_OFF = 1.0                   # seconds lame duck mode gives Raft leaderships to move


class Server:
    def __init__(self, opts):
        set_baseline(opts)
        self.opts = opts
        parser.set_reserved_replies(RESERVED_REPLY_PREFIXES)
        sublist.set_one_off_prefixes(ONE_OFF_PREFIXES)
        corehooks.register()
        self.loop = Loop(opts.poll_us, opts.send_ring)
        self.key = nkey.new_key(nkey.SERVER)     # signs auth callout requests
        self.id = nkey.public_of(self.key)        # the server id is its public nkey
        self._xkey = None                         # encrypted auth callouts (made when first used)
        self.name = opts.server_name or self.id
        self.start_time = time.time()
        self.accounts = AccountRegistry(opts)
        self.jwt_accounts = None            # natsd.auth.jwt.accounts.JwtAccounts in operator mode
        if opts.operator_mode:
            from natsd.auth.jwt.accounts import JwtAccounts
            self.jwt_accounts = JwtAccounts(opts, self.accounts, self.client_disconnect,
                                            lambda *link: install_import(self, *link),
                                            self.loop.call_later)
            why = self.jwt_accounts.resolver_unreachable()
            if why:
                raise InitError(why)
            if self.accounts.system_name:   # nats-server looks its system account up at start
                self.jwt_accounts.lookup(self.accounts.system_name)
        self.authenticator = Authenticator(opts, self.jwt_accounts)
        self.callout = None                 # natsd.auth.callout.AuthCallout: config or operator mode
        if opts.auth_callout is not None or opts.operator_mode:
            from natsd.auth.callout import AuthCallout
            self.callout = AuthCallout(self, opts.auth_callout)
        self.auth_workers = AuthWorkers(self.loop)
        self.client_proto = ClientProtocol(self)
        self.clients = {}                   # cid -> Connection
        self.closed_clients = []            # recent closed connection records (/connz)
        self.blocked = set()                # connections with writes pending (write deadline)
        self.write_slow = set()             # ... already logged as slow at their deadline (retry)
        self.slow_consumer_links = {"routes": 0, "gateways": 0, "leafs": 0, "events": 0}
        self.next_cid = 0
        self.total_connections = 0
        self.stale_connections = 0
        self.client_listener = None
        self.tls = None                     # natsd.net.tls.ServerTls when the client port has TLS
        self.monitor = None
        self.profiling = None               # the prof_port listener (monitor/profiling.py)
        self.shutting_down = False
        self.lame_duck = False
        self.config_load_time = time.time()
        self.subsystems = []                # objects with shutdown(), stopped in reverse order
        self.response_routers = {}          # account name -> ResponseRouter (_R_ replies)
        self.system = None                  # SystemServices when there is a system account
        self.remote_latency = None          # RemoteLatency: service latency across servers (idem)
        self.imports = []
        self.jetstream = None               # natsd.jetstream.engine.jetstream.JetStream when enabled
        self.leafnodes = None               # natsd.leafnodes.leafnode.LeafNodes when leafnodes{} is configured
        self.websocket = None               # natsd.net.websocket.WebSockets when websocket{} is configured
        self.mqtt = None                    # natsd.mqtt.subsystem.Mqtt when mqtt{} is configured
        self.leafs = {}                     # cid -> registered leaf Connection (not in clients)
        self.leafs_pending = {}             # cid -> leaf Connection before CONNECT/INFO finished
        self.cluster = None                 # natsd.cluster.routes.Routes when cluster{} has a port
        self.routes = {}                    # cid -> registered route Connection
        self.gateway = None                 # natsd.gateways.gateways.Gateways when gateway{} has a port

    # ---- lifecycle ----

    def start(self):
        opts = self.opts
        log.info("Starting nats-server")
        log.info("  Version:  %s", VERSION)
        log.info("  Git:      [%s]", GIT_COMMIT or "not set")
        if opts.cluster.name:
            log.info("  Cluster:  %s", opts.cluster.name)
        log.info("  Name:     %s", self.name)
        if opts.jetstream.enabled:
            log.info("  Node:     %s", get_hash(self.name))
        log.info("  ID:       %s", self.id)
        if opts.config_file:
            log.info("Using configuration file: %s %s", opts.config_file,
                     "(%s)" % opts.config_digest if opts.config_digest else "")
        if opts.default_js_domain:
            log.warning("The option `default_js_domain` is a temporary backwards compatibility measure and will be removed")
        self.tls = client_tls(opts)
        if opts.proxy_protocol and self.tls is not None:    # (TLS from the command line)
            from natsd.conf.unsupported import NOT_SUPPORTED, PROXY_WITH_TLS
            raise InitError(NOT_SUPPORTED % PROXY_WITH_TLS)
        self.ocsp_peer = self._ocsp_peer()  # tls ocsp_peer on the client port
        self.tls_rate = None                # tls connection_rate_limit on the client port
        if self.tls is not None and self.tls.settings.rate_limit and not opts.allow_non_tls:
            self.tls_rate = RateCounter(self.tls.settings.rate_limit, time.monotonic)
        if opts.http_port and opts.https_port:
            raise MonitorError("can't specify both HTTP (%d) and HTTPs (%d) ports"
                               % (opts.http_port, opts.https_port))
        if opts.prof_port:
            from natsd.monitor.http import MonitorServer
            from natsd.monitor import profiling
            self.profiling = MonitorServer(self, opts.host, max(0, opts.prof_port),
                                           routes=profiling.routes(self))
            log.info("profiling port: %d", self.profiling.port)
        if opts.http_port or opts.https_port:
            from natsd.monitor.http import MonitorServer
            secure = None
            if opts.https_port:
                if self.tls is None:
                    raise MonitorError("TLS cert and key required for HTTPS")
                secure = self.tls.without_client_certs()
            self.monitor = MonitorServer(self, opts.http_host, opts.https_port or opts.http_port, secure)
            log.info("Starting %s monitor on %s", "https" if secure else "http",
                     host_port(opts.http_host, self.monitor.port))
        self.imports = install_imports(self)
        if self.accounts.system is not None:
            from natsd.system.services import SystemServices
            self.system = SystemServices(self)
            self.remote_latency = RemoteLatency(self)
            set_latency_hook(self.remote_latency.delivered)
            self.system.start()
            self.subsystems.append(self.system)
            from natsd.system.claims import ClaimServices
            claim_services = ClaimServices(self.system, self.jwt_accounts)
            claim_services.start()
            self.subsystems.append(claim_services)
        if opts.jetstream.enabled:
            from natsd.jetstream.engine.jetstream import JetStream
            self.jetstream = JetStream(self)
            self.jetstream.start()
            self.subsystems.append(self.jetstream)
        # in nats-server's order: gateways, websocket, leaf nodes, the client port, ready, then routes
        if opts.gateway.port:
            from natsd.gateways.gateways import Gateways
            self.gateway = Gateways(self)
            self.gateway.start()
            self.subsystems.append(self.gateway)
        if opts.websocket.configured and ws_port(opts):
            from natsd.net.websocket import WebSockets, WsSettings
            self.websocket = WebSockets(self, WsSettings(opts.websocket.raw))
            self.websocket.start()
            self.subsystems.append(self.websocket)
        if opts.leafnode.port or opts.leafnode.remotes:
            from natsd.leafnodes.leafnode import LeafNodes
            self.leafnodes = LeafNodes(self)
            self.leafnodes.start()
            self.subsystems.append(self.leafnodes)
        if opts.mqtt.configured and _raw_port(opts.mqtt):
            from natsd.mqtt.subsystem import Mqtt, MqttSettings
            self.mqtt = Mqtt(self, MqttSettings(opts.mqtt.raw))
            self.mqtt.start()
            self.subsystems.append(self.mqtt)
        self.client_listener = Listener(self.loop, opts.host, opts.port, self._accept_client,
                                            reuse_port=opts.reuse_port)
        log.info("Listening for client connections on %s",
                 host_port(opts.host, self.client_listener.port))
        if opts.proxy_protocol:
            log.info("PROXY protocol enabled for client connections")
        if self.tls is not None:
            first = self.tls.settings.handshake_first and not self.tls.settings.fallback_delay
            log.info("TLS %s for client connections",
                     "available" if opts.allow_non_tls and not first else "required")
            if first:
                log.warning('Clients that are not using "TLS Handshake First" option will fail to connect')
        self._write_pid_file()
        if opts.cluster.port:           # (imported now: the routes dial within a ms of "ready")
            from natsd.cluster.routes import Routes
            if self.jetstream is not None:
                from natsd.jetstream.replicated.layer import ClusterLayer
        log.info("Server is ready")
        if opts.cluster.port:           # nats-server's routing starts once the client port listens
            self.cluster = Routes(self)
            self.cluster.start()
            self.subsystems.append(self.cluster)
            if self.jetstream is not None:
                self.jetstream.start_cluster(ClusterLayer(self.jetstream))
        ports_file.write(self)
        self.loop.call_later(1.0, self._write_deadline_sweep)
        if self.tls_rate is not None:
            self.loop.call_later(1.0, self._log_rate_limited)

    @property
    def port(self):
        return self.client_listener.port if self.client_listener else self.opts.port

    def run(self):
        if not self.shutting_down:          # a signal during start already shut it down
            # what start built (configuration, accounts, JetStream's state) lives until the
            # server stops: frozen, the collector's older passes no longer walk it
            gc.freeze()
            gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
            self.loop.run()

    def shutdown(self):
        """Stop accepting, close every connection, stop the loop."""
        if self.shutting_down:
            return
        self.shutting_down = True
        log.info("Initiating Shutdown...")
        if self.jetstream is not None:
            self.jetstream.tell_pulls_of_shutdown()
            self.jetstream.hand_off_leaders()       # as nats-server: no wait, the messages are out
        if self.client_listener:
            self.client_listener.close()
        if self.monitor:
            self.monitor.close()
        if self.profiling:
            self.profiling.close()
        for sub in reversed(self.subsystems):
            try:
                sub.shutdown()
            except Exception:
                log.exception("shutdown of %s failed", sub)
        self.auth_workers.shutdown()
        self.loop.close()                   # the work handed to worker threads is done
        self._remove_pid_file()
        ports_file.remove(self.opts)
        self.loop.run_once_nowait()
        # The client connections close with the process: what is queued for them goes out
        # now, and natsd.cli.run ends the process at once, so the kernel closes their sockets
        # as the last step of the exit, as with nats-server. Closed here, they closed ~3 ms
        # before the process was gone (its memory's teardown), and a client reconnecting
        # elsewhere at once came back before a launcher saw the exit.
        for c in list(self.clients.values()):
            if c.codec is not None:
                c.codec.goodbye("Server Shutdown")
            c.flush_now()
        log.info("Server Exiting..")
        self.loop.stop()

    def _write_pid_file(self):
        if self.opts.pid_file:
            with open(self.opts.pid_file, "w") as f:
                f.write(str(os.getpid()))

    def _remove_pid_file(self):
        if self.opts.pid_file:
            try:
                os.unlink(self.opts.pid_file)
            except OSError:
                pass

    # ---- client connections ----

    def info_dict(self, c=None, with_nonce=True, tls_first=False, client_ip=True):
        opts = self.opts
        info = {
            "server_id": self.id,
            "server_name": self.name,
            "version": VERSION,
            "proto": PROTO,
            "go": GO_VERSION,
            "host": opts.host,
            "port": self.port,
            "headers": not opts.no_header_support,
        }
        if self.authenticator.auth_required:
            info["auth_required"] = True
        if c is not None and c.state.ws:
            info.update(self.websocket.info_fields())
        elif self.tls is not None:
            info.update(self.tls.info_fields(tls_first))
        info["max_payload"] = opts.max_payload
        if self.jetstream_enabled():
            info["jetstream"] = True
        if c is not None:
            info["client_id"] = c.cid
            if client_ip:
                info["client_ip"] = c.state.host
            if c.state.nonce and with_nonce:
                info["nonce"] = c.state.nonce
        if self.cluster is not None:
            info["cluster"] = self.cluster.name
            urls = self.cluster.connect_urls
            if urls.client:
                info["connect_urls"] = list(urls.client)
            if urls.ws:
                info["ws_connect_urls"] = list(urls.ws)
        info["api_lvl"] = API_LEVEL
        info["xkey"] = self.xkey.public
        return info

    def cluster_name(self):
        """The cluster name; a server with leaf remotes and no cluster{} uses its server name."""
        if self.cluster is not None:
            return self.cluster.name
        name = getattr(self.opts.cluster, "name", "") or ""
        if not name and self.opts.leafnode.remotes:
            name = self.name
        return name

    def leafnode_count(self):
        return len(self.leafs)

    def leaf_varz(self):
        return self.leafnodes.varz() if self.leafnodes is not None else {}

    def jetstream_enabled(self):
        return self.jetstream is not None

    def jetstream_domain(self):
        return self.jetstream.domain if self.jetstream is not None else ""

    def jetstream_varz(self):
        return self.jetstream.varz() if self.jetstream is not None else None

    def jetstream_health_errors(self, query=None):
        return self.jetstream.health_errors(query) if self.jetstream is not None else []

    def new_internal_client(self, first_sid=1):
        """An internal client with the next cid (natsd.ids.InternalClient)."""
        self.next_cid += 1
        return InternalClient(self.next_cid, first_sid)

    def new_client(self, sock, addr, id_kind="cid"):
        """A client Connection for an accepted socket (client port, WebSocket or MQTT),
        registered with the loop; nothing sent yet. `id_kind` names it in the log (`mid` for
        MQTT, as nats-server)."""
        prepare_accepted(sock)
        fd = sock.detach()
        self.next_cid += 1
        c = Connection(fd)
        c.cid = self.next_cid
        c.handler = self.client_proto
        st = c.state = ClientState(addr[0], addr[1])
        opts = self.opts
        c.max_payload = opts.max_payload
        c.max_control_line = opts.max_control_line
        c.max_pending = opts.max_pending
        c.stall_limit = stall_limit(opts)
        c.trace = opts.trace
        c.sublist = self.accounts.global_account.sublist
        self.loop.add_handler(fd, c)
        self.clients[c.cid] = c
        self.total_connections += 1
        if self.authenticator.nonce_required:
            st.nonce = new_nonce()
        log.debug("%s:%d - %s:%d - Client connection created", st.host, st.port, id_kind, c.cid)
        return c

    def client_ready(self, c):
        """A WebSocket client finished its upgrade: the INFO, limits and timers a client on the
        client port gets at accept."""
        st = c.state
        c.send_bytes(info_line(self.info_dict(c)))
        if len(self.clients) > self.opts.max_connections:
            log.error("%s:%d - cid:%d - Maximum Connections Exceeded", st.host, st.port, c.cid)
            self.client_proto.fail(c, "maximum connections exceeded", "Maximum Connections Exceeded")
            return
        self.start_auth_timer(c)
        st.ping_timer = self.loop.call_later(self.opts.ping_interval, self._ping, c)

    def _accept_client(self, sock, addr):
        if self.shutting_down:
            sock.close()
            return
        c = self.new_client(sock, addr)
        st = c.state
        opts = self.opts
        if opts.proxy_protocol:
            # the INFO leaves out client_ip: it would be the load balancer's address
            self.client_proto.expect_proxy_header(c)
            c.send_bytes(info_line(self.info_dict(c, client_ip=False)))
        elif self.tls is None or self.tls.begin(c):
            c.send_bytes(info_line(self.info_dict(c)))
        else:
            st.info_due = True
            if self.tls.settings.fallback_delay:
                self.loop.call_later(self.tls.settings.fallback_delay, self._tls_fallback, c)
        if len(self.clients) > opts.max_connections:
            log.error("%s:%d - cid:%d - Maximum Connections Exceeded", st.host, st.port, c.cid)
            self.client_proto.fail(c, "maximum connections exceeded", "Maximum Connections Exceeded")
            return
        if self.tls_rate is not None and not self.tls_rate.allow():
            self.client_proto.fail(c, "Connection throttling is active. Please try again later.",
                                   "Maximum Connections Exceeded")
            return
        if self.tls is not None:
            st.tls_timer = self.loop.call_later(self.tls.settings.timeout,
                                                self.client_proto.tls_timeout, c)
        else:
            self.start_auth_timer(c)
        st.ping_timer = self.loop.call_later(opts.ping_interval, self._ping, c)

    def start_auth_timer(self, c):
        """The authentication clock starts once the connection is usable (after TLS)."""
        ws = self.websocket.settings if c.state.ws else None
        if (self.authenticator.auth_required or ws is not None and ws.auth_override) and not c.connected:
            timeout = (ws.auth_timeout if ws is not None and ws.auth_timeout else self._auth_timeout())
            c.state.auth_timer = self.loop.call_later(timeout, self._auth_timeout_expired, c)

    def send_due_info(self, c, first=False):
        """The INFO a handshake-first connection was waiting for."""
        st = c.state
        if st.info_due and not c.closing:
            st.info_due = False
            c.send_bytes(info_line(self.info_dict(c, tls_first=first)))

    def _tls_fallback(self, c):
        """handshake_first with a fallback delay: the client said nothing, so it is not doing
        TLS first; send the INFO in plaintext and expect TLS after it, as nats-server does."""
        if c.tls_sniff and not c.closing and not c.closed:
            self.send_due_info(c)

    def _auth_timeout(self):
        return self.opts.auth_timeout or default_auth_timeout(self.tls_timeout())

    def tls_timeout(self):
        """The client port's TLS handshake timeout (seconds), None without TLS."""
        return self.tls.settings.timeout if self.tls is not None else None

    def _auth_timeout_expired(self, c):
        if not c.connected and not c.closed:
            st = c.state
            log.error("%s:%d - cid:%d - Authentication Timeout", st.host, st.port, c.cid)
            self.client_proto.fail(c, ERR_AUTH_TIMEOUT, "Authentication Timeout")

    def first_ping(self, c):
        """After CONNECT the first PING goes out within about 2 s (not a whole ping interval),
        as nats-server's setFirstPingTimer: its PONG measures the client's RTT."""
        st = c.state
        if st.ping_timer is not None:
            st.ping_timer.cancel()
        delay = min(self.opts.ping_interval, FIRST_CLIENT_PING)
        st.ping_timer = self.loop.call_later(delay + random.random() * delay / 5, self._ping, c)

    def _ping(self, c):
        if c.closed or c.closing:
            return
        opts = self.opts
        st = c.state
        if c.pings_out + 1 > opts.ping_max:
            self.stale_connections += 1
            log.debug("%s:%d - cid:%d - Stale Client Connection - Closing", st.host, st.port, c.cid)
            self.client_proto.fail(c, "Stale Connection", "Stale Connection")
            return
        c.send_ping()
        c.release_idle_buffers()
        st.ping_timer = self.loop.call_later(opts.ping_interval, self._ping, c)

    def _write_deadline_sweep(self):
        """Once a second: connections whose output has been stuck past their write deadline."""
        if self.blocked:
            now = self.loop.time()
            for c in list(self.blocked):
                if c.closed:
                    self.blocked.discard(c)
                elif c.blocked_since:
                    c.handler.write_stalled(c, now)
        # checked at least twice per deadline (and once a second)
        self.loop.call_later(min(1.0, max(0.01, self.opts.write_deadline / 2)), self._write_deadline_sweep)

    def _ocsp_peer(self):
        """The client port's OCSP peer check (net/ocsppeer.py), or None."""
        if self.tls is None or self.tls.settings.ocsp_peer is None:
            return None
        from natsd.net.ocsppeer import OcspPeer
        return OcspPeer(self.tls.settings.ocsp_peer, self.tls.settings.ca_file)

    def _log_rate_limited(self):
        """nats-server's logRejectedTLSConns: once a second, how many TLS clients the
        connection rate limit turned away."""
        blocked = self.tls_rate.take_blocked()
        if blocked:
            log.warning("Rejected %d connections due to TLS rate limiting", blocked)
        self.loop.call_later(1.0, self._log_rate_limited)

    def slow_consumer_stats(self):
        """Slow consumers by kind of connection (varz, STATSZ), as nats-server counts them:
        routes, gateways and leaf nodes at their write deadline (a route once until it drains); every
        other slow-consumer event the core counted was a client's."""
        links = self.slow_consumer_links
        return {"clients": totals.slow_consumers - links["events"],
                "routes": links["routes"], "gateways": links["gateways"], "leafs": links["leafs"]}

    def client_connected(self, c):
        if self.system is not None:
            self.system.client_event(c, True)

    @property
    def xkey(self):
        """The server's curve25519 key, for auth callouts with an xkey."""
        if self._xkey is None:
            self._xkey = nkey.XKey()
        return self._xkey

    def account_named(self, name):
        """The account called `name`, or None; operator mode looks unknown ones up (a route
        or leaf telling of interest in an account this server has not used yet)."""
        acc = self.accounts.accounts.get(name)
        if acc is None and self.jwt_accounts is not None and self.jwt_accounts.lookup(name) is not None:
            acc = self.accounts.accounts.get(name)
        return acc

    def client_disconnect(self, c, text, reason):
        """-ERR '<text>' to a client (unless text is None), then close it (`reason` for /connz)."""
        if text is None:
            c.schedule_close(reason)
        else:
            self.client_proto.fail(c, text, reason)

    def bind_account(self, c, account):
        old = c.state.account
        if old is not None:
            old.clients.discard(c)
        c.state.account = account
        account.clients.add(c)
        c.sublist = account.sublist
        c.has_mappings = bool(account.mappings)
        c.external_traces = bool(account.trace_dest)
        c.forget_lookup()

    def remember_closed(self, c):
        """Keep a closed connection for /connz?state=closed (the newest max_closed_clients)."""
        self.closed_clients.append(c)
        if len(self.closed_clients) > self.opts.max_closed_clients:
            del self.closed_clients[: len(self.closed_clients) - self.opts.max_closed_clients]

    def close_connection(self, c, prefix=None):
        """Final close: unregister, drop subscriptions, release the socket. `prefix` names the
        connection in the log line when the handler names it otherwise than `cid:`."""
        if c.closed:
            return
        st = c.state
        release_connection(self.loop, c, st.auth_timer, st.ping_timer, st.tls_timer,
                           getattr(st, "expiry_timer", None))
        for s in list(c.subs.values()):
            s.closed = True
            if c.sublist.remove(s):
                self.interest_removed(st.account, s)
        self.clients.pop(c.cid, None)
        self.blocked.discard(c)
        if st.account is not None:
            st.account.clients.discard(c)
        st.stop = time.time()
        st.reason = c.close_reason or ""
        if c.connected and self.system is not None:
            self.system.client_event(c, False)
        self.remember_closed(c)
        if prefix is None:
            prefix = "%s:%d - cid:%d - " % (st.host, st.port, c.cid)
        log.debug("%sClient connection closed: %s", prefix, st.reason)

    # ---- lame duck mode ----

    def enter_lame_duck_mode(self):
        """nats-server's lame duck mode: stop accepting, hand the Raft leaderships led here to
        other members (and give them a second), stop JetStream, tell clients (a full INFO with
        "ldm": true), wait the grace period, then close the clients one by one over what is
        left of lame_duck_duration (at most a second apart) and shut down. A second signal
        while in lame duck mode is ignored."""
        if self.lame_duck or self.shutting_down or self.client_listener is None:
            return
        self.lame_duck = True
        log.info("Entering lame duck mode, stop accepting new clients")
        if self.system is not None:
            self.system.lame_duck_event()
        self.client_listener.close()
        self.client_listener = None
        if self.cluster is not None:
            self.cluster.lame_duck()
        if self.jetstream is not None and self.jetstream.hand_off_leaders():
            # as nats-server: a second for the other members to take over, then JetStream stops
            self.loop.call_later(LEADER_HAND_OFF, self._lame_duck_clients)
        else:
            self._lame_duck_clients()

    def _lame_duck_clients(self):
        if self.shutting_down:
            return
        opts = self.opts
        if self.jetstream is not None:
            self.jetstream.shutdown()
        clients = list(self.clients.values())
        if not clients:
            self.shutdown()
            return
        grace = abs(opts.lame_duck_grace_period)
        spread = opts.lame_duck_duration - grace
        if spread <= 0:
            spread = 1.0
        interval = min(spread / len(clients), 1.0)
        for c in clients:
            self.tell_lame_duck(c)
        self.loop.call_later(grace, self._lame_duck_evict, clients, interval)

    def tell_lame_duck(self, c):
        """A full INFO with "ldm": true to a client that takes asynchronous INFO (protocol 1,
        past its first PONG) -> whether it was sent."""
        if not (c.connected and not c.connect_info_due and _int(c.state.connect, "protocol") >= 1):
            return False
        info = self.info_dict(c, with_nonce=False)
        info["ldm"] = True
        c.send_bytes(info_line(info))
        return True

    def _lame_duck_evict(self, clients, interval):
        if self.shutting_down:
            return
        log.info("Closing existing clients")
        self._evict_next(clients, 0, interval)

    def _evict_next(self, clients, i, interval):
        if self.shutting_down:
            return
        clients[i].schedule_close("Server Shutdown")
        if i + 1 < len(clients):
            delay = max(interval / 2, random.random() * interval)
            self.loop.call_later(delay, self._evict_next, clients, i + 1, interval)
        else:
            self.loop.call_soon(self.shutdown)

    # ---- interest hooks (leaf nodes and imports attach here) ----

    def interest_added(self, account, sub):
        pass

    def interest_removed(self, account, sub):
        pass

    def publish_mapped(self, c, subject, reply, hdr, payload):
        """A publish in an account with subject mappings: map first, then route."""
        mapped = c.state.account.mappings.map(subject.decode("utf-8", "replace"))
        if mapped == "":
            return                      # the unassigned share of a weighted mapping is dropped
        target = mapped.encode() if mapped is not None else subject
        if mapped is not None:
            trace = current_trace()
            if trace is not None:
                trace.mapped(mapped)
        if not publish(c.sublist, target, reply, hdr, payload, c) and reply and c.no_responders:
            self.client_proto.no_responders(c, subject, reply)

    def response_router(self, account):
        router = self.response_routers.get(account.name)
        if router is None:
            router = self.response_routers[account.name] = ResponseRouter(self, account)
        return router

    # ---- reload ----

    def reload_config_file(self):
        """Read the configuration file again and apply it (SIGHUP, `$SYS.REQ.SERVER.<id>.RELOAD`)
        -> None, or why it could not, in nats-server's words."""
        path = self.opts.config_file
        if not path:
            return "can only reload config when a file is provided using -c or --config"
        try:
            new = load_file(path)
        except (ConfigError, OSError) as e:
            return str(e)
        if new.unsupported:
            return "\n".join(msg for _, msg in new.unsupported)
        new.flags_given = self.opts.flags_given
        reapply_flags(new, new.flags_given)
        set_baseline(new)
        for name in _ENVIRONMENT_WINS:
            setattr(new, name, getattr(self.opts, name))
        refused = reload_refusal(self.opts, new)
        if refused:
            return refused
        self.reload(new)
        return None

    def reload(self, new_opts):
        """Apply a reloaded config: authorization and logging (what nats-server reloads most)."""
        from natsd.output import logger
        self.opts = new_opts
        self.client_proto.opts = new_opts
        try:
            logger.configure(new_opts)
        except logger.LogDestinationError as e:
            log.error("Failed to reload the log destination, keeping the old one: %s", e)
        self.authenticator = Authenticator(new_opts, self.jwt_accounts)
        try:
            self.tls = client_tls(new_opts)     # new connections; open ones keep their session
            self.ocsp_peer = self._ocsp_peer()
        except Exception as e:
            log.error("Failed to reload the TLS configuration, keeping the old one: %s", e)
        for c in list(self.clients.values()):
            c.trace = new_opts.trace
            c.stall_limit = stall_limit(new_opts)
            if c.connected and not c.closing:
                self.client_proto.reauthorize(c)
        if self.leafnodes is not None:
            self.leafnodes.reload(new_opts)
        self.config_load_time = time.time()
        log.info("Reloaded server configuration%s",
                 " (%s)" % new_opts.config_digest if new_opts.config_digest else "")


# What natsd's environment variables set (NATSD_POLL_US, NATSD_SEND_RING, NATSD_NEW_FILES_US,
# NATSD_REUSE_PORT) stays on a reload.
_ENVIRONMENT_WINS = ("poll_us", "send_ring", "new_files_us", "reuse_port")


def stall_limit(opts):
    """Queued bytes past which a subscriber pauses its publishers (a fraction of max_pending);
    never with `no_fast_producer_stall` (nats-server then lets the subscriber fall behind
    until it is cut as a slow consumer)."""
    if opts.no_fast_producer_stall:
        return NEVER_STALL
    return max(256 * 1024, min(opts.max_pending // 8, 8 * 1024 * 1024))


NEVER_STALL = 1 << 62


def ws_port(opts):
    return _raw_port(opts.websocket)


def _raw_port(block):
    """The port of a `websocket {}` / `mqtt {}` block (`port`, or `listen`'s), 0 for none."""
    for k, v in block.raw.items():
        if k.lower() == "port":
            return v
        if k.lower() == "listen" and isinstance(v, str):
            return int(v.rpartition(":")[2] or 0)
        if k.lower() == "listen" and isinstance(v, int):
            return v
    return 0


class MonitorError(Exception):
    """The monitoring port cannot start (nats-server: "Can't start monitoring: ...")."""


class InitError(Exception):
    """What nats-server's NewServer refuses (printed as `nats-server: <error>`, exit 1)."""


def client_tls(opts):
    """The client port's TLS (a config `tls {}` block or the --tls flags), or None."""
    from natsd.net.tls import ServerTls, TlsSettings
    if opts.tls or opts.tls_verify or opts.tls_cert:
        settings = TlsSettings.from_flags(opts)
    elif opts.tls_config.configured:
        settings = TlsSettings(opts.tls_config.raw)
    else:
        return None
    return ServerTls(settings, opts.allow_non_tls)


def _int(d, key):
    try:
        return int((d or {}).get(key) or 0)
    except (TypeError, ValueError):
        return 0

