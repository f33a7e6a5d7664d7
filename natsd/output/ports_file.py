"""The ports file (`ports_file_dir`, `--ports_file_dir`): nats-server's Ports JSON, written
once the listeners are up as `<executable>_<pid>.ports` and removed at shutdown.

Each listener is listed by the URLs it is reached at (an unspecified host by this machine's
addresses, as nats-server resolves it): `nats` (or `tls`), `monitoring` (`http`/`https`),
`cluster` (`nats`/`tls`), `profile`, `websocket` (`ws`/`wss`); a listener not running is
left out.  The file appears whole (written beside it, then renamed).
"""
import json
import logging
import os

from natsd.net.listener import host_label, non_local_ips
from natsd.output.program import program_name

log = logging.getLogger("natsd")


def path(opts):
    if not opts.ports_file_dir:
        return ""
    return os.path.join(opts.ports_file_dir, "%s_%d.ports" % (program_name(), os.getpid()))


def _urls(scheme, host, port):
    ips = non_local_ips(host)
    return ["%s://%s" % (scheme, host_label(h, port)) for h in (ips or [host])]


def ports(server):
    """nats-server's Ports of this server."""
    opts = server.opts
    out = {"nats": _urls("tls" if server.tls is not None else "nats", opts.host, server.port)}
    if server.monitor is not None:
        out["monitoring"] = _urls("https" if opts.https_port else "http", opts.http_host, server.monitor.port)
    if server.cluster is not None:
        out["cluster"] = _urls("tls" if server.cluster.tls is not None else "nats",
                               opts.cluster.host or "0.0.0.0", server.cluster.port)
    if server.profiling is not None:
        out["profile"] = _urls("http", opts.host, server.profiling.port)
    ws = server.websocket
    if ws is not None and ws.port:
        out["websocket"] = _urls("wss" if ws.settings.tls is not None else "ws", ws.settings.host, ws.port)
    return out


def write(server):
    p = path(server.opts)
    if not p:
        return
    # written beside and renamed into place: a reader never sees a half-written file
    partial = p + ".partial"
    try:
        with open(partial, "w") as f:
            f.write(json.dumps(ports(server), separators=(",", ":")))
        os.replace(partial, p)
    except OSError as e:
        log.error("Error writing ports file (%s): %s", p, e)


def remove(opts):
    p = path(opts)
    if p:
        try:
            os.remove(p)
        except OSError as e:
            log.error("Error cleaning up ports file %s: %s", p, e)
