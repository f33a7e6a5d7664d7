"""`/accountz` and `/accstatz` (and `$SYS.REQ.SERVER.PING.ACCOUNTZ`, `$SYS.REQ.ACCOUNT.PING.STATZ`).

`/accountz` lists account names, or with `acc=<name>` one account's detail (connections,
subscriptions, configured exports/imports/mappings and those that reach the system account's
services (sysexports.py), sublist statistics) in nats-server's `AccountInfo` shape. `/accstatz` gives each account's connection/subscription/message
figures (`AccountStat`), only accounts in use unless `unused=1`; `accs=A,B` restricts the list
(the JSON option `accounts`; nats-server's HTTP handler ignores `accs`).

natsd keeps no per-account message counters: `sent`/`received` are the sums over the account's
open connections and the closed connections still remembered in `server.closed_clients`;
route/gateway/leaf sub-figures and per-account slow consumers are 0 (no such traffic exists).
"""
import time
from dataclasses import dataclass, field

from natsd.auth.jwt.claims import account_json
from natsd.monitor import params as P
from natsd.monitor.connz import kind_of
from natsd.monitor.subsz import SublistStats
from natsd.monitor.sysexports import system_exports, system_imports

GLOBAL = "$G"


@dataclass
class AccountzOptions:
    account: str = ""                   # query "acc", JSON "account"


options_from_query, options_from_json = P.plain_options(AccountzOptions, account="acc")


@dataclass
class AccountStatzOptions:
    accounts: list = field(default_factory=list)
    include_unused: bool = False


def accstatz_options_from_query(q):
    accs = [a for a in P.q_str(q, "accs").split(",") if a]
    return AccountStatzOptions(accounts=accs, include_unused=P.q_bool(q, "unused"))


def accstatz_options_from_json(body):
    b, S = P.j_body(body), "AccountStatzOptions"
    return AccountStatzOptions(accounts=P.j_str_list(b, "accounts", S),
                               include_unused=P.j_bool(b, "include_unused", S))


# ---- helpers ----

def _lookup(server, name):
    return server.accounts.accounts.get(name)


def local_counts(acc):
    """(client connections, leaf node connections) bound to the account."""
    leafs = sum(1 for c in acc.clients if kind_of(c) == "Leafnode")
    clients = sum(1 for c in acc.clients if kind_of(c) == "Client")
    return clients, leafs


def _export_json(exp):
    e = {"subject": exp.subject, "type": exp.kind}
    if exp.kind == "service":
        e["response_type"] = exp.response_type or "Singleton"
        if exp.response_threshold:
            e["response_threshold"] = int(round(exp.response_threshold * 1e9))
        if exp.latency is not None:
            e["service_latency"] = {"sampling": exp.latency.sampling or "headers",
                                    "results": exp.latency.subject}
    if exp.account_token_position:
        e["account_token_position"] = exp.account_token_position
    if exp.allow_trace:
        e["allow_trace"] = True
    if exp.accounts:
        e["approved_accounts"] = list(exp.accounts)
    return e


def _import_json(server, acc, imp):
    from natsd.accounts.imports import find_export, stream_local_subject
    exporter = _lookup(server, imp.account)
    invalid = exporter is None or find_export(exporter, imp.kind, imp.subject, acc.name) is None
    if imp.kind == "service":
        local = imp.to or imp.subject
        i = {"subject": imp.subject, "account": imp.account, "to": local,
             "local_subject": local, "type": "service"}
    else:
        i = {"subject": imp.subject, "account": imp.account,
             "local_subject": stream_local_subject(imp), "type": "stream"}
    if imp.allow_trace:
        i["allow_trace"] = True
    i.update({"invalid": invalid, "share": bool(imp.share), "tracking": False})
    return i


