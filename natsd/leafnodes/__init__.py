"""Leaf nodes: links to other servers that extend a cluster's subject space (`leafnodes {}`).

- leafnode.py   the accept and solicit sides, the leaf protocol's control operations,
                interest (LS+/LS-), loop detection, JetStream domain rules
- linkperms.py  what may cross one leaf link, seen from this server
- creds.py      `.creds` files and nkey seeds of solicited remotes: the CONNECT they sign

LMSG/HMSG themselves are parsed and routed in C (natsd/_core/parser.pyx, router.pyx).
"""
