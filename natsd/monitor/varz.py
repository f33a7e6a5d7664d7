"""`/varz`: server identity, configuration echoes and totals, with nats-server's field names."""
import os
import time

from natsd import VERSION, PROTO
from natsd._core.conn import totals
from natsd.gofmt import go_float, go_time
from natsd.net.tls import cert_not_after, default_auth_timeout

_process = None                 # psutil's view of this process, made at the first /varz


def this_process():
    """psutil's Process of this server (made when first asked for)."""
    global _process
    if _process is None:
        import psutil                   # (2.6 MB resident: loaded when monitoring is asked)
        _process = psutil.Process(os.getpid())
    return _process

# nats-server 2.15.1's feature flags (`feature_flags`, also in every $SYS ServerInfo), at the
# values that describe what natsd does: v1 `$JS.ACK`/`$JS.FC` subjects and API replies; the
# other two concern nats-server's own Raft entries and snapshots (natsd's replicated streams
# have their own encodings, natsd/jetstream/replicated/streams.py) and keep the default.
# A `feature_flags {}` block in the configuration is accepted but cannot switch natsd to
# another behaviour, so it is not echoed.
FEATURE_FLAGS = {"js_ack_fc_v2": False, "js_api_reply_v2": False, "js_raft_delete_range": True,
                 "js_snapshot_sources": False}


def _git_commit():
    """The natsd commit this process runs (7 hex digits, as nats-server's formatRevision), read
    from the source checkout's .git; "" (and no `git_commit` key, as an unstamped nats-server
    build) when natsd does not run from a git checkout."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):                 # a worktree: "gitdir: <path>"
            with open(git) as f:
                git = os.path.join(root, f.read().split(":", 1)[1].strip())
        with open(os.path.join(git, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head[:7]
        ref = head[4:].strip()
        common = git
        if os.path.isfile(os.path.join(git, "commondir")):
            with open(os.path.join(git, "commondir")) as f:
                common = os.path.join(git, f.read().strip())
        for base in (git, common):
            path = os.path.join(base, ref)
            if os.path.isfile(path):
                with open(path) as f:
                    return f.read().strip()[:7]
        with open(os.path.join(common, "packed-refs")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0][:7]
    except (OSError, IndexError):
        pass
    return ""


GIT_COMMIT = _git_commit()


# The endpoints nats-server counts in `http_req_stats` (/subscriptionsz counts as /subsz);
# /stacksz, /ipqueuesz, /raftz, /debug/vars (and natsd's /metrics) are not counted there.
COUNTED_PATHS = {"/", "/varz", "/connz", "/routez", "/gatewayz", "/leafz", "/subsz",
                 "/accountz", "/accstatz", "/jsz", "/healthz"}


def http_req_stats(server):
    out = {}
    if server.monitor is not None:
        for path, n in server.monitor.requests.items():
            path = "/subsz" if path == "/subscriptionsz" else path
            if path in COUNTED_PATHS:
                out[path] = out.get(path, 0) + n
    return out


def disk_io_wait_stats(server):
    """nats-server's DiskIOWaitStats: contention on its disk I/O semaphore (file operations
    waiting for one of a bounded number of slots). natsd writes its message stores on the event
    loop thread, one operation after another, with nothing to wait for; only fsyncs go to the
    loop's pool of 4 worker threads (at most one per stream at a time), and that pool (in
    natsd/_core/loop.pyx) does not count waits. So the figures are 0: no semaphore waits exist,
    and the fsync queue is not measured."""
    return {"waiters": 0, "waits": 0, "wait_time": 0, "max_wait_time": 0}


def rfc3339(ts):
    """Unix time in seconds -> time.Time's JSON text (see gofmt.go_time)."""
    return go_time(round(ts * 1e9))


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


def _pinned_account_fails(server):
    """Logins resolver_pinned_accounts refused (omitted while there are none)."""
    jwt_accounts = getattr(server, "jwt_accounts", None)
    return getattr(jwt_accounts, "pinned_failures", 0) or None