def _mappings_json(server, acc):
    cfg = getattr(acc.config, "mappings", None) or {}
    if acc.name == GLOBAL and not cfg:
        cfg = getattr(server.opts, "mappings", None) or {}
    out = {}
    for src, dests in cfg.items():
        out[src] = []
        for d in dests:
            md = {"subject": d.subject, "weight": d.weight}
            if d.cluster:
                md["cluster"] = d.cluster
            out[src].append(md)
    return out


def account_info(server, acc):
    clients, leafs = local_counts(acc)
    cfg = acc.config
    info = {"account_name": acc.name,
            "update_time": P.now_rfc3339(acc.updated or server.config_load_time)}
    if acc.is_system:
        info["is_system"] = True
    info.update({
        "expired": False,
        "complete": True,
        "jetstream_enabled": bool(acc.jetstream) and server.jetstream_enabled(),
        "leafnode_connections": leafs,
        "client_connections": clients,
        "subscriptions": acc.subscription_count,
    })
    mappings = _mappings_json(server, acc)
    if mappings:
        info["mappings"] = mappings
    exports = [_export_json(e) for e in (getattr(cfg, "exports", None) or ())]
    exports += system_exports(server, acc)
    if exports:
        info["exports"] = exports
    imports = sorted((getattr(cfg, "imports", None) or ()), key=lambda i: i.kind != "stream")
    imports = [_import_json(server, acc, i) for i in imports] + system_imports(server, acc)
    if imports:
        info["imports"] = imports
    if acc.jwt is not None:
        info["jwt"] = acc.jwt.token
        info["issuer_key"] = acc.jwt.issuer
    info["name_tag"] = acc.name_tag
    if acc.jwt is not None:
        if acc.jwt.nats.get("tags"):
            info["tags"] = list(acc.jwt.nats["tags"])
        info["decoded_jwt"] = account_json(acc.jwt)
    info["sublist_stats"] = SublistStats.of(acc.sublist).to_json()
    return info


# ---- handlers ----

def handler(server, opts):
    out = {"server_id": server.id, "now": P.now_rfc3339(time.time())}
    sys_acc = server.accounts.system
    if sys_acc is not None:
        out["system_account"] = sys_acc.name
    if not opts.account:
        out["accounts"] = [a.name for a in server.accounts]
        return out
    acc = _lookup(server, opts.account)
    if acc is None:
        raise P.OptionsError("Account %s does not exist" % opts.account)
    out["account_detail"] = account_info(server, acc)
    return out


def _traffic(acc, server):
    in_msgs = in_bytes = out_msgs = out_bytes = 0
    conns = list(acc.clients)
    conns.extend(c for c in server.closed_clients if c.state.account is acc)
    for c in conns:
        in_msgs += c.in_msgs
        in_bytes += c.in_bytes
        out_msgs += c.out_msgs
        out_bytes += c.out_bytes
    return (in_msgs, in_bytes), (out_msgs, out_bytes)


def _data_stats(msgs, nbytes):
    zero = {"msgs": 0, "bytes": 0}
    return {"msgs": msgs, "bytes": nbytes, "gateways": dict(zero), "routes": dict(zero),
            "leafs": dict(zero)}


def account_stat(server, acc):
    clients, leafs = local_counts(acc)
    (im, ib), (om, ob) = _traffic(acc, server)
    return {"acc": acc.name, "name": acc.name, "conns": clients, "leafnodes": leafs,
            "total_conns": clients + leafs, "num_subscriptions": acc.subscription_count,
            "sent": _data_stats(om, ob), "received": _data_stats(im, ib), "slow_consumers": 0}


def accstatz_handler(server, opts):
    out = {"server_id": server.id, "now": P.now_rfc3339(time.time()), "account_statz": []}
    if opts.accounts:
        accs = [a for a in (_lookup(server, n) for n in opts.accounts) if a is not None]
    else:
        accs = list(server.accounts)
    for acc in accs:
        if opts.include_unused or acc.clients:
            out["account_statz"].append(account_stat(server, acc))
    return out
