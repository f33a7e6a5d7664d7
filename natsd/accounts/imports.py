"""Exports and imports between accounts: how a message crosses from one subject space to another.

A *service import* (importer publishes requests, exporter answers) is an internal subscription
in the importer's sublist on the local subject. Its handler republishes the request into the
exporter's sublist on the export subject, replacing the reply with `_R_.<prefix>.<token>`; the
exporter's response router maps that reply back to the requester's inbox in the importer.
`response_type` decides how long the mapping lives: singleton (one response), stream and
chunked (until the response threshold passes without traffic).

A *stream import* (exporter publishes, importer receives) is an internal subscription in the
exporter's sublist on the imported subject, republishing into the importer, renamed by `to` or
`prefix`.
"""
import logging

from natsd._core.router import current_trace, publish, publish_delivery, publish_local, split_delivery
from natsd._core.sublist import Subscription
from natsd.ids import random_token
from natsd.accounts.clientinfo import client_info, in_field_order
from natsd.accounts.latency import LatencyReporter, answered_here, tracked_reply
from natsd.gofmt import go_json
from natsd.headers import put_last, request_info

log = logging.getLogger("natsd")

DEFAULT_RESPONSE_THRESHOLD = 120.0          # nats-server: 2m



def wildcard_destination(pattern):
    """`a.*.b.>` -> `a.{{wildcard(1)}}.b.>`: maps a matching subject token for token."""
    out, i = [], 0
    for tok in pattern.split("."):
        if tok == "*":
            i += 1
            out.append("{{wildcard(%d)}}" % i)
        else:
            out.append(tok)
    return ".".join(out)


def renaming(src, dest):
    """A transform from src-space to dest-space, or None when the subject is kept as is."""
    if not dest or dest == src:
        return None
    from natsd.accounts.transform import SubjectTransform
    return SubjectTransform.compile(src, wildcard_destination(dest) if "*" in dest else dest)


class ResponseRouter:
    """Per exporting account: `_R_.<prefix>.<token>` replies mapped back to requesters."""

    def __init__(self, server, account):
        self.server = server
        self.account = account
        self.prefix = "_R_.%s." % random_token(6)
        self.entries = {}               # reply token (bytes) -> _Response
        self.sub = Subscription(None, (self.prefix + ">").encode(), b"", None, self._on_response)
        self.sub.forwarder = True
        account.sublist.insert(self.sub)
        self.sweeper = None
        self.awaiting = {}              # reply -> (reporter, M1, until): answered, M2 not yet in

    def register(self, importer, reply, response_type, threshold, tracking=None):
        """A reply subject for the exporter; `tracking` is (LatencyReporter, Tracking) for a
        request whose latency is measured (its reply then says so, for another server)."""
        new_reply = self._new_reply(tracking)
        while new_reply in self.entries:
            new_reply = self._new_reply(tracking)
        self.entries[new_reply] = _Response(importer, reply, response_type,
                                            self.server.loop.time() + threshold, threshold, tracking)
        if self.sweeper is None:
            self.sweeper = self.server.loop.call_later(1.0, self._sweep)
        return new_reply

    def _new_reply(self, tracking):
        reply = (self.prefix + random_token(6)).encode()        # nats-server's replyLen
        return tracked_reply(reply, self.server) if tracking is not None and self.server.system else reply

    def _on_response(self, sub, subject, reply, hdr, payload, origin):
        entry = self.entries.get(subject)
        if entry is None:
            return
        if entry.response_type == "Singleton":
            del self.entries[subject]
        else:
            entry.expires = self.server.loop.time() + entry.threshold
        if entry.tracking is not None:          # the first response is measured
            reporter, tracked = entry.tracking
            entry.tracking = None
            if answered_here(origin):
                reporter.measured(tracked, origin)
            else:                               # the responder's server measures its half
                m1 = reporter.measurement(tracked, origin)
                if entry.m2 is not None:
                    reporter.merged(m1, entry.m2)
                else:
                    self.awaiting[subject] = (reporter, m1, self.server.loop.time() + entry.threshold)
        publish(entry.importer.sublist, entry.reply, reply, hdr, payload)

    def remote_measurement(self, reply, m2):
        """The responder's server's half (M2) of the request sent with `reply`: merged with
        this server's and published, or kept until the response comes."""
        waiting = self.awaiting.pop(reply, None)
        if waiting is not None:
            reporter, m1, _ = waiting
            reporter.merged(m1, m2)
            return
        entry = self.entries.get(reply)
        if entry is not None and entry.tracking is not None:
            entry.m2 = m2

    def undelivered(self, reply):
        """Nobody took the request sent with `reply`: forget it (503 when measured)."""
        entry = self.entries.pop(reply, None)
        if entry is not None and entry.tracking is not None:
            reporter, tracked = entry.tracking
            reporter.failed(tracked, 503, "Service Unavailable")

    def _sweep(self):
        now = self.server.loop.time()
        for k in [k for k, e in self.entries.items() if e.expires <= now]:
            entry = self.entries.pop(k)
            if entry.tracking is not None:      # no response within the threshold
                reporter, tracked = entry.tracking
                reporter.failed(tracked, 504, "Service Timeout")
        for k in [k for k, (_, _, until) in self.awaiting.items() if until <= now]:
            del self.awaiting[k]                # the responder's server never told its half
        busy = self.entries or self.awaiting
        self.sweeper = self.server.loop.call_later(1.0, self._sweep) if busy else None

    def close(self):
        self.account.sublist.remove(self.sub)
        if self.sweeper is not None:
            self.sweeper.cancel()


