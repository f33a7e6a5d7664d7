"""Operator mode's accounts: account JWTs verified and turned into live accounts.

An account is made the first time something looks it up (a user logging in, a route telling
of interest), from the JWT the resolver (natsd.auth.jwt.resolver) holds: the JWT must decode as account
claims, name the key it is filed under, be issued by a trusted operator key and pass
nats-io/jwt's validation, as nats-server's verifyAccountClaims checks. The account then gets
the JWT's limits, default permissions, signing keys, mappings, exports and imports (linked
through natsd.auth.jwt.exports and natsd.accounts.imports) and JetStream settings (AccountRegistry.on_update
tells the JetStream engine). A newer JWT for a live account (a CLAIMS.UPDATE, or a directory
resolver's store changing) is applied at once, as nats-server's updateAccountClaimsWithRefresh:
the new limits reach the connected clients (the newest connections past the limit are closed),
users the JWT revokes, or whose signing key it drops, are disconnected, and the account's
imports and its importers' are linked again. A deleted account locks out new clients and
disconnects its own.

What natsd does not serve in account JWTs (UNSERVED) makes the account unusable, with a log
line naming it: its users are refused, never admitted with a restriction dropped.
"""
from __future__ import annotations

import logging
import time

from natsd.auth.jwt import claims
from natsd.auth.jwt.claims import jwt_permissions, signing_keys
from natsd.auth.jwt.exports import (
    JwtExport, JwtImport, activation_expiry, authorize, exports_of, imports_of, validation_error)
from natsd.accounts.mappings import MappingTable, default_domain_rules
from natsd.options import AccountOpts, MappingDest
from natsd.gofmt import go_quote
from natsd.subject import is_valid_literal_subject
from natsd.auth.permissions import Permissions
from natsd.auth.jwt.resolver import PendingFetch, make_resolver
from natsd.accounts.transform import TransformError

log = logging.getLogger("natsd")

ERR_ACCOUNT_CONNS = "maximum account active connections exceeded"
ERR_MAX_SUBS = "maximum subscriptions exceeded"
SUB_LIMIT_CLOSE = 0.02          # seconds between telling a client at its subscription limit and closing it
ERR_REVOKED = "User Authentication Revoked"
ERR_ACCOUNT_EXPIRED = "Account Authentication Expired"
ERR_AUTH_VIOLATION = "Authorization Violation"


def _limits(nats: dict) -> dict:
    lim = nats.get("limits")
    return lim if isinstance(lim, dict) else {}


def jetstream_limits(nats: dict) -> dict | None:
    """The JetStream limits of account claims as natsd.jetstream reads an account's
    `jetstream` limits, or None when the JWT does not enable JetStream (no tier, or the
    untiered limits, with memory or disk storage: nats-io/jwt's IsJSEnabled). Tiered limits
    (`tiered_limits` by replica count) come as `tiers`, and the R1 tier, the one streams on a
    single server use, also as the limits themselves."""
    lim = _limits(nats)
    tiers = lim.get("tiered_limits")
    tiers = {name: t for name, t in tiers.items() if isinstance(t, dict)} if isinstance(tiers, dict) else {}
    enables = lambda t: bool(t.get("mem_storage") or t.get("disk_storage"))
    if tiers:
        if not any(enables(t) for t in tiers.values()):
            return None
        return dict(_js_tier(tiers.get("R1", {})) if "R1" in tiers else {}, tiered=True,
                    tiers={name: _js_tier(t) for name, t in tiers.items()})
    if not enables(lim):
        return None
    return dict(_js_tier(lim), tiered=False)


def _js_tier(lim: dict) -> dict:
    unlimited = lambda v: -1 if not v else v      # nats-server's toUnlimited (0 means no limit)
    return {"max_mem": lim.get("mem_storage", 0), "max_store": lim.get("disk_storage", 0),
            "max_streams": lim.get("streams", 0), "max_consumers": lim.get("consumer", 0),
            "max_ack_pending": unlimited(lim.get("max_ack_pending")),
            "mem_max_stream_bytes": unlimited(lim.get("mem_max_stream_bytes")),
            "disk_max_stream_bytes": unlimited(lim.get("disk_max_stream_bytes")),
            "max_bytes_required": bool(lim.get("max_bytes_required"))}


def _trace(nats: dict) -> tuple[str, int]:
    """The claims' `trace` as nats-server takes it: no destination for one that is not a
    subject; a sampling outside 1..100 is 100."""
    trace = nats.get("trace") or {}
    dest = str(trace.get("dest") or "")
    if not is_valid_literal_subject(dest):
        return "", 0
    sampling = int(trace.get("sampling") or 0)
    return dest, sampling if 0 < sampling <= 100 else 100


