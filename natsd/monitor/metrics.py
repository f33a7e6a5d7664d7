"""`/metrics`: the server's figures in the Prometheus text exposition format 0.0.4 (natsd only).

Every family is named `natsd_*` and comes with `# HELP` and `# TYPE`. Families are produced by
collectors, functions `collector(server) -> iterable of Family`; the built-in ones cover the
server (what /varz reports), connections by kind, and accounts. Subsystems add theirs with
`register_collector` (or the JetStream collector here, which reads the `server.jetstream`
interface documented in natsd/monitor/jsz.py) and emit nothing while they do not exist:
no family is ever emitted with placeholder zeros for a missing feature.

Per-account figures are connections, leaf node connections and subscriptions. natsd keeps no
monotonic per-account message counters (connection counters vanish when a connection closes),
so per-account messages/bytes are not exported; server-wide totals are.
"""
import math
import os
import time

from natsd import VERSION
from natsd._core.conn import totals
from natsd.monitor.connz import kind_of

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KINDS = ("Client", "Leafnode", "Router", "Gateway")


class Family:
    """One metric family: name (without _total for counters), type, help, samples."""

    def __init__(self, name, mtype, help_text):
        self.name = name
        self.type = mtype
        self.help = help_text
        self.samples = []               # (labels dict, value)

    def add(self, value, **labels):
        self.samples.append((labels, value))
        return self


