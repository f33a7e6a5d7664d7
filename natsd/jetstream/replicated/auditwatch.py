"""API audits on a cluster: the server a client sent its request to audits it.

nats-server sends one `$JS.EVENT.ADVISORY.API` audit for every API request, naming the client
that asked. On a natsd cluster the client's server is the one that knows the client: a
request about a stream travels on to the stream's leader over a route (natsd/jetstream/
placement.py), and a change to a replicated stream is answered only once its group has
applied it, by the stream's leader or through the meta leader (natsd/jetstream/replicated/meta.py).
So:

  * a request this server's handler answers at once is audited there (api.Request.send);
  * a request it passes on, or answers later, is watched here: the reply subject gets an
    internal subscription for up to WATCH_FOR seconds, and the answer is audited as it goes
    by to the client;
  * a server does not audit a request a route brought it: the client's server does.

As nats-server's, the audit of a change answered once applied carries no request; an error
answered at once carries it. Watching costs nothing unless someone listens for audits.

Owns:
  * `watch(jsa, origin, op, subject, reply, payload)` — watch one request's answer.
  * `watched(jsa, reply)` — is the answer to `reply` audited by a watch here?
"""
import time

from natsd._core.sublist import Subscription
from natsd.jetstream.engine import advisories

WATCH_FOR = 30.0                # seconds an answer is waited for (longer than any client's timeout)
MAX_WATCHES = 1000              # per account: past it the oldest watch gives up

# changes a cluster answers once its groups applied them: nats-server audits their
# successful answers without the request
APPLIED_FIRST = frozenset((
    "STREAM.CREATE", "STREAM.UPDATE", "STREAM.DELETE", "STREAM.PURGE", "STREAM.MSG.DELETE",
    "STREAM.PEER.REMOVE", "STREAM.CANCEL_MOVE", "CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE",
    "CONSUMER.DELETE"))


class _Watch:
    __slots__ = ("jsa", "key", "op", "subject", "request", "client", "sub", "expires")

    def __init__(self, jsa, key, op, subject, request, client):
        self.jsa, self.key, self.op = jsa, key, op
        self.subject, self.request, self.client = subject, request, client
        self.sub = Subscription(None, key, b"", None, self._answered)
        self.expires = time.monotonic() + WATCH_FOR

    def _answered(self, sub, subject, reply, hdr, payload, origin):
        if not self.close():
            return
        response = bytes(payload)
        request = self.request
        if self.op in APPLIED_FIRST and b'"error"' not in response:
            request = None
        advisories.api_audit_for(self.jsa, self.jsa.account, self.client, self.subject,
                                 request, response)

    def close(self):
        """Stop watching. -> whether it was still watching."""
        if self.jsa.audit_watches.get(self.key) is not self:
            return False
        del self.jsa.audit_watches[self.key]
        self.sub.closed = True
        self.jsa.sublist.remove(self.sub)
        return True


def watch(jsa, origin, op, subject, reply, payload):
    """Audit the answer to this request when it goes by (if anyone listens for audits)."""
    if not reply or not advisories.listening(jsa.sublist, advisories.API_AUDIT):
        return
    watches = jsa.audit_watches
    key = bytes(reply)
    old = watches.get(key)
    if old is not None:
        old.close()
    _expire(watches)
    w = _Watch(jsa, key, op, bytes(subject), bytes(payload) if payload else None,
               advisories.client_info(origin, jsa.account, jsa.server))
    watches[key] = w
    jsa.sublist.insert(w.sub)
    if jsa.audit_sweep is None:
        jsa.audit_sweep = jsa.server.loop.call_later(WATCH_FOR, _sweep, jsa)


def watched(jsa, reply):
    return bool(reply) and jsa.audit_watches.get(bytes(reply)) is not None


def _expire(watches):
    now = time.monotonic()
    for w in list(watches.values()):
        if w.expires > now and len(watches) < MAX_WATCHES:
            break               # in the order they began: the rest expire later
        w.close()


def _sweep(jsa):
    jsa.audit_sweep = None
    watches = jsa.audit_watches
    _expire(watches)
    if watches:
        left = next(iter(watches.values())).expires - time.monotonic()
        jsa.audit_sweep = jsa.server.loop.call_later(max(left, 0.1), _sweep, jsa)
