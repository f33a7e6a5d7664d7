"""`/ipqueuesz` and `$SYS.REQ.SERVER.PING.IPQUEUESZ`: the server's internal queues.

nats-server lists its internal queues (only the busy ones unless `all`), each with `pending`
items and items `in_progress`. natsd reports the intake of the system account's requests
("System recvQ" in nats-server): `in_progress` counts the requests being answered right now
(`server.system.in_progress`; the IPQUEUESZ request itself, when asked over $SYS). natsd hands
those requests to their handlers through the router's internal delivery queue
(natsd/_core/router.pyx), shared by all internal subscriptions, whose length it does not
expose; `pending` is therefore 0.
"""
from dataclasses import dataclass

from natsd.monitor import params as P

SYSTEM_RECVQ = "System recvQ"


@dataclass
class IpqueueszOptions:
    all: bool = False
    filter: str = ""                    # query "queues"


options_from_query, options_from_json = P.plain_options(IpqueueszOptions, filter="queues")


def queues(server):
    """name -> (pending, in progress)"""
    out = {}
    system = getattr(server, "system", None)
    if system is not None:
        out[SYSTEM_RECVQ] = (0, system.in_progress)
    return out


def handler(server, opts):
    out = {}
    for name, (pending, in_progress) in queues(server).items():
        if not opts.all and pending == 0 and in_progress == 0:
            continue
        if opts.filter and opts.filter not in name:
            continue
        q = {"pending": pending}
        if in_progress:
            q["in_progress"] = in_progress
        out[name] = q
    return out