def varz(server, query):
    opts = server.opts
    now = time.time()
    js = (server.jetstream_varz() if hasattr(server, "jetstream_varz") else None) or {}
    sys_acc = server.accounts.system
    ct = client_traffic()
    v = {
        "server_id": server.id,
        "server_name": server.name,
        "version": VERSION,
        "proto": PROTO,
        "git_commit": GIT_COMMIT or None,
        "go": "python",
        "host": opts.host,
        "port": server.port,
    }
    if server.authenticator.auth_required:
        v["auth_required"] = True
    tls = server.tls
    if tls is not None:
        v.update({k: val for k, val in tls.info_fields().items() if k != "tls_available"})
    if server.cluster is not None:
        urls = server.cluster.connect_urls
        if urls.client:
            v["connect_urls"] = list(urls.client)
        if urls.ws:
            v["ws_connect_urls"] = list(urls.ws)
    tls_timeout = tls.settings.timeout if tls is not None else None
    v.update({
        "max_connections": opts.max_connections,
        "ping_interval": ns(opts.ping_interval),
        "ping_max": opts.ping_max,
        "http_host": opts.http_host,
        "http_port": server.monitor.port if server.monitor else opts.http_port,
        "http_base_path": opts.http_base_path,
        "https_port": opts.https_port,
        "auth_timeout": go_float(opts.auth_timeout or default_auth_timeout(tls_timeout)),
        "max_control_line": opts.max_control_line,
        "max_payload": opts.max_payload,
        "max_pending": opts.max_pending,
        "cluster": server.cluster.varz() if server.cluster is not None else {},
        "gateway": server.gateway.varz() if server.gateway is not None else {},
        "leaf": server.leaf_varz() if hasattr(server, "leaf_varz") else {},
        "mqtt": server.mqtt.varz() if server.mqtt is not None else {},
        "websocket": server.websocket.varz() if server.websocket is not None else {},
        "jetstream": js,
        "tls_timeout": go_float(tls_timeout or 2),
        "write_deadline": ns(opts.write_deadline),
        "start": rfc3339(server.start_time),
        "now": rfc3339(now),
        "uptime": go_duration_short(now - server.start_time),
        "mem": this_process().memory_info().rss,
        "cores": os.cpu_count(),
        "gomaxprocs": os.cpu_count(),
        "cpu": this_process().cpu_percent(None),
        "connections": len(server.clients),
        "total_connections": server.total_connections,
        "routes": len(server.routes),
        "remotes": len(server.cluster.routes) if server.cluster is not None else 0,
        "leafnodes": server.leafnode_count() if hasattr(server, "leafnode_count") else 0,
        "in_msgs": totals.in_msgs,
        "in_bytes": totals.in_bytes,
        "in_client_msgs": ct["in_msgs"],
        "in_client_bytes": ct["in_bytes"],
        "out_msgs": totals.out_msgs,
        "out_bytes": totals.out_bytes,
        "out_client_msgs": ct["out_msgs"],
        "out_client_bytes": ct["out_bytes"],
        "slow_consumers": totals.slow_consumers,
        "stale_connections": server.stale_connections,
        "stalled_clients": totals.stalls,
        "subscriptions": sum(a.subscription_count for a in server.accounts),
        "http_req_stats": http_req_stats(server),
        "config_load_time": rfc3339(server.config_load_time),
        "config_digest": getattr(opts, "config_digest", "") or "",
        "tags": list(opts.server_tags) if opts.server_tags else None,
        "metadata": dict(opts.server_metadata) if opts.server_metadata else None,
        "feature_flags": dict(FEATURE_FLAGS),
        "system_account": sys_acc.name if sys_acc else None,     # omitempty
        "pinned_account_fails": _pinned_account_fails(server),
        "slow_consumer_stats": server.slow_consumer_stats(),
        "stale_connection_stats": {"clients": server.stale_connections, "routes": 0,
                                   "gateways": 0, "leafs": 0},
        "disk_io_wait_stats": disk_io_wait_stats(server),
        "tls_cert_not_after": cert_not_after(tls.settings) if tls is not None else None,
    })
    return {k: val for k, val in v.items() if val is not None}


def client_traffic():
    """Messages and bytes from and to clients: the totals less what routes and leaf nodes
    carried."""
    t = totals
    return {"in_msgs": t.in_msgs - t.route_in_msgs - t.leaf_in_msgs,
            "in_bytes": t.in_bytes - t.route_in_bytes - t.leaf_in_bytes,
            "out_msgs": t.out_msgs - t.route_out_msgs - t.leaf_out_msgs,
            "out_bytes": t.out_bytes - t.route_out_bytes - t.leaf_out_bytes}


def landing_page(server, paths):
    links = "\n".join('    <a href=".%s">%s</a><br/>' % (p, p.lstrip("/")) for p in paths if p != "/")
    return ("<html lang=\"en\">\n  <head><title>NATS Server</title></head>\n  <body>\n"
            "    <h3>NATS Server v%s (natsd)</h3>\n%s\n  </body>\n</html>\n" % (VERSION, links))
