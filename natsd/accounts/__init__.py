"""Accounts: isolated subject spaces, and the ways a message crosses from one to another.

- registry.py    the server's accounts, each with its own sublist, limits and connection count
- imports.py     service and stream exports/imports between accounts (the `_R_.` reply
                 mapping, response tracking, shared requesters)
- mappings.py    an account's `mappings {}` table (weighted and per-cluster destinations)
- transform.py   subject transforms compiled once and applied per subject: mappings, the `to`
                 of imports and exports, JetStream's subject transforms
- latency.py     service latency metrics of exports that ask for them
- clientinfo.py  nats-server's ClientInfo of a connection and the user name it shows

Accounts made from JWTs (operator mode) are natsd/auth/jwt/accounts.py's; the system
account's services are natsd/system/.
"""
