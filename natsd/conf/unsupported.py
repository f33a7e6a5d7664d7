"""What natsd cannot serve yet: the one table of refused config keys and flags.

nats-server accepts these and acts on them (MQTT, TLS on gateway links, ...).  natsd must not
start as if they were not there -- that would, for instance, leave IoT devices without the
broker they were promised, or a gateway link in plaintext that was asked for TLS -- so it
refuses them:

    natsd: server.conf:2:1: MQTT is not supported by natsd yet

nats-server's own errors come first: a config or flag nats-server itself refuses (a missing
certificate file, an unknown field, ...) gets nats-server's error, in conf/load.py and
flags.py.  Only a config nats-server would run reaches this table.

When natsd learns a feature, delete its rows here (and its entry in START_CHECKS).

Clustering runs (natsd/cluster/), and so do gateways (natsd/gateways/).
"""
from __future__ import annotations

from typing import Callable, Iterator

from natsd.auth.jwt.accounts import UNSERVED

from natsd.conf.errors import go_position
from natsd.gofmt import go_quote
from natsd.conf.parser import Node

# -- when a key asks for the feature --------------------------------------------------


def _no_openssl(n: Node) -> bool:
    from natsd.net.tls import NO_OPENSSL_CIPHERS
    return n.kind == "array" and any(it.kind == "string" and it.value in NO_OPENSSL_CIPHERS for it in n.value)


def _mlkem_lacking(n: Node) -> bool:
    from natsd.net.tls import MLKEM_CURVES, openssl_has_mlkem
    return (n.kind == "array" and any(it.kind == "string" and it.value in MLKEM_CURVES for it in n.value)
            and not openssl_has_mlkem())


def _always(n: Node) -> bool:
    return True


def _true(n: Node) -> bool:
    return n.kind == "bool" and n.value is True


def _nonzero(n: Node) -> bool:
    return n.kind != "integer" or n.value != 0


def _not_default_flag(n: Node) -> bool:
    """A `feature_flags {}` entry that is not what nats-server 2.15.1 does by default (natsd
    behaves as those defaults)."""
    from natsd.monitor.varz import FEATURE_FLAGS
    return n.key.lower() not in FEATURE_FLAGS or n.value != FEATURE_FLAGS[n.key.lower()]


def _owner(n: Node) -> bool:
    """`cluster_traffic: owner` (natsd's replicated traffic runs in the system account)."""
    return not (n.kind == "string" and n.value.lower() in ("", "system"))


def _listen_port(n: Node) -> int:
    """The port of a `port`/`listen` value (0 when there is none)."""
    if n.kind == "integer":
        return n.value
    if n.kind == "string":
        _, _, port = n.value.rpartition(":")
        try:
            return int(port)
        except ValueError:
            return 0
    return 0


def _account_claims(n: Node) -> dict:
    """The `nats` claims of an account JWT in resolver_preload ({} when it does not decode:
    the loader reports that)."""
    from natsd.auth.jwt import claims
    if n.kind != "string":
        return {}
    try:
        return claims.decode(n.value).nats
    except claims.JwtError:
        return {}


def _preload_uses(used: Callable[[dict], bool]) -> Callable[[Node], bool]:
    return lambda n: used(_account_claims(n))


# -- the table -------------------------------------------------------------------------
# The `tls {}` blocks of links and other listeners
# (the client, leaf node and WebSocket ports' `tls {}` have it: natsd/net/ocsppeer.py)
_TLS_BLOCKS = ["cluster.tls", "gateway.tls", "gateway.gateways[].tls", "leafnodes|leaf.remotes[].tls", "mqtt.tls"]

