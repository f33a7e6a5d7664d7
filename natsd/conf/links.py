"""Config sections for the other listeners and links: `leafnodes` (with remotes and their
authorization), `cluster`, `gateway`, `websocket`/`mqtt` blocks, and TLS blocks checked as
nats-server's parseTLS and GenTLSConfig check them."""
from __future__ import annotations

import re

from urllib.parse import urlsplit

from natsd.options import RemoteGatewayOpts, RemoteLeafOpts, User
from natsd.gofmt import go_quote
from natsd.conf.errors import go_read_error
from natsd.conf.parser import Node
from natsd.conf.reader import GO_TYPE, KIND_NAME, Reader, parse_duration


_TLS_BOOLS = {"insecure", "verify", "verify_and_map", "verify_cert_and_check_known_urls",
              "allow_insecure_cipher_suites"}
_TLS_OTHER = {"cipher_suites", "curve_preferences", "timeout", "connection_rate_limit", "pinned_certs",
              "cert_store", "cert_match_by", "cert_match", "ca_certs_match", "handshake_first", "first",
              "immediate", "cert_match_skip_invalid", "ocsp_peer", "min_version"}
_WEBSOCKET_FIELDS = {"listen", "port", "host", "net", "advertise", "no_tls", "same_origin", "allowed_origins",
                     "allowed_origin", "allow_origins", "allow_origin", "origins", "origin", "handshake_timeout",
                     "compress", "compression", "authorization", "authentication", "jwt_cookie", "user_cookie",
                     "pass_cookie", "token_cookie", "no_auth_user", "headers", "ping_interval"}
_MQTT_FIELDS = {"listen", "port", "host", "net", "authorization", "authentication", "no_auth_user", "ack_wait",
                "ackwait", "js_api_timeout", "api_timeout", "max_ack_pending", "max_pending", "max_inflight",
                "js_domain", "stream_replicas", "consumer_replicas", "consumer_memory_storage",
                "consumer_inactive_threshold", "consumer_auto_cleanup", "reject_qos2_publish",
                "downgrade_qos2_subscribe"}


def _read_pem(path: str) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as f:
            return f.read(), None
    except OSError as e:
        return None, go_read_error(path, e)


def gen_tls_error(cert_file: str, key_file: str, ca_file: str) -> str | None:
    """What nats-server's GenTLSConfig says about these files, or None.

    The files are read as nats-server reads them (relative to the working directory).
    Only what can be told without a TLS stack is checked: presence, readability, PEM
    data; a certificate that does not parse is left to the refusal of TLS itself."""
    if cert_file and not key_file:
        return "missing 'key_file' in TLS configuration"
    if key_file and not cert_file:
        return "missing 'cert_file' in TLS configuration"
    if cert_file:
        cert, err = _read_pem(cert_file)
        if err is None:
            key, err = _read_pem(key_file)
        if err is None and b"-----BEGIN" not in cert:
            err = "tls: failed to find any PEM data in certificate input"
        if err is None and b"-----BEGIN" not in key:
            err = "tls: failed to find any PEM data in key input"
        if err:
            return f"error parsing X509 certificate/key pair: {err}"
    if ca_file:
        pem, err = _read_pem(ca_file)
        if err:
            return err
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            return "failed to parse root ca certificate"
    return None



def _is_public_user_key(key: str) -> bool:
    from natsd.auth import nkey
    return nkey.is_valid_public(key, nkey.USER)


def _valid_url(u: str) -> bool:
    """Rough equivalent of Go's url.Parse acceptance for server URLs."""
    if not u or any(c.isspace() or ord(c) < 0x20 for c in u):
        return False
    try:
        parts = urlsplit(u if "://" in u else "nats://" + u)
        parts.port  # raises on a non-numeric port
    except ValueError:
        return False
    return bool(parts.hostname) or parts.netloc.startswith(":")



