"""What a configuration reload may change: nats-server's diffOptions, checked before anything
is applied, so that a refused reload changes nothing.

nats-server walks its Options struct in field order and stops at the first field that changed
and cannot be reloaded: `config reload not supported for <Field>: old=<v>, new=<v>` (Go's %v
of the two values).  natsd keeps the same table: each row names the natsd option, the Go
field, and whether nats-server reloads it.  Where nats-server reloads a setting that natsd
does not apply on a running server yet (the routes of a running cluster, JetStream limits,
an account's imports, exports and mappings, leaf node remotes), natsd refuses the reload in
the same shape, saying so, rather than report success and ignore the change.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from natsd.gofmt import go_seconds

GO = "go"          # nats-server refuses a change of this field
NATSD = "natsd"    # nats-server reloads it; natsd cannot apply it to a running server yet
APPLIED = "ok"     # reloaded by both


def _v(value) -> str:
    """Go's %v of a scalar option value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_seconds(value)
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(_v(x) for x in value) + "]"
    if value is None:
        return "<nil>"
    return str(value)


def _count(value) -> str:
    return str(int(value))


def _go_map(value) -> str:
    """Go's %v of a map[string]string: its pairs in key order."""
    return "map[" + " ".join("%s:%s" % (k, value[k]) for k in sorted(value)) + "]"


def _policy(value) -> str:
    return value or "default"


# (natsd attribute, Go field, rule, how the value prints), in the order of nats-server's
# Options struct.  Options natsd does not have (or that only the command line sets) are not
# listed; the blocks (cluster, leafnodes, jetstream, accounts) have their own checks below.
FIELDS: list[tuple[str, str, str, Callable[[Any], str]]] = [
    ("server_name", "ServerName", GO, _v),
    ("host", "Host", GO, _v),
    ("port", "Port", GO, _v),
    ("client_advertise", "ClientAdvertise", APPLIED, _v),
    ("trace", "Trace", APPLIED, _v),
    ("debug", "Debug", APPLIED, _v),
    ("trace_verbose", "TraceVerbose", APPLIED, _v),
    ("trace_headers", "TraceHeaders", APPLIED, _v),
    ("disable_sublist_cache", "NoSublistCache", GO, _v),
    ("no_header_support", "NoHeaderSupport", GO, _v),
    ("logtime", "Logtime", APPLIED, _v),
    ("logtime_utc", "LogtimeUTC", APPLIED, _v),
    ("max_connections", "MaxConn", APPLIED, _v),
    ("max_subscriptions", "MaxSubs", GO, _v),
    ("max_sub_tokens", "MaxSubTokens", GO, _v),
    ("default_sentinel", "DefaultSentinel", APPLIED, _v),
    ("no_system_account", "NoSystemAccount", GO, _v),
    ("ping_interval", "PingInterval", APPLIED, _v),
    ("ping_max", "MaxPingsOut", APPLIED, _v),
    ("http_host", "HTTPHost", GO, _v),
    ("http_port", "HTTPPort", GO, _v),
    ("http_base_path", "HTTPBasePath", GO, _v),
    ("https_port", "HTTPSPort", GO, _v),
    ("auth_timeout", "AuthTimeout", APPLIED, _v),
    ("max_control_line", "MaxControlLine", APPLIED, _v),
    ("max_payload", "MaxPayload", APPLIED, _v),
    ("max_pending", "MaxPending", GO, _count),
    ("no_fast_producer_stall", "NoFastProducerStall", APPLIED, _v),
    ("default_js_domain", "JsAccDefaultDomain", GO, _go_map),
    ("prof_port", "ProfPort", GO, _v),
    ("pid_file", "PidFile", APPLIED, _v),
    ("ports_file_dir", "PortsFileDir", APPLIED, _v),
    ("log_file", "LogFile", APPLIED, _v),
    ("log_size_limit", "LogSizeLimit", GO, _v),
    ("log_max_num", "LogMaxFiles", GO, _v),
    ("syslog", "Syslog", APPLIED, _v),
    ("remote_syslog", "RemoteSyslog", APPLIED, _v),
    ("allow_non_tls", "AllowNonTLS", GO, _v),
    ("write_deadline", "WriteDeadline", APPLIED, _v),
    ("write_timeout", "WriteTimeout", GO, _policy),
    ("max_closed_clients", "MaxClosedClients", GO, _v),
    ("lame_duck_duration", "LameDuckDuration", GO, _v),
    ("lame_duck_grace_period", "LameDuckGracePeriod", GO, _v),
    ("max_traced_msg_len", "MaxTracedMsgLen", APPLIED, _v),
    ("connect_error_reports", "ConnectErrorReports", APPLIED, _v),
    ("reconnect_error_reports", "ReconnectErrorReports", APPLIED, _v),
    ("server_tags", "Tags", APPLIED, _v),
    ("server_metadata", "Metadata", APPLIED, _v),
]

# leafnodes{} fields nats-server's getLeafNodeOptionsChanges refuses (its checkConfigsEqual),
# as (natsd attribute, Go field).
_LEAF_FIELDS = [("host", "Host"), ("port", "Port"), ("username", "Username"), ("password", "Password"),
                ("account", "Account"), ("auth_timeout", "AuthTimeout"), ("advertise", "Advertise"),
                ("no_advertise", "NoAdvertise"), ("reconnect_delay", "ReconnectInterval"),
                ("min_version", "MinVersion"), ("isolate_leafnode_interest", "IsolateLeafnodeInterest"),
                ("write_deadline", "WriteDeadline"), ("write_timeout", "WriteTimeout")]


