"""The system account: `$SYS` requests answered and events published, as nats-server does.

- services.py  `$SYS.REQ.SERVER.*` and `$SYS.REQ.ACCOUNT.*` services (the monitoring
               endpoints' data, in nats-server's envelope), connect/disconnect events, STATSZ
- remote.py    the cluster's other servers from their events: who is up (STATSZ, SHUTDOWN,
               LAMEDUCK), each account's connections there (its limit counts them), their
               subscription counts (NSUBS) and the server's own reply inbox
- filters.py   what a request asks of its answer besides data: which servers answer
               (EventFilterOptions) and how it is encoded (Accept-Encoding)
- claims.py    operator mode's account JWT services: CLAIMS.UPDATE, LOOKUP, LIST, PACK, DELETE
"""
