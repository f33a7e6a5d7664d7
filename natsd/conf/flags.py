"""nats-server's command line -> Options (config file first, explicit flags on top).

Owns flag names, aliases and Go `flag` package syntax (`-p 1`, `-p=1`, `--port 1`,
booleans only as `-D` or `-D=false`, parsing stops at the first non-flag), the
usage text, nats-server's own checks of flag values (--cluster URL, --tls* files,
--routes without --cluster), and, through natsd.conf.unsupported, which flags and
config keys ask for what natsd cannot serve yet.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from natsd.conf import ConfigError, load_file
from natsd.conf.links import gen_tls_error
from natsd.conf.unsupported import flag_refusals
from natsd.options import Options, set_baseline

HELP_TEXT = """\
Usage: natsd [options]

Server Options:
    -a, --addr, --net <host>         Address to bind client listener to (default: 0.0.0.0)
    -p, --port <port>                Client port, -1 picks a random one (default: 4222)
    -n, --name
        --server_name <server_name>  Name of this server (default: generated)
    -P, --pid <file>                 Write the process id to this file
    -m, --http_port <port>           Port for http monitoring
    -ms,--https_port <port>          Port for https monitoring
    -c, --config <file>              Read this configuration file
    -t                               Check the configuration file and exit
    -sl,--signal <signal>[=<pid>]    Send a signal to a running server (ldm, stop, quit, term, reopen, reload)
                                     <pid> is a process id (e.g. 1) or a pid file (e.g. /var/run/natsd.pid)
        --client_advertise <string>  Client URL advertised to other servers
        --ports_file_dir <dir>       Write a ports file into this directory (<executable_name>_<pid>.ports)

