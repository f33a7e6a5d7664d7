"""Exports and imports of account JWTs, as nats-io/jwt v2 writes them and nats-server reads them.

An export (`type` stream or service, `subject`, `token_req`, `revocations`, `response_type`,
`response_threshold` in nanoseconds) becomes an ExportOpts; an import (`account`, `subject`,
`local_subject`, the older `to`, `share`, `token`) an ImportOpts with natsd's meaning of
`subject` (the exporter's subject) and `to` (the importer's), as nats-server's
updateAccountClaims maps them: a stream import's `to` is a prefix, a service import's
`subject` is local unless `local_subject` is given. `authorize` is nats-server's
checkStreamImportAuthorized/checkServiceImportAuthorized: the export must cover the subject,
and a `token_req` export wants an activation token issued by the exporter (or one of its
signing keys) to this importer for a subject covering it, unexpired and not revoked (an
import whose token expires is dropped then: natsd.auth.jwt.accounts links the account again).
`validation_error` is what nats-io/jwt's Validate finds wrong in them: an account JWT with
such an export or import (a token for another account, an overlapping service import, ...)
is not a valid account at all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from natsd.auth.jwt import claims
from natsd.gofmt import go_quote
from natsd.options import ExportOpts, ImportOpts, ServiceLatency
from natsd.subject import is_valid_subject, subject_is_subset

RESPONSE_TYPES = {"singleton": "Singleton", "stream": "Stream", "chunked": "Chunked"}


@dataclass
class JwtExport:
    opts: ExportOpts
    token_req: bool
    revocations: dict


@dataclass
class JwtImport:
    opts: ImportOpts
    token: str


def _typed_entries(ac: claims.Claims, key: str):
    """(entry, "service" or "stream") for each map of an account claim's exports/imports."""
    for e in ac.nats.get(key) or []:
        if isinstance(e, dict):
            yield e, "service" if e.get("type") == "service" else "stream"


def exports_of(ac: claims.Claims) -> list[JwtExport]:
    out = []
    for e, kind in _typed_entries(ac, "exports"):
        threshold = e.get("response_threshold") or 0
        opts = ExportOpts(kind=kind, subject=str(e.get("subject") or ""),
                          response_type=RESPONSE_TYPES.get(str(e.get("response_type") or "").lower(),
                                                           "Singleton"),
                          response_threshold=threshold / 1e9 if isinstance(threshold, (int, float)) else 0.0,
                          allow_trace=bool(e.get("allow_trace")))
        lat = e.get("service_latency")
        if kind == "service" and isinstance(lat, dict):
            opts.latency = ServiceLatency(subject=str(lat.get("results") or ""), sampling=_sampling(lat))
        pos = e.get("account_token_position")
        if isinstance(pos, int) and not isinstance(pos, bool) and pos > 0:
            opts.account_token_position = pos
        revs = e.get("revocations") if isinstance(e.get("revocations"), dict) else {}
        out.append(JwtExport(opts, bool(e.get("token_req")), revs))
    return out


def _sampling(lat: dict) -> int:
    """nats-io/jwt's SamplingRate: a percentage, or "headers" (0)."""
    v = lat.get("sampling", 0)
    if isinstance(v, str) and v.lower() == "headers":
        return 0
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def imports_of(ac: claims.Claims) -> list[JwtImport]:
    out = []
    for i, kind in _typed_entries(ac, "imports"):
        subject, local, to = (str(i.get(k) or "") for k in ("subject", "local_subject", "to"))
        opts = ImportOpts(kind=kind, account=str(i.get("account") or ""), share=bool(i.get("share")),
                          allow_trace=bool(i.get("allow_trace")))
        if kind == "stream":
            opts.subject = subject
            if local:
                opts.to = local
            else:
                opts.prefix = to
        elif local:
            opts.subject, opts.to = subject, local
        else:
            opts.subject, opts.to = to or subject, subject
        out.append(JwtImport(opts, str(i.get("token") or "")))
    return out