# Config rows: (feature, key path, when).  A path is dot-separated keys (case-insensitive,
# `|` separates aliases), `*` is any key of a map, `[]` after a key walks the items of
# its array.  The error points at the last key of the path.
CONFIG: list[tuple[str, str, Callable[[Node], bool]]] = [
] + [(feature, "resolver_preload.*", _preload_uses(used)) for feature, used in UNSERVED] + [
    ("trusted proxy authentication", "proxies", _always),
    ("trusted proxy authentication", "authorization.proxy_required", _true),
    ("trusted proxy authentication", "authorization.users[].proxy_required", _true),
    ("trusted proxy authentication", "accounts.*.users[].proxy_required", _true),
    ("trusted proxy authentication", "leafnodes|leaf.authorization.proxy_required", _true),
    ("trusted proxy authentication", "leafnodes|leaf.authorization.users[].proxy_required", _true),
    ("OCSP stapling", "ocsp", _always),
    ("OCSP stapling", "ocsp_cache", _always),
] + [("OCSP peer verification", tls + ".ocsp_peer", _always) for tls in _TLS_BLOCKS] + [
    ("the insecure cipher suites OpenSSL no longer implements (3DES, RC4)", tls + ".cipher_suites", _no_openssl)
    for tls in ["tls", "websocket|ws.tls", "leafnodes|leaf.tls"] + _TLS_BLOCKS] + [
    ("post-quantum TLS groups with this OpenSSL (before 3.5)", tls + ".curve_preferences", _mlkem_lacking)
    for tls in ["tls", "websocket|ws.tls", "leafnodes|leaf.tls"] + _TLS_BLOCKS] + [
    ("JetStream cluster traffic in the account", "accounts.*.jetstream.cluster_traffic", _owner),
    ("block profiles", "prof_block_rate", _nonzero),
    ("feature flags other than nats-server 2.15's defaults", "feature_flags.*", _not_default_flag),
    ("JetStream tuning of nats-server's own internals",
     "jetstream.tpm|info_queue_limit|meta_compact|meta_compact_size|meta_compact_sync|max_concurrent_io|"
     "request_queue_limit|max_outstanding_catchup",
     _always),
    ("JetStream domain extension hints", "jetstream.extension_hint", _always),
    ("JetStream cluster migration of leaf node remotes",
     "leafnodes|leaf.remotes[].jetstream_cluster_migrate|js_cluster_migrate", _true),
]

# Flag rows: (feature, Options attributes the flags set).  A flag asks for the feature
# when it is given with a non-empty, non-zero, non-false value.
FLAGS: list[tuple[str, tuple[str, ...]]] = []

NOT_SUPPORTED = "%s is not supported by natsd yet"


def _walk(m: dict[str, Node], parts: list[str]) -> Iterator[Node]:
    """Nodes at `parts` below the map `m`."""
    head, rest = parts[0], parts[1:]
    items = head.endswith("[]")
    names = set(head.removesuffix("[]").split("|"))
    for key, n in m.items():
        if "*" not in names and key.lower() not in names:
            continue
        found = ([it for it in n.value] if n.kind == "array" else []) if items else [n]
        for it in found:
            if not rest:
                yield it
            elif it.kind == "map":
                yield from _walk(it.value, rest)


PROXY_WITH_TLS = "the PROXY protocol with TLS on the client port"


def _proxy_protocol_with_tls(tree: dict[str, Node]) -> list[tuple[str, str]]:
    """natsd reads a PROXY protocol header on plaintext client connections only."""
    if not any(True for _ in _walk(tree, ["tls"])):
        return []
    return [("proxy_protocol", f"{go_position(*n.pos)}: {NOT_SUPPORTED % PROXY_WITH_TLS}")
            for n in _walk(tree, ["proxy_protocol"]) if _true(n)]


def config_refusals(tree: dict[str, Node]) -> list[tuple[str, str]]:
    """[(path, "file:line:col: <feature> is not supported by natsd yet")] for every key of
    the config that asks for something natsd does not serve."""
    out: list[tuple[str, str]] = _proxy_protocol_with_tls(tree)
    seen: set[tuple] = set()
    for feature, path, when in CONFIG:
        for n in _walk(tree, path.split(".")):
            if not when(n):
                continue
            f, line, col = n.pos
            if (f, line, col, feature) in seen:
                continue
            seen.add((f, line, col, feature))
            out.append((path, f"{go_position(f, line, col)}: {NOT_SUPPORTED % feature}"))
    return out


def flag_refusals(given: list[tuple[str, str, object]]) -> list[str]:
    """["--<flag>: <feature> is not supported by natsd yet"] for the flags (as typed, with
    their dashes) that ask for something natsd does not serve."""
    features = {dest: feature for feature, dests in FLAGS for dest in dests}
    out = []
    for flag, dest, value in given:
        feature = features.get(dest)
        if feature and value not in (False, 0, "", None):
            msg = f"{flag}: {NOT_SUPPORTED % feature}"
            if msg not in out:
                out.append(msg)
    return out


# -- nats-server's own start-up refusals for these features ----------------------------
# nats-server validates some of these settings only when the server starts (`-t` does not
# see them) and exits with `nats-server: <error>`.  A plain `natsd` start reports the same
# error before its own refusal.  Each check returns nats-server's error text or None.


