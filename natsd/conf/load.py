"""Config tree -> Options, with validation and `file:line:col: message` errors.

Owns the meaning of every config key nats-server accepts (same names, aliases
and units), collects ALL errors before raising one ConfigError, and checks what
can be checked without a running server (unknown fields, accounts referenced by
imports/remotes, duplicate users, bad durations and sizes, TLS certificate files,
operator JWT files, trusted keys), with nats-server's texts and positions.  Keys
nats-server accepts but natsd does not implement are stored (Options.extra / raw
blocks); those asking for what natsd cannot serve are listed in Options.unsupported
(natsd.conf.unsupported) for the command line to refuse.
"""
from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import urlsplit
from typing import Any, Callable

import nkeys

from ..options import (
    AccountLimits, AccountOpts, ExportOpts, ImportOpts, MappingDest, NkeyUser, Options,
    Permissions, RemoteLeafOpts, ResponsePermission, ServiceLatency, SubjectPermission, User,
)
from .errors import ConfigError, go_position, go_read_error, go_syntax_error
from . import unsupported
from ..gofmt import parse_go_duration
from ..subject import is_valid_subject, subject_is_subset, subjects_overlap
from .lexer import LexError
from .parser import Node, config_digest, parse_string

_KIND_NAME = {"string": "a string", "integer": "an integer", "float": "a float", "bool": "a boolean",
              "datetime": "a datetime", "array": "an array", "map": "a map"}
# The Go types nats-server's config values have (its type-assertion panics name them).
_GO_TYPE = {"string": "string", "integer": "int64", "float": "float64", "bool": "bool",
            "datetime": "time.Time", "array": "[]interface {}", "map": "map[string]interface {}"}

# -- units ------------------------------------------------------------------


def parse_duration(s: str | int | float) -> float:
    """Go time.ParseDuration ("1h30m", "500ms", "-2s", "0") -> seconds.

    Plain numbers are taken as seconds (nats-server's legacy integer form)."""
    if isinstance(s, bool):
        raise ValueError(f"invalid duration {s!r}")
    if isinstance(s, (int, float)):
        return float(s)
    return parse_go_duration(s.strip()) / 1e9


def parse_size(v: str | int) -> int:
    """JetStream storage sizes: an int is bytes; a string "256M" uses K/M/G/T = 1024 powers.

    (Unquoted `256M` never gets here as a string: the parser already made it
    256*1000^2.  That quoted/unquoted difference is nats-server's.)"""
    if isinstance(v, bool):
        raise ValueError("must be int64 or string")
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        raise ValueError("must be int64 or string")
    if v == "":
        return 0
    mult = {"K": 10, "M": 20, "G": 30, "T": 40}.get(v[-1])
    try:
        num = int(v[:-1])
    except ValueError:
        raise ValueError(f"invalid size {v!r}") from None
    if mult is None:
        raise ValueError("sizes defined as strings must end in K, M, G, T")
    return num << mult


# -- TLS blocks, as nats-server's parseTLS / GenTLSConfig check them -------------------------
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


def _valid_operator_key(key: str) -> bool:
    """nkeys.IsValidPublicOperatorKey: base32, operator prefix 'O', CRC16."""
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except (binascii.Error, ValueError):
        return False
    if len(raw) != 35 or raw[0] != nkeys.PREFIX_BYTE_OPERATOR:
        return False
    return nkeys.crc16(bytearray(raw[:33])) == int.from_bytes(raw[33:], "little")


def _subject_is_subset(sub: str, pattern: str) -> bool:
    """Is every subject matched by `sub` also matched by `pattern`?"""
    st, pt = sub.split("."), pattern.split(".")
    for i, p in enumerate(pt):
        if p == ">":
            return len(st) > i
        if i >= len(st):
            return False
        if p == "*":
            if st[i] == ">":
                return False
            continue
        if st[i] != p:
            return False
    return len(st) == len(pt)


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


def _wildcards_used(subject: str, to: str) -> str | None:
    """nats-server maps an import `to` over its subject; every `*` must be used."""
    if not to or to == subject:
        return None
    stoks, ttoks = subject.split("."), to.split(".")
    n_star = stoks.count("*")
    if "$" in to or "{{" in to:
        return None  # explicit $1 / {{wildcard(1)}} references: left to the server
    if ttoks.count("*") != n_star:
        return f"not using all of the token wildcard(s) in {to}"
    if (stoks[-1] == ">") != (ttoks[-1] == ">"):
        return f"the full wildcard must be the last token of both subjects in {to}"
    return None