def _not_supported(field: str, old, new, fmt=_v) -> str:
    return "config reload not supported for %s: old=%s, new=%s" % (field, fmt(old), fmt(new))


def _by_natsd(what: str) -> str:
    return "config reload not supported by natsd yet for %s" % what


def _plain(x):
    """A comparable form of an option value (dataclasses as dicts)."""
    if dataclasses.is_dataclass(x):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                if f.name not in ("pos", "raw")}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _scalars(old, new) -> str | None:
    for attr, field, rule, fmt in FIELDS:
        a, b = getattr(old, attr), getattr(new, attr)
        if a == b or rule == APPLIED:
            continue
        return _not_supported(field, a, b, fmt)
    return None


def _no_auth_user(old, new) -> str | None:
    """nats-server: clearing no_auth_user is fine unless the user it named is still there;
    any other change is refused."""
    a, b = old.no_auth_user, new.no_auth_user
    if a == b:
        return None
    if a and not b and not any(u.username == a for u in new.users):
        return None
    return _not_supported("NoAuthUser", a, b)


def _system_account(old, new) -> str | None:
    a, b = old.system_account or "$SYS", new.system_account
    if (old.system_account or "") == (b or ""):
        return None
    if a == "$SYS" and not b:
        return None
    return _not_supported("SystemAccount", old.system_account or "$SYS", b)


def _cluster(old, new) -> str | None:
    a, b = old.cluster, new.cluster
    if a.host != b.host:
        return "config reload not supported for cluster host: old=%s, new=%s" % (a.host, b.host)
    if a.port != b.port:
        return "config reload not supported for cluster port: old=%d, new=%d" % (a.port, b.port)
    if _plain(a) != _plain(b) or a.raw.get("permissions") != b.raw.get("permissions"):
        return _by_natsd("the cluster block (routes, permissions, compression, pool size, "
                         "pinned accounts)")
    return None


def _gateway(old, new) -> str | None:
    """nats-server reloads nothing of the gateway block (it refuses any change)."""
    a, b = old.gateway, new.gateway
    if _plain(a) == _plain(b) and _plain(a.raw) == _plain(b.raw):
        return None
    def show(g):
        return "{%s %s %d}" % (g.name, g.host, g.port)
    return "config reload not supported for Gateway: old=%s, new=%s" % (show(a), show(b))


def _leafnode(old, new) -> str | None:
    a, b = old.leafnode, new.leafnode
    for attr, field in _LEAF_FIELDS:
        x, y = getattr(a, attr), getattr(b, attr)
        if x != y:
            fmt = _policy if attr == "write_timeout" else _v
            return 'config reload not supported for LeafNode: field "%s": old=%s, new=%s' % (
                field, fmt(x), fmt(y))
    if _plain(a.remotes) != _plain(b.remotes) or _plain(a.compression) != _plain(b.compression):
        return _by_natsd("leaf node remotes and compression")
    return None


def _jetstream(old, new) -> str | None:
    a, b = old.jetstream, new.jetstream
    if a.enabled != b.enabled:
        return _by_natsd("enabling or disabling JetStream")
    if not b.enabled:
        return None
    if a.store_dir != b.store_dir:
        return "config reload not supported for jetstream storage directory"
    if a.domain != b.domain:
        return _not_supported("JetStreamDomain", a.domain, b.domain)
    if (a.max_memory, a.max_store) != (b.max_memory, b.max_store):
        return _by_natsd("jetstream max memory and max store")
    if _plain(a) != _plain(b):
        return _by_natsd("the jetstream block's limits and settings")
    return None


def _accounts(old, new) -> str | None:
    """Users and their permissions reload (the authenticator is rebuilt); what else an
    account defines does not yet on natsd."""
    def shape(o):
        out = {}
        for name, acc in o.accounts.items():
            d = _plain(acc)
            d.pop("users", None)
            out[name] = d
        return out, _plain(o.mappings)
    if shape(old) != shape(new):
        return _by_natsd("accounts' imports, exports, mappings, limits and JetStream settings")
    return None


def _listeners(old, new) -> str | None:
    a, b = (_tls_rate(o) for o in (old, new))
    if a != b:
        return _not_supported("TLSRateLimit", a, b)
    if _plain(old.websocket.raw) != _plain(new.websocket.raw):
        return "config reload not supported for Websocket"
    if old.operator_mode != new.operator_mode or _plain(old.resolver) != _plain(new.resolver):
        return _by_natsd("the operator and account resolver")
    return None


def _tls_rate(o) -> int:
    raw = o.tls_config.raw if o.tls_config.configured else {}
    return next((v for k, v in raw.items() if k.lower() == "connection_rate_limit"), 0) or 0


CHECKS = [_scalars, _no_auth_user, _system_account, _cluster, _gateway, _leafnode, _jetstream,
          _accounts, _listeners]


def reload_refusal(old, new) -> str | None:
    """Why `new` options cannot replace `old` on a running server (nats-server's words where
    it refuses too), or None."""
    for check in CHECKS:
        why = check(old, new)
        if why:
            return why
    return None