def _leaf_mixed_urls(o) -> str | None:
    for r in o.leafnode.remotes:
        ws = [u.lower().startswith(("ws://", "wss://")) for u in r.urls]
        if any(ws) and not all(ws):
            quoted = " ".join('"%s"' % u for u in r.urls)
            return f"remote leaf node configuration cannot have a mix of websocket and non-websocket urls: [{quoted}]"
    return None


def _gateway(o) -> str | None:
    g = o.gateway
    if not g.name and not g.port:
        return None
    if not g.name:
        return "gateway has no name"
    if " " in g.name:
        return "gateway name cannot contain spaces"
    if not g.port:
        return f'gateway "{g.name}" has no port specified (select -1 for random port)'
    for i, r in enumerate(g.gateways):
        if not r.name:
            return f"gateway in the list {i} has no name"
        if not r.urls:
            return f'gateway "{r.name}" has no URL'
    return None


def _cluster_gateway_name(o) -> str | None:
    """nats-server's validateCluster: a cluster named otherwise than its gateway."""
    if o.gateway.name and o.cluster.name and o.cluster.name != o.gateway.name:
        return "cluster name conflicts between cluster and gateway definitions"
    return None


def _raw_port(block) -> int:
    raw = block.raw if isinstance(block.raw, dict) else {}
    port = 0
    for k, v in raw.items():
        if k.lower() == "port" and isinstance(v, int) and not isinstance(v, bool):
            port = v
        elif k.lower() == "listen":
            port = _listen_port(Node(v, "integer" if isinstance(v, int) else "string", "", 0, 0))
    return port


def _raw_get(block, key):
    raw = block.raw if isinstance(block.raw, dict) else {}
    return next((v for k, v in raw.items() if k.lower() == key), None)


def _mqtt(o) -> str | None:
    """nats-server's validateMQTTOptions, then what natsd's MQTT does not serve yet."""
    if not o.mqtt.configured or _raw_port(o.mqtt) == 0:
        return None
    if not o.server_name and (o.cluster.port or o.gateway.port):
        return "mqtt requires server name to be explicitly set"
    auth = _raw_get(o.mqtt, "authorization") or _raw_get(o.mqtt, "authentication") or {}
    if (o.users or o.nkeys) and isinstance(auth, dict):
        keys = {k.lower() for k in auth}
        if keys & {"user", "username"}:
            return "mqtt authentication username not compatible with presence of users/nkeys"
        if "token" in keys:
            return "mqtt authentication token not compatible with presence of users/nkeys"
    if (not o.jetstream.enabled and not o.cluster.port and not o.gateway.port
            and not o.leafnode.port and not o.leafnode.remotes):
        return "mqtt requires JetStream to be enabled if running in standalone mode"
    return None


def _websocket(o) -> str | None:
    if not o.websocket.configured or _raw_port(o.websocket) == 0:
        return None
    if _raw_get(o.websocket, "tls") is None and _raw_get(o.websocket, "no_tls") is not True:
        return "websocket requires TLS configuration"
    return None


def _route_compression(o) -> str | None:
    from natsd.net.compression import CompressionError, Compression, S2_FAST
    if not o.cluster.port:
        return None
    try:
        Compression.parse(o.cluster.compression, S2_FAST)
    except CompressionError as e:
        return str(e)
    return None


def _jetstream_cluster(o) -> str | None:
    if o.jetstream.enabled and o.cluster.port and not o.server_name:
        return "jetstream cluster requires `server_name` to be set"
    if o.jetstream.enabled and o.cluster.port and not o.cluster.name:
        return "jetstream cluster requires `cluster.name` to be set"
    return None


def _default_js_domain(o) -> str | None:
    """nats-server's validateJetStreamOptions for `default_js_domain`."""
    from natsd.subject import is_valid_subject
    if not o.default_js_domain:
        return None
    if not o.operator_mode or o.trusted_only:
        for name, domain in o.default_js_domain.items():
            if name == "$G":
                continue
            acc = o.accounts.get(name)
            if acc is None:
                return "in non operator mode, `default_js_domain` references non existing account %s" % go_quote(name)
            if acc.jetstream and domain:
                return "default_js_domain contains account name %s with enabled JetStream" % go_quote(name)
    else:
        from natsd.auth import nkey
        for name in o.default_js_domain:
            if not nkey.is_valid_public(name, nkey.ACCOUNT):
                return ("default_js_domain contains account name %s, which is not a valid public account nkey"
                        % go_quote(name))
    system = o.system_account or "$SYS"
    for name, domain in o.default_js_domain.items():
        if name == system:
            return "system account %s can not be in default_js_domain" % go_quote(name)
        if domain and not is_valid_subject("$JS.%s.API" % domain):
            return "default_js_domain contains account %s with invalid domain name %s" % (go_quote(name), go_quote(domain))
    return None