class _Response:
    __slots__ = ("importer", "reply", "response_type", "expires", "threshold", "tracking", "m2")

    def __init__(self, importer, reply, response_type, expires, threshold, tracking):
        self.importer = importer
        self.reply = reply
        self.response_type = response_type
        self.expires = expires
        self.threshold = threshold
        self.tracking = tracking
        self.m2 = None                  # the responder's server's half, when it came first


class ServiceImport:
    """Requests on `local` in the importer go to `remote` in the exporter."""

    def __init__(self, server, importer, exporter, export, local, remote, share=False):
        self.server = server
        self.importer = importer
        self.exporter = exporter
        self.local = local
        self.remote = remote
        self.response_type = export.response_type if export else "Singleton"
        self.threshold = (export.response_threshold if export and export.response_threshold
                          else DEFAULT_RESPONSE_THRESHOLD)
        self.transform = renaming(local, remote)
        self.latency = (LatencyReporter(server, exporter, export.latency)
                        if export is not None and export.latency is not None else None)
        self.share = share              # the import shows the exporter who asked (latency)
        self.allow_trace = bool(export is not None and export.allow_trace)
        self.sub = Subscription(None, local.encode(), b"", None, self._on_request)
        self.sub.forwarder = True
        # every server of a cluster runs the import for its own clients
        self.sub.local_only = True
        # A self-import (nats-server accepts one) would see its own republish again and loop
        # forever (internal deliveries are queued, each one re-importing the last): it only
        # takes messages from connections, not from internal publishes.
        self.self_import = importer is exporter

    def _on_request(self, sub, subject, reply, hdr, payload, origin):
        if origin is None and self.self_import:
            return
        requested = subject
        if self.transform is not None:
            mapped = self.transform.apply(subject.decode())
            if mapped is None:
                return
            subject = mapped.encode()
        trace = current_trace()
        if trace is not None:
            trace.service_import(self.exporter, requested.decode("utf-8", "surrogateescape"),
                                 subject.decode("utf-8", "surrogateescape"))
            go_on, hdr = trace.through_import(self.allow_trace, hdr)
            if not go_on:
                return
        hdr = self._with_requester(hdr, origin)
        reply, delivered_as = split_delivery(reply)
        tracked = self.latency.sample(origin, self.share, hdr) if self.latency is not None else None
        new_reply = None
        if reply:
            router = self.server.response_router(self.exporter)
            new_reply = router.register(self.importer, reply, self.response_type, self.threshold,
                                        (self.latency, tracked) if tracked is not None else None)
        elif tracked is not None:
            self.latency.failed(tracked, 400, "Bad Request")
        if delivered_as is not None:
            delivered = publish_delivery(self.exporter.sublist, subject, delivered_as, new_reply,
                                         hdr, payload)
        else:
            delivered = publish(self.exporter.sublist, subject, new_reply, hdr, payload)
        if not delivered and reply:
            router.undelivered(new_reply)
            if origin is not None and origin.no_responders:
                origin.handler.no_responders(origin, requested, reply)


    def _with_requester(self, hdr, origin):
        """The request as the exporter gets it: nats-server puts who asked in
        `Nats-Request-Info` (the account and round trip; the whole ClientInfo where the
        import shares it; the server too for the system account). A request another import
        republished keeps that one's, naming this importer as the service (`svc`); one that
        came over a route is left as its server sent it."""
        if origin is None:
            ci = request_info(hdr)
            if not ci:
                return hdr
            ci["svc"] = self.importer.name
        elif origin.state.kind == "Router":
            return hdr
        else:
            ci = client_info(origin, server=self.server if self.share else None, detailed=self.share)
            if ci is None:
                return hdr
            if not self.share and self.exporter.is_system:
                ci["server"] = self.server.name
                if self.server.cluster_name():
                    ci["cluster"] = self.server.cluster_name()
        return put_last(hdr, "Nats-Request-Info", go_json(in_field_order(ci)).decode())


