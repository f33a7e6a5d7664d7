"""Options: every server setting natsd knows, with nats-server's defaults.

Owns the plain data the rest of the server reads (``Options`` and the nested
dataclasses).  Filling it from a config file is ``natsd.conf.load``; from the
command line is ``natsd.conf.flags``.  No behaviour lives here beyond defaults.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# (file, line, col) of the config entry a value came from; None when the value
# did not come from a config file (defaults, flags).
Pos = tuple[str, int, int] | None

DEFAULT_PORT = 4222
DEFAULT_HOST = "0.0.0.0"
DEFAULT_LEAFNODE_PORT = 7422  # what `-p`-less remotes dial; listener is off unless configured
DEFAULT_MAX_PAYLOAD = 1024 * 1024
DEFAULT_MAX_PENDING = 64 * 1024 * 1024
DEFAULT_SYSTEM_ACCOUNT = "$SYS"
GLOBAL_ACCOUNT = "$G"


@dataclass
class SubjectPermission:
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


@dataclass
class ResponsePermission:
    max_msgs: int = 1          # nats-server DEFAULT_ALLOW_RESPONSE_MAX_MSGS
    expires: float = 120.0     # seconds; DEFAULT_ALLOW_RESPONSE_EXPIRATION = 2m


@dataclass
class Permissions:
    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    response: ResponsePermission | None = None


@dataclass(kw_only=True)
class ConfiguredUser:
    """What a configured user has, however it authenticates (keyword-only, after the
    subclass's credentials)."""
    permissions: Permissions | None = None
    account: str | None = None
    allowed_connection_types: list[str] = field(default_factory=list)
    proxy_required: bool = False
    pos: Pos = None


@dataclass
class User(ConfiguredUser):
    username: str = ""
    password: str = ""


@dataclass
class NkeyUser(ConfiguredUser):
    nkey: str = ""


@dataclass
class MappingDest:
    subject: str = ""
    weight: int = 100          # percent; 100 when the mapping is unweighted
    cluster: str = ""


@dataclass
class ServiceLatency:
    subject: str = ""
    sampling: int = 100        # percent; 0 means "headers" (sample when header present)


@dataclass
class ExportOpts:
    kind: str = "stream"       # "stream" | "service"
    subject: str = ""
    accounts: list[str] | None = None   # None = public export
    response_type: str = "Singleton"     # "Singleton" | "Stream" | "Chunked"
    response_threshold: float = 0.0      # seconds, 0 = nats-server default (2m)
    latency: ServiceLatency | None = None
    account_token_position: int = 0     # >0: that token of an import's subject must be the importer
    allow_trace: bool = False
    pos: Pos = None

    def position_is_wildcard(self) -> bool:
        """An account token position must point at a `*` of the subject (nats-server's
        setExportAuth; a subject without one at that position is "invalid subject")."""
        tokens = self.subject.split(".")
        pos = self.account_token_position
        return pos <= 0 or (pos <= len(tokens) and tokens[pos - 1] == "*")

    def allows(self, importer: str, subject: str) -> bool:
        """May account `importer` import `subject` (a subject this export covers)? With an
        account token position, only when that token of `subject` is the importer's name
        (nats-server's checkAuth: an import of the export's own wildcard subject never is);
        otherwise when the export is public or lists the importer. Activation tokens are
        natsd.auth.jwt.exports' part."""
        pos = self.account_token_position
        if pos > 0:
            tokens = subject.split(".")
            return subject != self.subject and pos <= len(tokens) and tokens[pos - 1] == importer
        return self.accounts is None or importer in self.accounts


@dataclass
class ImportOpts:
    kind: str = "stream"       # "stream" | "service"
    account: str = ""
    subject: str = ""
    to: str = ""
    prefix: str = ""           # stream imports only (legacy)
    share: bool = False
    allow_trace: bool = False
    pos: Pos = None


@dataclass
class AccountLimits:
    max_connections: int = -1  # -1 = unlimited (nats-server jwt.NoLimit)
    max_subscriptions: int = -1
    max_payload: int = -1
    max_leafnodes: int = -1


@dataclass
class AccountOpts:
    name: str = ""
    users: list[User | NkeyUser] = field(default_factory=list)
    nkey: str = ""
    jetstream: bool = False
    jetstream_limits: dict[str, Any] = field(default_factory=dict)
    exports: list[ExportOpts] = field(default_factory=list)
    imports: list[ImportOpts] = field(default_factory=list)
    mappings: dict[str, list[MappingDest]] = field(default_factory=dict)
    limits: AccountLimits = field(default_factory=AccountLimits)
    default_permissions: Permissions | None = None
    msg_trace: dict[str, Any] = field(default_factory=dict)
    pos: Pos = None


@dataclass
class AuthCalloutOpts:
    """`authorization { auth_callout { ... } }`: who answers for users the config does not know."""
    issuer: str = ""                # the account nkey that signs the answers
    account: str = "$G"             # where requests are sent (`$SYS.REQ.USER.AUTH`)
    auth_users: list[str] = field(default_factory=list)   # users that log in as configured
    xkey: str = ""                  # the service's public xkey: requests are encrypted to it
    allowed_accounts: list[str] = field(default_factory=list)


@dataclass
class ResolverOpts:
    """Operator mode's account resolver (`resolver:`), as nats-server's config reads it."""
    kind: str = ""                  # "MEMORY", "URL", "FULL" or "CACHE"; "" = none configured
    url: str = ""                   # URL(...)
    dir: str = ""                   # FULL / CACHE: the directory of <account key>.jwt files
    delete: str = ""                # FULL: "" (no deletes), "rename" (allow_delete) or "hard"
    limit: int = 0                  # most JWTs held (0 = no limit)
    ttl: float = 0.0                # CACHE: seconds a JWT is kept (0 = for ever)
    interval: float = 0.0           # FULL: seconds between store syncs (0 = a minute)
    timeout: float = 1.9            # seconds an account fetch waits (DEFAULT_ACCOUNT_FETCH_TIMEOUT)
    tls: dict[str, Any] | None = None   # resolver_tls: the URL resolver's HTTPS client settings

    def __bool__(self):
        return bool(self.kind)


@dataclass
class JetStreamOpts:
    enabled: bool = False
    store_dir: str = ""
    max_memory: int = -1       # -1 = server picks (75% of RAM)
    max_store: int = -1        # -1 = server picks (1TB or disk)
    domain: str = ""
    sync_interval: float | str = 120.0   # seconds, or "always"
    sync_always: bool = False
    sync_interval_set: bool = False      # `sync_interval` given in the config: lazy (timer) sync
    strict: bool = True
    unique_tag: str = ""
    max_buffered_msgs: int = 0      # a stream's ingest queue: 0 is nats-server's 100,000 messages
    max_buffered_size: int = 0      # ... and 128 MiB
    max_outstanding_catchup: int = 0
    request_queue_limit: int = 0
    key: str = ""
    prev_key: str = ""
    cipher: str = ""
    extension_hint: str = ""
    limits: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # accepted, not used yet


@dataclass
class LeafProxyOpts:
    """A leaf remote's `proxy {}`: the HTTP proxy its WebSocket connections tunnel through."""
    url: str = ""
    username: str = ""
    password: str = ""
    timeout: float = 0.0        # 0: the remote's dial timeout


@dataclass
class RemoteLeafOpts:
    urls: list[str] = field(default_factory=list)
    account: str = ""
    credentials: str = ""
    nkey: str = ""
    deny_imports: list[str] = field(default_factory=list)
    deny_exports: list[str] = field(default_factory=list)
    hub: bool = False
    disabled: bool = False
    no_randomize: bool = False
    compression: Any = None
    tls: dict[str, Any] | None = None
    first_info_timeout: float = 0.0     # 0: nats-server's 1s wait for the hub's first INFO
    dial_timeout: float = 0.0           # 0: the leafnodes block's (else nats-server's 1s)
    isolate: bool = False               # not told of other leaf nodes' interest (LocalIsolation)
    proxy: "LeafProxyOpts" = field(default_factory=lambda: LeafProxyOpts())
    request_isolation: bool = False     # asks the hub not to tell it of its other leafs' interest
    ignore_discovered_servers: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    pos: Pos = None


@dataclass
class LeafNodeOpts:
    host: str = DEFAULT_HOST
    port: int = 0              # 0 = no listener (only `port`/`listen` turn it on)
    advertise: str = ""
    no_advertise: bool = False
    username: str = ""
    password: str = ""
    dial_timeout: float = 0.0  # 0: nats-server's DEFAULT_ROUTE_DIAL (1s) for its remotes
    nkey: str = ""             # authorization { nkey }: the one public user key leaf nodes sign with
    account: str = ""
    users: list[User] = field(default_factory=list)
    auth_timeout: float = 0.0
    remotes: list[RemoteLeafOpts] = field(default_factory=list)
    min_version: str = ""
    reconnect_delay: float = 1.0
    compression: Any = None
    isolate_leafnode_interest: bool = False
    tls: dict[str, Any] | None = None
    write_deadline: float = 0.0     # 0: the server's write_deadline
    write_timeout: str = "default"  # default (retry), close or retry
    configured: bool = False


@dataclass
class ClusterOpts:
    name: str = ""
    host: str = ""
    port: int = 0
    listen: str = ""           # raw --cluster / listen URL
    routes: list[str] = field(default_factory=list)
    advertise: str = ""
    no_advertise: bool = False
    connect_retries: int = 0
    pool_size: int = 3
    accounts: list[str] = field(default_factory=list)   # pinned: a route of their own
    ping_interval: float = 0.0      # 0: the server's ping_interval (at most 30s on routes)
    ping_max: int = 0
    connect_backoff: bool = False
    compression: Any = None
    authorization: dict[str, Any] | None = None
    tls: dict[str, Any] | None = None
    write_deadline: float = 0.0     # 0: the server's write_deadline
    write_timeout: str = "default"  # default (retry), close or retry
    # route permissions: publish = import (what we ask routes for), subscribe = export (the
    # interest of routes we accept)
    permissions: Permissions | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    configured: bool = False


@dataclass
class RemoteGatewayOpts:
    """One entry of `gateway { gateways: [...] }`: a cluster, the URLs to reach it and, when
    dialing it needs other certificates than the gateway's own `tls {}`, its `tls {}`."""
    name: str = ""
    urls: list[str] = field(default_factory=list)
    tls: dict[str, Any] | None = None


@dataclass
class GatewayOpts:
    name: str = ""
    host: str = ""
    port: int = 0
    advertise: str = ""
    username: str = ""
    password: str = ""
    auth_timeout: float = 0.0
    connect_retries: int = 0
    connect_backoff: bool = False
    reject_unknown: bool = False
    write_deadline: float = 0.0     # 0: the server's write_deadline
    write_timeout: str = "default"  # default (retry), close or retry
    tls: dict[str, Any] | None = None
    gateways: list[RemoteGatewayOpts] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    configured: bool = False


@dataclass
class RawBlock:
    """A subsystem natsd parses but does not run yet (websocket, mqtt, tls...)."""
    configured: bool = False
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class Options:
    config_file: str | None = None
    server_name: str = ""
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    client_advertise: str = ""
    http_host: str = ""                 # "": the client host (nats-server's baseline)
    allow_non_tls: bool = False         # a TLS client port also takes plaintext clients
    http_port: int = 0
    https_port: int = 0
    http_base_path: str = ""
    max_connections: int = 64 * 1024
    max_subscriptions: int = 0
    max_sub_tokens: int = 0
    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_pending: int = DEFAULT_MAX_PENDING
    max_control_line: int = 4096
    ping_interval: float = 120.0
    ping_max: int = 2
    write_deadline: float = 10.0
    write_timeout: str = "default"  # clients: default (close), close or retry
    no_fast_producer_stall: bool = False   # never pause publishers for a slow subscriber
    default_sentinel: str = ""      # operator mode: the bearer user JWT of CONNECTs without one
    auth_timeout: float = 0.0                # 0: nats-server's default (2 s, or the TLS timeout + 1 s)
    no_header_support: bool = False
    disable_sublist_cache: bool = False
    max_closed_clients: int = 10000
    lame_duck_duration: float = 120.0
    lame_duck_grace_period: float = 10.0
    pid_file: str = ""
    ports_file_dir: str = ""
    connect_error_reports: int = 3600
    reconnect_error_reports: int = 1
    prof_port: int = 0

    debug: bool = False
    trace: bool = False
    trace_verbose: bool = False
    trace_headers: bool = False
    logtime: bool = True
    logtime_utc: bool = False
    log_file: str = ""
    log_size_limit: int = 0
    log_max_num: int = 0
    syslog: bool = False
    remote_syslog: str = ""
    max_traced_msg_len: int = 0

    username: str = ""
    password: str = ""
    authorization: str = ""    # token
    users: list[User] = field(default_factory=list)
    nkeys: list[NkeyUser] = field(default_factory=list)
    no_auth_user: str = ""
    default_permissions: Permissions | None = None
    accounts: dict[str, AccountOpts] = field(default_factory=dict)
    system_account: str = ""   # "" means the default "$SYS"
    no_system_account: bool = False
    mappings: dict[str, list[MappingDest]] = field(default_factory=dict)
    mappings_pos: dict[str, Pos] = field(default_factory=dict)
    # operator (JWT) mode: the operators' keys and signing keys, and the accounts whose JWTs
    # the resolver is given at start (resolver_preload: public key -> account JWT)
    auth_callout: AuthCalloutOpts | None = None
    operator_mode: bool = False
    trusted_only: bool = False      # operator mode from `trusted` keys alone (no operator JWT)
    default_js_domain: dict[str, str] = field(default_factory=dict)   # account -> JetStream domain
    proxy_protocol: bool = False    # client connections may start with a PROXY protocol header
    trusted_keys: list[str] = field(default_factory=list)
    resolver: ResolverOpts = field(default_factory=ResolverOpts)
    resolver_preload: dict[str, str] = field(default_factory=dict)
    resolver_pinned_accounts: set[str] | None = None   # None: any account may log in

    jetstream: JetStreamOpts = field(default_factory=JetStreamOpts)
    leafnode: LeafNodeOpts = field(default_factory=LeafNodeOpts)
    cluster: ClusterOpts = field(default_factory=ClusterOpts)
    gateway: GatewayOpts = field(default_factory=GatewayOpts)
    websocket: RawBlock = field(default_factory=RawBlock)
    mqtt: RawBlock = field(default_factory=RawBlock)
    tls_config: RawBlock = field(default_factory=RawBlock)

    server_tags: list[str] = field(default_factory=list)
    server_metadata: dict[str, str] = field(default_factory=dict)
    config_digest: str = ""

    # --tls* flags (refused: TLS is not implemented yet, see natsd.conf.unsupported)
    tls: bool = False
    tls_verify: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca_cert: str = ""

    # natsd's own: the loop's longest polling window before it sleeps, in microseconds
    # (NATSD_POLL_US in the environment; 0 turns polling off).
    poll_us: float = 200.0
    # natsd's own: flush many connections with one io_uring submission when the kernel allows
    # (NATSD_SEND_RING=0 in the environment sends one by one; natsd/_core/sendring.h).
    send_ring: bool = True
    # natsd's own: a new consumer's files are made on the loop while that takes under this
    # many microseconds on average, else on worker threads (NATSD_NEW_FILES_US in the
    # environment; 0 always hands them to the threads; natsd/jetstream/engine/persist.py).
    new_files_us: float = 500.0
    # natsd's own: the client port is opened with SO_REUSEPORT, so several natsd processes
    # (joined by routes) share it, one per core (NATSD_REUSE_PORT=1; docs/multicore.md).
    reuse_port: bool = False

    # Everything else nats-server accepts (operator, resolver, ocsp, ...): key -> value.
    extra: dict[str, Any] = field(default_factory=dict)
    # Config warnings (e.g. "ping_interval should be converted to a duration");
    # nats-server logs them, and `-t` treats them as failures.
    warnings: list[str] = field(default_factory=list)
    # Config keys asking for what natsd cannot serve yet: [(key path, "file:line:col:
    # <feature> is not supported by natsd yet")] (natsd.conf.unsupported); the command
    # line refuses to start or check such a config.
    unsupported: list[tuple[str, str]] = field(default_factory=list)
    # (option, value) the command line set: they win over the file, at start and on reloads
    flags_given: list[tuple[str, Any]] = field(default_factory=list)


DEFAULT_PORT = 4222


def set_baseline(o: Options) -> None:
    """Defaults that depend on other settings (nats-server setBaselineOptions): a client port
    of 0 is the default port (-1 asks for a random one), and the monitoring port listens on
    the client host unless told otherwise."""
    if o.port == 0:
        o.port = DEFAULT_PORT
    if not o.http_host:
        o.http_host = o.host
