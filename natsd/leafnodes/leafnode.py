"""Leaf node connections: the accept side (`leafnodes { port }`), the solicit side
(`leafnodes { remotes: [...] }`), interest propagation (LS+/LS-), JetStream domain
suppression, loop detection and keepalive.

Messages (LMSG/HMSG) are parsed and routed in C (natsd/_core/parser.pyx `remote_op`,
router.pyx `flush_remote`); this module handles the control side of a leaf connection,
following nats-server's leafnode.go:

- A leaf connection is bound to one account on each side. Its remote interest lives in that
  account's sublist as Subscriptions whose `conn` is the leaf Connection (sid = the LS+ key
  `subject[ queue]`, `weight` = the queue weight).
- The interest we send is kept in a per-connection `smap` (key -> count) fed by the account
  sublist's `on_change` hook: the first subscription on a key sends `LS+`, the last removal
  `LS-`; queue keys send every weight change.
- What may cross the link (natsd/leafnodes/linkperms.py): the leaf user's permissions on the hub side,
  those the hub announced on the spoke side, deny_imports / deny_exports and the JetStream
  domain denies filter both the interest and the messages in each direction (`st.perms.send`,
  `st.perms.recv`). A hub closes a link whose leaf breaks its user's permissions.
"""
import base64
import json
import logging
import os
import random
import time
from urllib.parse import urlsplit, unquote

from natsd import VERSION, SERVER_PROTO, version_at_least
from natsd._core.conn import Connection
from natsd._core.router import route_remote
from natsd._core.sublist import Sublist, Subscription
from natsd.client import ClientState
from natsd.auth.offloop import OffLoop
from natsd.auth.authenticator import verify_nonce_signature
from natsd.gofmt import go_float, go_json, go_quote, go_seconds, omitempty
from natsd.net.compression import (
    NOT_SUPPORTED, OFF, S2_AUTO, Compression, CompressionError, codec as compression_codec,
    compresses)
from natsd.net.dialer import Dialer, HttpTunnel, go_dial_error, host_label, report_connect_error
from natsd.net.listener import plain_addr
from natsd.leafnodes.creds import CredsError, check_creds, expand_path, leaf_connect_auth
from natsd.ids import random_token
from natsd.output.logger import TRACE
from natsd.leafnodes.linkperms import LinkPerms, internal_interest, internal_message, is_literal
from natsd import msgtrace
from natsd.auth.permissions import Permissions
from natsd.protocol import (KIND_CLIENT, KIND_GATEWAY, KIND_LEAF, KIND_ROUTE, ProtocolHandler, info_line,
                            prepare_accepted, proto_number, release_connection)
from natsd._core.ws import WsCodec
from natsd.net.tls import ServerTls, TlsSettings, cert_not_after, default_auth_timeout, pinning_refusal
from natsd.subject import subject_is_subset

log = logging.getLogger("natsd")

LDS_PREFIX = "$LDS."
LOOP_DELAY = 30.0                       # reconnect delay after a loop was detected
PERM_VIOLATION_DELAY = 30.0
FIRST_PING = 1.0                        # nats-server: firstPingInterval for non-clients
CONNECT_PROCESS_TIMEOUT = 2.0
FIRST_INFO_TIMEOUT = 1.0        # nats-server's DEFAULT_LEAFNODE_INFO_WAIT (a remote's first_info_timeout)
DIAL_TIMEOUT = 1.0              # nats-server: DEFAULT_ROUTE_DIAL for leaf node remotes too

DENY_ALL_CLIENT_JS = ["$JS.API.>", "$KV.>", "$OBJ.>"]
DENY_ALL_JS = ["$JSC.>", "$NRG.>", "$JS.API.>", "$KV.>", "$OBJ.>"]

ERR_LEAF_PORT = "attempted to connect to leaf node port"
ERR_WRONG_PORT = "attempted to connect to wrong port"
_EMPTY_SUBLIST = Sublist()



class LeafState(ClientState):
    """What the Python side knows about one leaf connection (monitoring reads it too)."""
    __slots__ = ("remote", "remote_server", "remote_domain", "remote_cluster", "remote_account",
                 "is_spoke", "isolated", "compression", "comp_negotiated", "smap",
                 "info_received", "finished",
                 "connect_timer", "leaf_url", "solicited", "hub_info", "ws_key", "told_urls",
                 "peer_proto")

    def __init__(self, host, port, remote=None):
        super().__init__(host, port)
        self.kind = "Leafnode"
        self.remote = remote            # RemoteLeaf for connections we solicited
        self.solicited = remote is not None
        self.remote_server = ""
        self.peer_proto = 0             # the hub's INFO proto or the leaf's CONNECT protocol (3: traces)
        self.remote_domain = ""
        self.remote_cluster = ""
        self.remote_account = ""
        self.is_spoke = remote is not None and not remote.opts.hub
        self.isolated = False
        self.compression = ""           # the mode agreed with the peer (/leafz)
        self.comp_negotiated = False
        self.smap = None                # key -> count, set once interest is exchanged
        self.perms = LinkPerms()        # what may cross this link, each way (linkperms.py)
        self.hub_info = None            # spoke side: the hub's INFO that finished the connect
        self.ws_key = None              # spoke side over WebSocket: our Sec-WebSocket-Key
        self.info_received = False
        self.finished = False
        self.connect_timer = None
        self.leaf_url = ""
        self.told_urls = None           # the leafnode_urls this accepted leaf node was last sent


class RemoteLeaf:
    """One configured remote: its URLs, the local account, reconnect state."""

    def __init__(self, opts):
        self.opts = opts
        self.urls = [u if "://" in u else "nats-leaf://" + u for u in opts.urls]
        self.configured_urls = list(self.urls)
        self.index = -1
        self.account = opts.account or ""
        self.delay = 0.0                # extra delay before the next attempt (loop detected...)
        self.conn = None
        self.timer = None
        self.attempts = 0
        self.first_connect = True
        self.dialer = None
        self.current = None             # SplitResult of the URL in use
        # TLS: a `tls {}` block or tls:// URLs ask for it; a hub's INFO can too
        self.tls_settings = TlsSettings(opts.tls, server=False)
        self.tls_configured = bool(opts.tls) or any(u.lower().startswith(("tls://", "wss://"))
                                                    for u in self.urls)
        self.tls_ctx = None
        self.compression = Compression.parse(opts.compression, S2_AUTO, unset=S2_AUTO)
        ex = opts.extra
        self.ws_compression = bool(ex.get("ws_compression", ex.get("ws_compress",
                                   ex.get("websocket_compression", ex.get("websocket_compress")))))
        self.ws_no_masking = bool(ex.get("ws_no_masking", ex.get("websocket_no_masking")))

    @property
    def websocket(self):
        """The URL in use is ws:// or wss://: the link is WebSocket frames."""
        return self.current is not None and self.current.scheme.lower() in ("ws", "wss")

    def tls_session(self):
        """A client TLS session for the URL in use (its host checked against the certificate
        unless `insecure`)."""
        if self.tls_ctx is None:
            self.tls_ctx = self.tls_settings.context()
        host = self.tls_settings.server_name or (self.current.hostname if self.current else "")
        return self.tls_ctx.session(host or None, check_host=not self.tls_settings.insecure)

    def next_url(self):
        if not self.urls:
            return None
        self.index = (self.index + 1) % len(self.urls)
        return urlsplit(self.urls[self.index])

    def discovered(self, info):
        """nats-server's updateLeafNodeURLs: the hub cluster's leaf node URLs (its INFO's
        `leafnode_urls`, or `ws_connect_urls` for a WebSocket remote) go before the
        configured ones, which stay; a URL whose host:port is configured is not repeated.
        Nothing changes with `ignore_discovered_servers`."""
        if self.opts.ignore_discovered_servers or not self.configured_urls:
            return
        first = urlsplit(self.configured_urls[0]).scheme.lower()
        if first in ("ws", "wss"):
            scheme, found = ("wss" if self.tls_configured else "ws"), info.get("ws_connect_urls")
        else:
            scheme, found = "nats-leaf", info.get("leafnode_urls")
        if not isinstance(found, list) or not found:
            return
        known = {urlsplit(u).netloc.rpartition("@")[2] for u in self.configured_urls}
        fresh = []
        for hp in found:
            if isinstance(hp, str) and hp not in known:
                known.add(hp)
                fresh.append("%s://%s" % (scheme, hp))
        in_use = self.urls[self.index] if 0 <= self.index < len(self.urls) else None
        self.urls = fresh + self.configured_urls
        self.index = self.urls.index(in_use) if in_use in self.urls else -1


