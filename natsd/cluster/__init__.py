"""Clustering over routes: natsd servers (and nats-server) in a full mesh (`cluster {}`).

- routes.py      the subsystem: listening, soliciting configured and gossiped routes,
                 registering them (pools, pinned accounts, duplicates), closing, reconnecting
- routeproto.py  the handler of route connections: CONNECT, INFO, RS+/RS-/LS+/LS-, errors
- interest.py    what we tell routes: the cluster-wide interest of each account (RS+/LS+)
- connecturls.py the client URLs of the cluster (INFO connect_urls), kept as servers come
                 and go
- pool.py        which pooled route carries an account (nats-server's fnv32a hash)

Messages themselves never leave C: the parser reads RMSG/HMSG/LMSG (natsd/_core/parser.pyx)
and the router frames them for routes (natsd/_core/router.pyx), one hop at most. Raft, which
replicated JetStream runs over these routes, is natsd/raft/.
"""