class StreamImport:
    """Messages on `subject` in the exporter are delivered in the importer as `local`."""

    def __init__(self, importer, exporter, subject, local, allow_trace=False):
        self.importer = importer
        self.allow_trace = allow_trace
        self.exporter = exporter
        self.subject = subject
        self.local = local
        self.transform = renaming(subject, local)
        self.sub = Subscription(None, subject.encode(), b"", None, self._on_message)
        self.sub.forwarder = True
        self.self_import = importer is exporter     # see ServiceImport.self_import

    def _on_message(self, sub, subject, reply, hdr, payload, origin):
        if origin is None and self.self_import:
            return
        if self.transform is not None:
            mapped = self.transform.apply(subject.decode())
            if mapped is None:
                return
            subject = mapped.encode()
        trace = current_trace()
        if trace is not None:
            trace.stream_export(self.importer, subject.decode("utf-8", "surrogateescape"),
                                self.exporter_view)
            go_on, hdr = trace.through_import(self.allow_trace, hdr)
            if not go_on:
                return
        # the exporter's messages reach every server with this import (its interest travels
        # over routes), and each delivers them to its own subscribers
        publish_local(self.importer.sublist, subject, reply, hdr, payload)

    def exporter_view(self, subscribed: str) -> str:
        """An importer's subscription as the exporter sees it (nats-server's shadow
        subscription, what a trace's egress names): the import's local prefix taken off."""
        if subscribed == self.local:
            return self.subject
        if self.local.endswith(self.subject) and subscribed.startswith(self.local[:-len(self.subject)]):
            return subscribed[len(self.local) - len(self.subject):]
        return subscribed


def stream_local_subject(imp):
    if imp.to:
        return imp.to
    if imp.prefix:
        return "%s.%s" % (imp.prefix.rstrip("."), imp.subject)
    return imp.subject


def find_export(exporter, kind, subject, importer_name):
    """The export of `exporter` that covers `subject` for `importer_name`, or None."""
    from natsd.subject import subject_is_subset
    for exp in getattr(exporter.config, "exports", None) or ():
        if exp.kind != kind or not subject_is_subset(subject, exp.subject):
            continue
        if not exp.allows(importer_name, subject):
            continue
        return exp
    return None


def install_import(server, acc, exporter, export, imp):
    """The internal subscription that carries one import of `acc` (from `exporter`, under
    `export`): (the sublist it is in, the subscription)."""
    if imp.kind == "service":
        si = ServiceImport(server, acc, exporter, export, imp.to or imp.subject, imp.subject, imp.share)
        acc.sublist.insert(si.sub)
        return acc.sublist, si.sub
    si = StreamImport(acc, exporter, imp.subject, stream_local_subject(imp), imp.allow_trace)
    exporter.sublist.insert(si.sub)
    return exporter.sublist, si.sub


def install_imports(server):
    """Create the internal subscriptions for every configured import. Returns them all."""
    installed = []
    for acc in server.accounts:
        for imp in getattr(acc.config, "imports", None) or ():
            exporter = server.accounts.get(imp.account)
            if exporter is None:
                log.error("Account %s: import from unknown account %s", acc.name, imp.account)
                continue
            export = find_export(exporter, imp.kind, imp.subject, acc.name)
            if export is None:
                log.error("Account %s: no %s export of %r in account %s", acc.name, imp.kind,
                          imp.subject, exporter.name)
                continue
            installed.append(install_import(server, acc, exporter, export, imp))
    return installed
