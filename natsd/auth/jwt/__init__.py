"""Operator (JWT) mode: trust flows from operator keys to account JWTs to user JWTs.

- claims.py    NATS JWTs (nats-io/jwt claims): decoded, verified, issued
- resolver.py  where account JWTs are kept and found: MEMORY, URL, FULL/CACHE directories
- accounts.py  account JWTs verified and turned into live accounts, updated while running
- exports.py   the exports, imports and activation tokens of account JWTs
- login.py     a CONNECT with a user JWT (processClientOrLeafAuthentication's JWT branch)

The `$SYS` claim services that update, look up, list and sync account JWTs are
natsd/system/claims.py.
"""