class LinkSections(Reader):
    # -- leafnodes ---------------------------------------------------------------
    def leafnodes(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        ln = self.o.leafnode
        ln.configured = True
        for mk, mv in m.items():
            lk = mk.lower()
            if self.address_key(ln, lk, mk, mv, blank_host_keeps_default=True):
                pass
            elif lk == "authorization":
                self.leaf_authorization(mv)
            elif lk == "remotes":
                self.remotes(mv)
            elif lk in ("reconnect", "reconnect_delay", "reconnect_interval"):
                ln.reconnect_delay = self.duration(mv, "reconnect", ln.reconnect_delay)
            elif lk == "tls":
                ln.tls = mv.plain() if self.tls(mv) is not None else None
            elif lk in ("leafnode_advertise", "advertise"):
                ln.advertise = self.s(mv, mk)
            elif lk == "no_advertise":
                ln.no_advertise = self.b(mv, mk)
            elif lk in ("min_version", "minimum_version"):
                ln.min_version = self.s(mv, mk)
                if ln.min_version and not re.fullmatch(r"v?\d+\.\d+\.\d+(-.*)?", ln.min_version):
                    self.err(mv, f"invalid leafnode's minimum version: {ln.min_version}")
            elif lk == "compression":
                ln.compression = self.compression(mv, mk)
            elif lk in ("isolate_leafnode_interest", "isolate"):
                ln.isolate_leafnode_interest = self.b(mv, mk)
            elif lk == "dial_timeout":
                ln.dial_timeout = self.duration(mv, mk)
            elif lk == "write_deadline":
                ln.write_deadline = self.duration(mv, mk)
            elif lk == "write_timeout":
                ln.write_timeout = self.write_policy(mv, mk)
            else:
                self.unknown(mk, mv)

    def leaf_authorization(self, n: Node):
        m = self.m(n, "authorization")
        ln = self.o.leafnode
        for k, v in (m or {}).items():
            lk = k.lower()
            if lk in ("user", "username"):
                ln.username = self.s(v, k)
            elif lk in ("pass", "password"):
                ln.password = self.s(v, k)
            elif lk == "nkey":
                ln.nkey = self.s(v, k)
                if not _is_public_user_key(ln.nkey):
                    self.err(v, "Not a valid public nkey for leafnode authorization")
            elif lk == "timeout":
                if v.kind in ("integer", "float"):
                    ln.auth_timeout = float(v.value)
                else:
                    ln.auth_timeout = self.duration(v, k)
            elif lk == "users":
                if not self.want(v, ("array",), k):
                    continue
                for un in v.value:
                    if un.kind != "map":
                        self.err(un, f"Expected user entry to be a map/struct, got {self.show(un)}")
                        continue
                    u = User(pos=un.pos)
                    for uk, uv in un.value.items():
                        luk = uk.lower()
                        if luk in ("user", "username"):
                            u.username = self.s(uv, uk)
                        elif luk in ("pass", "password"):
                            u.password = self.s(uv, uk)
                        elif luk == "account":
                            u.account = self.s(uv, uk)
                        elif luk == "proxy_required":
                            u.proxy_required = self.b(uv, uk)
                        else:
                            self.unknown(uk, uv)
                    ln.users.append(u)
            elif lk == "account":
                ln.account = self.s(v, k)
            elif lk == "proxy_required":
                self.b(v, k)
            else:
                self.unknown(k, v)
        if ln.users and (ln.username or ln.password):
            self.err(n, "can not have a single user/pass and a users array")
        elif ln.users and ln.nkey:
            self.err(n, "can not have a single nkey and a users array")

    def remotes(self, n: Node):
        if n.kind != "array":
            self.err(n, f"Expected remotes field to be an array, got {KIND_NAME[n.kind]}")
            return
        seen: set[tuple] = set()
        for rn in n.value:
            if rn.kind != "map":
                self.err(rn, f"Expected remote leafnode entry to be a map/struct, got {self.show(rn)}")
                continue
            r = RemoteLeafOpts(pos=rn.pos)
            self.remote_nodes = getattr(self, "remote_nodes", [])
            account_node = proxy_node = None
            for k, v in rn.value.items():
                lk = k.lower()
                if lk in ("url", "urls"):
                    if v.kind not in ("string", "array"):
                        got = str(v.value).lower() if v.kind == "bool" else v.value       # (Go's %v)
                        self.err(v, f"Expected remote leafnode url to be an array or string, got {got}")
                        continue
                    for u in self.strs(v, k):
                        if not _valid_url(u.strip()):
                            self.err(v, f'error parsing leafnode url "{u}"')
                        r.urls.append(u.strip())
                elif lk in ("account", "local"):
                    r.account = self.s(v, k)
                    account_node = v
                elif lk in ("creds", "credentials"):
                    r.credentials = self.s(v, k)
                    if r.nkey:
                        self.err(v, "Remote leafnode can not have both creds and nkey defined")
                elif lk in ("nkey", "seed"):
                    r.nkey = self.s(v, k)
                    if not r.nkey.startswith("SU"):
                        self.err(v, f'Remote leafnode nkey is not a valid seed: "{r.nkey}"')
                    if r.credentials:
                        self.err(v, "Remote leafnode can not have both creds and nkey defined")
                elif lk == "tls":
                    r.tls = v.plain() if self.tls(v) is not None else None
                elif lk == "hub":
                    r.hub = self.b(v, k)
                elif lk in ("deny_imports", "deny_import"):
                    r.deny_imports = self.perm_subjects(v, k, False)
                elif lk in ("deny_exports", "deny_export"):
                    r.deny_exports = self.perm_subjects(v, k, False)
                elif lk == "disabled":
                    r.disabled = self.b(v, k)
                elif lk in ("no_randomize", "dont_randomize"):
                    r.no_randomize = self.b(v, k)
                elif lk == "compression":
                    r.compression = self.compression(v, k)
                elif lk == "first_info_timeout":
                    r.first_info_timeout = self.duration(v, k)
                elif lk == "dial_timeout":
                    r.dial_timeout = self.duration(v, k)
                elif lk in ("isolate_leafnode_interest", "isolate"):
                    r.isolate = self.b(v, k)
                elif lk == "request_isolation":
                    r.request_isolation = self.b(v, k)
                elif lk == "ignore_discovered_servers":
                    r.ignore_discovered_servers = self.b(v, k)
                elif lk == "proxy":
                    proxy_node = v
                    self.leaf_proxy(v, r.proxy)
                elif lk in ("ws_compress", "ws_compression", "websocket_compress", "websocket_compression",
                            "ws_no_masking", "websocket_no_masking", "jetstream_cluster_migrate",
                            "js_cluster_migrate"):
                    if v.kind != "bool" and lk not in ("jetstream_cluster_migrate", "js_cluster_migrate"):
                        self.err(v, f"interface conversion: interface {{}} is {GO_TYPE[v.kind]}, not bool")
                        continue
                    r.extra[lk] = v.plain()
                else:
                    self.unknown(k, v)
            if proxy_node is not None:
                why = proxy_problem(r)
                if why:
                    self.err(proxy_node, why)
                    continue
            ident = (tuple(r.urls), r.account)
            if ident in seen:
                self.err(rn, f"duplicate remote {', '.join(r.urls)} for account {r.account or '$G'}")
                continue
            seen.add(ident)
            self.o.leafnode.remotes.append(r)
            self.remote_nodes.append((r, account_node or rn))

    def leaf_proxy(self, n: Node, proxy):
        """A remote's `proxy { url, username, password, timeout }`: the HTTP proxy its
        WebSocket connections go through (CONNECT)."""
        if n.kind != "map":
            self.err(n, f"Expected proxy to be a map, got {KIND_NAME[n.kind]}")
            return
        for k, v in n.value.items():
            lk = k.lower()
            if lk == "url":
                proxy.url = self.s(v, k)
            elif lk == "username":
                proxy.username = self.s(v, k)
            elif lk == "password":
                proxy.password = self.s(v, k)
            elif lk == "timeout":
                proxy.timeout = self.duration(v, "proxy timeout")
            else:
                self.unknown(k, v)

    # -- cluster / gateway (parsed, not run) --------------------------------------
    def _name(self, v: Node, k: str) -> str:
        name = self.s(v, k)
        if " " in name:
            self.err(v, f"{k} name cannot contain spaces")
        return name

    def address_key(self, target, lk: str, mk: str, mv: Node, blank_host_keeps_default=False) -> bool:
        """A listener block's `listen`, `port` and `host`/`net` into target.host/.port; False
        for any other key. (`listen: ":7422"` keeps the leaf node's default host.)"""
        if lk == "listen":
            hp = self.listen(mv, mk)
            if hp:
                target.host = hp[0] or target.host if blank_host_keeps_default else hp[0]
                target.port = hp[1]
        elif lk == "port":
            target.port = self.i(mv, mk)
        elif lk in ("host", "net"):
            target.host = self.s(mv, mk)
        else:
            return False
        return True

    def _link_block(self, k: str, n: Node, target, what: str):
        """A `cluster {}` or `gateway {}` block: target marked configured (the block kept raw),
        its name and listen address read -> (lower key, key, node) for each other key."""
        m = self.m(n, k)
        if m is None:
            return
        target.configured, target.raw = True, n.plain()
        for mk, mv in m.items():
            lk = mk.lower()
            if lk == "name":
                target.name = self._name(mv, what)
            elif not self.address_key(target, lk, mk, mv):
                yield lk, mk, mv

    def cluster(self, k: str, n: Node):
        c = self.o.cluster
        for lk, mk, mv in self._link_block(k, n, c, "cluster"):
            if lk == "routes":
                if mv.kind != "array":          # (nats-server takes no single string here)
                    self.err(mv, f"interface conversion: interface {{}} is {GO_TYPE[mv.kind]}, not []interface {{}}")
                    continue
                c.routes = self.strs(mv, mk)
            elif lk in ("cluster_advertise", "advertise"):
                c.advertise = self.s(mv, mk)
            elif lk == "no_advertise":
                c.no_advertise = self.b(mv, mk)
            elif lk == "connect_retries":
                c.connect_retries = self.i(mv, mk)
            elif lk == "pool_size":
                c.pool_size = self.i(mv, mk, 3)
            elif lk == "compression":
                c.compression = self.compression(mv, mk)
            elif lk == "authorization":
                c.authorization = mv.plain() if self.want(mv, ("map",), mk) else None
            elif lk == "tls":
                c.tls = mv.plain() if self.tls(mv, client_ctx=False) is not None else None
            elif lk == "accounts":
                c.accounts = self.strs(mv, mk)
            elif lk == "ping_interval":
                c.ping_interval = self.duration(mv, mk)
            elif lk == "ping_max":
                c.ping_max = self.i(mv, mk)
            elif lk == "connect_backoff":
                c.connect_backoff = self.b(mv, mk)
            elif lk == "write_deadline":
                c.write_deadline = self.duration(mv, mk)
            elif lk == "write_timeout":
                c.write_timeout = self.write_policy(mv, mk)
            elif lk == "permissions":
                perms = self.permissions(mv, mk)
                if perms is not None and perms.response is not None:
                    self.err(mv, "Cluster permissions do not support dynamic responses")
                else:
                    c.permissions = perms
            else:
                self.unknown(mk, mv)

    def compression(self, n: Node, k: str):
        """A link's `compression`: a mode, a bool or `{ mode, rtt_thresholds }` (nats-server's
        parseCompression and its errors); its plain value, or None after an error."""
        if n.kind in ("string", "bool"):
            return n.plain()
        if n.kind != "map":
            self.err(n, f'field "{k}" should be a boolean or a structure, got {GO_TYPE[n.kind]}')
            return None
        for mk, mv in n.value.items():
            lmk = mk.lower()
            if lmk == "mode" and mv.kind != "string":
                self.err(mv, f"interface conversion: interface {{}} is {GO_TYPE[mv.kind]}, not string")
                return None
            if lmk in ("rtt_thresholds", "thresholds", "rtts", "rtt"):
                for item in mv.value if mv.kind == "array" else []:
                    try:
                        parse_duration(item.value if item.kind == "string" else "")
                    except ValueError as e:
                        self.err(mv, str(e))
                        return None
            elif lmk != "mode" and not mv.used_variable:
                self.err(mv, f'unknown field "{mk}"')
                return None
        return n.plain()

    def gateway(self, k: str, n: Node):
        g = self.o.gateway
        if n.kind != "map":
            self.err(n, f"Expected gateway to be a map, got {GO_TYPE[n.kind]}")
            return
        for lk, mk, mv in self._link_block(k, n, g, "gateway"):
            if lk == "gateways":
                g.gateways = self.remote_gateways(mv, mk)
            elif lk == "tls":
                g.tls = mv.plain() if self.tls(mv, client_ctx=False) is not None else None
            elif lk == "authorization":
                self.gateway_auth(mv, mk, g)
            elif lk == "advertise":
                g.advertise = self.s(mv, mk)
            elif lk == "connect_retries":
                g.connect_retries = self.i(mv, mk)
            elif lk == "connect_backoff":
                g.connect_backoff = self.b(mv, mk)
            elif lk in ("reject_unknown", "reject_unknown_cluster"):
                g.reject_unknown = self.b(mv, mk)
            elif lk == "write_deadline":
                g.write_deadline = self.duration(mv, mk)
            elif lk == "write_timeout":
                g.write_timeout = self.write_policy(mv, mk)
            else:
                self.unknown(mk, mv)

    def gateway_auth(self, n: Node, k: str, g):
        """A gateway's `authorization {}`: one user and password, a timeout (no users list,
        no token, no callout, as nats-server parses it)."""
        m = self.m(n, k)
        if m is None:
            return
        for ak, av in m.items():
            lak = ak.lower()
            if lak in ("user", "username"):
                g.username = self.s(av, ak)
            elif lak in ("pass", "password"):
                g.password = self.s(av, ak)
            elif lak == "timeout":
                g.auth_timeout = float(av.value) if av.kind in ("integer", "float") else self.duration(av, ak)
            elif lak == "users":
                self.err(n, "Gateway authorization does not allow multiple users")
            elif lak == "token":
                self.err(n, "Gateway authorization does not support tokens")
            elif lak == "auth_callout":
                self.err(n, "Gateway authorization does not support callouts")
            else:
                self.unknown(ak, av)

    def remote_gateways(self, n: Node, k: str) -> list:
        if n.kind != "array":
            # (nats-server reports this one without a position)
            self.err(None, f"Expected gateways field to be an array, got {GO_TYPE[n.kind]}")
            return []
        out = []
        for gn in n.value:
            if gn.kind != "map":
                self.err(gn, f"Expected gateway entry to be a map/struct, got {self.show(gn)}")
                continue
            r = RemoteGatewayOpts()
            for gk, gv in gn.value.items():
                lgk = gk.lower()
                if lgk == "name":
                    r.name = self.s(gv, gk)
                elif lgk in ("url", "urls"):
                    urls = [self.s(gv, gk)] if lgk == "url" else self.strs(gv, gk)
                    for u in urls:
                        if not _valid_url(u.strip()):
                            self.err(gv, 'error parsing gateway url [%s]' % go_quote(u.strip()))
                            continue
                        r.urls.append(u.strip())
                elif lgk == "tls":
                    r.tls = gv.plain() if self.tls(gv, client_ctx=False) is not None else None
                else:
                    self.unknown(gk, gv)
            out.append(r)
        return out

    # -- TLS, websocket, mqtt, operators (checked as nats-server checks them, not run) ----
    def tls(self, n: Node, client_ctx: bool = True) -> dict | None:
        """A `tls {}` block: nats-server's parseTLS field checks, then GenTLSConfig's
        certificate checks.  Returns the block, or None after an error."""
        if n.kind != "map":
            self.err(n, f"interface conversion: interface {{}} is {GO_TYPE[n.kind]}, not map[string]interface {{}}")
            return None
        files = {"cert_file": "", "key_file": "", "ca_file": ""}
        certs = False
        insecure = []                       # insecure cipher suites asked for
        allow_insecure = False
        for k, v in n.value.items():
            lk = k.lower()
            if lk == "cipher_suites":
                found = self._cipher_suites(v)
                if found is None:
                    return None
                insecure += found
            elif lk in files:
                if v.kind != "string":
                    self.err(v, f"error parsing tls config, expected '{lk}' to be filename")
                    return None
                files[lk] = v.value
            elif lk in _TLS_BOOLS:
                if v.kind != "bool":
                    self.err(v, f"error parsing tls config, expected '{lk}' to be a boolean")
                    return None
                allow_insecure = allow_insecure or (lk == "allow_insecure_cipher_suites" and v.value)
                if lk == "verify_cert_and_check_known_urls" and v.value and client_ctx:
                    self.err(v, "verify_cert_and_check_known_urls not supported in this context")
                    return None
            elif lk in ("certs", "certificates"):
                certs = True
            elif lk in _TLS_CHECKED:
                why = _tls_value_problem(lk, k, v)
                if why is not None:
                    self.err(why[0], why[1])
                    return None
            elif lk == "ocsp_peer":
                from natsd.net.ocsppeer import OcspConfigError, parse
                try:
                    parse(v.plain())
                except OcspConfigError as e:
                    self.err(v, str(e))
                    return None
            elif lk == "cert_store":
                # nats-server reads the Windows certificate store only on Windows
                self.err(v, "cert_store not compatible with current operating system")
                return None
            elif lk not in _TLS_OTHER:
                self.err(v, f'error parsing tls config, unknown field "{k}"')
                return None
        if certs and files["cert_file"]:
            self.err(n, "error parsing tls config, cannot combine 'cert_file' option with 'certs' option")
            return None
        if insecure and not allow_insecure:
            self.err(n, "insecure cipher suites configured without 'allow_insecure_cipher_suites' option "
                        "set: " + ", ".join(insecure))
            return None
        problem = gen_tls_error(files["cert_file"], files["key_file"], files["ca_file"])
        if problem:
            self.err(n, problem)
            return None
        return n.value

    def _cipher_suites(self, v: Node) -> list | None:
        """A `cipher_suites` list as nats-server's parseCipher takes it: the insecure names in
        it, or None after an error."""
        from natsd.net.tls import GO_INSECURE_CIPHERS, GO_SECURE_CIPHERS
        if v.kind != "array":
            self.err(v, f"interface conversion: interface {{}} is {GO_TYPE[v.kind]}, not []interface {{}}")
            return None
        if not v.value:
            self.err(v, "error parsing tls config, 'cipher_suites' cannot be empty")
            return None
        insecure = []
        for item in v.value:
            name = item.value if item.kind == "string" else ""
            if name not in GO_SECURE_CIPHERS and name not in GO_INSECURE_CIPHERS:
                self.err(item, f"unrecognized cipher {name}")
                return None
            if name in GO_INSECURE_CIPHERS:
                insecure.append(name)
        return insecure

    def listener_block(self, n: Node, name: str) -> bool:
        """`websocket {}` / `mqtt {}`: a map of known fields, its `tls {}` checked."""
        if n.kind != "map":
            self.err(n, f"Expected {name} to be a map, got {GO_TYPE[n.kind]}")
            return False
        fields = _WEBSOCKET_FIELDS if name == "websocket" else _MQTT_FIELDS
        for k, v in n.value.items():
            lk = k.lower()
            if lk == "tls":
                self.tls(v)
            elif lk not in fields:
                self.unknown(k, v)
            elif lk in _MQTT_DURATIONS and name == "mqtt":
                self.duration(v, _MQTT_DURATIONS[lk])
            elif (want := _LISTENER_TYPES[name].get(lk)) is not None and v.kind != want:
                # (a panic in nats-server's parser: the block's first such error only)
                self.err(v, f"interface conversion: interface {{}} is {GO_TYPE[v.kind]}, not {GO_TYPE[want]}")
                return True
            elif lk in _ORIGINS and name == "websocket" and v.kind not in ("string", "array"):
                self.err(v, f"error parsing allowed origins: unsupported type {GO_TYPE[v.kind]}")
            elif lk in _MQTT_PENDING and name == "mqtt" and not 0 <= v.value <= 0xFFFF:
                self.err(v, f"invalid value {v.value}, should in [0..{0xFFFF}] range")
            elif lk == "consumer_replicas" and name == "mqtt":
                self.warn(v, 'invalid use of field "%s": consumer replicas setting ignored in this '
                             'server version' % k)
            elif lk == "handshake_timeout" and name == "websocket":
                if v.kind == "string":
                    try:
                        parse_duration(v.value)
                    except ValueError as e:
                        self.err(v, f"error parsing handshake timeout: {e}")
                elif v.kind != "integer":
                    self.err(v, "error parsing handshake timeout: unsupported type "
                                f"{GO_TYPE.get(v.kind, v.kind)}")
        return True


# the mqtt {} durations (nats-server's parseDuration, under the name its errors give) and the
# websocket {} booleans, checked here; the rest of these blocks is read where it is used
_MQTT_DURATIONS = {"ack_wait": "ack_wait", "ackwait": "ack_wait", "js_api_timeout": "js_api_timeout",
                   "api_timeout": "js_api_timeout", "consumer_inactive_threshold": "consumer_inactive_threshold",
                   "consumer_auto_cleanup": "consumer_inactive_threshold"}
# the values nats-server's parseWebsocket and parseMQTT take as one Go type
_LISTENER_TYPES = {
    "websocket": {**dict.fromkeys(("no_tls", "same_origin", "compress", "compression"), "bool"),
                  **dict.fromkeys(("host", "net", "advertise", "jwt_cookie", "user_cookie", "pass_cookie",
                                   "token_cookie", "no_auth_user"), "string")},
    "mqtt": {**dict.fromkeys(("consumer_memory_storage", "reject_qos2_publish", "downgrade_qos2_subscribe"), "bool"),
             **dict.fromkeys(("host", "net", "no_auth_user", "js_domain"), "string"),
             **dict.fromkeys(("stream_replicas", "max_ack_pending", "max_pending", "max_inflight"), "integer")},
}
_MQTT_PENDING = {"max_ack_pending", "max_pending", "max_inflight"}
_ORIGINS = {"allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins", "origin"}
# what nats-server's parseTLS checks of these fields' values (the rest of _TLS_OTHER is read
# where it is used)
_TLS_CHECKED = {"curve_preferences", "min_version", "timeout", "connection_rate_limit", "pinned_certs",
                "handshake_first", "first", "immediate"}
# crypto/tls's curve names nats-server 2.15.1 (Go 1.26) knows
_GO_CURVE_NAMES = {"SecP384r1MLKEM1024", "SecP256r1MLKEM768", "X25519MLKEM768", "X25519", "CurveP256",
                   "CurveP384", "CurveP521"}
_PINNED = re.compile(r"^[A-Fa-f0-9]{64}$")


def _tls_value_problem(lk: str, key: str, v: Node) -> tuple[Node, str] | None:
    """(node, nats-server's error) for a bad value of one of _TLS_CHECKED, or None."""
    if lk == "curve_preferences":
        if v.kind != "array":
            return v, f"interface conversion: interface {{}} is {GO_TYPE[v.kind]}, not []interface {{}}"
        if not v.value:
            return v, "error parsing tls config, 'curve_preferences' cannot be empty"
        for item in v.value:
            if item.kind != "string" or item.value not in _GO_CURVE_NAMES:
                return item, f"unrecognized curve preference {item.value}"
    elif lk == "min_version":
        if v.kind != "string":
            return v, f"error parsing tls config: 'min_version' wrong type: {v.value}"
        if v.value in ("1.0", "1.1"):
            return v, f"error parsing tls config: unsupported TLS version: TLS {v.value}"
        if v.value not in ("1.2", "1.3"):
            return v, f"error parsing tls config: unknown version: {v.value}"
    elif lk == "timeout":
        if v.kind == "string":
            try:
                parse_duration(v.value)
            except ValueError as e:
                return v, f"error parsing tls config, 'timeout' {e}"
        elif v.kind not in ("integer", "float"):
            return v, "error parsing tls config, 'timeout' wrong type"
    elif lk == "connection_rate_limit":
        if v.kind != "integer":
            return v, "error parsing tls config, 'connection_rate_limit' wrong type"
    elif lk == "pinned_certs":
        if v.kind != "array":
            return v, ("error parsing tls config, expected 'pinned_certs' to be a list of hex-encoded sha256 "
                       "of DER encoded SubjectPublicKeyInfo")
        for item in v.value:
            entry = str(item.value).lower()
            if item.kind != "string" or not _PINNED.match(entry):
                return item, (f"error parsing tls config, 'pinned_certs' key {entry} does not look like "
                              "hex-encoded sha256 of DER encoded SubjectPublicKeyInfo")
    elif v.kind == "string":                            # handshake_first / first / immediate
        text = v.value.lower()
        if text not in ("true", "on", "false", "off", "auto", "auto_fallback"):
            try:
                parse_duration(v.value)
            except ValueError:
                return v, f'field "{key}"\'s value "{v.value}" is invalid'
    elif v.kind != "bool":
        return v, f'field "{key}" should be a boolean or a string, got {GO_TYPE[v.kind]}'
    return None


def proxy_problem(r) -> str | None:
    """nats-server's validateLeafNodeProxyOptions: what is wrong with a remote's proxy
    settings, or None. (Its warnings, that a proxy only serves ws:// and wss:// URLs, never
    reach nats-server 2.15.1's output, and it tunnels every URL anyway.)"""
    from urllib.parse import urlsplit
    p = r.proxy
    if not p.url:
        return None
    try:
        u = urlsplit(p.url)
        u.port                                      # raises on a bad port
    except ValueError as e:
        return "invalid proxy URL: %s" % e
    if u.scheme not in ("http", "https"):
        return "proxy URL scheme must be http or https, got: %s" % u.scheme
    if not u.netloc:
        return "proxy URL must specify a host"
    if p.timeout < 0:
        return "proxy timeout must be >= 0"
    if bool(p.username) != bool(p.password):
        return "proxy username and password must both be specified or both be empty"
    for url in r.urls:
        if urlsplit(url).scheme.lower() == "wss" and r.tls is None:
            return ("proxy is configured but remote URL %s requires TLS and no TLS configuration is provided. "
                    "When using proxy with TLS endpoints, ensure TLS is properly configured for the "
                    "leafnode remote" % url)
    return None
