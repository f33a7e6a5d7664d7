"""`/raftz` and `$SYS.REQ.SERVER.PING.RAFTZ`: Raft groups by account.

natsd has no clustering, hence no Raft groups: the answers are nats-server's for a server
without any (HTTP 404 "No Raft nodes registered"; for a $SYS request an empty map, or nothing
usable (`null`) when there is no system account to default the account filter to).
"""
from dataclasses import dataclass

from natsd.monitor import params as P


@dataclass
class RaftzOptions:
    account: str = ""                   # query "acc"
    group: str = ""


def options_from_query(q):
    return RaftzOptions(account=P.q_str(q, "acc"), group=P.q_str(q, "group"))


def options_from_json(body):
    b, S = P.j_body(body), "RaftzOptions"
    return RaftzOptions(account=P.j_str(b, "account", S), group=P.j_str(b, "group", S))


def raft_groups(server, account):
    """account -> {group name -> RaftzGroup}: none in natsd."""
    return {}


def handler(server, opts):
    account = opts.account
    if not account:
        sys_acc = server.accounts.system
        if sys_acc is None:
            return None
        account = sys_acc.name
    return raft_groups(server, account)


def http_handler(server, opts):
    return 404, b"No Raft nodes registered", "text/plain; charset=utf-8"
