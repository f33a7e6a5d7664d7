"""Config section for operator (JWT) mode: `operator` (a JWT, a file holding one, or a list),
`trusted`/`trusted_keys`, `resolver: MEMORY` and `resolver_preload`, as nats-server reads
them (readOperatorJWT, the preload map's "invalid account JWT").

The trusted keys are each operator's own key and its signing keys. The preloaded account JWTs
whose issuer is trusted and whose subject is their key become accounts (Options.jwt_accounts, with
their connection, subscription and payload limits and default permissions) and
Options.jwt_claims (their verified claims, for the authenticator: signing keys,
revocations). An account JWT from an untrusted issuer is kept out, so its users are refused
at connect, as nats-server refuses them. What natsd does not serve in account JWTs yet is
refused by natsd.conf.unsupported.
"""
from __future__ import annotations

import re

from .. import claims, nkey
from ..claims import jwt_permissions, signing_keys
from ..options import AccountLimits, AccountOpts
from .errors import go_read_error
from .parser import Node
from .reader import Reader

_DECORATED = re.compile(r"-{3,}[^\n]*-{3,}\r?\n([\w\-.=]+)\r?\n-{3,}")


class OperatorSection(Reader):
    def __init__(self, *args):
        super().__init__(*args)
        self.operator_claims = []           # decoded operator JWTs
        self.explicit_trusted = []          # `trusted` keys
        self.preloads = []                  # (key, account claims, node)

    def operators(self, n: Node):
        """`operator: <file or JWT>` (or a list): each read and decoded now, as nats-server."""
        items = n.value if n.kind == "array" else [n]
        for it in items:
            if it.kind != "string":
                continue
            text = it.value
            try:
                with open(text, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError as e:
                if not text.startswith("eyJ"):
                    self.err(n, f"error parsing operator JWT: {go_read_error(it.value, e)}")
                    continue
            m = _DECORATED.search(text)
            token = m.group(1) if m else text.strip()
            try:
                oc = claims.decode_kind(token, "operator")
            except claims.JwtError as e:
                self.err(n, f"error parsing operator JWT: {e}")
                continue
            self.operator_claims.append(oc)
            self.o.operator_mode = True
            for key in [oc.subject] + list(signing_keys(oc)):
                if key not in self.o.trusted_keys:
                    self.o.trusted_keys.append(key)

    def trusted_keys(self, n: Node):
        """`trusted: <key>` / `trusted_keys: [...]` must be public operator nkeys."""
        items = n.value if n.kind == "array" else [n]
        where = items[-1] if n.kind == "array" and items else n
        for it in items:
            if it.kind == "string" and not nkey.is_valid_public(it.value, nkey.OPERATOR):
                self.err(where, f'trust key "{it.value}" required to be a valid public operator nkey')
            elif it.kind == "string":
                self.explicit_trusted.append(it.value)

    def resolver(self, k: str, n: Node):
        if n.kind == "string":
            self.o.resolver = n.value.strip()

    def resolver_preload(self, k: str, n: Node):
        if n.kind != "map":
            self.err(n, "preload should be a map of account_public_key:account_jwt")
            return
        for key, v in n.value.items():
            if v.kind != "string":
                self.err(v, "preload map value should be a string JWT")
                continue
            try:
                ac = claims.decode_kind(v.value, "account")
            except claims.JwtError:
                self.err(v, "invalid account JWT")
                continue
            self.preloads.append((key, ac, v))

    def operator_accounts(self):
        """After the whole file: the trusted preloaded accounts become accounts."""
        o = self.o
        if self.explicit_trusted and not self.operator_claims:
            o.trusted_keys = list(self.explicit_trusted)    # refused (conf/unsupported.py)
        if self.operator_claims and not o.system_account:
            o.system_account = self.operator_claims[0].nats.get("system_account") or ""
        trusted = set(o.trusted_keys)
        for key, ac, node in self.preloads:
            if ac.subject != key or ac.issuer not in trusted or key in o.accounts:
                continue                # refused at connect (nats-server: not a valid account)
            lim = ac.nats.get("limits") or {}
            acc = AccountOpts(name=key, pos=node.pos, limits=AccountLimits(
                max_connections=int(lim.get("conn", -1)), max_subscriptions=int(lim.get("subs", -1)),
                max_payload=int(lim.get("payload", -1))),
                default_permissions=jwt_permissions(ac.nats.get("default_permissions")))
            o.jwt_accounts[key] = acc
            o.jwt_claims[key] = ac