class _Loader:
    def __init__(self, tree: dict[str, Node], filename: str):
        self.tree = tree
        self.file = filename
        self.o = Options(config_file=None if filename.startswith("<") else filename)
        self.errors: list[tuple[tuple[str, int, int], str]] = []
        self.warnings: list[str] = []
        self.usernames: dict[str, Node] = {}
        self.imports: list[tuple[AccountOpts, ImportOpts, Node]] = []
        self.export_accounts: list[tuple[ExportOpts, Node]] = []
        self._svc_import_subjects: dict[int, dict[str, list[ImportOpts]]] = {}
        self._added_imports: dict[str, list[ImportOpts]] = {}

    # -- reporting / typed access ------------------------------------------
    def err(self, n: Node | tuple, msg: str):
        pos = self.go_pos(n) if isinstance(n, Node) else n
        self.errors.append((pos, msg))

    def warn(self, n: Node, msg: str):
        self.warnings.append(f"{go_position(*self.go_pos(n))}: {msg}")

    @staticmethod
    def go_pos(n: Node) -> tuple[str, int, int]:
        """Where nats-server points: a map entry's key; a quoted string that is not a map
        entry (an array item) at its first character inside the quotes."""
        f, l, c = n.pos
        if n.key is None and n.kind == "string" and n.quoted:
            c += 1
        return f, l, c

    def unknown(self, key: str, n: Node):
        if not n.used_variable:
            self.err(n, f'unknown field "{key}"')

    def want(self, n: Node, kinds: tuple[str, ...], what: str) -> bool:
        if n.kind in kinds:
            return True
        if len(kinds) == 1:
            # nats-server type-asserts the value and reports the panic.
            self.err(n, f"interface conversion: interface {{}} is {_GO_TYPE[n.kind]}, not {_GO_TYPE[kinds[0]]}")
            return False
        exp = " or ".join(_KIND_NAME[k] for k in kinds)
        self.err(n, f'expected {exp} for "{what}", got {_KIND_NAME[n.kind]} ({self.show(n)})')
        return False

    @staticmethod
    def show(n: Node) -> str:
        if n.kind in ("map", "array"):
            return n.kind
        return repr(n.plain()) if n.kind == "string" else (n.raw or str(n.value))

    def s(self, n: Node, what: str, default: Any = "") -> Any:
        return n.value if self.want(n, ("string",), what) else default

    def i(self, n: Node, what: str, default: Any = 0) -> Any:
        return n.value if self.want(n, ("integer",), what) else default

    def b(self, n: Node, what: str, default: Any = False) -> Any:
        return n.value if self.want(n, ("bool",), what) else default

    def m(self, n: Node, what: str) -> dict[str, Node] | None:
        return n.value if self.want(n, ("map",), what) else None

    def strs(self, n: Node, what: str) -> list[str]:
        """A string or an array of strings."""
        if n.kind == "string":
            return [n.value]
        if not self.want(n, ("string", "array"), what):
            return []
        out = []
        for it in n.value:
            if self.want(it, ("string",), what):
                out.append(it.value)
        return out

    def duration(self, n: Node, what: str, default: float = 0.0, int_ok: bool = True) -> float:
        """Go duration string; a bare integer means seconds (with nats-server's warning)."""
        if n.kind == "string":
            try:
                return parse_duration(n.value)
            except ValueError as e:
                self.err(n, f"error parsing {what}: {e}")
                return default
        if n.kind in ("integer", "float") and int_ok:
            self.warn(n, f'invalid use of field "{what}": {what} should be converted to a duration')
            return float(n.value)
        self.want(n, ("string",), what)
        return default

    def listen(self, n: Node, what: str) -> tuple[str, int] | None:
        if n.kind == "integer":
            return "", n.value
        if n.kind == "string":
            hp = n.value
            host, sep, port = hp.rpartition(":")
            if not sep:
                self.err(n, f"could not parse address string {hp!r} for \"{what}\" (expected host:port)")
                return None
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            try:
                return host, int(port)
            except ValueError:
                self.err(n, f"could not parse port {port!r} in \"{what}\"")
                return None
        self.want(n, ("integer", "string"), what)
        return None

    def dispatch(self, m: dict[str, Node], handlers: dict[str, Callable[[str, Node], None]]):
        for key, n in m.items():
            h = handlers.get(key.lower())
            if h is None:
                self.unknown(key, n)
            else:
                h(key, n)

    # -- top level -----------------------------------------------------------
    def load(self) -> Options:
        o = self.o
        setters = self._top_level()
        for key, n in self.tree.items():
            h = setters.get(key.lower())
            if h is None:
                # A key that is only there to be referenced as $var is fine.
                self.unknown(key, n)
                continue
            h(key, n)
        self.cross_checks()
        o.warnings = self.warnings
        return o

    def _top_level(self) -> dict[str, Callable[[str, Node], None]]:
        o = self.o

        def attr(name: str, conv: Callable[[Node, str], Any]):
            return lambda k, n: setattr(o, name, conv(n, k))

        def extra(k: str, n: Node):
            o.extra[k.lower()] = n.plain()

        def listen(k, n):
            hp = self.listen(n, k)
            if hp:
                o.host = hp[0] or o.host
                o.port = hp[1]

        def server_name(k, n):
            v = self.s(n, k)
            if " " in v:
                self.err(n, "server name cannot contain spaces")
            o.server_name = v

        def trace_verbose(k, n):
            o.trace_verbose = o.trace = self.b(n, k)

        def trace_headers(k, n):
            o.trace_headers = o.trace = self.b(n, k)

        def http(k, n):
            hp = self.listen(n, k)
            if hp:
                o.http_host = hp[0] or o.http_host
                if k.lower() == "https":
                    o.https_port = hp[1]
                else:
                    o.http_port = hp[1]

        def store_dir(k, n):
            if o.jetstream.store_dir:
                self.err(n, "Duplicate 'store_dir' configuration")
            o.jetstream.store_dir = self.s(n, k)

        def int31(name):
            def f(k, n):
                v = self.i(n, k, None)
                if v is None:
                    return
                if v > (1 << 31) - 1:
                    self.err(n, f"{k} value is too big")
                else:
                    setattr(o, name, v)
            return f

        def max_conn(k, n):
            v = self.i(n, k, None)
            if v is not None:
                o.max_connections = -1 if v == 0 else v   # nats-server: 0 -> -1

        def max_sub_tokens(k, n):
            v = self.i(n, k, None)
            if v is None:
                return
            if v > 255:
                self.err(n, f"{k} value is too big")
            elif v <= 0:
                self.err(n, f"{k} value can not be negative")
            else:
                o.max_sub_tokens = v

        def lame(name, minimum):
            def f(k, n):
                if not self.want(n, ("string",), k):
                    return
                try:
                    d = parse_duration(n.value)
                except ValueError as e:
                    self.err(n, f"error parsing {k}: {e}")
                    return
                if minimum is not None and d < minimum:
                    self.err(n, f"invalid {k} of {n.value}, minimum is 30 seconds")
                elif d < 0:
                    self.err(n, f"invalid {k}, needs to be positive")
                else:
                    setattr(o, name, d)
            return f

        def tags(k, n):
            o.server_tags.extend(self.strs(n, k))

        def metadata(k, n):
            mm = self.m(n, k)
            for mk, mv in (mm or {}).items():
                o.server_metadata[mk] = self.s(mv, mk)

        def raw_block(name):
            def f(k, n):
                blk = getattr(o, name)
                blk.configured = True
                blk.raw = n.plain() if n.kind == "map" else {"value": n.plain()}
            return f

        def write_timeout(k, n):
            v = self.s(n, k)
            if v and v.lower() not in ("default", "close", "retry"):
                self.err(n, f"write_timeout must be 'default', 'close' or 'retry', got {v!r}")
            o.extra["write_timeout"] = v

        def no_auth_user(k, n):
            o.no_auth_user = self.s(n, k)
            self.no_auth_node = n

        def system_account(k, n):
            o.system_account = self.s(n, k)
            self.system_account_node = n

        h: dict[str, Callable[[str, Node], None]] = {
            "listen": listen,
            "client_advertise": attr("client_advertise", self.s),
            "port": attr("port", self.i),
            "server_name": server_name,
            "host": attr("host", self.s), "net": attr("host", self.s),
            "debug": attr("debug", self.b),
            "trace": attr("trace", self.b),
            "trace_verbose": trace_verbose,
            "trace_headers": trace_headers,
            "logtime": attr("logtime", self.b),
            "logtime_utc": attr("logtime_utc", self.b),
            "mappings": lambda k, n: self.mappings(n, k, o.mappings, o.mappings_pos),
            "disable_sublist_cache": attr("disable_sublist_cache", self.b),
            "accounts": self.accounts,
            "authorization": self.authorization,
            "http": http, "https": http,
            "http_port": attr("http_port", self.i), "monitor_port": attr("http_port", self.i),
            "https_port": attr("https_port", self.i),
            "http_base_path": attr("http_base_path", self.s),
            "cluster": self.cluster,
            "gateway": self.gateway,
            "leafnodes": self.leafnodes,
            "store_dir": store_dir,
            "jetstream": self.jetstream,
            "logfile": attr("log_file", self.s),
            "logfile_size_limit": attr("log_size_limit", self.i),
            "logfile_max_num": attr("log_max_num", self.i),
            "syslog": attr("syslog", self.b),
            "remote_syslog": attr("remote_syslog", self.s),
            "pidfile": attr("pid_file", self.s),
            "ports_file_dir": attr("ports_file_dir", self.s),
            "prof_port": attr("prof_port", self.i),
            "max_control_line": int31("max_control_line"),
            "max_payload": int31("max_payload"),
            "max_pending": attr("max_pending", self.i),
            "max_connections": max_conn,
            "max_traced_msg_len": attr("max_traced_msg_len", self.i),
            "max_subscriptions": attr("max_subscriptions", self.i),
            "max_sub_tokens": max_sub_tokens,
            "ping_interval": lambda k, n: setattr(o, "ping_interval", self.duration(n, k, o.ping_interval)),
            "ping_max": attr("ping_max", self.i),
            "tls": lambda k, n: self.tls(n) is not None and raw_block("tls_config")(k, n),
            "write_deadline": lambda k, n: setattr(o, "write_deadline", self.duration(n, k, o.write_deadline)),
            "write_timeout": write_timeout,
            "lame_duck_duration": lame("lame_duck_duration", 30.0),
            "lame_duck_grace_period": lame("lame_duck_grace_period", None),
            "no_auth_user": no_auth_user,
            "system_account": system_account,
            "no_system_account": attr("no_system_account", self.b),
            "no_header_support": attr("no_header_support", self.b),
            "connect_error_reports": attr("connect_error_reports", self.i),
            "reconnect_error_reports": attr("reconnect_error_reports", self.i),
            "websocket": lambda k, n: self.listener_block(n, "websocket") and raw_block("websocket")(k, n),
            "mqtt": lambda k, n: self.listener_block(n, "mqtt") and raw_block("mqtt")(k, n),
            "server_tags": tags,
            "server_metadata": metadata,
            "max_closed_clients": attr("max_closed_clients", self.i),
        }
        aliases = {"maps": "mappings", "no_sublist_cache": "disable_sublist_cache", "leaf": "leafnodes",
                   "storedir": "store_dir", "log_file": "logfile", "log_size_limit": "logfile_size_limit",
                   "log_max_num": "logfile_max_num", "pid_file": "pidfile", "max_conn": "max_connections",
                   "max_subs": "max_subscriptions", "max_subscription_tokens": "max_sub_tokens",
                   "system": "system_account", "no_system": "no_system_account",
                   "no_sys_acc": "no_system_account", "ws": "websocket"}
        for a, target in aliases.items():
            h[a] = h[target]

        def operator(k, n):
            self.operators(n)
            extra(k, n)

        def trusted(k, n):
            self.trusted_keys(n)
            extra(k, n)
        # Accepted and stored, not implemented by natsd (yet).
        h["allow_non_tls"] = attr("allow_non_tls", self.b)
        for k in ("default_sentinel", "prof_block_rate", "proxy_protocol", "ocsp",
                  "operator", "operators", "roots", "root", "root_operators", "root_operator",
                  "resolver", "account_resolver", "accounts_resolver", "resolver_tls", "resolver_preload",
                  "resolver_pinned_accounts", "trusted", "trusted_keys", "feature_flags",
                  "default_js_domain", "ocsp_cache", "no_fast_producer_stall", "proxies"):
            h[k] = extra
        for k in ("operator", "operators", "roots", "root", "root_operators", "root_operator"):
            h[k] = operator
        h["trusted"] = h["trusted_keys"] = trusted
        return h

    # -- authorization / users / permissions ----------------------------------
    def authorization(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        o = self.o
        users: list[User | NkeyUser] | None = None
        default_perms = None

        def timeout(kk, v):
            if v.kind in ("integer", "float"):
                o.auth_timeout = float(v.value)
            elif v.kind == "string":
                try:
                    o.auth_timeout = parse_duration(v.value)
                except ValueError as e:
                    self.err(v, f"error parsing authorization config, 'timeout' {e}")
            else:
                self.err(v, "error parsing authorization config, 'timeout' wrong type")
            if o.auth_timeout > 60:
                self.warn(v, f"timeout of {o.auth_timeout} seconds is high, consider keeping it under "
                             "60 seconds. possibly caused by unquoted duration; use '1m' instead of 1m")

        def set_users(kk, v):
            nonlocal users
            users = self.users(v, kk, None)

        def perms(kk, v):
            nonlocal default_perms
            default_perms = self.permissions(v, kk)

        self.dispatch(m, {
            "user": lambda kk, v: setattr(o, "username", self.s(v, kk)),
            "username": lambda kk, v: setattr(o, "username", self.s(v, kk)),
            "pass": lambda kk, v: setattr(o, "password", self.s(v, kk)),
            "password": lambda kk, v: setattr(o, "password", self.s(v, kk)),
            "token": lambda kk, v: setattr(o, "authorization", self.s(v, kk)),
            "timeout": timeout,
            "users": set_users,
            "default_permission": perms, "default_permissions": perms, "permissions": perms,
            "auth_callout": lambda kk, v: o.extra.__setitem__("auth_callout", v.plain()),
            "auth_hook": lambda kk, v: o.extra.__setitem__("auth_callout", v.plain()),
            "proxy_required": lambda kk, v: o.extra.__setitem__("proxy_required", self.b(v, kk)),
        })
        o.default_permissions = default_perms
        if (o.username or o.password) and o.authorization:
            self.err(n, "Cannot have a user/pass and token")
        if users is not None:
            if o.username:
                self.err(n, "Can not have a single user/pass and a users array")
            if o.authorization:
                self.err(n, "Can not have a token and a users array")
            for u in users:
                if default_perms is not None and u.permissions is None:
                    u.permissions = default_perms
                (o.nkeys if isinstance(u, NkeyUser) else o.users).append(u)

    def users(self, n: Node, what: str, account: str | None) -> list[User | NkeyUser]:
        """`users: [{user, password, permissions, ...}, {nkey: U...}]`, with duplicate detection."""
        if not self.want(n, ("array",), what):
            return []
        out: list[User | NkeyUser] = []
        for un in n.value:
            if un.kind != "map":
                self.err(un, f"Expected user entry to be a map/struct, got {self.show(un)}")
                continue
            name = password = nkey = ""
            perms = None
            conn_types: list[str] = []
            proxy = False
            for k, v in un.value.items():
                lk = k.lower()
                if lk == "nkey":
                    nkey = self.s(v, k)
                elif lk in ("user", "username"):
                    name = self.s(v, k)
                elif lk in ("pass", "password"):
                    password = self.s(v, k)
                elif lk in ("permission", "permissions", "authorization"):
                    perms = self.permissions(v, k)
                elif lk in ("allowed_connection_types", "connection_types", "clients"):
                    conn_types = self.strs(v, k)
                elif lk == "proxy_required":
                    proxy = self.b(v, k)
                else:
                    self.unknown(k, v)
            pos = un.pos
            if not nkey and not name:
                self.err(un, "User entry requires a user")
                continue
            if nkey:
                if name or password:
                    self.err(un, "Nkey users do not take usernames or passwords")
                    continue
                if not (nkey.startswith("U") and len(nkey) == 56):
                    self.err(un, "Not a valid public nkey for a user")
                    continue
                u: User | NkeyUser = NkeyUser(nkey, perms, account, conn_types, proxy, pos)
                ident = nkey
            else:
                u = User(name, password, perms, account, conn_types, proxy, pos)
                ident = name
            if ident in self.usernames:
                kind = "nkey" if nkey else "user"
                self.err(un, f'Duplicate {kind} "{ident}" detected')
                continue
            self.usernames[ident] = un
            out.append(u)
        return out

    def permissions(self, n: Node, what: str) -> Permissions | None:
        m = self.m(n, what)
        if m is None:
            return None
        p = Permissions()
        for k, v in m.items():
            lk = k.lower()
            if lk in ("pub", "publish", "import"):
                p.publish = self.subject_permission(v, k, allow_queue=False)
            elif lk in ("sub", "subscribe", "export"):
                p.subscribe = self.subject_permission(v, k, allow_queue=True)
            elif lk in ("publish_allow_responses", "allow_responses"):
                if v.kind == "bool":
                    p.response = ResponsePermission() if v.value else None
                elif v.kind == "map":
                    p.response = self.allow_responses(v)
                else:
                    self.err(v, "error parsing response permissions, expected a boolean or a map")
                if p.response is not None and p.publish is None:
                    p.publish = SubjectPermission()
            elif not v.used_variable:
                self.err(v, f'Unknown field "{k}" parsing permissions')
        return p

    def allow_responses(self, n: Node) -> ResponsePermission:
        rp = ResponsePermission()
        for k, v in n.value.items():
            lk = k.lower()
            if lk in ("max", "max_msgs", "max_messages", "max_responses"):
                mx = self.i(v, k)
                if mx:
                    rp.max_msgs = mx
            elif lk in ("expires", "expiration", "ttl"):
                if v.kind != "string":
                    self.err(v, "error parsing expires, not a duration string")
                    continue
                try:
                    d = parse_duration(v.value)
                except ValueError as e:
                    self.err(v, f"error parsing expires: {e}")
                    continue
                if d:
                    rp.expires = d
            elif not v.used_variable:
                self.err(v, f'Unknown field "{k}" parsing permissions')
        return rp

    def subject_permission(self, n: Node, what: str, allow_queue: bool) -> SubjectPermission | None:
        if n.kind == "map":
            if not n.value:
                return None
            sp = SubjectPermission()
            for k, v in n.value.items():
                if k.lower() == "allow":
                    sp.allow = self.perm_subjects(v, k, allow_queue)
                elif k.lower() == "deny":
                    sp.deny = self.perm_subjects(v, k, allow_queue)
                elif not v.used_variable:
                    self.err(v, f'Unknown field name "{k}" parsing subject permissions, '
                                "only 'allow' or 'deny' are permitted")
            return sp
        return SubjectPermission(allow=self.perm_subjects(n, what, allow_queue))

    def perm_subjects(self, n: Node, what: str, allow_queue: bool) -> list[str]:
        subs = self.strs(n, what)
        for s in subs:
            if is_valid_subject(s):
                continue
            parts = s.split()
            if allow_queue and len(parts) == 2 and all(is_valid_subject(x) for x in parts):
                continue
            self.err(n, f'subject "{s}" is not a valid subject')
        return subs

    # -- accounts --------------------------------------------------------------
    def accounts(self, k: str, n: Node):
        o = self.o
        if n.kind == "array":   # `accounts: [A, B]` just names them
            for it in n.value:
                name = self.s(it, k)
                if name == "$G":
                    self.err(it, '"$G" is a Reserved Account')
                elif name in o.accounts:
                    self.err(it, f"Duplicate Account Entry: {name}")
                elif name:
                    o.accounts[name] = AccountOpts(name=name, pos=it.pos)
            return
        m = self.m(n, k)
        for name, an in (m or {}).items():
            if an.used_variable:
                continue
            if an.kind != "map":
                self.err(an, "Expected map entries for accounts")
                continue
            if name == "$G":
                self.err(an, '"$G" is a Reserved Account')
                continue
            acc = AccountOpts(name=name, pos=an.pos)
            o.accounts[name] = acc
            users_node = None
            for ak, av in an.value.items():
                lk = ak.lower()
                if lk == "nkey":
                    v = self.s(av, ak)
                    if not (v.startswith("A") and len(v) == 56):
                        self.err(av, f'Not a valid public nkey for an account: "{v}"')
                    acc.nkey = v
                elif lk == "imports":
                    self.account_imports(av, acc)
                elif lk == "exports":
                    self.account_exports(av, acc)
                elif lk == "jetstream":
                    self.account_jetstream(av, acc)
                elif lk == "users":
                    users_node = av
                    acc.users = self.users(av, ak, name)
                elif lk == "default_permissions":
                    acc.default_permissions = self.permissions(av, ak)
                elif lk in ("mappings", "maps"):
                    self.mappings(av, ak, acc.mappings, {})
                elif lk == "limits":
                    self.account_limits(av, acc.limits)
                elif lk in ("msg_trace", "trace_dest"):
                    acc.msg_trace = av.plain() if av.kind == "map" else {"dest": av.plain()}
                else:
                    self.unknown(ak, av)
            if acc.default_permissions is not None:
                for u in acc.users:
                    if u.permissions is None:
                        u.permissions = acc.default_permissions
            if acc.users and users_node is not None:
                if o.username:
                    self.err(users_node, "Can not have a single user/pass and accounts")
                if o.authorization:
                    self.err(users_node, "Can not have a token and accounts")
            for u in acc.users:
                (o.nkeys if isinstance(u, NkeyUser) else o.users).append(u)

    def account_jetstream(self, n: Node, acc: AccountOpts):
        if n.kind == "bool":
            acc.jetstream = n.value
        elif n.kind == "string":
            v = n.value.lower()
            if v in ("enabled", "enable"):
                acc.jetstream = True
            elif v in ("disabled", "disable"):
                acc.jetstream = False
            else:
                self.err(n, f"Expected 'enabled' or 'disabled' for string value, got '{n.value}'")
        elif n.kind == "map":
            acc.jetstream = True
            known = {"max_memory", "max_mem", "mem", "memory", "max_store", "max_file", "max_disk", "store",
                     "disk", "max_streams", "streams", "max_consumers", "consumers", "max_bytes_required",
                     "max_stream_bytes", "max_bytes", "mem_max_stream_bytes", "memory_max_stream_bytes",
                     "disk_max_stream_bytes", "store_max_stream_bytes", "max_ack_pending", "cluster_traffic"}
            for k, v in n.value.items():
                lk = k.lower()
                if lk in ("enabled", "enable"):
                    acc.jetstream = self.b(v, k, True)
                elif lk in ("disabled", "disable"):
                    acc.jetstream = not self.b(v, k, False)
                elif lk in known:
                    val = v.value
                    if lk in ("max_memory", "max_mem", "mem", "memory", "max_store", "max_file", "max_disk",
                              "store", "disk") and v.kind in ("integer", "string"):
                        try:
                            val = parse_size(v.value)
                        except ValueError as e:
                            self.err(v, f"{k} {e}")
                    acc.jetstream_limits[lk] = val
                else:
                    self.unknown(k, v)
        else:
            self.err(n, f"Expected map, bool or string to define JetStream, got {_KIND_NAME[n.kind]}")

    def account_limits(self, n: Node, lim: AccountLimits):
        m = self.m(n, "limits")
        fields = {"max_connections": "max_connections", "max_conn": "max_connections",
                  "max_subscriptions": "max_subscriptions", "max_subs": "max_subscriptions",
                  "max_payload": "max_payload", "max_pay": "max_payload",
                  "max_leafnodes": "max_leafnodes", "max_leafs": "max_leafnodes"}
        for k, v in (m or {}).items():
            f = fields.get(k.lower())
            if f is None:
                self.unknown(k, v)
            else:
                setattr(lim, f, self.i(v, k, -1))

    def account_exports(self, n: Node, acc: AccountOpts):
        if not self.want(n, ("array",), "exports"):
            return
        for en in n.value:
            if en.kind != "map":
                self.err(en, f"Export Items should be a map with type entry, got {_KIND_NAME[en.kind]}")
                continue
            ex = ExportOpts(pos=en.pos)
            kind_seen = False
            rt_node = lat_node = None
            for k, v in en.value.items():
                lk = k.lower()
                if lk in ("stream", "service"):
                    if kind_seen:
                        self.err(v, f'Detected {lk} "{v.plain()}" but already saw a {ex.kind}')
                        continue
                    kind_seen = True
                    ex.kind = lk
                    ex.subject = self.s(v, k)
                elif lk in ("response", "response_type"):
                    rt_node = v
                    rt = self.s(v, k).lower()
                    names = {"single": "Singleton", "singleton": "Singleton", "stream": "Stream",
                             "chunk": "Chunked", "chunked": "Chunked"}
                    if rt not in names:
                        self.err(v, f'Unknown response type: "{v.value}"')
                    else:
                        ex.response_type = names[rt]
                elif lk in ("threshold", "response_threshold", "response_max_time", "response_time"):
                    rt_node = v
                    if v.kind != "string":
                        self.err(v, "Expected response threshold to be a parseable time duration, "
                                    f"got {_KIND_NAME[v.kind]}")
                        continue
                    try:
                        ex.response_threshold = parse_duration(v.value)
                    except ValueError:
                        self.err(v, f'Expected response threshold to be a parseable time duration, got "{v.value}"')
                elif lk == "accounts":
                    ex.accounts = self.strs(v, k)
                    self.export_accounts.append((ex, v))
                elif lk == "latency":
                    lat_node = v
                    ex.latency = self.latency(v)
                elif lk == "account_token_position":
                    ex.account_token_position = self.i(v, k)
                elif lk == "allow_trace":
                    ex.allow_trace = self.b(v, k)
                else:
                    self.unknown(k, v)
            if not kind_seen:
                self.err(en, 'export needs a "stream" or "service" subject')
                continue
            if ex.kind == "stream":
                if rt_node is not None:
                    self.err(rt_node, "Detected response directive on non-service")
                if lat_node is not None:
                    self.err(lat_node, "Detected latency directive on non-service")
            if ex.subject and not is_valid_subject(ex.subject):
                self.err(en, f'Error adding {ex.kind} export "{ex.subject}": subject is not valid')
            acc.exports.append(ex)

    def latency(self, n: Node) -> ServiceLatency | None:
        if n.kind == "string":
            return ServiceLatency(subject=n.value)
        m = self.m(n, "latency")
        if m is None:
            return None
        lat = ServiceLatency()
        for k, v in m.items():
            if k == "sampling":
                if v.kind == "integer":
                    lat.sampling = v.value
                elif v.kind == "string" and v.value.strip().lower() == "headers":
                    lat.sampling = 0
                    continue
                elif v.kind == "string":
                    try:
                        lat.sampling = int(v.value.removesuffix("%"))
                    except ValueError:
                        self.err(v, f"Failed to parse latency sample: {v.value!r}")
                        continue
                else:
                    self.err(v, "Expected latency sample to be a string or map/struct")
                    continue
                if not 1 <= lat.sampling <= 100:
                    self.err(v, "sampling value should be between 1 and 100")
            elif k == "subject":
                lat.subject = self.s(v, k)
        if not lat.subject:
            self.err(n, "Latency subject required, but missing")
        return lat

    def account_imports(self, n: Node, acc: AccountOpts):
        if not self.want(n, ("array",), "imports"):
            return
        for imn in n.value:
            if imn.kind != "map":
                self.err(imn, f"Import Items should be a map with type entry, got {_KIND_NAME[imn.kind]}")
                continue
            im = ImportOpts(pos=imn.pos)
            kind_seen = False
            for k, v in imn.value.items():
                lk = k.lower()
                if lk in ("stream", "service"):
                    if kind_seen:
                        self.err(v, f"Detected {lk} but already saw a {im.kind}")
                        continue
                    kind_seen = True
                    im.kind = lk
                    sm = self.m(v, k) or {}
                    for sk, sv in sm.items():
                        if sk.lower() == "account":
                            im.account = self.s(sv, sk)
                        elif sk.lower() == "subject":
                            im.subject = self.s(sv, sk)
                        else:
                            self.unknown(sk, sv)
                    if not im.account or not im.subject:
                        self.err(v, f"Expected an account and a subject for {lk} import")
                elif lk == "prefix":
                    im.prefix = self.s(v, k)
                elif lk == "to":
                    im.to = self.s(v, k)
                elif lk == "share":
                    im.share = self.b(v, k)
                elif lk == "allow_trace":
                    im.allow_trace = self.b(v, k)
                else:
                    self.unknown(k, v)
            if not kind_seen:
                self.err(imn, 'import needs a "stream" or "service" entry')
                continue
            if im.to and im.subject:
                bad = _wildcards_used(im.subject, im.to)
                if bad:
                    frm, to = (im.subject, im.to) if im.kind == "stream" else (im.to, im.subject)
                    self.err(imn, f'Error adding {im.kind} import "{im.subject}": failed to create mapping '
                                  f'transform for {im.kind} import subject from "{frm}" to "{to}": '
                                  f'invalid mapping destination: {bad}')
            if im.kind == "service" and im.account and im.subject:
                local = im.to or im.subject
                seen = self._svc_import_subjects.setdefault(id(acc), {}).setdefault(local, [])
                dup = next((d for d in seen if d.account == im.account), None)
                if dup is not None:
                    self.err(imn, f'Duplicate service import subject "{local}", previously used in import '
                                  f'for account "{dup.account}", subject "{dup.subject}"')
                    continue
                seen.append(im)
            if im.kind == "service" and im.prefix:
                self.err(imn, '"prefix" is only for stream imports, use "to"')
            acc.imports.append(im)
            if im.account and im.subject:
                self.imports.append((acc, im, imn))

    def mappings(self, n: Node, what: str, out: dict[str, list[MappingDest]], positions: dict):
        m = self.m(n, what)
        for subj, v in (m or {}).items():
            if not is_valid_subject(subj):
                self.err(v, f'Subject "{subj}" is not a valid subject')
                continue
            positions[subj] = v.pos
            dests: list[MappingDest] = []
            if v.kind == "string":
                dests.append(MappingDest(subject=v.value))
            elif v.kind in ("array", "map"):
                items = v.value if v.kind == "array" else [v]
                for dn in items:
                    d = self.map_dest(dn)
                    if d is not None:
                        dests.append(d)
                if sum(d.weight for d in dests if not d.cluster) > 100:
                    self.err(v, f'Error adding mapping for "{subj}" : total weight needs to be <= 100')
            else:
                self.err(v, f"Unknown type {_KIND_NAME[v.kind]} for mapping destination")
                continue
            out[subj] = dests

    def map_dest(self, n: Node) -> MappingDest | None:
        if n.kind != "map":
            self.err(n, "Expected an entry for the mapping destination")
            return None
        d = MappingDest()
        weighted = False
        for k, v in n.value.items():
            lk = k.lower()
            if lk in ("dest", "destination"):
                d.subject = self.s(v, k)
            elif lk == "weight":
                if v.kind == "string":
                    try:
                        w = int(v.value.removesuffix("%"))
                    except ValueError:
                        self.err(v, f'Invalid weight "{v.value}" for mapping destination')
                        return None
                elif v.kind == "integer":
                    w = v.value
                else:
                    self.err(v, f"Unknown entry type for weight of {self.show(v)}")
                    return None
                if not 0 <= w <= 100:
                    self.err(v, f"Invalid weight {w} for mapping destination")
                    return None
                d.weight, weighted = w, True
            elif lk == "cluster":
                d.cluster = self.s(v, k)
            else:
                self.err(v, f'Unknown field "{k}" for mapping destination')
                return None
        if not weighted:
            self.err(n, f'Missing weight for mapping destination "{d.subject}"')
            return None
        return d

    # -- jetstream -------------------------------------------------------------
    def jetstream(self, k: str, n: Node):
        js = self.o.jetstream
        if n.kind == "bool":
            js.enabled = n.value
            return
        if n.kind == "string":
            v = n.value.lower()
            if v in ("enabled", "enable"):
                js.enabled = True
            elif v in ("disabled", "disable"):
                js.enabled = False
            else:
                self.err(n, f"Expected 'enabled' or 'disabled' for string value, got '{n.value}'")
            return
        if n.kind != "map":
            self.err(n, f"Expected map, bool or string to define JetStream, got {_KIND_NAME[n.kind]}")
            return
        enable = True
        for mk, mv in n.value.items():
            lk = mk.lower()
            if lk == "strict":
                js.strict = self.b(mv, mk, True)
            elif lk in ("store", "store_dir", "storedir"):
                if js.store_dir:
                    self.err(mv, "Duplicate 'store_dir' configuration")
                js.store_dir = self.s(mv, mk)
            elif lk in ("sync", "sync_interval"):
                if mv.kind == "string" and mv.value.lower() == "always":
                    js.sync_interval, js.sync_always = "always", True
                else:
                    js.sync_interval = self.duration(mv, mk, 120.0)
                    js.sync_interval_set = True
            elif lk in ("max_memory_store", "max_mem_store", "max_mem", "max_file_store", "max_file",
                        "max_outstanding_catchup", "max_buffered_size"):
                try:
                    size = parse_size(mv.value if mv.kind in ("integer", "string") else None)
                except ValueError as e:
                    name = "max_mem_store" if "mem" in lk else ("max_file_store" if "file" in lk else lk)
                    self.err(mv, f"{name} {e}")
                    continue
                if "mem" in lk:
                    js.max_memory = size
                elif "file" in lk:
                    js.max_store = size
                elif lk == "max_buffered_size":
                    js.max_buffered_size = size
                else:
                    js.max_outstanding_catchup = size
            elif lk == "domain":
                js.domain = self.s(mv, mk)
                if js.domain and any(c in js.domain for c in " .\t*>"):
                    self.err(mv, f"invalid domain name: {js.domain!r} (no spaces, dots or wildcards)")
            elif lk in ("enable", "enabled"):
                enable = self.b(mv, mk, True)
            elif lk in ("key", "ek", "encryption_key"):
                js.key = self.s(mv, mk)
            elif lk in ("prev_key", "prev_ek", "prev_encryption_key"):
                js.prev_key = self.s(mv, mk)
            elif lk == "cipher":
                c = self.s(mv, mk)
                if c.lower() not in ("chacha", "chachapoly", "aes"):
                    from ..gofmt import go_quote
                    self.err(mv, f"Unknown cipher type: {go_quote(c)}")   # Go's %q
                js.cipher = c
            elif lk == "extension_hint":
                js.extension_hint = self.s(mv, mk)
            elif lk == "limits":
                self.js_limits(mv)
            elif lk == "unique_tag":
                js.unique_tag = self.s(mv, mk).strip().lower()
            elif lk == "max_buffered_msgs":
                js.max_buffered_msgs = self.i(mv, mk, js.max_buffered_msgs)
            elif lk == "request_queue_limit":
                js.request_queue_limit = self.i(mv, mk)
            elif lk in ("tpm", "info_queue_limit", "meta_compact", "meta_compact_size", "meta_compact_sync",
                        "max_concurrent_io"):
                js.extra[lk] = mv.plain()
            else:
                self.unknown(mk, mv)
        js.enabled = enable

    def js_limits(self, n: Node):
        m = self.m(n, "limits")
        lim = self.o.jetstream.limits
        for k, v in (m or {}).items():
            lk = k.lower()
            if lk in ("max_ack_pending", "max_ha_assets", "max_request_batch"):
                lim[lk] = self.i(v, k)
            elif lk == "duplicate_window":
                lim[lk] = self.duration(v, k)
            elif lk == "batch":
                bm = self.m(v, k) or {}
                for bk, bv in bm.items():
                    if bk.lower() in ("max_inflight_per_stream", "max_inflight_total", "max_msgs"):
                        lim.setdefault("batch", {})[bk.lower()] = self.i(bv, bk)
                    elif bk.lower() == "timeout":
                        lim.setdefault("batch", {})["timeout"] = self.duration(bv, bk)
                    else:
                        self.unknown(bk, bv)
            else:
                self.unknown(k, v)

    # -- leafnodes ---------------------------------------------------------------
    def leafnodes(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        ln = self.o.leafnode
        ln.configured = True
        for mk, mv in m.items():
            lk = mk.lower()
            if lk == "listen":
                hp = self.listen(mv, mk)
                if hp:
                    ln.host = hp[0] or ln.host
                    ln.port = hp[1]
            elif lk == "port":
                ln.port = self.i(mv, mk)
            elif lk in ("host", "net"):
                ln.host = self.s(mv, mk)
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
                ln.compression = mv.plain()
            elif lk in ("isolate_leafnode_interest", "isolate"):
                ln.isolate_leafnode_interest = self.b(mv, mk)
            elif lk in ("dial_timeout", "write_deadline"):
                self.duration(mv, lk)
            elif lk == "write_timeout":
                self.s(mv, mk)
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
                self.s(v, k)
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

    def remotes(self, n: Node):
        if n.kind != "array":
            self.err(n, f"Expected remotes field to be an array, got {_KIND_NAME[n.kind]}")
            return
        seen: set[tuple] = set()
        for rn in n.value:
            if rn.kind != "map":
                self.err(rn, f"Expected remote leafnode entry to be a map/struct, got {self.show(rn)}")
                continue
            r = RemoteLeafOpts(pos=rn.pos)
            self.remote_nodes = getattr(self, "remote_nodes", [])
            account_node = None
            for k, v in rn.value.items():
                lk = k.lower()
                if lk in ("url", "urls"):
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
                    r.compression = v.plain()
                elif lk in ("first_info_timeout",):
                    r.first_info_timeout = self.duration(v, k)
                elif lk in ("ws_compress", "ws_compression", "websocket_compress", "websocket_compression",
                            "ws_no_masking", "websocket_no_masking", "jetstream_cluster_migrate",
                            "js_cluster_migrate", "isolate_leafnode_interest", "isolate", "request_isolation",
                            "dial_timeout", "proxy", "ignore_discovered_servers"):
                    r.extra[lk] = v.plain()
                else:
                    self.unknown(k, v)
            ident = (tuple(r.urls), r.account)
            if ident in seen:
                self.err(rn, f"duplicate remote {', '.join(r.urls)} for account {r.account or '$G'}")
                continue
            seen.add(ident)
            self.o.leafnode.remotes.append(r)
            self.remote_nodes.append((r, account_node or rn))

    # -- cluster / gateway (parsed, not run) --------------------------------------
    def _name(self, v: Node, k: str) -> str:
        name = self.s(v, k)
        if " " in name:
            self.err(v, f"{k} name cannot contain spaces")
        return name

    def cluster(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        c = self.o.cluster
        c.configured, c.raw = True, n.plain()
        for mk, mv in m.items():
            lk = mk.lower()
            if lk == "name":
                c.name = self._name(mv, "cluster")
            elif lk == "listen":
                hp = self.listen(mv, mk)
                if hp:
                    c.host, c.port = hp
            elif lk == "port":
                c.port = self.i(mv, mk)
            elif lk in ("host", "net"):
                c.host = self.s(mv, mk)
            elif lk == "routes":
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
                c.compression = mv.plain()
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
            elif lk in ("permissions", "write_deadline", "write_timeout"):
                pass  # kept in c.raw
            else:
                self.unknown(mk, mv)

    def gateway(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        g = self.o.gateway
        g.configured, g.raw = True, n.plain()
        for mk, mv in m.items():
            lk = mk.lower()
            if lk == "name":
                g.name = self._name(mv, "gateway")
            elif lk == "listen":
                hp = self.listen(mv, mk)
                if hp:
                    g.host, g.port = hp
            elif lk == "port":
                g.port = self.i(mv, mk)
            elif lk in ("host", "net"):
                g.host = self.s(mv, mk)
            elif lk == "gateways":
                g.gateways = mv.plain() if self.want(mv, ("array",), mk) else []
            elif lk == "tls":
                self.tls(mv, client_ctx=False)   # kept in g.raw
            elif lk in ("authorization", "advertise", "connect_retries", "connect_backoff",
                        "reject_unknown", "reject_unknown_cluster", "write_deadline", "write_timeout"):
                pass  # kept in g.raw
            else:
                self.unknown(mk, mv)

    # -- TLS, websocket, mqtt, operators (checked as nats-server checks them, not run) ----
    def tls(self, n: Node, client_ctx: bool = True) -> dict | None:
        """A `tls {}` block: nats-server's parseTLS field checks, then GenTLSConfig's
        certificate checks.  Returns the block, or None after an error."""
        if n.kind != "map":
            self.err(n, f"interface conversion: interface {{}} is {_GO_TYPE[n.kind]}, not map[string]interface {{}}")
            return None
        files = {"cert_file": "", "key_file": "", "ca_file": ""}
        certs = False
        for k, v in n.value.items():
            lk = k.lower()
            if lk in files:
                if v.kind != "string":
                    self.err(v, f"error parsing tls config, expected '{lk}' to be filename")
                    return None
                files[lk] = v.value
            elif lk in _TLS_BOOLS:
                if v.kind != "bool":
                    self.err(v, f"error parsing tls config, expected '{lk}' to be a boolean")
                    return None
                if lk == "verify_cert_and_check_known_urls" and v.value and client_ctx:
                    self.err(v, "verify_cert_and_check_known_urls not supported in this context")
                    return None
            elif lk in ("certs", "certificates"):
                certs = True
            elif lk not in _TLS_OTHER:
                self.err(v, f'error parsing tls config, unknown field "{k}"')
                return None
        if certs and files["cert_file"]:
            self.err(n, "error parsing tls config, cannot combine 'cert_file' option with 'certs' option")
            return None
        problem = gen_tls_error(files["cert_file"], files["key_file"], files["ca_file"])
        if problem:
            self.err(n, problem)
            return None
        return n.value

    def listener_block(self, n: Node, name: str) -> bool:
        """`websocket {}` / `mqtt {}`: a map of known fields, its `tls {}` checked."""
        if n.kind != "map":
            self.err(n, f"Expected {name} to be a map, got {_GO_TYPE[n.kind]}")
            return False
        fields = _WEBSOCKET_FIELDS if name == "websocket" else _MQTT_FIELDS
        for k, v in n.value.items():
            lk = k.lower()
            if lk == "tls":
                self.tls(v)
            elif lk not in fields:
                self.unknown(k, v)
            elif lk == "handshake_timeout" and name == "websocket":
                if v.kind == "string":
                    try:
                        parse_duration(v.value)
                    except ValueError as e:
                        self.err(v, f"error parsing handshake timeout: {e}")
                elif v.kind != "integer":
                    self.err(v, "error parsing handshake timeout: unsupported type "
                                f"{_GO_TYPE.get(v.kind, v.kind)}")
        return True

    def operators(self, n: Node):
        """`operator: <file or JWT>` (or a list): nats-server reads each one at load time."""
        items = n.value if n.kind == "array" else [n]
        for it in items:
            if it.kind != "string":
                continue
            name = it.value
            if name.startswith("eyJ"):
                continue
            try:
                with open(name, "rb"):
                    pass
            except OSError as e:
                self.err(n, f"error parsing operator JWT: {go_read_error(name, e)}")

    def trusted_keys(self, n: Node):
        """`trusted: <key>` / `trusted_keys: [...]` must be public operator nkeys."""
        items = n.value if n.kind == "array" else [n]
        where = items[-1] if n.kind == "array" and items else n
        for it in items:
            if it.kind == "string" and not _valid_operator_key(it.value):
                self.err(where, f'trust key "{it.value}" required to be a valid public operator nkey')

    # -- checks that need the whole file -------------------------------------------
    def cross_checks(self):
        o = self.o
        accs = o.accounts
        for ex, v in self.export_accounts:
            for an in ex.accounts or []:
                if an not in accs:
                    self.err(v, f'"{an}" account not defined for {ex.kind} export')
        # nats-server adds every stream import, then every service import, refusing any
        # that would close a cycle (accounts.go serviceImportFormsCycle/streamImportFormsCycle).
        self._added_imports = {}
        ordered = ([x for x in self.imports if x[1].kind == "stream"] +
                   [x for x in self.imports if x[1].kind == "service"])
        for acc, im, node in ordered:
            target = accs.get(im.account)
            if target is None:
                self.err(node, f'"{im.account}" account not defined for {im.kind} import')
                continue
            ok = any(ex.kind == im.kind and _subject_is_subset(im.subject, ex.subject)
                     and (ex.accounts is None or acc.name in ex.accounts)
                     for ex in target.exports)
            if not ok:
                self.err(node, f'Error adding {im.kind} import "{im.subject}": {im.kind} import not authorized '
                               f'(account "{im.account}" has no matching {im.kind} export)')
                continue
            if self._import_forms_cycle(acc, im):
                self.err(node, f'Error adding {im.kind} import "{im.subject}": import forms a cycle')
                continue
            self._added_imports.setdefault(acc.name, []).append(im)
        for r, node in getattr(self, "remote_nodes", []):
            if r.account and r.account != "$G" and r.account not in accs:
                self.err(node, f'leafnode remote account "{r.account}" is not defined in "accounts"')
        sysacc = o.system_account
        if sysacc and sysacc != "$SYS" and sysacc not in accs:
            self.err(self.system_account_node, f'system account "{sysacc}" is not defined in "accounts"')
        if o.no_auth_user:
            names = {u.username for u in o.users} | {u.nkey for u in o.nkeys}
            if o.no_auth_user not in names:
                self.err(self.no_auth_node, f'no_auth_user: "{o.no_auth_user}" not present as user or nkey '
                                            "in authorization block or account configuration")


def _stream_local(im: ImportOpts) -> str:
    if im.prefix:
        return f"{im.prefix.rstrip('.')}.{im.subject}"
    return im.to or im.subject


def _import_forms_cycle(self, acc, im: ImportOpts) -> bool:
    """Would adding `im` to `acc` close an import cycle? (checks imports added so far)"""
    accs = self.o.accounts
    added = self._added_imports

    def svc(name: str, frm: str, visited: set[str], depth: int = 0) -> bool:
        if depth > 1024:
            return True
        for si in added.get(name, ()):
            if si.kind != "service" or not subjects_overlap(frm, si.subject):
                continue
            if si.account in visited:
                return True
            visited.add(name)
            f = si.to or si.subject
            nf = f if subject_is_subset(f, frm) else frm
            if svc(si.account, nf, visited, depth + 1):
                return True
        return False

    def stream(name: str, to: str, visited: set[str], depth: int = 0) -> bool:
        if depth > 1024:
            return True
        a = accs.get(name)
        if a is None or not any(ex.kind == "stream" and subject_is_subset(to, ex.subject)
                                for ex in a.exports):
            return False
        for si in added.get(name, ()):
            sto = _stream_local(si) if si.kind == "stream" else None
            if sto is None or not subjects_overlap(to, sto):
                continue
            if si.account in visited:
                return True
            visited.add(name)
            if stream(si.account, sto if subject_is_subset(sto, to) else to, visited, depth + 1):
                return True
        return False

    if im.kind == "service":
        frm = im.to or im.subject
        if "*" in im.subject or ">" in im.subject:     # transformUntokenize the local subject
            frm = re.sub(r"\$\d+|\{\{\s*wildcard\s*\(\s*\d+\s*\)\s*\}\}", "*", frm)
        return svc(im.account, frm, {acc.name})
    return (stream(im.account, _stream_local(im), {acc.name})
            or stream(im.account, im.subject, {acc.name}))


_Loader._import_forms_cycle = _import_forms_cycle


def _raise(loader: _Loader):
    errs = [f"{go_position(f, l, c)}: {msg}" for (f, l, c), msg in loader.errors]
    raise ConfigError(errs, loader.warnings)


def load_tree(tree: dict[str, Node], filename: str) -> Options:
    """Options from a parsed config.  Raises ConfigError for what nats-server refuses;
    what nats-server runs but natsd cannot serve is listed in ``Options.unsupported``
    (natsd.conf.unsupported) for the command line to refuse."""
    ld = _Loader(tree, filename)
    opts = ld.load()
    if ld.errors:
        _raise(ld)
    opts.config_digest = config_digest(tree)
    opts.unsupported = unsupported.config_refusals(tree)
    return opts


def load_string(text: str, filename: str = "<string>") -> Options:
    """Parse and load config text; raises ConfigError listing every problem.

    A syntax error is reported as nats-server reports it (`Parse error on line N: '...'`,
    no file name) when natsd knows nats-server's text for it."""
    try:
        tree = parse_string(text, filename)
    except LexError as e:
        raise ConfigError([go_syntax_error(e, text, filename)], plain=True) from None
    return load_tree(tree, filename)


def load_file(path: str) -> Options:
    """Parse and load a config file (includes relative to its directory)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError([go_read_error(path, e)], plain=True) from None
    return load_string(text, path)