def escape_help(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label(s):
    return str(s).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def render(families):
    out = []
    for f in families:
        name = f.name + "_total" if f.type == "counter" else f.name
        out.append("# HELP %s %s" % (name, escape_help(f.help)))
        out.append("# TYPE %s %s" % (name, f.type))
        for labels, value in f.samples:
            if labels:
                lbl = ",".join('%s="%s"' % (k, escape_label(v)) for k, v in labels.items())
                out.append("%s{%s} %s" % (name, lbl, format_value(value)))
            else:
                out.append("%s %s" % (name, format_value(value)))
    return ("\n".join(out) + "\n").encode()


# ---- collectors ----

def _gauge(name, help_text, value=None):
    f = Family(name, "gauge", help_text)
    if value is not None:
        f.add(value)
    return f


def _counter(name, help_text, value=None):
    f = Family(name, "counter", help_text)
    if value is not None:
        f.add(value)
    return f


def server_collector(server):
    from natsd.monitor.varz import this_process
    now = time.time()
    yield _gauge("natsd_info", "Server identity (always 1).").add(
        1, server_id=server.id, server_name=server.name, version=VERSION)
    yield _gauge("natsd_start_time_seconds", "Server start time, seconds since the epoch.",
                 server.start_time)
    yield _gauge("natsd_uptime_seconds", "Seconds since the server started.",
                 now - server.start_time)
    yield _gauge("natsd_connections", "Open client connections (as /varz connections).",
                 len(server.clients))
    yield _counter("natsd_accepted_connections", "Client connections accepted since start "
                   "(as /varz total_connections).", server.total_connections)
    yield _gauge("natsd_subscriptions", "Subscriptions in all accounts (as /varz subscriptions).",
                 sum(a.subscription_count for a in server.accounts))
    yield _counter("natsd_in_msgs", "Messages received from connections.", totals.in_msgs)
    yield _counter("natsd_out_msgs", "Messages sent to connections.", totals.out_msgs)
    yield _counter("natsd_in_bytes", "Payload bytes received from connections.", totals.in_bytes)
    yield _counter("natsd_out_bytes", "Payload bytes sent to connections.", totals.out_bytes)
    yield _counter("natsd_slow_consumers", "Connections closed as slow consumers.",
                   totals.slow_consumers)
    yield _counter("natsd_stale_connections", "Connections closed as stale (no PONG).",
                   server.stale_connections)
    yield _gauge("natsd_cpu_percent", "Process CPU use in percent (as /varz cpu).",
                 this_process().cpu_percent(None))
    yield _gauge("natsd_memory_rss_bytes", "Process resident memory (as /varz mem).",
                 this_process().memory_info().rss)
    yield _gauge("natsd_cores", "CPU cores seen by the process.", os.cpu_count() or 0)
    if server.monitor is not None:
        f = _counter("natsd_http_requests", "Monitoring HTTP requests by endpoint path.")
        for path, n in sorted(server.monitor.requests.items()):
            f.add(n, path=path)
        yield f


def connection_kind_collector(server):
    counts = {"Client": 0}
    conns = dict(server.clients)
    for extra in ("leafs", "routes"):
        for c in (getattr(server, extra, None) or {}).values():
            conns.setdefault(c.cid, c)
    if server.gateway is not None:
        for c in list(server.gateway.out.values()) + list(server.gateway.inbound.values()):
            conns.setdefault(c.cid, c)
    for c in conns.values():
        k = kind_of(c)
        counts[k] = counts.get(k, 0) + 1
    f = _gauge("natsd_connections_by_kind", "Open connections by kind (Client, Leafnode, ...).")
    for k in sorted(counts, key=lambda k: (KINDS.index(k) if k in KINDS else len(KINDS), k)):
        f.add(counts[k], kind=k)
    yield f


def account_collector(server):
    conns = _gauge("natsd_account_connections", "Open client connections bound to the account.")
    leafs = _gauge("natsd_account_leafnodes", "Leaf node connections bound to the account.")
    subs = _gauge("natsd_account_subscriptions", "Subscriptions in the account's sublist.")
    for acc in server.accounts:
        n_leaf = sum(1 for c in acc.clients if kind_of(c) == "Leafnode")
        conns.add(len(acc.clients) - n_leaf, account=acc.name)
        leafs.add(n_leaf, account=acc.name)
        subs.add(acc.subscription_count, account=acc.name)
    yield conns
    yield leafs
    yield subs


def route_collector(server):
    """Per remote server of the cluster: its route connections and what they carried."""
    if server.cluster is None:
        return
    routes = _gauge("natsd_routes", "Route connections to the remote server (pool and pinned).")
    fam = {k: _counter("natsd_route_%s" % k, "Route %s with the remote server." % what)
           for k, what in (("in_msgs", "messages received"), ("out_msgs", "messages sent"),
                           ("in_bytes", "payload bytes received"),
                           ("out_bytes", "payload bytes sent"))}
    pending = _gauge("natsd_route_pending_bytes", "Bytes queued for the remote server.")
    by_remote = {}
    for c in server.routes.values():
        by_remote.setdefault(c.state.remote_name or c.state.remote_id, []).append(c)
    for name, conns in sorted(by_remote.items()):
        routes.add(len(conns), remote=name)
        for k, f in fam.items():
            f.add(sum(getattr(c, k) for c in conns), remote=name)
        pending.add(sum(c.pending_bytes() for c in conns), remote=name)
    yield routes
    yield from fam.values()
    yield pending


def gateway_collector(server):
    """Per remote cluster and direction: the gateway connections and what they carried."""
    gw = server.gateway
    if gw is None:
        return
    conns = _gauge("natsd_gateway_connections", "Gateway connections with the remote cluster.")
    fam = {k: _counter("natsd_gateway_%s" % k, "Gateway %s with the remote cluster." % what)
           for k, what in (("in_msgs", "messages received"), ("out_msgs", "messages sent"),
                           ("in_bytes", "payload bytes received"),
                           ("out_bytes", "payload bytes sent"))}
    groups = {}
    for c in gw.out.values():
        groups.setdefault((c.state.gw_name, "outbound"), []).append(c)
    for c in gw.inbound.values():
        groups.setdefault((c.state.gw_name, "inbound"), []).append(c)
    for (name, direction), cs in sorted(groups.items()):
        conns.add(len(cs), remote=name, direction=direction)
        for k, f in fam.items():
            f.add(sum(getattr(c, k) for c in cs), remote=name, direction=direction)
    yield conns
    yield from fam.values()


def mqtt_collector(server):
    """Per account: MQTT clients connected here, the sessions and retained messages known."""
    mqtt = getattr(server, "mqtt", None)
    if mqtt is None:
        return
    clients = _gauge("natsd_mqtt_clients", "MQTT clients connected to this server.")
    sessions = _gauge("natsd_mqtt_sessions", "MQTT sessions of the account known to this server.")
    retained = _gauge("natsd_mqtt_retained_messages", "Retained MQTT messages of the account.")
    per_account = {}
    for c in server.clients.values():
        if getattr(c.state, "mqtt", None) is not None and c.state.account is not None:
            per_account[c.state.account.name] = per_account.get(c.state.account.name, 0) + 1
    for name, m in sorted(mqtt.managers.items()):
        clients.add(per_account.get(name, 0), account=name)
        sessions.add(len(m.sessions), account=name)
        retained.add(len(m.retained), account=name)
    yield clients
    yield sessions
    yield retained


def jetstream_collector(server):
    """Per-account, per-stream and per-consumer families; nothing without JetStream."""
    from natsd.monitor.jsz import jetstream
    js = jetstream(server)
    if js is None:
        return
    usage = js.usage()
    yield _gauge("natsd_jetstream_memory_bytes", "JetStream memory storage in use.",
                 usage.get("memory", 0))
    yield _gauge("natsd_jetstream_storage_bytes", "JetStream file storage in use.",
                 usage.get("storage", 0))
    api = usage.get("api", {})
    yield _counter("natsd_jetstream_api_requests", "JetStream API requests.", api.get("total", 0))
    yield _counter("natsd_jetstream_api_errors", "JetStream API errors.", api.get("errors", 0))
    s_msgs = _gauge("natsd_stream_messages", "Messages stored in the stream.")
    s_bytes = _gauge("natsd_stream_bytes", "Bytes stored in the stream.")
    s_cons = _gauge("natsd_stream_consumers", "Consumers of the stream.")
    c_pending = _gauge("natsd_consumer_pending_messages", "Messages not yet delivered.")
    c_ack = _gauge("natsd_consumer_ack_pending_messages", "Delivered, awaiting acknowledgement.")
    c_redel = _gauge("natsd_consumer_redelivered_messages", "Messages redelivered.")
    for jsa in js.accounts():
        for stream in jsa.streams():
            st = stream.state()
            lbl = {"account": jsa.name, "stream": stream.name}
            s_msgs.add(st.get("messages", 0), **lbl)
            s_bytes.add(st.get("bytes", 0), **lbl)
            s_cons.add(st.get("consumer_count", 0), **lbl)
            for con in stream.consumers():
                info = con.info()
                clbl = dict(lbl, consumer=info.get("name", ""))
                c_pending.add(info.get("num_pending", 0), **clbl)
                c_ack.add(info.get("num_ack_pending", 0), **clbl)
                c_redel.add(info.get("num_redelivered", 0), **clbl)
    for f in (s_msgs, s_bytes, s_cons, c_pending, c_ack, c_redel):
        if f.samples:
            yield f


COLLECTORS = [server_collector, connection_kind_collector, account_collector,
              route_collector, gateway_collector, mqtt_collector, jetstream_collector]


def register_collector(fn):
    """Add a collector `fn(server) -> iterable of Family` (e.g. from the leaf node subsystem)."""
    if fn not in COLLECTORS:
        COLLECTORS.append(fn)
    return fn


def options_from_query(q):
    return None


def options_from_json(body):
    return None


def handler(server, opts=None):
    families = []
    for collect in COLLECTORS:
        families.extend(collect(server))
    return 200, render(families), CONTENT_TYPE
