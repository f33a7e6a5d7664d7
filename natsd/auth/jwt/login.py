"""Operator mode's client authentication: a CONNECT with a user JWT, as nats-server's
processClientOrLeafAuthentication checks one.

The token must decode as user claims (natsd.auth.jwt.claims), be within its time window, be issued by an
account natsd.auth.jwt.accounts can serve (looked up through the resolver) or by one of that
account's signing keys (then `issuer_account` names the account), not be revoked by the account (`revocations`: the user's key or `*`, at or
after the token's `iat`), and, unless it is a bearer token, come with the user key's signature
of the INFO nonce. The client's address must be in one of the JWT's `src` networks and the
time within one of its `times` (in `times_location`, else the server's zone), as nats-server's
validateSrc/validateTimes; the connection then ends with the time window (or the JWT's `exp`).
The user's permissions are the JWT's `pub`/`sub`/`resp`, or the account's `default_permissions`
when the JWT has none; its `subs` and `payload` limits apply to the connection (a claim left
out is 0, as Go decodes it; -1 is no limit). A user issued by a scoped signing key sets none of
this itself: the scope's template does, its subjects templated ({{name()}}, {{subject()}},
{{account-name()}}, {{account-subject()}}, {{tag(x)}}, {{account-tag(x)}}).
"""
import datetime
import ipaddress
import itertools
import logging
import re
import time

from natsd.auth.jwt import claims
from natsd.auth.jwt.claims import jwt_permissions
from natsd.auth.jwt.accounts import bearer_refused, revoked
from natsd.gofmt import go_quote
from natsd.auth.permissions import Permissions
from natsd.subject import is_valid_subject

log = logging.getLogger("natsd")

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})$")


class JwtUser:
    """What an accepted user JWT binds the connection to."""

    def __init__(self, uc, account, permissions, window_end=None, nats=None):
        self.claims = uc
        self.nats = uc.nats if nats is None else nats  # what applies (a scoped key's template)
        self.public = uc.subject
        self.account = account
        self.permissions = permissions
        ends = [t for t in (uc.expires, window_end) if t]
        self.expires = min(ends) if ends else 0     # when the connection is cut off
        self.max_subs = _limit(self.nats, "subs")
        self.max_payload = _limit(self.nats, "payload")


def _limit(nats, key):
    v = nats.get(key, 0)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def src_allows(src, host):
    """nats-server's validateSrc: no `src` allows all; else the host must be in one of them
    (a list, or the older comma-separated text)."""
    if isinstance(src, str):
        src = [s.strip().lower() for s in src.split(",")]
    if not src:
        return True
    try:
        ip = ipaddress.ip_address((host or "").strip("[]"))
    except ValueError:
        return False
    for cidr in src:
        try:
            net = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            return False
        if ip.version == net.version and ip in net:
            return True
    return False


def connect_window(times, location, now=None):
    """nats-server's validateTimes: (allowed now, unix time the window ends or None)."""
    if not times:
        return True, None
    now = time.time() if now is None else now
    if location:
        import zoneinfo                 # (loaded for a user JWT with a time zone)
        try:
            zone = zoneinfo.ZoneInfo(location)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return False, None
    else:
        zone = datetime.datetime.now().astimezone().tzinfo
    local = datetime.datetime.fromtimestamp(now, zone)
    best = None
    for tr in times:
        bounds = []
        for key in ("start", "end"):
            m = _CLOCK.match(str((tr or {}).get(key, "")) if isinstance(tr, dict) else "")
            if not m or int(m[1]) > 23 or int(m[2]) > 59 or int(m[3]) > 59:
                return False, None
            bounds.append(local.replace(hour=int(m[1]), minute=int(m[2]), second=int(m[3]), microsecond=0))
        start, end = bounds
        if start > end:                         # crosses midnight
            if end > local:
                end_at = end
            else:
                end = end + datetime.timedelta(days=1)
                end_at = end if start < local < end else None
        else:
            end_at = end if start < local < end else None
        if end_at is not None and (best is None or end_at.timestamp() > best):
            best = end_at.timestamp()
    return best is not None, best