def _uses(*keys):
    return lambda nats: any(nats.get(k) for k in keys)


# (feature, does the account JWT's `nats` claims use it?)
UNSERVED = [
    ("JetStream cluster traffic in the account", lambda nats: str(nats.get("cluster_traffic") or "system").lower() != "system"),
]


def unserved_feature(nats: dict) -> str | None:
    for feature, used in UNSERVED:
        if used(nats):
            return feature
    return None


class AccountJwtError(Exception):
    """An account JWT that cannot back an account; str() says why."""


class JwtAccounts:
    """Verified account claims by account key, and the live accounts made from them.

    `registry` is the server's AccountRegistry; `disconnect(c, err_text, reason)` sends a
    client nats-server's -ERR and closes it; `link` installs one import (natsd.accounts.imports);
    `call_later` is the loop's timer."""

    def __init__(self, opts, registry, disconnect, link, call_later):
        self.trusted = set(opts.trusted_keys)
        self.pinned_failures = 0        # logins refused by resolver_pinned_accounts (varz)
        self.server_max_payload = opts.max_payload
        self.cluster = opts.cluster.name or ""
        self.default_domains = opts.default_js_domain     # account key -> domain (default_js_domain)
        self.registry = registry
        self.disconnect = disconnect
        self.link = link            # link(importer, exporter, ExportOpts, ImportOpts) -> (sublist, sub)
        self.exports: dict[str, list[JwtExport]] = {}
        self.imports: dict[str, list[JwtImport]] = {}
        self.links: dict[str, list] = {}               # account key -> its installed imports
        self.call_later = call_later                    # (delay, fn, *args) -> timer (the loop's)
        self.timers: dict[str, list] = {}              # account key -> activation expiry timers
        self._linking: set[str] = set()
        self.claims: dict[str, claims.Claims] = {}      # account key -> claims of a live account
        self.keys: dict[str, dict] = {}                 # account key -> its signing keys
        self.defaults: dict[str, Permissions | None] = {}
        self.resolver = make_resolver(opts.resolver, self._stored, self._deleted)
        for key, token in opts.resolver_preload.items():
            try:
                self.resolver.store(key, token)
            except Exception as e:          # nats-server keeps going past a bad preload
                log.error("Preloaded account [%s] not valid: %s", key, e)

    def resolver_unreachable(self) -> str | None:
        """nats-server's start-up test of a URL resolver ("is anyone home"), or None."""
        check = getattr(self.resolver, "check", None)
        return check() if check is not None else None

    # -- looking up --

    def verify(self, token: str, key: str | None = None) -> claims.Claims:
        """The claims of an account JWT natsd can serve; AccountJwtError otherwise."""
        try:
            ac = claims.decode_kind(token, "account")
        except claims.JwtError as e:
            raise AccountJwtError(str(e)) from None
        if key is not None and ac.subject != key:
            raise AccountJwtError("subject does not match jwt content")
        why = validation_error(ac)
        if why:
            log.debug("Account JWT of %s not valid: %s", ac.subject, why)
        if ac.issuer not in self.trusted or ac.time_check() or why:
            raise AccountJwtError("account validation failed")   # nats-server's ErrAccountValidation
        feature = unserved_feature(ac.nats)
        if feature:
            raise AccountJwtError("uses %s, which natsd does not serve yet" % feature)
        self._mappings(ac, {})
        return ac

    def _mappings(self, ac: claims.Claims, extra: dict):
        """The JWT's `mappings` ({source: [{subject, weight, cluster}]}) and the `extra` rules
        after them compiled, or None."""
        maps = ac.nats.get("mappings")
        if not isinstance(maps, dict):
            maps = {}
        rules = {src: [MappingDest(str(d.get("subject") or ""), int(d.get("weight") or 100),
                                   str(d.get("cluster") or "")) for d in dests if isinstance(d, dict)]
                 for src, dests in maps.items() if isinstance(dests, list)}
        rules.update(extra)
        if not rules:
            return None
        try:
            return MappingTable.from_options(rules, self.cluster)
        except TransformError as e:
            raise AccountJwtError("invalid subject mapping: %s" % e) from None

    def _default_domain_rules(self, acc, jetstream: bool) -> dict:
        """`default_js_domain`'s rules for a new account, logged as nats-server's registerAccount
        logs them."""
        domain = self.default_domains.get(acc.name)
        if domain is None:
            return {}
        if jetstream:
            log.warning("Skipping Default Domain %s, set for JetStream enabled account %s",
                        go_quote(domain), go_quote(acc.name))
            return {}
        if not domain:
            return {}
        rules = default_domain_rules(domain)
        for src, dests in rules.items():
            log.info("Adding default domain mapping %s -> %s to account %s %#x", go_quote(src),
                     go_quote(dests[0].subject), go_quote(acc.name), id(acc))
        return rules

    def lookup(self, key: str, defer: bool = False) -> claims.Claims | None:
        """The live claims of account `key`, making the account from the resolver's JWT on
        first use; None when there is no usable JWT (logged). A fetch (URL resolver, or the
        cluster for a directory resolver) raises PendingFetch with `defer` (a login waits for
        it off the loop); without, a URL is fetched blocking and the cluster is not asked."""
        ac = self.claims.get(key)
        if ac is not None:
            return ac
        try:
            token = self.resolver.fetch(key)
        except PendingFetch as pending:
            if defer:
                raise
            # on the loop: a URL may be fetched here (blocking); other servers' answers could
            # not arrive while we wait, so the cluster is not asked
            token = pending.work() if pending.resolver.kind == "URL" else None
        if token is None:
            log.debug("Account JWT lookup error: account %s not found", key)
            return None
        try:
            ac = self.verify(token, key)
        except AccountJwtError as e:
            log.error("Account %s can not be used: %s", key, e)
            return None
        self._install(ac)
        return ac

    def default_permissions(self, key: str) -> Permissions | None:
        return self.defaults.get(key)

    # -- applying claims --

    def _install(self, ac: claims.Claims) -> None:
        key = ac.subject
        acc = self.registry.get(key) if key in self.registry.accounts else None
        new = acc is None
        if new:
            acc = self.registry.add(key)
        self.claims[key] = ac
        acc.jwt, acc.updated = ac, time.time()
        self.keys[key] = signing_keys(ac)
        cfg = jwt_permissions(ac.nats.get("default_permissions"))
        self.defaults[key] = Permissions.from_config(cfg) if cfg is not None else None
        # a limit the claims leave out is 0, as Go decodes it: nothing allowed (-1 is none)
        lim = _limits(ac.nats)
        acc.max_connections = int(lim.get("conn", 0))
        acc.max_subscriptions = int(lim.get("subs", 0))
        acc.max_payload = int(lim.get("payload", 0))
        acc.max_leafnodes = int(lim.get("leaf", 0))
        js = jetstream_limits(ac.nats)
        # as nats-server: the default domain's rules join the account's when it is registered
        # (its first claims); a later update keeps the claims' own mappings only
        acc.mappings = self._mappings(ac, self._default_domain_rules(acc, js is not None) if new else {})
        acc.trace_dest, acc.trace_sampling = _trace(ac.nats)
        self.exports[key], self.imports[key] = exports_of(ac), imports_of(ac)
        acc.config = AccountOpts(name=key, exports=[e.opts for e in self.exports[key]],
                                 imports=[i.opts for i in self.imports[key]],
                                 jetstream=js is not None, jetstream_limits=js or {})
        acc.jetstream = js is not None
        self._relink(key)
        for hook in self.registry.on_update:
            hook(acc)

    # -- imports --

    def _relink(self, key: str) -> None:
        """(Re)install the imports of `key` and of every live account that imports from it."""
        self._link(key)
        for other, imps in list(self.imports.items()):
            if other != key and any(i.opts.account == key for i in imps):
                self._link(other)

    def _link(self, key: str) -> None:
        if key in self._linking:
            return                      # an exporter loaded while linking `key` came back to it
        self._linking.add(key)
        try:
            for sublist, sub in self.links.pop(key, []):
                sublist.remove(sub)
            for timer in self.timers.pop(key, []):
                timer.cancel()
            installed, timers = [], []
            acc = self.registry.get(key)
            for imp in self.imports.get(key, []) if key in self.claims else []:
                exporter = imp.opts.account
                ec = self.lookup(exporter)
                if ec is None:
                    log.error("Can't locate account [%s] for import of [%s] %s", exporter,
                              imp.opts.subject, imp.opts.kind)
                    continue
                exp, why = authorize(key, imp, ec, self.keys[exporter], self.exports[exporter],
                                     int(time.time()))
                if exp is None:
                    log.error("Account %s: %s import of [%s] from %s not added: %s", key, imp.opts.kind,
                              imp.opts.subject, exporter, why)
                    continue
                installed.append(self.link(acc, self.registry.get(exporter), exp.opts, imp.opts))
                expiry = activation_expiry(imp) if exp.token_req else 0
                if expiry:                  # then the import goes (nats-server: activationExpired)
                    timers.append(self.call_later(max(0.0, expiry + 1 - time.time()), self._link, key))
            self.links[key] = installed
            self.timers[key] = timers
        finally:
            self._linking.discard(key)

    def update(self, key: str, token: str) -> None:
        """A new JWT for account `key`, applied when the account is live (a JWT for an
        account nobody uses yet waits in the resolver). AccountJwtError when refused."""
        ac = self.verify(token, key)
        if key not in self.claims:
            return
        old = self.claims[key]
        if old.token == token:
            return
        log.debug("Updating account claims: %s/%s", key, ac.name)
        old_keys = self.keys.get(key, {})
        self._install(ac)
        new_keys = self.keys[key]
        altered = {k for k, scope in old_keys.items() if k not in new_keys or new_keys[k] != scope}
        for c in sorted(self.registry.get(key).clients, key=lambda c: c.cid):
            user = getattr(c.state, "jwt_user", None)
            if user is not None and user.claims.issuer in altered and not (c.closing or c.closed):
                log.debug("User JWT signing key of %s was removed or changed", user.public)
                self.disconnect(c, None, "Authentication Failure")
        self._enforce(key, ac)

    def _enforce(self, key: str, ac: claims.Claims) -> None:
        """What the new claims mean for the connected clients, oldest first."""
        acc = self.registry.get(key)
        revocations = ac.nats.get("revocations") or {}
        count = 0
        for c in sorted(acc.clients, key=lambda c: c.cid):
            if c.closing or c.closed or not _is_client(c):
                continue                # clients only, as nats-server (not leafs)
            if 0 <= acc.max_connections <= count:
                log.error("%s", ERR_ACCOUNT_CONNS)
                self.disconnect(c, ERR_ACCOUNT_CONNS, "Maximum Account Connections Exceeded")
                continue
            count += 1
            user = c.state.jwt_user
            if user is not None and user.nats.get("bearer_token") and bearer_refused(ac):
                log.debug("Bearer User JWT not allowed")
                self.disconnect(c, ERR_AUTH_VIOLATION, "Authentication Failure")
                continue
            if user is not None and revoked(revocations, user.public, user.claims.issued_at):
                log.debug("%s", ERR_REVOKED)
                self.disconnect(c, ERR_REVOKED, "Credentials Revoked")
                continue
            c.has_mappings = bool(acc.mappings)
            c.external_traces = bool(acc.trace_dest)
            c.forget_lookup()
            self.apply_client_limits(c, acc)

    def apply_client_limits(self, c, acc) -> None:
        """nats-server's applyAccountLimits, as a client connects and when its account's claims
        change: the smallest of the user's, the account's and the server's limits (-1: none).
        A client already at its subscription limit is told so and closed SUB_LIMIT_CLOSE later
        (nats-server does both from a goroutine: the client's PONG goes out first)."""
        user = c.state.jwt_user
        payload = [self.server_max_payload, acc.max_payload, user.max_payload if user else -1]
        c.max_payload = min(p for p in payload if p >= 0)
        subs = [n for n in (acc.max_subscriptions, user.max_subs if user else -1) if n >= 0]
        if subs and min(subs) <= len(c.subs):
            log.error("%s", ERR_MAX_SUBS)
            self.call_later(0, lambda: c.closed or c.handler.send_err(c, ERR_MAX_SUBS))
            self.call_later(SUB_LIMIT_CLOSE, lambda: c.closed or self.disconnect(
                c, None, "Maximum Subscriptions Exceeded"))

    # -- resolver callbacks --

    def _stored(self, key: str) -> None:
        """The directory resolver holds a new JWT for `key`."""
        if key not in self.claims:
            return
        token = self.resolver.held(key)
        try:
            self.update(key, token)
        except AccountJwtError as e:
            log.error("DirResolver - Update for account %r resulted in error %s", key, e)

    def _deleted(self, key: str) -> None:
        """nats-server's removeCb: new clients are locked out, connected ones expire."""
        log.debug("Disable account %s due to remove", key)
        self.claims.pop(key, None)
        self._relink(key)
        acc = self.registry.get(key) if key in self.registry.accounts else None
        if acc is None:
            return
        acc.max_connections = acc.max_subscriptions = acc.max_payload = 0
        for c in sorted(acc.clients, key=lambda c: c.cid):
            if not (c.closing or c.closed) and _is_client(c):
                self.disconnect(c, ERR_ACCOUNT_EXPIRED, "Authentication Expired")


def _is_client(c) -> bool:
    """A client connection (not a leaf node: leaf limits are counted apart, as nats-server)."""
    return getattr(c.state, "kind", "") == "Client"


def bearer_refused(ac: claims.Claims) -> bool:
    """The account's `disallow_bearer` limit."""
    return bool(_limits(ac.nats).get("disallow_bearer"))


def revoked(revocations: dict, public: str, issued_at: int) -> bool:
    """Is a user JWT issued at `issued_at` revoked (its key, or `*` for all, at or after)?"""
    for key in (public, "*"):
        t = revocations.get(key)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= issued_at:
            return True
    return False