Logging Options:
    -l, --log <file>                 Log to this file instead of stderr
    -T, --logtime                    Put a timestamp on log lines (default: true)
        --logtime_utc                Timestamps in UTC rather than local time (default: false)
    -s, --syslog                     Log to syslog (or the windows event log)
    -r, --remote_syslog <addr>       Remote syslog address (udp://localhost:514)
    -D, --debug                      Debug output
    -V, --trace                      Trace protocol traffic
    -VV                              Verbose trace (system account traffic too)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (system account traffic too)
        --log_size_limit <limit>     Rotate the log file at this size (default: no rotation)
        --max_traced_msg_len <len>   Truncate traced messages to this length (default: unlimited)

JetStream Options:
    -js, --jetstream                 Turn JetStream on
    -sd, --store_dir <dir>           Directory for JetStream storage

Authorization Options:
        --user <user>                Username clients must present
        --pass <password>            Password clients must present
        --auth <token>               Token clients must present

TLS Options:
        --tls                        Turn TLS on, without verifying clients (default: false)
        --tlscert <file>             Server certificate
        --tlskey <file>              Private key of the server certificate
        --tlsverify                  Turn TLS on and verify client certificates
        --tlscacert <file>           CA used to verify client certificates

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to connect to
        --cluster <cluster-url>      Cluster URL solicited routes connect to
        --cluster_name <string>      Cluster name (default: generated)
        --no_advertise <bool>        Do not tell clients about other cluster members
        --cluster_advertise <string> Cluster URL advertised to other servers
        --connect_retries <number>   Connect retries for implicit routes
        --cluster_listen <url>       Cluster URL members can solicit routes from

Profiling Options:
        --profile <port>             Port for the profiling HTTP endpoint

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show the version
        --help_tls                   Help on TLS options
"""

SIGNALS = ("ldm", "stop", "quit", "term", "reopen", "reload")


class FlagError(Exception):
    """A command line nats-server refuses: it prints `nats-server: <message>` and exits 1.

    ``warnings`` are the config file's warnings, which nats-server printed before it
    got to the flag it refused."""

    def __init__(self, msg: str, warnings: list[str] | None = None):
        super().__init__(msg)
        self.warnings = list(warnings or [])


class FlagSyntaxError(FlagError):
    """What Go's flag package refuses (unknown flag, bad value, missing argument):
    nats-server prints the message alone on stderr, then its usage on stdout, and exits 0."""


@dataclass
class CommandLine:
    opts: Options
    show_version: bool = False
    show_help: bool = False
    show_tls_help: bool = False
    check_config: bool = False
    signal: str | None = None
    # What natsd refuses to serve (natsd.conf.unsupported): "file:line:col: <feature> is
    # not supported by natsd yet" for config keys, "--tls: ..." for flags.
    refusals: list[str] = field(default_factory=list)


def _flag_table(rows: str) -> dict[str, tuple[str, str]]:
    """Flag name -> (kind, destination), from rows of `kind destination name...`."""
    flags: dict[str, tuple[str, str]] = {}
    for row in rows.strip().splitlines():
        kind, dest, *names = row.split()
        for name in names:
            flags[name] = (kind, dest)
    return flags


# One flag a row: its kind (bool | int | str), its destination (a key understood by
# _apply()), then every name it goes by.
_FLAGS = _flag_table("""
bool help                h help
int  port                p port
str  server_name         n name server_name
str  host                a addr net
str  client_advertise    client_advertise
bool debug               D debug
bool trace               V trace
bool VV                  VV
bool DV                  DV
bool DVV                 DVV
bool logtime             T logtime
bool logtime_utc         logtime_utc
str  username            user
str  password            pass
str  authorization       auth
int  http_port           m http_port
int  https_port          ms https_port
str  config              c config
bool check               t
str  signal              sl signal
str  pid_file            P pid
str  ports_file_dir      ports_file_dir
str  log_file            l log
int  log_size_limit      log_size_limit
bool syslog              s syslog
str  remote_syslog       r remote_syslog
bool version             v version
int  prof_port           profile
str  routes              routes
str  cluster_listen      cluster cluster_listen
str  cluster_advertise   cluster_advertise
bool no_advertise        no_advertise
int  connect_retries     connect_retries
str  cluster_name        cluster_name
bool help_tls            help_tls
bool tls                 tls
bool tls_verify          tlsverify
str  tls_cert            tlscert
str  tls_key             tlskey
str  tls_ca_cert         tlscacert
int  max_traced_msg_len  max_traced_msg_len
bool jetstream           js jetstream
str  store_dir           sd store_dir
""")

_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


def _parse_args(argv: list[str]) -> tuple[list[tuple[str, str, object]], list[str]]:
    """Go flag.Parse: returns [(flag as typed, with its dashes, dest, value)] and the
    remaining args."""
    given: list[tuple[str, str, object]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            i += 1
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        if not name or name[0] in "-=":
            raise FlagSyntaxError(f"bad flag syntax: {arg}")
        dashes = arg[:len(arg) - len(name)]
        value: str | None = None
        if "=" in name:
            name, value = name.split("=", 1)
        if name not in _FLAGS:
            raise FlagSyntaxError(f"flag provided but not defined: -{name}")
        kind, dest = _FLAGS[name]
        i += 1
        if kind == "bool":
            if value is None:
                parsed: object = True
            elif value in _TRUE:
                parsed = True
            elif value in _FALSE:
                parsed = False
            else:
                raise FlagSyntaxError(f'invalid boolean value "{value}" for -{name}: parse error')
        else:
            if value is None:
                if i >= len(argv):
                    raise FlagSyntaxError(f"flag needs an argument: -{name}")
                value = argv[i]
                i += 1
            if kind == "int":
                try:
                    parsed = int(value, 0) if value.strip() == value else int("x")
                except ValueError:
                    raise FlagSyntaxError(f'invalid value "{value}" for flag -{name}: parse error') from None
                if not -(1 << 63) <= parsed < (1 << 63):
                    raise FlagSyntaxError(f'invalid value "{value}" for flag -{name}: value out of range')
            else:
                parsed = value
        given.append((dashes + name, dest, parsed))
    return given, argv[i:]


def _split_hostport(url: str) -> tuple[str, int]:
    """nats-server's overrideCluster: url.Parse, then net.SplitHostPort of its host."""
    wants_random = url.endswith(":-1")
    if wants_random:
        url = url[:-3] + ":0"
    try:
        parts = urlsplit(url)
        netloc = parts.netloc if "://" in url else ""
        hostport = netloc.rsplit("@", 1)[-1]
        parts.port
    except ValueError:
        port = url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1].rpartition(":")[2]
        raise FlagError(f'parse "{url}": invalid port ":{port}" after host') from None
    if parts.username is not None and parts.password is None and "@" in netloc:
        raise FlagError("expected cluster password to be set")
    if hostport.startswith("["):
        host, sep, port = hostport[1:].partition("]:")
    else:
        host, sep, port = hostport.rpartition(":")
    if not sep:
        raise FlagError(f"address {hostport}: missing port in address" if hostport else "missing port in address")
    try:
        return host, -1 if wants_random else int(port)
    except ValueError:
        raise FlagError("expected integer") from None


