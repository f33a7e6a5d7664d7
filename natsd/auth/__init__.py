"""Authentication and authorization: who a connection is, and what it may do.

- authenticator.py  CONNECT credentials -> user, account and permissions: users and
                    passwords (bcrypt), tokens, nkeys, `no_auth_user`, the -ERR texts
- offloop.py        slow checks run off the event loop (bcrypt comparisons, account JWTs
                    fetched from a URL resolver) and their verdicts brought back
- permissions.py    a user's publish/subscribe/response permissions at run time
- nkey.py           nkeys: public keys, Ed25519 signatures, the server's own keys and xkey
- ed25519.py        the Ed25519 public key of a seed (no libsodium needed at start)
- callout.py        auth callout: users decided by a service (config and operator mode)
- jwt/              operator mode: JWT claims, account resolvers, accounts made from JWTs,
                    their exports and imports, logins with a user JWT

The configuration that feeds these is natsd/conf/auth.py and natsd/conf/operator.py.
"""