class LeafNodes:
    """The leaf node subsystem of one Server."""

    def __init__(self, server):
        self.server = server
        self.loop = server.loop
        self.opts = server.opts.leafnode
        self.listener = None
        self.proto = LeafProtocol(self)
        self.remotes = [RemoteLeaf(r) for r in self.opts.remotes if not r.disabled]
        self.by_account = {}            # account name -> set of leaf Connections with an smap
        self.lds = {}                   # account name -> loop detection subject
        self.hooked = set()
        self.stopped = False
        self.tls = ServerTls(TlsSettings(self.opts.tls)) if self.opts.tls else None
        self.ocsp_peer = None           # tls ocsp_peer: leaf nodes' certificates checked (net/ocsppeer.py)
        if self.tls is not None and self.tls.settings.ocsp_peer is not None:
            from natsd.net.ocsppeer import OcspPeer
            self.ocsp_peer = OcspPeer(self.tls.settings.ocsp_peer, self.tls.settings.ca_file)
        self.compression = Compression.parse(self.opts.compression, S2_AUTO, unset=S2_AUTO)

    # ---- lifecycle ----

    def start(self):
        from natsd.net.listener import Listener, host_port
        for acc in self.server.accounts:
            self._hook(acc)
        if self.opts.port:
            port = 0 if self.opts.port < 0 else self.opts.port
            self.listener = Listener(self.loop, self.opts.host, port, self._accept)
            log.info("Listening for leafnode connections on %s",
                     host_port(self.opts.host, self.listener.port))
        for r in self.remotes:
            if r.opts.credentials:
                err = check_creds(expand_path(r.opts.credentials))
                if err:
                    log.error("%s", err)
            self.loop.call_soon(self.connect, r)

    def shutdown(self):
        self.stopped = True
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for r in self.remotes:
            if r.timer is not None:
                r.timer.cancel()
            if r.dialer is not None:
                r.dialer.cancel()
        for c in list(self.server.leafs.values()):
            c.schedule_close("Server Shutdown")

    @property
    def port(self):
        return self.listener.port if self.listener is not None else 0

    def reload(self, new_opts):
        """A config reload: accepted leaf connections are checked against the new
        authorization. Failing credentials get 'Authorization Violation'; a link bound to
        another account or whose user's permissions changed is closed (the leaf reconnects and
        gets the new ones, interest included)."""
        lo = new_opts.leafnode
        lo.port, lo.host = self.opts.port, self.opts.host
        self.opts = lo
        for c in list(self.server.leafs.values()):
            st = c.state
            if st.solicited or c.closing or c.closed:
                continue
            bound = self.authenticate(st.connect or {}, st.nonce, host=st.host)
            if bound is False:
                user = st.connect.get("user") if st.connect else None
                log.error("%sauthentication error%s", self.prefix(c),
                          " - User %s" % go_quote(str(user)) if user else "")
                self.proto.fail(c, "Authorization Violation", "Authentication Failure")
                continue
            account = self.server.accounts.get(bound[0])
            if account is not st.account:
                c.schedule_close("Client Closed")
                continue
            if LinkPerms.for_user(bound[1]).user_key() != st.perms.user_key():
                log.info("%sLeafnode permissions changed by the configuration reload, closing",
                         self.prefix(c))
                c.schedule_close("Client Closed")

    def _hook(self, acc):
        if acc.name in self.hooked:
            return
        self.hooked.add(acc.name)
        prev = acc.sublist.on_change

        def on_change(sub, added, acc=acc, prev=prev):
            if prev is not None:
                prev(sub, added)
            conns = self.by_account.get(acc.name)
            if conns:
                self.propagate(acc, sub, self.sub_delta(sub) if added else -self.sub_delta(sub))
        acc.sublist.on_change = on_change

    def lds_subject(self, acc):
        s = self.lds.get(acc.name)
        if s is None:
            s = self.lds[acc.name] = LDS_PREFIX + random_token(22)
        return s

    # ---- connections common to both sides ----

    def _new_conn(self, fd, host, port, remote=None):
        server = self.server
        server.next_cid += 1
        c = Connection(fd, KIND_LEAF)
        c.cid = server.next_cid
        self._as_leaf(c, host, port, remote)
        self.loop.add_handler(fd, c)
        server.total_connections += 1
        return c

    def _as_leaf(self, c, host, port, remote=None):
        """Leaf settings for a connection (new, or a WebSocket one that asked for /leafnode)."""
        server = self.server
        c.kind = KIND_LEAF
        c.handler = self.proto
        ws = c.state.ws if c.state is not None else False
        c.state = LeafState(host, port, remote)
        c.state.ws = ws
        sopts = server.opts
        # not told of other leaf nodes' interest: every leaf connection of the server, or this
        # remote's (nats-server's IsolateLeafnodeInterest, a remote's LocalIsolation); a
        # leaf may also ask for it in its CONNECT (request_isolation)
        c.state.isolated = bool(sopts.leafnode.isolate_leafnode_interest
                                or (remote is not None and remote.opts.isolate))
        c.max_payload = sopts.max_payload
        c.max_control_line = sopts.max_control_line
        c.max_pending = max(sopts.max_pending, 64 * 1024 * 1024)
        c.stall_limit = 1 << 62         # never pause publishers because of a leaf
        c.trace = sopts.trace
        c.echo = False
        c.verbose = False
        c.pedantic = False
        c.headers = not sopts.no_header_support
        c.sublist = _EMPTY_SUBLIST

    def prefix(self, c):
        st = c.state
        return "%s - lid%s:%d - " % (_hp(st.host, st.port), ":ws" if st.ws else "", c.cid)

    # ---- accept side ----

    def _accept(self, sock, addr):
        server = self.server
        if server.shutting_down or self.stopped:
            sock.close()
            return
        prepare_accepted(sock)
        try:
            local = plain_addr(sock.getsockname())
        except OSError:
            local = (self.opts.host, self.port)
        fd = sock.detach()
        c = self._new_conn(fd, addr[0], addr[1])
        st = c.state
        st.nonce = _nonce()
        st.leaf_url = _hp(local[0], local[1])
        server.leafs_pending[c.cid] = c
        log.info("%sLeafnode connection created ", self.prefix(c))
        if self.tls is None or self.tls.begin(c):
            self._send_accept_info(c)
        else:
            st.info_due = True
        if self.tls is not None:
            st.tls_timer = self.loop.call_later(self.tls.settings.timeout, self.proto.tls_timeout, c)
        else:
            self.start_auth_timer(c)

    def accept_websocket(self, c):
        """A WebSocket connection upgraded on /leafnode: from now on a leaf we accepted (its
        INFO, nonce and auth timer as on the leafnode port; TLS, if any, was the websocket's)."""
        server = self.server
        server.clients.pop(c.cid, None)
        st = c.state
        for t in (st.auth_timer, st.ping_timer, st.tls_timer):
            if t is not None:
                t.cancel()
        self._as_leaf(c, st.host, st.port)
        st = c.state
        st.ws = True
        st.nonce = _nonce()
        st.leaf_url = _hp(self.opts.host or "0.0.0.0", self.port)
        server.leafs_pending[c.cid] = c
        log.info("%sLeafnode connection created ", self.prefix(c))
        self._send_accept_info(c)
        self.start_auth_timer(c)

    def _send_accept_info(self, c):
        st = c.state
        st.info_due = False
        info = self.info_dict(st.ws)
        info["client_id"] = c.cid
        info["nonce"] = st.nonce
        info["leafnode_urls"] = st.told_urls = self.cluster_urls(st.leaf_url)
        _send_info(c, info)

    def cluster_urls(self, own):
        """INFO `leafnode_urls` for a leaf node that connected to us: our URL (the address it
        reached) and those of the servers routed to us, for it to fail over to."""
        urls = [own]
        for r in list(self.server.routes.values()):
            u = getattr(r.state, "leafnode_url", "")
            if u and u not in urls:
                urls.append(u)
        return urls

    def cluster_urls_changed(self):
        """A server with a leaf node port joined or left the cluster: the leaf nodes that
        connected to us get an INFO with the new `leafnode_urls` (nats-server's
        sendAsyncLeafNodeInfo)."""
        for c in list(self.server.leafs.values()):
            st = c.state
            if st.solicited or c.closing or c.closed or not st.leaf_url:
                continue
            urls = self.cluster_urls(st.leaf_url)
            if urls != st.told_urls:
                st.told_urls = urls
                info = self.info_dict(st.ws)
                info["leafnode_urls"] = urls
                _send_info(c, info)

    def start_auth_timer(self, c):
        timeout = self._auth_timeout_secs()
        c.state.auth_timer = self.loop.call_later(timeout, self._auth_timeout, c)

    def info_dict(self, ws=False):
        s = self.server
        sopts = s.opts
        info = {"server_id": s.id, "server_name": s.name, "version": VERSION, "proto": SERVER_PROTO,
                "go": "python", "host": self.opts.host, "port": self.port,
                "headers": not sopts.no_header_support, "auth_required": True}
        if self.tls is not None:
            info.update(self.tls.info_fields())
        info["max_payload"] = sopts.max_payload
        if s.jetstream_enabled():
            info["jetstream"] = True
        info.update(omitempty(("domain", s.jetstream_domain()), ("cluster", s.cluster_name())))
        if not ws and self.compression.mode != NOT_SUPPORTED:
            info["compression"] = self.compression.mode
        info["info_on_connect"] = True
        return info

    def _auth_timeout(self, c):
        if not c.connected and not c.closed and not c.closing:
            log.error("%sAuthentication Timeout", self.prefix(c))
            self.proto.fail(c, "Authentication Timeout", "Authentication Timeout")

    def authenticate(self, connect, nonce, defer=False, host=""):
        """What a leaf CONNECT binds to: (account name or None, the user's permissions or
        None), or False when it is refused. With `defer`, slow work (bcrypt, an account JWT
        fetch) raises an OffLoop (see Authenticator.authenticate); `host` is the peer's
        address (a user JWT's `src` networks)."""
        lo = self.opts
        auth = self.server.authenticator
        if lo.nkey and not lo.username:
            # nats-server: the one nkey of leafnodes { authorization { nkey } }, its
            # signature of our nonce
            if connect.get("nkey") != lo.nkey or not verify_nonce_signature(
                    lo.nkey, nonce, str(connect.get("sig") or "")):
                return False
            return lo.account or None, None
        if lo.users or lo.username:
            user = connect.get("user") or ""
            pw = connect.get("pass") or ""
            if lo.users:
                for u in lo.users:
                    if u.username == user and auth.check_secret(u.password or "", pw, defer):
                        return (u.account or lo.account or None,
                                Permissions.from_config(getattr(u, "permissions", None)))
                return False
            if user == lo.username and auth.check_secret(lo.password, pw, defer):
                return lo.account or None, None
            return False
        if not auth.auth_required:
            return lo.account or None, None
        result = auth.authenticate(connect, nonce, kind="LEAF", defer=defer, host=host)
        if result is None:
            return False
        return result.account or lo.account or None, result.permissions

    # ---- solicit side ----

    def connect(self, remote):
        if self.stopped or self.server.shutting_down or remote.conn is not None or remote.dialer:
            return
        remote.timer = None
        if remote.delay > 0:
            d, remote.delay = remote.delay, 0.0
            remote.timer = self.loop.call_later(d, self.connect, remote)
            return
        u = remote.next_url()
        if u is None:
            return
        remote.current = u
        host = u.hostname or "127.0.0.1"
        port = u.port or 7422
        label = host_label(host, port)
        log.debug("Trying to connect as leafnode to remote server on %s", go_quote(label))

        def done(sock, reason):
            remote.dialer = None
            if sock is None:
                self.dial_failed(remote, label, "dial tcp %s: %s" % (label, go_dial_error(reason)))
            elif self.stopped or self.server.shutting_down:
                sock.close()
            else:
                self.dial_succeeded(remote, sock)
        timeout = remote.opts.dial_timeout or self.server.opts.leafnode.dial_timeout or DIAL_TIMEOUT
        proxy = remote.opts.proxy
        if proxy.url:                   # (nats-server tunnels every URL, not only ws:// ones)
            self._through_proxy(remote, u, label, proxy, timeout)
            return
        remote.dialer = Dialer(self.loop, host, port, done, timeout)

    def _through_proxy(self, remote, u, label, proxy, dial_timeout):
        """A remote behind an HTTP proxy: dial the proxy, CONNECT to the hub's host:port (80,
        or 443 for wss, when the URL names none, as nats-server), then the link as usual."""
        target = host_label(u.hostname or "127.0.0.1", u.port or (443 if u.scheme.lower() == "wss" else 80))
        p = urlsplit(proxy.url)
        p_host, p_port = p.hostname or "127.0.0.1", p.port or (443 if p.scheme == "https" else 80)
        timeout = proxy.timeout or dial_timeout

        def tunneled(sock, reason):
            remote.dialer = None
            if sock is None:
                self.dial_failed(remote, label, reason)
            elif self.stopped or self.server.shutting_down:
                sock.close()
            else:
                self.dial_succeeded(remote, sock)

        def reached(sock, reason):
            if sock is None:
                remote.dialer = None
                where = host_label(p_host, p_port)
                self.dial_failed(remote, label, "failed to connect to proxy: dial tcp %s: %s"
                                 % (where, go_dial_error(reason)))
            elif self.stopped or self.server.shutting_down:
                remote.dialer = None
                sock.close()
            else:
                remote.dialer = HttpTunnel(self.loop, sock, target, proxy.username, proxy.password,
                                           timeout, tunneled)
        remote.dialer = Dialer(self.loop, p_host, p_port, reached, timeout)

    def dial_failed(self, remote, label, reason):
        """A connect attempt failed; `reason` in nats-server's words (`dial tcp ...`, or the
        proxy's)."""
        remote.attempts += 1
        n = remote.attempts
        if report_connect_error(self.server.opts, remote.first_connect, n):
            log.error("Error trying to connect as leafnode to remote server %s (attempt %d): %s",
                      go_quote(label), n, reason)
        else:
            log.debug("Error trying to connect as leafnode to remote server %s (attempt %d): %s",
                      go_quote(label), n, reason)
        self.schedule_reconnect(remote)

    def schedule_reconnect(self, remote):
        if self.stopped or self.server.shutting_down:
            return
        base = self.opts.reconnect_delay or 1.0
        delay = base + random.random() * base * 0.1 if remote.delay <= 0 else remote.delay
        remote.delay = 0.0
        remote.timer = self.loop.call_later(delay, self.connect, remote)

    def dial_succeeded(self, remote, sock):
        remote.attempts = 0
        try:
            peer = sock.getpeername()
        except OSError:
            peer = (remote.current.hostname, remote.current.port or 7422)
        fd = sock.detach()
        acc = self.server.accounts.get(remote.account)
        c = self._new_conn(fd, peer[0], peer[1], remote)
        remote.conn = c
        c.connected = True              # our own connection: no CONNECT expected from the hub
        if acc is None:
            log.error("Unable to lookup account %s for solicited leafnode connection: account not found",
                      remote.account)
            c.schedule_close("Missing Account")
            return
        c.state.account = acc
        c.sublist = acc.sublist
        self.server.leafs_pending[c.cid] = c
        log.info("%sLeafnode connection created for account: %s ", self.prefix(c), acc.name)
        st = c.state
        st.connect_timer = self.loop.call_later(remote.opts.first_info_timeout or FIRST_INFO_TIMEOUT,
                                                self._no_first_info, c)
        if remote.websocket:
            st.ws = True
            c.codec = WsCodec(False)
            if remote.current.scheme.lower() == "wss":
                self.start_tls(c)               # TLS first, then the HTTP upgrade over it
            else:
                self.ws_request(c)
        elif remote.tls_settings.handshake_first:
            self.start_tls(c)

    def ws_request(self, c):
        """Ask the hub's websocket port for a leaf node link (path /leafnode)."""
        remote = c.state.remote
        u = remote.current
        key = base64.b64encode(os.urandom(16)).decode()
        c.state.ws_key = key
        path = (u.path.strip("/") + "/leafnode").lstrip("/")
        lines = ["GET /%s HTTP/1.1" % path, "Host: %s" % u.netloc.rpartition("@")[2],
                 "User-Agent: natsd", "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
                 "Sec-WebSocket-Version: 13", "Upgrade: websocket"]
        if remote.ws_compression:
            lines.append("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
                         "client_no_context_takeover")
        if remote.ws_no_masking:
            lines.append("Nats-No-Masking: true")
        c.codec.control_raw(("\r\n".join(lines) + "\r\n\r\n").encode())
        c.flush_now()

    def start_tls(self, c):
        """We solicited: start the TLS client handshake (before the hub's INFO with
        handshake_first, else right after it)."""
        remote = c.state.remote
        try:
            c.tls = remote.tls_session()
        except Exception as e:
            log.error("%sTLS leafnode configuration error: %s", self.prefix(c), e)
            c.schedule_close("TLS Handshake Failure")
            return
        c.tls_active = True
        c.state.tls_timer = self.loop.call_later(remote.tls_settings.timeout, self.proto.tls_timeout, c)
        if c.tls.start() < 0:
            self.proto.tls_failed(c, c.tls.error)
            return
        c.flush_now()

    def _no_first_info(self, c):
        """The hub sent no INFO within `first_info_timeout`: nats-server's read deadline
        passes, the connection closes as a read error, and the remote is tried again."""
        if not c.closed and not c.closing and not c.state.info_received:
            log.debug("%sNo INFO from the remote within the first_info_timeout", self.prefix(c))
            c.schedule_close("Read Error")

    def _no_info(self, c):
        if not c.closed and not c.closing and not c.state.finished:
            self.proto.fail(c, "Stale Leaf Node Connection - Closing", "Stale Connection")

    def send_connect(self, c):
        st = c.state
        remote = st.remote
        s = self.server
        acc = st.account
        info = {"version": VERSION}
        ropts = remote.opts
        if ropts.credentials or ropts.nkey:
            if ropts.credentials:
                log.debug('%sAuthenticating with credentials file %s', self.prefix(c),
                          go_quote(expand_path(ropts.credentials)))
            try:
                info.update(leaf_connect_auth(ropts.credentials, ropts.nkey, st.nonce))
            except CredsError as e:
                log.error("%s%s", self.prefix(c), e)
                c.schedule_close("Write Error")
                return False
        # In addition (auth callout), user/password or token from the URL, as nats-server does.
        u = remote.current
        if u is not None and u.username is not None:
            info["user"] = unquote(u.username)
            if u.password is not None:
                info["pass"] = unquote(u.password)
            else:
                info["auth_token"] = info["user"]
        info["server_id"] = s.id
        domain = s.jetstream_domain() if hasattr(s, "jetstream_domain") else ""
        if domain:
            info["domain"] = domain
        info["name"] = s.name
        if remote.opts.hub:
            info["is_hub"] = True
        cluster = s.cluster_name() if hasattr(s, "cluster_name") else ""
        if cluster:
            info["cluster"] = cluster
        if c.headers:
            info["headers"] = True
        if _account_has_js(s, acc):
            info["jetstream"] = True
        if remote.opts.deny_imports:
            info["deny_pub"] = list(remote.opts.deny_imports)
        if remote.opts.request_isolation:
            info["isolate"] = True
        info["remote_account"] = acc.name
        if st.compression:
            info["compress_mode"] = st.compression
        info["protocol"] = SERVER_PROTO
        c.send_bytes(b"CONNECT " + go_json(info) + b"\r\n")
        return True

    # ---- registration (both sides) ----

    def register(self, c):
        """CONNECT accepted (hub side) or the hub's connect_info INFO received (leaf side)."""
        st = c.state
        s = self.server
        acc = st.account
        st.finished = True
        if st.connect_timer is not None:
            st.connect_timer.cancel()
            st.connect_timer = None
        s.leafs_pending.pop(c.cid, None)
        s.leafs[c.cid] = c
        acc.clients.add(c)
        c.sublist = acc.sublist
        c.has_mappings = bool(acc.mappings)
        c.forget_lookup()
        self._hook(acc)
        if st.remote is not None:
            st.remote.first_connect = False
            st.perms.apply_info(st.hub_info or {}, st.remote.opts.deny_exports or (),
                                st.remote.opts.deny_imports or ())
        self._domain_denies(c)
        if not st.perms.recv.open:
            c.pub_allowed = {}
        c.track_replies = st.perms.response is not None
        c.spoke = st.is_spoke
        c.origin = st.remote_cluster.encode() if st.remote_cluster else None
        self.init_smap(c)
        st.ping_timer = self.loop.call_later(FIRST_PING + random.random() * 0.2, self._ping, c)
        if s.system is not None and (st.remote is None or st.remote.opts.hub):
            s.system.remote.leaf_connected(acc)     # accepted here, or a hub's (nats-server's rule)

    def update_permissions(self, c, info):
        """Spoke side: the hub announced new permissions (a reload on its side)."""
        st = c.state
        remote = st.remote.opts
        st.perms = LinkPerms()
        st.perms.apply_info(info, remote.deny_exports or (), remote.deny_imports or ())
        self._domain_denies(c)
        c.pub_allowed = None if st.perms.recv.open else {}
        for sub in c.subs.values():
            sub.deny_filter = st.perms.needs_delivery_check(sub.subject.decode("utf-8", "surrogateescape"))

    def _domain_denies(self, c):
        st = c.state
        s = self.server
        acc = st.account
        sys_acc = s.accounts.system
        domain = s.jetstream_domain() if hasattr(s, "jetstream_domain") else ""
        js = s.jetstream_enabled()
        name = st.remote_server
        decorated = "%s/%s" % (name, st.remote_cluster) if st.remote_cluster else name
        block_outgoing = False
        # default_js_domain: an account sent to the default (empty) domain keeps its JetStream
        # API open on the link; such a mapping anywhere keeps the system account from extending
        force_sys_deny = False
        defaults = s.opts.default_js_domain
        if defaults:
            if acc is sys_acc:
                if "" in defaults.values():
                    log.info("%sNot extending remote JetStream domain %s due to presence of empty default domain",
                             self.prefix(c), go_quote(st.remote_domain))
                    force_sys_deny = True
            elif acc is not None and defaults.get(acc.name) == "":
                log.debug("%sSkipping deny %s for account %s due to default domain", self.prefix(c),
                          go_quote("$JS.API.>"), go_quote(acc.name))
                return
        if (domain != st.remote_domain or not js and not domain or sys_acc is None or acc is None
                or force_sys_deny):
            if acc is sys_acc and acc is not None:
                log.info("%sSystem account connected from %s", self.prefix(c), decorated)
                log.info("%sJetStream not extended, domains differ", self.prefix(c))
                self._deny_both(st, DENY_ALL_JS)
            else:
                log.info('%sJetStream using domains: local %s, remote %s', self.prefix(c),
                         go_quote(domain), go_quote(st.remote_domain))
                self._deny_both(st, DENY_ALL_CLIENT_JS)
            block_outgoing = True
        elif acc is sys_acc:
            log.info("Extending JetStream domain %s as System Account connected from server %s",
                     go_quote(st.remote_domain), decorated)
        else:
            self._deny_both(st, DENY_ALL_CLIENT_JS)
        if domain and js and acc is not None and block_outgoing:
            st.perms.send.add_deny(["$JS.%s.API.>" % domain])

    @staticmethod
    def _deny_both(st, subjects):
        st.perms.deny_both(subjects)

    # ---- interest ----

    @staticmethod
    def sub_delta(sub):
        """A leaf's or route's queue member stands for its weight."""
        if sub.queue is not None and sub.conn is not None and sub.conn.kind != KIND_CLIENT:
            return max(sub.weight, 1)
        return 1

    def wants(self, c, sub):
        """Should the subscription `sub` be advertised to leaf connection `c`?"""
        other = sub.conn
        if other is c:
            return False
        st = c.state
        if other is not None and other.kind != KIND_CLIENT:
            if st.isolated and other.kind == KIND_LEAF:
                return False                # other leaf nodes' interest ("east-west")
            # a spoke sends up only local interest and that of leafs that connect to us (the
            # hub reaches the rest of our cluster itself)
            if st.is_spoke and (other.kind in (KIND_ROUTE, KIND_GATEWAY) or other.state.is_spoke):
                return False
            # a leaf cluster is not told about its own interest coming back over a route
            if sub.origin is not None and c.origin is not None and sub.origin == c.origin:
                return False
        return True

    def can_send_interest(self, st, subject):
        """Advertise our interest in `subject`? Only for what we would take from the remote."""
        return internal_interest(subject) or st.perms.recv.may_subscribe(subject)

    def init_smap(self, c):
        st = c.state
        acc = st.account
        smap = {}
        for sub in acc.sublist.all_subscriptions():
            if sub.closed or not self.wants(c, sub):
                continue
            subj = sub.subject.decode("utf-8", "replace")
            # as nats-server's initLeafNodeSmapAndSendSubs: the account's service imports go
            # to a leaf node we accepted whatever the link's permissions (a spoke checks them)
            if not (not st.is_spoke and _service_import(sub)) and not self.can_send_interest(st, subj):
                continue
            key = subj if sub.queue is None else subj + " " + sub.queue.decode("utf-8", "replace")
            smap[key] = smap.get(key, 0) + self.sub_delta(sub)
        if acc.mappings:
            for src in acc.mappings.sources():
                if st.is_spoke and not self.can_send_interest(st, src):
                    continue
                smap[src] = smap.get(src, 0) + 1
        lds = self.lds_subject(acc)
        smap[lds] = smap.get(lds, 0) + 1
        st.smap = smap
        self.by_account.setdefault(acc.name, set()).add(c)
        out = []
        for key, n in smap.items():
            out.append(_ls(key, n))
        if out:
            data = "".join(out).encode()
            c.send_bytes(data)
            if c.trace:
                for line in out:
                    log.log(TRACE, "%s->> [%s]", self.prefix(c), line.rstrip("\r\n"))

    def propagate(self, acc, sub, delta):
        conns = self.by_account.get(acc.name)
        if not conns:
            return
        subj = sub.subject.decode("utf-8", "replace")
        key = None
        is_lds = subj.startswith(LDS_PREFIX)
        for c in list(conns):
            if c.closed or c.closing:
                continue
            st = c.state
            if st.smap is None:
                continue
            if not is_lds and not self.wants(c, sub):
                continue
            if sub.conn is c:
                continue
            if delta > 0 and not self.can_send_interest(st, subj):
                continue
            if key is None:
                key = subj if sub.queue is None else subj + " " + sub.queue.decode("utf-8", "replace")
            n = st.smap.get(key)
            if delta < 0 and n is None:
                continue
            n = n or 0
            update = sub.queue is not None or (n <= 0 < n + delta) or (n > 0 >= n + delta)
            n += delta
            if n > 0:
                st.smap[key] = n
            else:
                st.smap.pop(key, None)
            if update:
                if delta > 0 and not self.can_send_interest(st, subj):
                    continue
                line = _ls(key, n)
                c.send_bytes(line.encode())
                if c.trace:
                    log.log(TRACE, "%s->> [%s]", self.prefix(c), line.rstrip("\r\n"))

    # ---- keepalive ----

    def _ping(self, c):
        if c.closed or c.closing:
            return
        sopts = self.server.opts
        if c.pings_out + 1 > sopts.ping_max:
            self.server.stale_connections += 1
            log.debug("%sStale Client Connection - Closing", self.prefix(c))
            self.proto.fail(c, "Stale Connection", "Stale Connection")
            return
        c.send_ping()
        c.state.ping_timer = self.loop.call_later(sopts.ping_interval, self._ping, c)

    # ---- closing ----

    def closed(self, c):
        s = self.server
        st = c.state
        if c.closed:
            return
        release_connection(self.loop, c, st.auth_timer, st.ping_timer, st.connect_timer, st.tls_timer)
        acc = st.account
        conns = self.by_account.get(acc.name) if acc is not None else None
        if conns is not None:
            conns.discard(c)
        st.smap = None
        for sub in list(c.subs.values()):
            sub.closed = True
            c.sublist.remove(sub)
        c.subs.clear()
        s.leafs.pop(c.cid, None)
        s.leafs_pending.pop(c.cid, None)
        if acc is not None:
            acc.clients.discard(c)
        st.stop = time.time()
        st.reason = c.close_reason or ""
        if st.remote_server:
            log.info("%sLeafnode connection closed: %s - Remote: %s", self.prefix(c), st.reason,
                     st.remote_server)
        else:
            log.info("%sLeafnode connection closed: %s", self.prefix(c), st.reason)
        s.remember_closed(c)
        remote = st.remote
        if remote is not None and remote.conn is c:
            remote.conn = None
            self.schedule_reconnect(remote)

    # ---- monitoring ----

    def _auth_timeout_secs(self):
        """The leaf port's `authorization { timeout }`, else nats-server's default for it (the
        top level's does not apply)."""
        return self.opts.auth_timeout or default_auth_timeout(
            self.tls.settings.timeout if self.tls is not None else None)

    def varz(self):
        """nats-server's LeafNodeOptsVarz (remote URLs as host:port, as it shows them)."""
        lo = self.opts
        v = {}
        tls = self.tls.settings if self.tls is not None else None
        if lo.port:
            v["host"] = lo.host
            v["port"] = self.port
            v["auth_timeout"] = go_float(self._auth_timeout_secs())
            v["tls_timeout"] = go_float(tls.timeout) if tls is not None else 2
            if tls is not None:
                v["tls_required"] = True
                if tls.verify:
                    v["tls_verify"] = True
        if self.remotes:
            v["remotes"] = [self._remote_varz(r) for r in self.remotes]
        not_after = cert_not_after(tls)
        if not_after:
            v["tls_cert_not_after"] = not_after
        return v

    @staticmethod
    def _remote_varz(r):
        out = {"local_account": r.account or "$G"}
        if r.opts.tls:
            out["tls_timeout"] = go_float(r.tls_settings.timeout)
        out["urls"] = [urlsplit(u).netloc.rpartition("@")[2] for u in r.urls]
        deny = {}
        if r.opts.deny_exports:
            deny["exports"] = list(r.opts.deny_exports)
        if r.opts.deny_imports:
            deny["imports"] = list(r.opts.deny_imports)
        if deny:
            out["deny"] = deny
        return out


