"""`/leafz` and `$SYS.REQ.SERVER.PING.LEAFZ` / `$SYS.REQ.ACCOUNT.<acc>.LEAFZ`: leaf node connections.

Lists every connection whose `state.kind == "Leafnode"` (from `server.leafs` when the leaf
subsystem keeps one, else from `server.clients`), optionally restricted to an account, in
nats-server's `LeafInfo` shape. Leaf-specific facts are read from the connection state when
present: `remote_server` (the remote server name; falls back to the CONNECT name), `is_spoke`,
`isolated`, `compression`.
"""
import time
from dataclasses import dataclass

from natsd.monitor import params as P
from natsd.monitor.connz import account_name, kind_of


@dataclass
class LeafzOptions:
    subscriptions: bool = False
    account: str = ""                   # query "acc", JSON "account"


options_from_query, options_from_json = P.plain_options(LeafzOptions, subscriptions="subs",
                                                        account="acc")


def leaf_connections(server):
    leafs = getattr(server, "leafs", None)
    conns = list(leafs.values()) if leafs else list(server.clients.values())
    return sorted((c for c in conns if kind_of(c) == "Leafnode" and not c.closed),
                  key=lambda c: c.cid)


def leaf_info(c, opts):
    st = c.state
    li = {"id": c.cid, "name": getattr(st, "remote_server", "") or st.name or "",
          "is_spoke": bool(getattr(st, "is_spoke", False))}
    if getattr(st, "isolated", False):
        li["is_isolated"] = True
    li.update({"account": account_name(c), "ip": st.host, "port": st.port,
               "rtt": P.rtt_string(c.rtt), "in_msgs": c.in_msgs, "out_msgs": c.out_msgs,
               "in_bytes": c.in_bytes, "out_bytes": c.out_bytes, "subscriptions": len(c.subs)})
    if opts.subscriptions and c.subs:
        li["subscriptions_list"] = [s.subject.decode("utf-8", "replace") for s in c.subs.values()]
    compression = getattr(st, "compression", "")
    if compression:
        li["compression"] = compression
    return li


def handler(server, opts):
    leafs = [leaf_info(c, opts) for c in leaf_connections(server)
             if not opts.account or account_name(c) == opts.account]
    return {"server_id": server.id, "now": P.now_rfc3339(time.time()), "leafnodes": len(leafs),
            "leafs": leafs}