def authorize(importer: str, imp: JwtImport, exporter: claims.Claims, exporter_keys,
              exports: list[JwtExport], now: int) -> tuple[JwtExport | None, str]:
    """The export `imp` may use, or (None, why not)."""
    subject = imp.opts.subject
    for exp in exports:
        if exp.opts.kind != imp.opts.kind or not subject_is_subset(subject, exp.opts.subject):
            continue
        if exp.opts.account_token_position:         # checked before any activation token
            if exp.opts.allows(importer, subject):
                return exp, ""
            return None, "the subject's account token is not the importer's"
        if not exp.token_req:
            return exp, ""
        why = _activation_refusal(importer, imp, exporter, exporter_keys, exp, now)
        if why is None:
            return exp, ""
        return None, why
    return None, "no %s export of %s in account %s" % (imp.opts.kind, subject, exporter.subject)


def activation_expiry(imp: JwtImport) -> int:
    """When an import's activation token expires (unix seconds), 0 for never."""
    try:
        return claims.decode_kind(imp.token, "activation").expires if imp.token else 0
    except claims.JwtError:
        return 0


def _activation_refusal(importer, imp, exporter, exporter_keys, exp, now):
    if not imp.token:
        return "the export requires an activation token"
    try:
        act = claims.decode_kind(imp.token, "activation")
    except claims.JwtError as e:
        return "activation token not valid: %s" % e
    owner = act.issuer_account or act.issuer
    if owner != exporter.subject or (act.issuer != owner and act.issuer not in exporter_keys):
        return "activation token not issued by the exporting account"
    if act.subject != importer:
        return "activation token is for another account"
    if not subject_is_subset(imp.opts.subject, str(act.nats.get("subject") or "")):
        return "activation token does not cover the subject"
    if act.time_check(now):
        return "activation token %s" % act.time_check(now).replace("claim ", "")
    for key in (importer, "*"):
        t = exp.revocations.get(key)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= act.issued_at:
            return "activation token revoked"
    return None


def validation_error(ac: claims.Claims) -> str | None:
    """The first blocking problem nats-io/jwt's Validate finds in the exports and imports of
    account claims (an account with one is not valid at all, as in nats-server), or None."""
    now = int(time.time())
    for e in ac.nats.get("exports") or []:
        if not isinstance(e, dict):
            return "null export is not allowed"
        kind, rt = e.get("type"), e.get("response_type") or ""
        if kind not in ("stream", "service"):
            return "invalid export type: %s" % go_quote(str(kind))
        if kind == "service" and rt and rt not in ("Singleton", "Stream", "Chunked"):
            return "invalid response type for service: %s" % go_quote(str(rt))
        if kind == "stream" and rt:
            return "invalid response type for stream: %s" % go_quote(str(rt))
        if kind == "stream" and e.get("allow_trace"):
            return "AllowTrace only valid for service export"
        lat = e.get("service_latency")
        if lat is not None:
            if kind != "service":
                return "latency tracking only permitted for services"
            lat = lat if isinstance(lat, dict) else {}
            if _sampling(lat) != 0 and not 1 <= _sampling(lat) <= 100:
                return "sampling percentage needs to be between 1-100"
            results = str(lat.get("results") or "")
            if not is_valid_subject(results):
                return "subject %s is not valid" % go_quote(results)
            if any(t in ("*", ">") for t in results.split(".")):
                return "results subject can not contain wildcards"
        threshold = e.get("response_threshold") or 0
        if threshold and kind == "stream":
            return "response threshold only valid for services"
        if isinstance(threshold, (int, float)) and threshold < 0:
            return "negative response threshold is invalid"
        if not is_valid_subject(str(e.get("subject") or "")):
            return "subject %s is not valid" % go_quote(str(e.get("subject") or ""))
        why = _token_position_error(str(e.get("subject")), e.get("account_token_position"))
        if why:
            return why
    services = {}
    for i in ac.nats.get("imports") or []:
        if not isinstance(i, dict):
            return "null import is not allowed"
        why = _import_error(ac.subject, i, now)
        if why:
            return why
        if i.get("type") == "service":
            sub = str(i.get("to") or i.get("local_subject") or i.get("subject") or "")
            mine = services.setdefault(str(i.get("account") or ""), [])
            for other in mine:
                if subject_is_subset(sub, other) or subject_is_subset(other, sub):
                    return "overlapping subject namespace for %s and %s in same account %s" % (
                        go_quote(sub), go_quote(other), go_quote(str(i.get("account") or "")))
            mine.append(sub)
    return _limit_error(ac.nats)


