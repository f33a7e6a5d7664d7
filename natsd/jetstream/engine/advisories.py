"""JetStream advisories: the one helper every JetStream event goes through, plus the stream,
snapshot/restore and API-audit advisories.

Owns:
  * `send(sublist, subject, type_name, domain, **fields)` — publish
    `{"type","id","timestamp",<fields...>,"domain"}` on `subject` in the account, building the
    JSON only when someone listens (`sublist.match(subject).total > 0`), as nats-server's
    publishAdvisory checks `sl.HasInterest` first. Consumer advisories (consumer.py
    `Consumer.advisory`) use it too.
  * `stream_action(stream, action)` — `$JS.EVENT.ADVISORY.STREAM.{CREATED,DELETED,UPDATED}.<s>`
    (`io.nats.jetstream.advisory.v1.stream_action`, action create|delete|modify).
  * `api_audit(jsa|None, account, origin, subject, request, response)` —
    `$JS.EVENT.ADVISORY.API` (`io.nats.jetstream.advisory.v1.api_audit`: server, client,
    subject, request, response, domain); `api_audit_for` when the client's info was taken
    earlier (natsd/jetstream/replicated/auditwatch.py).
  * `client_info(origin, account)` — nats-server's ClientInfo (`forAdvisory`: no jwt/alts) of
    the connection a request came from.
  * `snapshot_create / snapshot_complete / restore_create / restore_complete` —
    `$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE|SNAPSHOT_COMPLETE|RESTORE_CREATE|RESTORE_COMPLETE.<s>`.
"""
import logging
import time

from natsd._core.router import publish
from natsd.accounts.clientinfo import client_info as full_client_info
from natsd.ids import random_token
from natsd.jetstream.engine.errors import dumps

log = logging.getLogger("natsd")

PREFIX = "$JS.EVENT.ADVISORY."
API_AUDIT = PREFIX + "API"
STREAM = PREFIX + "STREAM."
_ACTION_SUBJ = {"create": "CREATED", "delete": "DELETED", "modify": "UPDATED"}



def now():
    from natsd.gofmt import go_time
    return go_time(time.time_ns())


def listening(sublist, subject):
    if isinstance(subject, str):
        subject = subject.encode()
    return sublist.match(subject).total > 0


def send(sublist, subject, type_name, domain="", /, **fields):
    """Publish one advisory if anyone listens; fields whose value is None are left out.
    `fields` may also be a callable per value (evaluated only when sent). Returns True if sent."""
    bsubj = subject.encode() if isinstance(subject, str) else subject
    try:
        if sublist.match(bsubj).total == 0:
            return False
        ev = {"type": type_name, "id": random_token(), "timestamp": now()}
        for k, v in fields.items():
            if callable(v):
                v = v()
            if v is not None:
                ev[k] = v
        if domain:
            ev["domain"] = domain
        publish(sublist, bsubj, None, None, dumps(ev))
        return True
    except Exception:
        log.exception("advisory %s could not be sent", subject)
        return False


def _domain(jsa):
    return getattr(getattr(jsa, "engine", None), "domain", "") or ""


# ---- streams ----

def stream_action(stream, action):
    """CREATED / DELETED / UPDATED advisory for `stream` (action create|delete|modify)."""
    jsa = stream.jsa
    send(jsa.sublist, STREAM + "%s.%s" % (_ACTION_SUBJ[action], stream.name),
         "io.nats.jetstream.advisory.v1.stream_action", _domain(jsa),
         stream=stream.name, action=action)


# ---- client info ----

def client_info(origin, account, server=None):
    """ClientInfo of the connection `origin` as advisories carry it (nats-server's
    forAdvisory: no user JWT), None for internal requests."""
    ci = full_client_info(origin, account, server)
    if ci is not None:
        ci.pop("jwt", None)
    return ci


# ---- API audit ----

def api_audit(jsa, account, origin, subject, request, response):
    """`$JS.EVENT.ADVISORY.API` for one API request (from the connection `origin`) and its
    response (bytes or str)."""
    server = _server_of(jsa, account)
    api_audit_for(jsa, account, lambda: client_info(origin, account, server), subject, request, response)


def api_audit_for(jsa, account, client, subject, request, response):
    """The same for a client known by its ClientInfo (a dict, or a callable giving it)."""
    try:
        _api_audit(jsa, account, client, subject, request, response)
    except Exception:
        log.exception("API audit advisory failed")


def _server_of(jsa, account):
    server = getattr(jsa, "server", None) if jsa is not None else None
    return server if server is not None else getattr(account, "server", None)


def _api_audit(jsa, account, client, subject, request, response):
    sl = account.sublist
    if sl.match(API_AUDIT.encode()).total == 0:
        return
    server = _server_of(jsa, account)

    def text(b):
        if b is None:
            return None
        return b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else b

    send(sl, API_AUDIT, "io.nats.jetstream.advisory.v1.api_audit",
         _domain(jsa) if jsa is not None else "",
         server=getattr(server, "name", "") if server is not None else "",
         client=client,
         subject=text(subject),
         request=text(request) or None,
         response=text(response) or "")


# ---- snapshot / restore ----

def snapshot_create(jsa, name, state, ci):
    send(jsa.sublist, STREAM + "SNAPSHOT_CREATE." + name,
         "io.nats.jetstream.advisory.v1.snapshot_create", _domain(jsa),
         stream=name, state=state, client=ci)


def snapshot_complete(jsa, name, start_ns, end_ns, ci, error=""):
    from natsd.gofmt import go_time
    fields = dict(stream=name, start=go_time(start_ns), end=go_time(end_ns), client=ci)
    dom = _domain(jsa)
    if dom:                                 # nats-server's field order: domain before error
        fields["domain"] = dom
    if error:
        fields["error"] = error
    send(jsa.sublist, STREAM + "SNAPSHOT_COMPLETE." + name,
         "io.nats.jetstream.advisory.v1.snapshot_complete", "", **fields)


def restore_create(jsa, name, ci):
    send(jsa.sublist, STREAM + "RESTORE_CREATE." + name,
         "io.nats.jetstream.advisory.v1.restore_create", _domain(jsa), stream=name, client=ci)


def restore_complete(jsa, name, start_ns, end_ns, nbytes, ci):
    from natsd.gofmt import go_time
    send(jsa.sublist, STREAM + "RESTORE_COMPLETE." + name,
         "io.nats.jetstream.advisory.v1.restore_complete", _domain(jsa),
         stream=name, start=go_time(start_ns), end=go_time(end_ns), bytes=nbytes, client=ci)
