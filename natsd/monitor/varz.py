"""`/varz`: server identity, configuration echoes and totals, with nats-server's field names."""
import os
import time
from datetime import datetime, timezone

import psutil

from natsd import VERSION, PROTO
from natsd._core.conn import totals

_process = psutil.Process(os.getpid())


def rfc3339(ts):
    """Unix time -> RFC 3339 UTC with nanoseconds, as Go prints time.Time."""
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%09dZ" % int(round((ts % 1) * 1e9) % 1000000000)


def go_duration_short(seconds):
    """nats-server's uptime format: 1d2h3m4s."""
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    out = ""
    if d:
        out += "%dd" % d
    if d or h:
        out += "%dh" % h
    if d or h or m:
        out += "%dm" % m
    return out + "%ds" % s


def ns(seconds):
    return int(round(seconds * 1e9))


def _seconds_number(v):
    return int(v) if float(v).is_integer() else v


def varz(server, query):
    opts = server.opts
    now = time.time()
    js = (server.jetstream_varz() if hasattr(server, "jetstream_varz") else None) or {}
    sys_acc = server.accounts.system
    v = {
        "server_id": server.id,
        "server_name": server.name,
        "version": VERSION,
        "proto": PROTO,
        "go": "python",
        "host": opts.host,
        "port": server.port,
    }
    if server.authenticator.auth_required:
        v["auth_required"] = True
    v.update({
        "max_connections": opts.max_connections,
        "ping_interval": ns(opts.ping_interval),
        "ping_max": opts.ping_max,
        "http_host": opts.http_host,
        "http_port": server.monitor.port if server.monitor else opts.http_port,
        "http_base_path": opts.http_base_path,
        "https_port": opts.https_port,
        "auth_timeout": _seconds_number(opts.auth_timeout or 2),
        "max_control_line": opts.max_control_line,
        "max_payload": opts.max_payload,
        "max_pending": opts.max_pending,
        "cluster": {},
        "gateway": {},
        "leaf": server.leaf_varz() if hasattr(server, "leaf_varz") else {},
        "mqtt": {},
        "websocket": {},
        "jetstream": js,
        "tls_timeout": 2,
        "write_deadline": ns(opts.write_deadline),
        "start": rfc3339(server.start_time),
        "now": rfc3339(now),
        "uptime": go_duration_short(now - server.start_time),
        "mem": _process.memory_info().rss,
        "cores": os.cpu_count(),
        "gomaxprocs": os.cpu_count(),
        "cpu": _process.cpu_percent(None),
        "connections": len(server.clients),
        "total_connections": server.total_connections,
        "routes": 0,
        "remotes": 0,
        "leafnodes": server.leafnode_count() if hasattr(server, "leafnode_count") else 0,
        "in_msgs": totals.in_msgs,
        "in_bytes": totals.in_bytes,
        "in_client_msgs": totals.in_msgs,
        "in_client_bytes": totals.in_bytes,
        "out_msgs": totals.out_msgs,
        "out_bytes": totals.out_bytes,
        "out_client_msgs": totals.out_msgs,
        "out_client_bytes": totals.out_bytes,
        "slow_consumers": totals.slow_consumers,
        "stale_connections": server.stale_connections,
        "stalled_clients": 0,
        "subscriptions": sum(a.sublist.count for a in server.accounts),
        "http_req_stats": dict(server.monitor.requests) if server.monitor else {},
        "config_load_time": rfc3339(server.config_load_time),
        "config_digest": getattr(opts, "config_digest", "") or "",
        "tags": list(opts.server_tags) if opts.server_tags else None,
        "metadata": dict(opts.server_metadata) if opts.server_metadata else None,
        "system_account": sys_acc.name if sys_acc else "",
        "slow_consumer_stats": {"clients": totals.slow_consumers, "routes": 0, "gateways": 0,
                                "leafs": 0},
        "stale_connection_stats": {"clients": server.stale_connections, "routes": 0,
                                   "gateways": 0, "leafs": 0},
    })
    return {k: val for k, val in v.items() if val is not None}


def landing_page(server, paths):
    links = "\n".join('    <a href=".%s">%s</a><br/>' % (p, p.lstrip("/")) for p in paths if p != "/")
    return ("<html lang=\"en\">\n  <head><title>NATS Server</title></head>\n  <body>\n"
            "    <h3>NATS Server v%s (natsd)</h3>\n%s\n  </body>\n</html>\n" % (VERSION, links))
