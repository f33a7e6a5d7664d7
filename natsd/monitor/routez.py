"""`/routez` and `/gatewayz` (and their `$SYS.REQ.SERVER.PING.*` forms).

Route connections are listed from `server.routes` (cid -> Connection whose `state` may carry
`remote_id`, `remote_name`, `did_solicit`, `is_configured`, `compression`, `route_account`);
without routes, nats-server's shape for a server with none:
`{"server_id","server_name","now","num_routes":0,"routes":[]}`. natsd has no gateways yet, so
/gatewayz answers nats-server's shape for a server without them:
`{"server_id","now","outbound_gateways":{},"inbound_gateways":{}}`; a gateway subsystem would
provide `server.gateway.gatewayz(opts, now)` returning the filled dict.
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
    if gw is not None and getattr(gw, "enabled", False):
        return gw.gatewayz(opts, now)
    return {"server_id": server.id, "now": P.now_rfc3339(now), "outbound_gateways": {},
            "inbound_gateways": {}}