def _apply(o: Options, dest: str, v) -> None:
    simple = {"port", "server_name", "host", "client_advertise", "debug", "trace", "logtime", "logtime_utc",
              "username", "password", "authorization", "http_port", "https_port", "pid_file", "ports_file_dir",
              "log_file", "log_size_limit", "syslog", "remote_syslog", "prof_port", "tls", "tls_verify",
              "tls_cert", "tls_key", "tls_ca_cert", "max_traced_msg_len"}
    if dest in simple:
        setattr(o, dest, v)
    elif dest == "VV":
        o.trace = o.trace_verbose = v
    elif dest == "DV":
        o.debug = o.trace = v
    elif dest == "DVV":
        o.debug = o.trace = o.trace_verbose = v
    elif dest == "jetstream":
        o.jetstream.enabled = v
    elif dest == "store_dir":
        o.jetstream.store_dir = v
    elif dest == "routes":
        o.cluster.routes = [r.strip() for r in v.split(",") if r.strip()]
    elif dest == "cluster_listen":
        o.cluster.listen = v
        if v:
            o.cluster.host, o.cluster.port = _split_hostport(v)
            # nats-server's overrideCluster: the URL's credentials replace the config's
            u = urlsplit(v)
            auth = {"user": unquote(u.username), "password": unquote(u.password or "")} \
                if u.username is not None else None
            o.cluster.authorization = auth
    elif dest == "cluster_advertise":
        o.cluster.advertise = v
    elif dest == "no_advertise":
        o.cluster.no_advertise = v
    elif dest == "connect_retries":
        o.cluster.connect_retries = v
    elif dest == "cluster_name":
        o.cluster.name = v


def parse_command_line(argv: list[str]) -> CommandLine:
    """argv without the program name.  Raises FlagError or ConfigError."""
    given, rest = _parse_args(argv)
    values = {dest: v for _, dest, v in given}
    cl = CommandLine(opts=Options())
    cl.show_help = bool(values.get("help"))
    cl.show_version = bool(values.get("version"))
    cl.show_tls_help = bool(values.get("help_tls"))
    if cl.show_version or cl.show_help or cl.show_tls_help:
        return cl
    if rest:
        cmd = rest[0].lower()
        if cmd == "version":
            cl.show_version = True
            return cl
        if cmd == "help":
            cl.show_help = True
            return cl
        raise FlagError(f'unrecognized command: "{rest[0]}"')

    cl.check_config = bool(values.get("check"))
    if "signal" in values:
        sig = str(values["signal"])
        cmd = sig.split("=", 1)[0]
        if cmd not in SIGNALS:
            raise FlagError(f'unknown signal "{cmd}"')
        cl.signal = sig

    config = values.get("config")
    if config:
        cl.opts = load_file(str(config))
        if cl.check_config:
            if cl.opts.warnings:
                # nats-server -t fails on warnings too (e.g. integer ping_interval).
                raise ConfigError(cl.opts.warnings)
            # nats-server -t checks the file only: the other flags do not count.
            cl.refusals = [msg for _, msg in cl.opts.unsupported]
            return cl
    elif cl.check_config:
        raise FlagError("must specify [-c, --config] option to check configuration file syntax")

    try:
        _apply_flags(cl, given, values)
    except FlagError as e:
        e.warnings = cl.opts.warnings
        raise
    set_baseline(cl.opts)
    return cl


_NOT_OPTIONS = ("help", "version", "help_tls", "check", "signal", "config")


def reapply_flags(o: Options, flags: list[tuple[str, object]]) -> None:
    """The command line's settings over options read from the config file (at start, and
    on a reload: nats-server's MergeOptions with its flag snapshot)."""
    for dest, v in flags:
        _apply(o, dest, v)


def _apply_flags(cl: CommandLine, given: list[tuple[str, str, object]], values: dict) -> None:
    """Explicitly given flags win over the config file, in command-line order; then
    nats-server's checks of them (in its order), then natsd's refusals."""
    o = cl.opts
    o.flags_given = [(dest, v) for _, dest, v in given if dest not in _NOT_OPTIONS]
    reapply_flags(o, o.flags_given)
    if "cluster_listen" in values and not o.cluster.listen:
        o.cluster.port = 0          # `--cluster ""` turns the config's cluster listener off
    # nats-server: any --tls* flag turns TLS on from the flags, unless --tls=false, which
    # turns TLS off altogether (the config file's `tls {}` too).
    tls_off = values.get("tls") is False
    if not tls_off and any(d in values for d in ("tls", "tls_verify", "tls_cert", "tls_key", "tls_ca_cert")):
        if not o.tls_cert:
            raise FlagError("TLS Server certificate must be present and valid")
        if not o.tls_key:
            raise FlagError("TLS Server private key must be present and valid")
        err = gen_tls_error(o.tls_cert, o.tls_key, o.tls_ca_cert)
        if err:
            raise FlagError(err)
    if "routes" in values and o.cluster.routes and not (o.cluster.listen or o.cluster.host or o.cluster.port):
        raise FlagError("solicited routes require cluster capabilities, e.g. --cluster")

    config_refusals = o.unsupported
    if tls_off:
        o.tls_config.configured = False
        o.tls_verify, o.tls_cert, o.tls_key, o.tls_ca_cert = False, "", "", ""
        config_refusals = [(path, msg) for path, msg in config_refusals if path != "tls"]
    flags = [(flag, dest, v) for flag, dest, v in given if not (tls_off and dest.startswith("tls"))]
    cl.refusals = [msg for _, msg in config_refusals] + flag_refusals(flags)