class LeafProtocol(ProtocolHandler):
    """Control operations of leaf connections, called from the Cython parser and router."""

    def __init__(self, leafnodes):
        super().__init__(leafnodes.server)
        self.ln = leafnodes

    def _prefix(self, c):
        return self.ln.prefix(c)

    def peer_name(self, c):
        """The leaf's server, as a message trace names it."""
        return getattr(c.state, "remote_server", "") or super().peer_name(c)

    CLOSE_BY_DEFAULT = False          # nats-server: leaf connections retry at their write deadline
    STATS_KIND = "leafs"

    def write_policy(self):
        opts = self.server.opts
        return opts.leafnode.write_deadline or opts.write_deadline, self._closes(opts.leafnode.write_timeout)

    # ---- parser calls ----

    def auth_pending(self, c):
        """Accept side: anything but CONNECT first is an authorization violation."""
        log.error("%sAuthorization Error", self._prefix(c))
        self.fail(c, "Authorization Violation", "Authentication Failure")
        return True

    def connect(self, c, payload):
        st = c.state
        if st.solicited:
            return                          # a hub never sends CONNECT to us
        info = self.parse_json_op(c, payload, "leafConnectInfo")
        if info is None or c.connected:
            return
        st.connect = info
        if info.get("lang"):
            log.error("%s%s", self._prefix(c), ERR_LEAF_PORT)
            self.fail(c, ERR_LEAF_PORT, "Incorrect Port")
            return
        cluster = str(info.get("cluster") or "")
        if " " in cluster:
            text = "cluster name cannot contain spaces or new lines"
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Protocol Violation")
            return
        my_cluster = self.server.cluster_name() if hasattr(self.server, "cluster_name") else ""
        if my_cluster and cluster == my_cluster:
            text = "remote leafnode has same cluster name"
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Cluster Names Identical")
            return
        if info.get("gateway"):
            text = "Rejecting connection from gateway %s on the leafnode port" % go_quote(str(info["gateway"]))
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Wrong Gateway")
            return
        self._authenticate(c, info, cluster)

    def _authenticate(self, c, info, cluster):
        """Check the leaf's credentials and bind it; a bcrypt comparison runs off the loop first
        (natsd/auth/offloop.py) and this runs again with its verdict."""
        st = c.state
        ocsp = self.ln.ocsp_peer
        if ocsp is not None and not ocsp.admit(c, self.server.auth_workers,
                                               lambda: self._authenticate(c, info, cluster), self._prefix(c)):
            return
        try:
            bound = self.ln.authenticate(info, st.nonce, defer=True, host=st.host)
        except OffLoop as slow:
            self.server.auth_workers.check(c, st.host, slow,
                                           lambda: self._authenticate(c, info, cluster))
            return
        account = self.server.accounts.get(bound[0]) if bound is not False else None
        if account is None:
            user = info.get("user") or info.get("nkey") or ""
            if user:
                log.error('%sauthentication error - User %s', self._prefix(c), go_quote(user))
            else:
                log.error("%sauthentication error", self._prefix(c))
            self.fail(c, "Authorization Violation", "Authentication Failure")
            if self.server.system is not None:
                try:
                    self.server.system.auth_error(st.host, st.port, c.cid, "Authentication Failure")
                except Exception:
                    pass
            return
        if 0 <= account.max_leafnodes <= sum(1 for x in account.clients if x.kind == KIND_LEAF):
            log.error("%sMaximum leafnode connections exceeded", self._prefix(c))
            self.fail(c, "maximum account active connections exceeded",
                      "Maximum Account Connections Exceeded")
            return
        if st.auth_timer is not None:
            st.auth_timer.cancel()
            st.auth_timer = None
        st.user = str(info.get("user") or "")
        st.account = account
        st.name = str(info.get("name") or "")
        st.version = str(info.get("version") or "")
        st.remote_server = st.name
        st.peer_proto = proto_number(info.get("protocol"))
        st.remote_account = str(info.get("remote_account") or "")
        st.remote_cluster = cluster
        st.remote_domain = str(info.get("domain") or "")
        st.is_spoke = bool(info.get("is_hub"))
        st.isolated = bool(st.isolated or info.get("isolate"))
        if not st.compression:
            st.compression = str(info.get("compress_mode") or NOT_SUPPORTED)
        c.headers = bool(info.get("headers")) and not self.server.opts.no_header_support
        c.connected = True
        st.perms = LinkPerms.for_user(bound[1])
        deny_pub = info.get("deny_pub") or []
        if isinstance(deny_pub, list):
            st.perms.send.add_deny(str(x) for x in deny_pub)
        # let the remote know its account and permissions (nats-server: sendPermsAndAccountInfo)
        out = self.ln.info_dict(st.ws)
        out["client_id"] = c.cid
        out.update(st.perms.info_fields())
        out["connect_info"] = True
        out["remote_account"] = account.name
        if account.is_system:
            out["acc_is_sys"] = True
        out["leafnode_urls"] = st.told_urls = self.ln.cluster_urls(st.leaf_url)
        _send_info(c, out)
        minimum = self.ln.opts.min_version
        if minimum and not version_at_least(st.version, minimum):
            # nats-server: the INFO above, then the rejection (the remote waits before retrying)
            text = 'connection rejected since minimum version required is "%s"' % minimum
            log.error("%s%s", self._prefix(c), text)
            self.fail(c, text, "Minimum Version Required")
            return
        self.ln.register(c)

    def info(self, c, payload):
        st = c.state
        try:
            info = json.loads(payload)
        except ValueError:
            return
        if not isinstance(info, dict):
            return
        if not st.solicited:
            self._spoke_info(c, info)
            return
        first = not st.info_received
        st.remote.discovered(info)
        if first:
            st.info_received = True
            if not info.get("client_id") or info.get("leafnode_urls") is None:
                log.error("%s%s", self._prefix(c), ERR_WRONG_PORT)
                c.schedule_close("Incorrect Port")
                return
            if c.tls is None and not st.ws and (info.get("tls_required") or st.remote.tls_configured):
                # TLS first, the CONNECT (credentials) only over it: hub_info waits meanwhile
                st.hub_info = info
                self.ln.start_tls(c)
                return
            if self._negotiate(c, info):
                st.info_received = False    # the hub's next INFO, compressed, is the first
                return
            self._first_info(c, info)
        elif info.get("remote_account"):
            st.remote_account = info["remote_account"]
        if info.get("connect_info") and not st.finished:
            st.remote_account = str(info.get("remote_account") or "")
            st.hub_info = info
            self.ln.register(c)
        elif st.finished and ("import" in info or "export" in info):
            self.ln.update_permissions(c, info)

    # ---- compression (nats-server's negotiateLeafCompression) ----

    def _negotiate(self, c, info):
        """On the peer's first INFO: agree on S2 compression. When the link compresses, both
        sides send a new INFO announcing the mode (the spoke before switching, the hub after)
        and True is returned: the spoke goes on with the hub's next INFO. Not over WebSocket
        (one codec per connection: the WebSocket framing)."""
        st = c.state
        if st.comp_negotiated:
            return False
        st.comp_negotiated = True
        comp = st.remote.compression if st.solicited else self.ln.compression
        remote = str(info.get("compression") or "")
        if not comp.negotiates or st.ws:
            st.compression = OFF if remote and comp.mode != NOT_SUPPORTED and not st.ws \
                else NOT_SUPPORTED
            return False
        if not c.rtt_start:
            # as nats-server: before a PING has measured it, the time since the connection
            # started stands for the round trip (and decides s2_auto's level)
            c.rtt = max(time.time() - st.start, 1e-6)
        try:
            cm = comp.select(remote, c.rtt)
        except CompressionError as e:
            log.error("%s%s", self._prefix(c), e)
            self.fail(c, str(e), "Protocol Violation")
            return True
        st.compression = cm
        if not compresses(cm):
            return False
        out = self.ln.info_dict()
        out["compression"] = comp.info_mode(cm)
        out["client_id"] = c.cid
        if st.solicited:
            out.pop("nonce", None)
            c.start_codec(compression_codec(cm), info_line(out))
        else:
            out["nonce"] = st.nonce
            out["leafnode_urls"] = self.ln.cluster_urls(st.leaf_url)
            c.start_codec(compression_codec(cm))
            _send_info(c, out)
        return True

    def _spoke_info(self, c, info):
        """Hub side: an INFO from the leaf before its CONNECT is its compression offer."""
        if not c.connected:
            self._negotiate(c, info)

    def _first_info(self, c, info):
        """The hub's first INFO (after TLS if there is TLS): send our CONNECT."""
        st = c.state
        st.nonce = info.get("nonce")
        c.headers = bool(info.get("headers")) and not self.server.opts.no_header_support
        st.remote_server = info.get("server_name") or info.get("server_id") or ""
        st.name = st.remote_server
        st.peer_proto = proto_number(info.get("proto"))
        st.remote_domain = str(info.get("domain") or "")
        st.remote_cluster = str(info.get("cluster") or "")
        st.version = str(info.get("version") or "")
        if not self.ln.send_connect(c):
            return
        if st.connect_timer is not None:
            st.connect_timer.cancel()
        st.connect_timer = self.server.loop.call_later(CONNECT_PROCESS_TIMEOUT, self.ln._no_info, c)
        if not info.get("info_on_connect"):
            self.ln.register(c)

    # ---- TLS (shared steps in ProtocolHandler) ----

    tls_kind = "leafnode"

    def tls_server(self, c):
        return None if c.state.solicited else self.ln.tls

    def tls_plaintext_ok(self, c):
        return False

    def tls_check_remote(self, c):
        return pinning_refusal(c, c.state.remote.tls_settings.pinned)

    def codec_head(self, c):
        """Our WebSocket upgrade was answered: 101 with the right accept key, or we give up."""
        st = c.state
        from natsd.net.websocket import check_upgrade_response
        err = check_upgrade_response(c.codec, c.codec.take_head(), st.ws_key,
                                     st.remote.ws_compression, st.remote.ws_no_masking)
        if err:
            log.error("%sError soliciting leafnode connection: %s", self._prefix(c), err)
            c.codec.close_sent = True
            c.schedule_close("Read Error")
            return
        c.codec.start_frames()

    def codec_error(self, c, error):
        log.error("%sread error: %s", self._prefix(c), error)
        c.schedule_close("Read Error")

    def tls_ready(self, c):
        st = c.state
        if st.solicited and st.ws and not st.info_received:
            self.ln.ws_request(c)               # wss: the upgrade goes over TLS
            return
        if st.solicited:
            if st.hub_info is not None:         # INFO came in plaintext before the handshake
                info, st.hub_info = st.hub_info, None
                if self._negotiate(c, info):
                    st.info_received = False
                    return
                self._first_info(c, info)
        else:
            if st.info_due:
                self.ln._send_accept_info(c)
            self.ln.start_auth_timer(c)

    def leaf_sub(self, c, subject, queue, weight):
        st = c.state
        if st.account is None or not c.connected:
            self.fail(c, "Authorization Violation", "Protocol Violation")
            return
        subj = subject.decode("utf-8", "surrogateescape")
        if subj.startswith(LDS_PREFIX) and subj == self.ln.lds.get(st.account.name):
            self.handle_loop(c, True)
            return
        key = subject if queue is None else subject + b" " + queue
        old = c.subs.get(key)
        if old is not None:
            if queue is not None:
                w = max(weight, 1)
                delta = w - old.weight
                c.sublist.set_weight(old, w)
                if delta:
                    self.ln.propagate(st.account, old, delta)
            return
        deny_filter = False
        if not internal_interest(subj):
            send = st.perms.send
            if is_literal(subj) and not send.allows(subj):
                user = st.perms.user_send
                if user is not None and not user.allows(subj) and not st.solicited:
                    self.permission_violation(c, False, subject)
                    return
                log.debug("%sNot permitted to deliver to %s", self._prefix(c), go_quote(subject))
                return
            if any(subject_is_subset(subj, d) for d in send.deny):
                log.debug("%sNot permitted to deliver to %s", self._prefix(c), go_quote(subject))
                return
            deny_filter = st.perms.needs_delivery_check(subj)
        limit = self.server.opts.max_subscriptions
        if limit > 0 and len(c.subs) >= limit:
            log.error("%sMaximum Subscriptions Exceeded", self._prefix(c))
            self.send_err(c, "maximum subscriptions exceeded")
            return
        s = Subscription(c, subject, key, queue)
        if queue is not None:
            s.weight = max(weight, 1)
        s.deny_filter = deny_filter
        c.subs[key] = s
        c.sublist.insert(s)

    def leaf_unsub(self, c, subject, queue):
        key = subject if queue is None else subject + b" " + queue
        s = c.subs.pop(key, None)
        if s is None:
            return
        s.closed = True
        c.sublist.remove(s)

    def handle_loop(self, c, send_err):
        st = c.state
        acc = st.account.name if st.account is not None else ""
        delay = LOOP_DELAY
        if st.remote is not None:
            st.remote.delay = delay
        text = "Loop detected for leafnode account=%s. Delaying attempt to reconnect for %s" % (
            go_quote(acc), go_seconds(delay))
        if send_err:
            self.send_err(c, text)
        log.error("%s%s", self._prefix(c), text)
        c.schedule_close("Protocol Violation")

    def remote_message(self, c, subject, reply, hdr, payload, queues):
        """A leaf message the C path hands over: subject mapping, deny checks, many queues."""
        st = c.state
        if c.pub_allowed is not None and not self.check_publish(c, subject):
            return
        acc = st.account
        if acc is None:
            return
        target = subject
        if acc.mappings:
            mapped = acc.mappings.map(subject.decode("utf-8", "replace"))
            if mapped == "":
                return
            if mapped is not None:
                target = mapped.encode()
                if not queues:
                    queues = None           # mapped interest: local queue groups take part
        if queues is not None or target is subject:
            queues = queues if queues else []
        route_remote(c, c.sublist, target, reply, hdr, payload, queues)

    def check_publish(self, c, subject):
        """May a message on `subject` come in from this leaf? A hub closes the link of a leaf
        that publishes what its user may not (a reply it was asked for excepted: allow_responses);
        on a spoke, deny_imports and the domain denies drop the message without a word."""
        st = c.state
        subj = subject.decode("utf-8", "surrogateescape")
        if internal_message(subj):
            return True
        user = st.perms.user_recv
        if user is not None and not user.allows(subj):
            if st.replies and self.use_reply(st, subject):
                return True
            if not st.solicited:
                self.permission_violation(c, True, subject)
            return False
        # a hub holds a leaf to its user's permissions only (nats-server's leafSendAllowed): the
        # JetStream denies of the link keep interest and our messages from crossing, not the
        # API requests a leaf sends on interest it was told of
        ok = True if not st.solicited else st.perms.recv.allows(subj)
        if len(c.pub_allowed) > 4096:
            c.pub_allowed.clear()
        c.pub_allowed[subject] = ok
        return ok

    def permission_violation(self, c, publish, subject):
        """nats-server leafPermViolation: -ERR, an error log line, the link closed."""
        action = "Publish" if publish else "Subscription"
        self.send_err(c, "Permissions Violation for %s to %s" % (action, go_quote(subject)))
        log.error("%s%s Violation on %s - Check other side configuration", self._prefix(c), action,
                  go_quote(subject))
        c.schedule_close("Protocol Violation")

    def sub(self, c, subject, queue, sid):
        self.protocol_error(c, "Unknown Protocol Operation", True)

    def unsub(self, c, sid, max_msgs):
        self.protocol_error(c, "Unknown Protocol Operation", True)

    def client_error(self, c, text):
        t = text.decode("utf-8", "replace")
        log.error("%sLeafnode Error %s", self._prefix(c), t)
        if "Loop detected" in t:
            self.handle_loop(c, False)
        elif "same cluster name" in t and c.state.remote is not None:
            c.state.remote.delay = 30.0
            log.error("%sLeafnode connection dropped with same cluster name error. "
                      "Delaying attempt to reconnect for 30s", self._prefix(c))
        c.schedule_close("Client Closed")

    def reserved_reply(self, c, reply):
        pass

    def message_trace(self, c, subject, hdr, size):
        return msgtrace.start(self.server, c, subject, hdr, size)

    def publish_mapped(self, c, subject, reply, hdr, payload):
        self.remote_message(c, subject, reply, hdr, payload, None)

    def no_responders(self, c, subject, reply):
        pass

    def send_connect_info(self, c):
        pass

    def delivery_denied(self, c, sub, subject):
        return not c.state.perms.send.allows(subject.decode("utf-8", "surrogateescape"))

    def auto_unsubscribed(self, c, sub):
        pass

    def close(self, c):
        self.ln.closed(c)

    def forward(self, c, sub, subject, reply, hdr, payload):
        raise NotImplementedError("leaf connections frame messages in C")


# ---- helpers ----

def _hp(host, port):
    return "[%s]:%d" % (host, port) if ":" in str(host) else "%s:%d" % (host, port)


def _nonce():
    import base64
    return base64.urlsafe_b64encode(os.urandom(11)).decode().rstrip("=")


def _send_info(c, info):
    c.send_bytes(info_line(info))


def _service_import(sub):
    """Is `sub` a service import's: an import's forwarder, or JetStream's API subscription
    (`$JS.API.>`, `$JS.<domain>.API.>`), which an account imports from the system account on
    nats-server? (Not JetStream's other internal subscriptions, acks and the like.)"""
    if sub.conn is not None or not sub.local_only:
        return False
    subject = sub.subject
    return sub.forwarder or (subject.startswith(b"$JS.") and subject.endswith(b"API.>")
                             and subject.count(b".") <= 3)


def _ls(key, n):
    if n > 0:
        if " " in key:
            return "LS+ %s %d\r\n" % (key, n)
        return "LS+ %s\r\n" % key
    return "LS- %s\r\n" % key


def _account_has_js(server, acc):
    js = getattr(server, "jetstream", None)
    if js is None or acc is None:
        return False
    try:
        return bool(js.enabled_for(acc))
    except Exception:
        return False