class JwtAuthenticator:
    def __init__(self, accounts, pinned=None):
        self.accounts = accounts                        # natsd.auth.jwt.accounts.JwtAccounts
        self.pinned = pinned            # resolver_pinned_accounts: the only issuers let in

    def authenticate(self, token, nonce, sig, kind, verify_sig, host="", defer=False):
        """JwtUser, or None (the client gets 'Authorization Violation'). verify_sig(public,
        nonce, sig) checks the nonce signature; `host` is the client's address. With `defer`,
        an account JWT that must be fetched raises natsd.auth.jwt.resolver.PendingFetch."""
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
        if self.pinned is not None and acc_key not in self.pinned:
            log.debug("Account %s not listed as operator pinned account", acc_key)
            self.accounts.pinned_failures += 1
            return None
        ac = self.accounts.lookup(acc_key, defer)
        if ac is None or ac.time_check():
            log.debug("Account JWT of %s not found or not valid", acc_key)
            return None
        keys = self.accounts.keys[acc_key]
        if uc.issuer != acc_key and uc.issuer not in keys:
            log.debug("User JWT issuer %s is not a signing key of account %s", uc.issuer, acc_key)
            return None
        nats = uc.nats
        scope = keys.get(uc.issuer)
        if scope is not None:
            try:
                nats = scoped_user(scope, uc, ac)
            except ScopeError as e:
                log.debug("User JWT is not valid: %s", e)
                return None
        if revoked(ac.nats.get("revocations") or {}, uc.subject, uc.issued_at):
            log.debug("User JWT of %s has been revoked", uc.subject)
            return None
        if nats.get("bearer_token") and bearer_refused(ac):
            log.debug("Bearer User JWT not allowed")
            return None
        if not nats.get("bearer_token") and not verify_sig(uc.subject, nonce, sig):
            return None
        if not src_allows(nats.get("src"), host):
            log.error("Bad src Ip %s", host)
            return None
        allowed, window_end = connect_window(nats.get("times"), nats.get("times_location"))
        if not allowed:
            log.error("Outside connect times")
            return None
        types = {str(t).upper() for t in nats.get("allowed_connection_types") or []}
        if types and kind.upper() not in types:
            return None
        perms = jwt_permissions(nats)
        compiled = (Permissions.from_config(perms) if perms is not None
                    else self.accounts.default_permissions(acc_key))
        return JwtUser(uc, acc_key, compiled, window_end, nats)


class ScopeError(ValueError):
    """A user JWT its scoped signing key does not allow; str() says why."""


_USER_LIMITS = ("pub", "sub", "resp", "src", "times", "times_location", "subs", "data", "payload",
                "bearer_token", "proxy_required", "allowed_connection_types")
_MUSTACHE = re.compile(r"\{\{([^}]+)\}\}")
MAX_TEMPLATE_EXPANSIONS = 4096


def scoped_user(scope, uc, ac):
    """What a user issued by a scoped signing key may do: the scope's template (limits -1 where
    it says nothing), its subjects templated from the user and account claims, as nats-server's
    processUserPermissionsTemplate. The user JWT itself must set no permissions or limits."""
    if any(_set(uc.nats.get(k)) for k in _USER_LIMITS):
        raise ScopeError("scoped users require no permissions or limits set")
    tpl = scope.get("template") if isinstance(scope.get("template"), dict) else {}
    nats = {"subs": -1, "data": -1, "payload": -1, **tpl}
    for direction in ("pub", "sub"):
        perm = dict(nats.get(direction) or {})
        had_allow = bool(perm.get("allow"))
        for key in ("allow", "deny"):
            if perm.get(key):
                perm[key] = _expand(list(perm[key]), uc, ac, fail_on_bad=key == "deny")
        if had_allow and not perm.get("allow"):
            perm["deny"] = list(perm.get("deny") or []) + [">"]
        nats[direction] = perm
    return nats


def _set(v):
    return v not in (None, "", 0, False, [], {})


def _expand(subjects, uc, ac, fail_on_bad):
    if not any(_MUSTACHE.search(s) for s in subjects):
        return subjects
    out = []
    for subject in subjects:
        ops = _MUSTACHE.findall(subject)
        choices = [_template_values(op.strip(), subject, uc, ac, fail_on_bad) for op in ops]
        count = 1
        for values in choices:
            count *= len(values)
        if len(out) + count > MAX_TEMPLATE_EXPANSIONS:
            raise ScopeError("template expansion exceeds limit: %d" % MAX_TEMPLATE_EXPANSIONS)
        for combo in itertools.product(*choices):
            expanded = subject
            for op, value in zip(_MUSTACHE.findall(subject), combo):
                expanded = expanded.replace("{{%s}}" % op, value)
            if is_valid_subject(expanded):
                out.append(expanded)
            elif fail_on_bad:
                raise ScopeError("generated invalid subject")
    return out


def _template_values(op, subject, uc, ac, fail_on_bad):
    low = op.lower()
    if low == "name()":
        return [uc.name]
    if low == "subject()":
        return [uc.subject]
    if low == "account-name()":
        return [ac.name or ac.subject]
    if low == "account-subject()":
        return [uc.issuer_account]
    for prefix, tags in (("tag(", uc.nats.get("tags")), ("account-tag(", ac.nats.get("tags"))):
        if low.startswith(prefix) and op.endswith(")"):
            name = op[len(prefix):-1].lower() + ":"
            values = [t[len(name):] for t in tags or [] if isinstance(t, str) and t.startswith(name)]
            if values:
                return values
            if fail_on_bad:
                raise ScopeError("generated invalid subject %s: %s is not defined"
                                 % (go_quote(subject), go_quote(op[len(prefix):-1])))
            return [" "]
    raise ScopeError("template operation in %s: %s is not defined" % (go_quote(subject), go_quote(op)))

