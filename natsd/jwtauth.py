"""Operator mode's client authentication: a CONNECT with a user JWT, as nats-server's
processClientOrLeafAuthentication checks one.

The token must decode as user claims (natsd.claims), be within its time window, be issued by an
account natsd.jwtaccounts can serve (looked up through the resolver) or by one of that
account's signing keys (then `issuer_account` names the account), not be revoked by the account (`revocations`: the user's key or `*`, at or
after the token's `iat`), and, unless it is a bearer token, come with the user key's signature
of the INFO nonce. The user's permissions are the JWT's `pub`/`sub`/`resp`, or the account's
`default_permissions` when the JWT has none. User JWTs asking for what natsd does not enforce
yet (`src` networks, `times`, per-user subscription/data/payload limits) are refused with
a log line saying so: never admitted with the restriction dropped.
"""
import logging

from natsd import claims
from natsd.claims import jwt_permissions
from natsd.jwtaccounts import revoked
from natsd.permissions import Permissions

log = logging.getLogger("natsd")

UNSUPPORTED_USER = (("src", "source network (src) restrictions"), ("times", "connect time windows"),
                    ("locale", "connect time windows"))


class JwtUser:
    """What an accepted user JWT binds the connection to."""

    def __init__(self, uc, account, permissions):
        self.claims = uc
        self.public = uc.subject
        self.account = account
        self.permissions = permissions
        self.expires = uc.expires


class JwtAuthenticator:
    def __init__(self, accounts):
        self.accounts = accounts                        # natsd.jwtaccounts.JwtAccounts

    def authenticate(self, token, nonce, sig, kind, verify_sig):
        """JwtUser, or None (the client gets 'Authorization Violation'). verify_sig(public,
        nonce, sig) checks the nonce signature."""
        try:
            uc = claims.decode_kind(token, "user")
        except claims.JwtError as e:
            log.debug("User JWT not valid: %s", e)
            return None
        why = uc.time_check()
        if why:
            log.debug("User JWT not valid: %s", why)
            return None
        acc_key = uc.issuer_account or uc.issuer
        ac = self.accounts.lookup(acc_key)
        if ac is None or ac.time_check():
            log.debug("Account JWT of %s not found or not valid", acc_key)
            return None
        if uc.issuer != acc_key and uc.issuer not in self.accounts.keys[acc_key]:
            log.debug("User JWT issuer %s is not a signing key of account %s", uc.issuer, acc_key)
            return None
        if revoked(ac.nats.get("revocations") or {}, uc.subject, uc.issued_at):
            log.debug("User JWT of %s has been revoked", uc.subject)
            return None
        nats = uc.nats
        if not nats.get("bearer_token") and not verify_sig(uc.subject, nonce, sig):
            return None
        for key, what in UNSUPPORTED_USER:
            if nats.get(key):
                log.error("User JWT of %s asks for %s, which natsd does not enforce yet: refused",
                          uc.subject, what)
                return None
        for key in ("subs", "data", "payload"):
            if nats.get(key, -1) not in (-1, None):
                log.error("User JWT of %s asks for a %s limit, which natsd does not enforce yet: "
                          "refused", uc.subject, key)
                return None
        types = {str(t).upper() for t in nats.get("allowed_connection_types") or []}
        if types and kind.upper() not in types:
            return None
        perms = jwt_permissions(nats)
        compiled = (Permissions.from_config(perms) if perms is not None
                    else self.accounts.default_permissions(acc_key))
        return JwtUser(uc, acc_key, compiled)

