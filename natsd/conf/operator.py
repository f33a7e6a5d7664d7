"""Config section for operator (JWT) mode: `operator` (a JWT, a file holding one, or a list),
`trusted`/`trusted_keys`, `resolver` (MEMORY, URL(...) or the FULL/CACHE directory map) and
`resolver_preload`, as nats-server reads them (readOperatorJWT, the resolver map's checks,
the preload map's "invalid account JWT").

The trusted keys are each operator's own key and its signing keys. Preloaded account JWTs are
only decoded here; natsd.auth.jwt.accounts verifies them (trusted issuer, subject) when an account
is looked up, as nats-server does. What natsd does not serve in account JWTs is refused by
natsd.conf.unsupported at start and by natsd.auth.jwt.accounts at run time.
"""
from __future__ import annotations

import os
import re

from natsd.auth.jwt import claims
from natsd.auth import nkey
from natsd.auth.jwt.claims import signing_keys
from natsd.gofmt import go_duration, go_quote, parse_go_duration
from natsd.options import ResolverOpts
from natsd.conf.errors import go_read_error
from natsd.conf.parser import Node
from natsd.conf.reader import GO_TYPE, Reader

_DECORATED = re.compile(r"-{3,}[^\n]*-{3,}\r?\n([\w\-.=]+)\r?\n-{3,}")
_MEMORY = re.compile(r"(?i)(MEM|MEMORY)\s*")
_URL = re.compile(r'(?i)(?:URL)(?:\(\s*"?([^\s"]*)"?\s*\))?\s*')


def _go_url_parses(url: str) -> bool:
    """Go's url.Parse refuses control characters and broken %-escapes (little else)."""
    return not (any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in url)
                or re.search(r"%(?![0-9A-Fa-f]{2})", url))


class OperatorSection(Reader):
    def __init__(self, *args):
        super().__init__(*args)
        self.operator_claims = []           # decoded operator JWTs
        self.explicit_trusted = []          # `trusted` keys

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

    def resolver_pinned_accounts(self, k: str, n: Node):
        """The only accounts whose users may log in (nats-server's resolverPinnedAccounts):
        one key, or an array of them."""
        pinned = self.o.resolver_pinned_accounts = set()
        if n.kind == "string":
            pinned.add(n.value)
        elif n.kind == "array":
            for item in n.value:
                if item.kind == "string":
                    pinned.add(item.value)
                else:
                    self.err(item, "error parsing resolver_pinned_accounts: unsupported type in array "
                                   + GO_TYPE[item.kind])
        # any other type is passed over, as nats-server's type switch passes it over

    def resolver(self, k: str, n: Node):
        """`resolver: MEMORY | URL(<url>)` or `resolver { type: full|cache, dir, ... }`, with
        nats-server's texts for what it refuses."""
        r = ResolverOpts()
        if n.kind == "string":
            if _MEMORY.search(n.value):         # nats-server matches MEM anywhere in the text
                r.kind = "MEMORY"
            else:
                m = _URL.search(n.value)
                if m:
                    r.kind, r.url = "URL", (m.group(1) or "").strip()
                    if not _go_url_parses(r.url):
                        self.err(n, f"error parsing account resolver url [{go_quote(r.url)}]")
                        return
        elif n.kind == "map":
            r = self._resolver_map(n)
            if r is None:
                return
        else:
            self.err(n, f"error parsing operator resolver, wrong type {GO_TYPE.get(n.kind, n.kind)}")
            return
        if not r.kind:
            self.err(n, 'error parsing account resolver, should be MEM or  URL("url") or a map '
                        "containing dir and type state=[FULL|CACHE])")
            return
        self.o.resolver = r

    def _resolver_map(self, n: Node) -> ResolverOpts | None:
        v = {key.lower(): val for key, val in n.value.items()}
        r = ResolverOpts(dir=self.s(v["dir"], "dir") if "dir" in v else "")
        kind = (self.s(v["type"], "type") if "type" in v else "").upper()
        delete = self.b(v["allow_delete"], "allow_delete") if "allow_delete" in v else False
        hard = self.b(v["hard_delete"], "hard_delete") if "hard_delete" in v else None
        r.limit = self.i(v["limit"], "limit") if "limit" in v else 0
        try:
            for key in ("ttl", "interval", "timeout"):
                if key in v:
                    text = self.s(v[key], key)
                    setattr(r, key, parse_go_duration(text) / 1e9)
        except ValueError as e:
            self.err(n, str(e))
            return None
        if kind in ("FULL", "CACHE"):
            self._resolver_dir(n, r.dir)
        if kind == "CACHE":
            if r.interval:
                self.err(n, "CACHE does not accept sync")
            if delete:
                self.err(n, "CACHE does not accept allow_delete")
            if hard is not None:
                self.err(n, "CACHE does not accept hard_delete")
        elif kind == "FULL":
            if r.ttl:
                self.err(n, "FULL does not accept ttl")
            if hard is not None and not delete:
                self.err(n, "hard_delete has no effect without delete")
            r.delete = ("hard" if hard else "rename") if delete else ""
        if kind in ("FULL", "CACHE", "MEM", "MEMORY"):
            r.kind = "MEMORY" if kind.startswith("MEM") else kind
        if r.timeout <= 0:
            self.err(n, f"Fetch timeout {go_duration(int(r.timeout * 1e9))} is too smal")
        return r

    def _resolver_dir(self, n: Node, path: str):
        if not path:
            self.err(n, "dir has no value and needs to point to a directory")
        elif os.path.exists(path) and (not os.path.isdir(path) or not os.access(path, os.W_OK)):
            self.err(n, "dir needs to point to an accessible directory")

    def resolver_preload(self, k: str, n: Node):
        if n.kind != "map":
            self.err(n, "preload should be a map of account_public_key:account_jwt")
            return
        for key, v in n.value.items():
            if v.kind != "string":
                self.err(v, "preload map value should be a string JWT")
                continue
            try:
                claims.decode_kind(v.value, "account")
            except claims.JwtError:
                self.err(v, "invalid account JWT")
                continue
            self.o.resolver_preload[key] = v.value

    def operator_accounts(self):
        """After the whole file: `trusted` alone, the operator's system account, and
        `resolver_tls` (wherever it came in the file)."""
        o = self.o
        o.resolver.tls = getattr(self, "resolver_tls_block", None)
        if self.explicit_trusted and not self.operator_claims:
            # nats-server's trustedKeys without TrustedOperators: users log in with JWTs of
            # accounts these keys signed, and none of the operator's checks apply
            o.trusted_keys = list(self.explicit_trusted)
            o.operator_mode = o.trusted_only = True
        if self.operator_claims and not o.system_account:
            o.system_account = self.operator_claims[0].nats.get("system_account") or ""