def _limit_error(nats):
    """The operator's import, export and wildcard-export limits (nats-io/jwt reads a limit
    left out as 0, and `wildcards` left out as false)."""
    lim = nats.get("limits") if isinstance(nats.get("limits"), dict) else {}
    imports, exports = nats.get("imports") or [], nats.get("exports") or []
    count = lambda v: v if isinstance(v, int) and not isinstance(v, bool) else 0
    max_imports, max_exports = count(lim.get("imports", 0)), count(lim.get("exports", 0))
    if max_imports != -1 and len(imports) > max_imports:
        return "the account contains more imports than allowed by the operator"
    if max_exports != -1:
        if len(exports) > max_exports:
            return "the account contains more exports than allowed by the operator"
        if not lim.get("wildcards") and any(
                isinstance(e, dict) and any(t in ("*", ">") for t in str(e.get("subject") or "").split("."))
                for e in exports):
            return "the account contains wildcard exports that are not allowed by the operator"
    return None


def _token_position_error(subject, pos):
    if not isinstance(pos, int) or isinstance(pos, bool) or pos <= 0:
        return None
    tokens = subject.split(".")
    if not any(t in ("*", ">") for t in tokens):
        return "Account Token Position can only be used with wildcard subjects: %s" % subject
    if pos > len(tokens):
        return "Account Token Position %d exceeds length of subject '%s'" % (pos, subject)
    if tokens[pos - 1] != "*":
        return "Account Token Position %d matches '%s' but must match a * in: %s" % (pos, tokens[pos - 1], subject)
    return None


def _import_error(importer, i, now):
    kind, subject = i.get("type"), str(i.get("subject") or "")
    if kind not in ("stream", "service"):
        return "invalid import type: %s" % go_quote(str(kind))
    if kind == "service" and i.get("allow_trace"):
        return "AllowTrace only valid for stream import"
    if not i.get("account"):
        return "account to import from is not specified"
    if not is_valid_subject(subject):
        return "subject %s is not valid" % go_quote(subject)
    if i.get("local_subject") and i.get("to"):
        return "Local Subject replaces To"
    if i.get("share") and kind != "service":
        return "sharing information (for latency tracking) is only valid for services: %s" % go_quote(subject)
    if not i.get("token"):
        return None
    try:
        act = claims.decode_kind(str(i["token"]), "activation")
    except claims.JwtError:
        return "import %s contains an invalid activation token" % go_quote(subject)
    if i["account"] not in (act.issuer, act.issuer_account):
        return "activation token doesn't match account for import %s" % go_quote(subject)
    if act.subject != importer:
        return "activation token doesn't match account it is being included in, %s" % go_quote(subject)
    if act.nats.get("kind") != kind:
        return "mismatch between token import type %s and type of import %s" % (act.nats.get("kind"), kind)
    if act.time_check(now):
        return act.time_check(now)
    subj = str(i.get("to")) if kind == "service" and i.get("to") else subject
    if not subject_is_subset(subj, str(act.nats.get("subject") or "")):
        return "activation token import subject %s doesn't match import %s" % (
            go_quote(str(act.nats.get("subject") or "")), go_quote(subject))
    return None
