"""`/raftz` and `$SYS.REQ.SERVER.PING.RAFTZ`: Raft groups by account.

The groups are the JetStream meta group's (natsd/jetstream/replicated/meta.py), in the system account,
and the replicated streams' (natsd/jetstream/replicated/streams.py), each in its stream's account; the
account filter defaults to the system account. A server without any answers as nats-server does: HTTP 404 "No Raft nodes registered"; for a
$SYS request an empty map, or nothing usable (`null`) when there is no system account to
default the account filter to. Filters that match nothing give `{}`.
"""
import json
from dataclasses import dataclass

from natsd.monitor import params as P


@dataclass
class RaftzOptions:
    account: str = ""                   # query "acc"
    group: str = ""


options_from_query, options_from_json = P.plain_options(RaftzOptions, account="acc")


def _meta(server):
    js = getattr(server, "jetstream", None)
    return getattr(js, "meta", None) if js is not None else None


def raft_groups(server, account, group=""):
    """account -> {group name -> RaftzGroup} for the groups of `account` (and `group`)."""
    meta = _meta(server)
    if meta is None or server.accounts.system is None:
        return {}
    groups = {name: info for name, info in meta.raftz(account).items() if not group or name == group}
    return {account: groups} if groups else {}


def handler(server, opts):
    account = opts.account
    if not account:
        sys_acc = server.accounts.system
        if sys_acc is None:
            return None
        account = sys_acc.name
    return raft_groups(server, account, opts.group)


def http_handler(server, opts):
    if _meta(server) is None:
        return 404, b"No Raft nodes registered", "text/plain; charset=utf-8"
    groups = handler(server, opts)
    if groups is None:
        return 404, b"No Raft nodes returned, check supplied filters", "text/plain; charset=utf-8"
    return 200, json.dumps(groups, indent=3).encode(), "application/json"
