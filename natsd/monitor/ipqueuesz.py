"""`/ipqueuesz` and `$SYS.REQ.SERVER.PING.IPQUEUESZ`: the server's internal queues.

nats-server lists its internal queues (only the busy ones unless `all`), each with `pending`
items and items `in_progress`. natsd has one queue where nats-server has many: the internal
deliveries (to the system account's services, JetStream's API and streams' ingest, imports)
wait in the router's queue (natsd/_core/router.pyx) until the loop runs them, after the
iteration that published them; its depth at the moment of the request is `Internal deliveries`
`pending`. "System recvQ" (nats-server's name) counts the system account's requests being
answered right now as `in_progress` (the IPQUEUESZ request itself, when asked over $SYS).
"""
from dataclasses import dataclass

from natsd._core.router import internal_pending
from natsd.monitor import params as P

SYSTEM_RECVQ = "System recvQ"
INTERNAL_DELIVERIES = "Internal deliveries"


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
    out[INTERNAL_DELIVERIES] = (internal_pending(), 0)
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
