"""Config tree -> Options, with validation and `file:line:col: message` errors.

Owns the meaning of every config key nats-server accepts (same names, aliases
and units), collects ALL errors before raising one ConfigError, and checks what
can be checked without a running server (unknown fields, accounts referenced by
imports/remotes, duplicate users, bad durations and sizes, TLS certificate files,
operator JWT files, trusted keys), with nats-server's texts and positions.  Keys
nats-server accepts but natsd does not implement are stored (Options.extra / raw
blocks); those asking for what natsd cannot serve are listed in Options.unsupported
(natsd.conf.unsupported) for the command line to refuse.

This module reads the top-level keys; each section has its own module (auth, accounts,
jetstream, links, operator) mixed into the loader, on the typed readers of reader.py.
"""
from __future__ import annotations

from typing import Any, Callable

from natsd.options import Options
from natsd.conf import unsupported
from natsd.conf.accounts import AccountSections
from natsd.conf.auth import AuthSections
from natsd.conf.errors import ConfigError, go_position, go_read_error, go_syntax_error
from natsd.conf.jetstream import JetStreamSection
from natsd.conf.lexer import LexError
from natsd.conf.links import LinkSections
from natsd.conf.operator import OperatorSection
from natsd.conf.parser import Node, config_digest, parse_string
from natsd.conf.reader import GO_TYPE


class _Loader(AuthSections, AccountSections, JetStreamSection, LinkSections, OperatorSection):
    """One config file read: the top-level keys here, each section in its mixin."""

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
        self.operator_accounts()
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
                d = self.duration(n, k, None, int_ok=False)
                if d is None:
                    return
                if minimum is not None and d < minimum:
                    self.err(n, f"invalid {k} of {n.value}, minimum is 30 seconds")
                elif d < 0:
                    self.err(n, f"invalid {k}, needs to be positive")
                else:
                    setattr(o, name, d)
            return f

        def tags(k, n):
            """(nats-server's server_tags errors)"""
            if n.kind == "string":
                o.server_tags.append(n.value)
            elif n.kind != "array":
                self.err(n, f"error parsing tags: unsupported type {GO_TYPE[n.kind]}")
            elif any(t.kind != "string" for t in n.value):
                self.err(n, "error parsing tags: unsupported type *conf.token where string is expected")
            else:
                o.server_tags.extend(t.value for t in n.value)

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

        def no_auth_user(k, n):
            o.no_auth_user = self.s(n, k)
            self.no_auth_node = n

        def system_account(k, n):
            if n.kind != "string":
                self.err(n, "system account name must be a string")
                return
            o.system_account = n.value
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
            "write_timeout": lambda k, n: setattr(o, "write_timeout", self.write_policy(n, k)),
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
        h["default_sentinel"] = attr("default_sentinel", self.s)
        h["no_fast_producer_stall"] = attr("no_fast_producer_stall", self.b)
        h["proxy_protocol"] = attr("proxy_protocol", self.b)
        for k in ("prof_block_rate", "ocsp",
                  "operator", "operators", "roots", "root", "root_operators", "root_operator",
                  "resolver", "account_resolver", "accounts_resolver", "resolver_tls", "resolver_preload",
                  "resolver_pinned_accounts", "trusted", "trusted_keys", "feature_flags",
                  "ocsp_cache", "proxies"):
            h[k] = extra
        for k in ("operator", "operators", "roots", "root", "root_operators", "root_operator"):
            h[k] = operator
        h["trusted"] = h["trusted_keys"] = trusted

        def resolver(k, n):
            self.resolver(k, n)
            extra(k, n)

        def resolver_preload(k, n):
            self.resolver_preload(k, n)
            extra(k, n)
        h["resolver"] = h["account_resolver"] = h["accounts_resolver"] = resolver   # nats-server's aliases
        h["resolver_preload"] = resolver_preload
        h["resolver_pinned_accounts"] = self.resolver_pinned_accounts

        def resolver_tls(k, n):
            if self.tls(n) is not None:
                self.resolver_tls_block = n.plain()
        h["resolver_tls"] = resolver_tls
        h["default_js_domain"] = self.default_js_domain
        return h

    def default_js_domain(self, k: str, n: Node):
        """`default_js_domain: { <account>: <domain> }` (nats-server's JsAccDefaultDomain)."""
        if n.kind != "map":
            self.err(n, f"error default_js_domain config: unsupported type {GO_TYPE[n.kind]}")
            return
        out = {}
        for acc, v in n.value.items():
            if v.kind != "string":
                self.err(n, f"interface conversion: interface {{}} is {GO_TYPE[v.kind]}, not string")
                return
            out[acc] = v.value
        self.o.default_js_domain = out




def _raise(loader: _Loader):
    errs = [f"{go_position(*pos)}: {msg}" if pos else msg for pos, msg in loader.errors]
    raise ConfigError(errs, loader.warnings)


def load_tree(tree: dict[str, Node], filename: str) -> Options:
    """Options from a parsed config.  Raises ConfigError for what nats-server refuses;
    what nats-server runs but natsd cannot serve is listed in ``Options.unsupported``
    (natsd.conf.unsupported) for the command line to refuse."""
    ld = _Loader(tree, filename)
    opts = ld.load()
    if ld.errors:
        _raise(ld)
    if opts.gateway.name and not opts.cluster.name:
        opts.cluster.name = opts.gateway.name       # nats-server's validateCluster: not dynamic
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

