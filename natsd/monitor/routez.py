"""`/routez` and `/gatewayz` (and their `$SYS.REQ.SERVER.PING.*` forms).

Route connections are listed from `server.routes` (cid -> Connection whose `state` may carry
`remote_id`, `remote_name`, `did_solicit`, `is_configured`, `compression`, `route_account`);
without routes, nats-server's shape for a server with none:
`{"server_id","server_name","now","num_routes":0,"routes":[]}`. /gatewayz lists the gateway
subsystem's (natsd/gateways/) outbound connections by remote cluster and its inbound ones
(several per cluster), with each account's interest mode when `accs` asks; without gateways,
nats-server's shape: `{"server_id","now","outbound_gateways":{},"inbound_gateways":{}}`.
"""
import time
from dataclasses import dataclass

from natsd._core.conn import monotonic
from natsd.monitor import params as P


@dataclass
class RoutezOptions:
    subscriptions: bool = False
    subscriptions_detail: bool = False


def options_from_query(q):
    subs, detail = P.q_subs(q)
    return RoutezOptions(subscriptions=subs, subscriptions_detail=detail)


def options_from_json(body):
    b, S = P.j_body(body), "RoutezOptions"
    return RoutezOptions(subscriptions=P.j_bool(b, "subscriptions", S),
                         subscriptions_detail=P.j_bool(b, "subscriptions_detail", S))


def _route_info(c, now, mono_now, opts):
    from natsd.monitor.connz import sub_detail
    st = c.state
    last = now - (mono_now - c.last_activity)
    ri = {"rid": c.cid, "remote_id": getattr(st, "remote_id", "") or "",
          "remote_name": getattr(st, "remote_name", "") or "",
          "did_solicit": bool(getattr(st, "did_solicit", False)),
          "is_configured": bool(getattr(st, "is_configured", False)),
          "ip": st.host, "port": st.port, "start": P.now_rfc3339(st.start),
          "last_activity": P.now_rfc3339(last), "rtt": P.rtt_string(c.rtt),
          "uptime": P.my_uptime(now - st.start), "idle": P.my_uptime(now - last),
          "pending_size": c.pending_bytes(), "in_msgs": c.in_msgs, "out_msgs": c.out_msgs,
          "in_bytes": c.in_bytes, "out_bytes": c.out_bytes, "subscriptions": len(c.subs)}
    if c.subs:
        if opts.subscriptions_detail:
            ri["subscriptions_list_detail"] = [sub_detail(s, c.cid) for s in c.subs.values()]
        elif opts.subscriptions:
            ri["subscriptions_list"] = [s.subject.decode("utf-8", "replace")
                                        for s in c.subs.values()]
    for key in ("route_account", "compression"):
        val = getattr(st, key, "")
        if val:
            ri["account" if key == "route_account" else key] = val
    return ri


def handler(server, opts):
    now = time.time()
    routes = list((getattr(server, "routes", None) or {}).values())
    mono_now = monotonic()
    return {"server_id": server.id, "server_name": server.name, "now": P.now_rfc3339(now),
            "num_routes": len(routes),
            "routes": [_route_info(c, now, mono_now, opts) for c in routes]}


@dataclass
class GatewayzOptions:
    name: str = ""                      # query "gw_name"
    accounts: bool = False              # query "accs"
    account_name: str = ""              # query "acc_name" (implies accounts)
    subscriptions: bool = False
    subscriptions_detail: bool = False


def gatewayz_options_from_query(q):
    subs, detail = P.q_subs(q)
    accs = P.q_bool(q, "accs")
    acc_name = P.q_str(q, "acc_name")
    return GatewayzOptions(name=P.q_str(q, "gw_name"), accounts=accs or bool(acc_name),
                           account_name=acc_name, subscriptions=subs,
                           subscriptions_detail=detail)


def gatewayz_options_from_json(body):
    b, S = P.j_body(body), "GatewayzOptions"
    return GatewayzOptions(name=P.j_str(b, "name", S), accounts=P.j_bool(b, "accounts", S),
                           account_name=P.j_str(b, "account_name", S),
                           subscriptions=P.j_bool(b, "subscriptions", S),
                           subscriptions_detail=P.j_bool(b, "subscriptions_detail", S))


def gatewayz_handler(server, opts):
    now = time.time()
    gw = getattr(server, "gateway", None)
    if gw is None:
        return {"server_id": server.id, "now": P.now_rfc3339(now), "outbound_gateways": {},
                "inbound_gateways": {}}
    mono_now = monotonic()
    out = {"server_id": server.id, "now": P.now_rfc3339(now), "name": gw.name}
    if gw.host:
        out["host"] = gw.host
    if gw.port_advertised:
        out["port"] = gw.port_advertised
    outbound = {}
    for name, c in sorted(gw.out.items()):
        if opts.name and name != opts.name:
            continue
        rgw = {"configured": not c.state.cfg.implicit,
               "connection": _gateway_conn(c, now, mono_now)}
        if opts.accounts:
            rgw["accounts"] = _outbound_accounts(c, opts)
        outbound[name] = rgw
    inbound = {}
    for c in gw.inbound.values():
        name = c.state.gw_name
        if opts.name and name != opts.name:
            continue
        rgw = {"configured": False, "connection": _gateway_conn(c, now, mono_now)}
        if opts.accounts:
            rgw["accounts"] = [{"name": a, "interest_mode": "Interest-Only",
                                "interest_only_threshold": 1000}
                               for a in sorted(gw.interest.maps)
                               if not opts.account_name or a == opts.account_name]
        inbound.setdefault(name, []).append(rgw)
    out["outbound_gateways"] = outbound
    out["inbound_gateways"] = inbound
    return out


def _gateway_conn(c, now, mono_now):
    from natsd.monitor.connz import ConnzOptions, conn_info
    ci = conn_info(c, now, mono_now, ConnzOptions())
    ci["name"] = c.state.remote_id
    return {k: v for k, v in ci.items() if not k.startswith("_")}


def _outbound_accounts(c, opts):
    """The remote's interest on an outbound connection, per account (nats-server's outsim)."""
    accs = {}
    for sub in c.subs.values():
        name = sub.data.name
        if opts.account_name and name != opts.account_name:
            continue
        a = accs.setdefault(name, {"name": name, "interest_mode": "Interest-Only",
                                   "interest_only_threshold": 1000, "num_subs": 0,
                                   "num_queue_subs": 0, "_subs": []})
        a["num_subs"] += 1
        if sub.queue is not None:
            a["num_queue_subs"] += 1
        a["_subs"].append(sub)
    out = []
    for name in sorted(accs):
        a = accs[name]
        subs = a.pop("_subs")
        if opts.subscriptions:
            a["subscriptions_list"] = [s.subject.decode("utf-8", "replace") for s in subs]
        if not a["num_queue_subs"]:
            del a["num_queue_subs"]
        out.append(a)
    return out