def _operators(o) -> str | None:
    """nats-server's validateTrustedOperators (it checks nothing but the sentinel without an
    operator JWT, `trusted` keys alone included)."""
    if not o.operator_mode or o.trusted_only:
        return "default sentinel requires operators and accounts" if o.default_sentinel else None
    if o.default_sentinel:
        err = _sentinel_error(o.default_sentinel)
        if err:
            return err
    if not o.resolver:
        return "operators require an account resolver to be configured"
    if o.accounts:
        return "operators do not allow Accounts to be configured directly"
    if o.users or o.nkeys:
        return "operators do not allow users to be configured directly"
    if o.resolver_pinned_accounts:
        from natsd.auth import nkey
        from natsd.gofmt import go_quote
        for key in sorted(o.resolver_pinned_accounts):
            if not nkey.is_valid_public(key, nkey.ACCOUNT):
                return "pinned account key %s is not a valid public account nkey" % go_quote(key)
    return None


def _sentinel_error(token: str) -> str | None:
    """A default sentinel must be a bearer user JWT (or look like a scoped user: an issuer
    account and no permissions of its own, checked when it is used)."""
    from natsd.auth.jwt import claims
    try:
        uc = claims.decode_kind(token, "user")
    except claims.JwtError:
        return "default sentinel JWT not valid"
    nats = uc.nats
    if nats.get("bearer_token"):
        return None
    perms_empty = not any((nats.get("pub") or {}).get(k) or (nats.get("sub") or {}).get(k)
                          for k in ("allow", "deny")) and nats.get("resp") is None
    if uc.issuer_account and perms_empty:
        return None
    return "default sentinel must be a bearer token"


def _leaf_min_version(o) -> str | None:
    """nats-server's checkLeafMinVersionConfig."""
    from natsd import version_at_least
    mv = o.leafnode.min_version
    if mv and version_at_least(mv, "0.0.0") and not version_at_least(mv, "2.8.0"):
        return "the minimum version should be at least 2.8.0"
    return None


def _leaf_gateway_system_account(o) -> str | None:
    """nats-server's validateLeafNode: a leaf node port and a gateway need a system account."""
    if o.leafnode.port and (o.gateway.name or o.gateway.port) and not o.system_account:
        return "leaf nodes and gateways (both being defined) require a system account to also be configured"
    return None


def _ocsp_peer_needs_mtls(o) -> str | None:
    """nats-server's plugTLSOCSPPeer: checking peers' certificates needs them asked for."""
    for raw in (o.tls_config.raw if o.tls_config.configured else {}, o.leafnode.tls or {}):
        peer = next((v for k, v in raw.items() if k.lower() == "ocsp_peer"), None)
        if peer is None:
            continue
        from natsd.net.ocsppeer import parse     # (cryptography: 6 MB, loaded when asked for)
        verify = any(raw.get(k) is True for k in ("verify", "verify_and_map", "verify_cert_and_check_known_urls"))
        if not verify and parse(peer)["verify"]:
            return "OCSP peer verification for client connections requires TLS verify (mTLS) to be enabled"
    return None


def _read_only_preloads(o) -> str | None:
    """nats-server's configureResolver (after validateOptions): a URL resolver takes no preloads."""
    if o.resolver.kind == "URL" and o.resolver_preload:
        return "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR"
    return None


# In nats-server's order: validateOptions, then configureResolver (natsd's own refusals last).
START_CHECKS: list[Callable] = [_operators, _leaf_mixed_urls, _leaf_min_version, _leaf_gateway_system_account,
                                _gateway, _cluster_gateway_name, _mqtt, _websocket,
                                _default_js_domain, _route_compression, _jetstream_cluster, _read_only_preloads,
                                _ocsp_peer_needs_mtls]


def start_error(opts) -> str | None:
    """The error nats-server's start-up validation gives for these features, if any."""
    for check in START_CHECKS:
        err = check(opts)
        if err:
            return err
    return None
