"""Service latency tracking, as nats-server measures it for an export with `latency`
(config) or `service_latency` (account JWT): a sampled request through the service import is
remembered with its requester and the time it crossed; the first response (or the request's
failure) publishes a `io.nats.server.metric.v1.service_latency` metric on the export's
results subject in the exporting account.

Metrics go out only on a server with a system account, as nats-server's internal messages.
Sampling is a percentage, or 0 for "headers": a request carrying a trace header (Uber,
Zipkin B3, W3C traceparent) that asks to be sampled is measured, and the metric carries those
headers. The requester is described by its account and RTT only, unless the import `share`s
it; the responder in full. Statuses: 200 measured, 400 a request with no reply subject, 503
nobody took the request, 504 no response within the export's response threshold.

Across servers (a route, gateway or leaf node between the requester's server and the
responder's), each server measures its half, as nats-server does: a measured request leaves
with a reply ending `.<server hash>.T`; the responder's server (RemoteLatency) notes such a
request delivered to a client of an account that exports the subject and, when that client
answers, sends its measurement (M2: the responder, the service time) to
`$SYS.LATENCY.M2.<hash>`; the requester's server merges it with its own (M1: the total) and
publishes one metric, whichever of the two comes first.
"""
from __future__ import annotations

import random
import time

import json
import logging

from natsd._core.router import publish
from natsd.accounts.clientinfo import client_info
from natsd.gofmt import go_json, go_time
from natsd.headers import mime_headers
from natsd.ids import get_hash, random_token

log = logging.getLogger("natsd")

METRIC_TYPE = "io.nats.server.metric.v1.service_latency"
REMOTE_SUBJECT = "$SYS.LATENCY.M2.%s"          # + the requester's server hash
GO_ZERO_TIME = "0001-01-01T00:00:00Z"

UBER, TRACEPARENT, TRACESTATE, B3 = "Uber-Trace-Id", "Traceparent", "Tracestate", "B3"
B3_SAMPLED, B3_TRACE_ID = "X-B3-Sampled", "X-B3-Traceid"
B3_SPAN_IDS = ("X-B3-Parentspanid", "X-B3-Spanid")
UBER_CONTEXT_PREFIX = "Uberctx-"


def should_sample(sampling: int, hdr) -> tuple[bool, dict | None]:
    """nats-server's shouldSample: (measure this request?, the trace headers to report)."""
    if sampling < 0:
        return False, None
    if sampling >= 100 or (sampling > 0 and random.randrange(100) <= sampling):
        return True, None
    h = mime_headers(hdr)
    if not h:
        return False, None
    if UBER in h:
        # <trace>:<span>:<parent>:<flags>, sampled when the flags' low bit is set
        tokens = h[UBER][0].split(":")
        if len(tokens) == 4 and 0 < len(tokens[3]) <= 2:
            try:
                if int(tokens[3], 16) & 1:
                    return True, dict({UBER: h[UBER]}, **{k: v for k, v in h.items()
                                                         if k.startswith(UBER_CONTEXT_PREFIX)})
            except ValueError:
                pass
        return False, None
    sampled = (h.get(B3_SAMPLED) or [""])[0]
    zipkin = {k: h[k] for k in (B3_SAMPLED, B3_TRACE_ID) + B3_SPAN_IDS if k in h}
    if sampled == "1":
        return True, zipkin
    if sampled == "0":
        return False, None
    if B3_TRACE_ID in h:                # sampling left to the recipient
        return True, zipkin
    if B3 in h:
        tokens = h[B3][0].split("-")
        if (len(tokens) > 2 and tokens[2] == "0") or tokens == ["0"]:
            return False, None
        return True, {B3: h[B3]}
    if TRACEPARENT in h:
        tokens = h[TRACEPARENT][0].split("-")
        if len(tokens) == 4 and len(tokens[3]) == 2:
            try:
                if int(tokens[3], 16) & 1:
                    return True, dict({TRACEPARENT: h[TRACEPARENT]},
                                      **({TRACESTATE: h[TRACESTATE]} if TRACESTATE in h else {}))
            except ValueError:
                pass
    return False, None


class Tracking:
    """One measured request: who asked, whether its import shares who, when it crossed."""
    __slots__ = ("requester", "share", "ts", "header")

    def __init__(self, requester, share, header):
        self.requester = requester
        self.share = share
        self.ts = time.time_ns()
        self.header = header


class LatencyReporter:
    """Publishes metrics for one export's results subject in the exporting account."""

    def __init__(self, server, exporter, latency):
        self.server = server
        self.exporter = exporter
        self.subject = latency.subject
        self.sampling = latency.sampling

    def sample(self, requester, share, hdr) -> Tracking | None:
        sampled, header = should_sample(self.sampling, hdr)
        return Tracking(requester, share, header) if sampled else None

    def _requester(self, t: Tracking):
        return client_info(t.requester, server=self.server, detailed=t.share)

    def measured(self, t: Tracking, responder) -> None:
        """The first response came from `responder` here (nats-server's sendTrackingLatency)."""
        self.send(self.measurement(t, responder))

    def measurement(self, t: Tracking, responder) -> dict:
        """This server's figures for a response from `responder` (M1 when the responder is on
        another server: then only the total is this server's to tell)."""
        now = time.time_ns()
        service_rtt = now - t.ts
        requester = self._requester(t)
        answering = (client_info(responder, server=self.server, detailed=True)
                     if _kind(responder) in (None, "Client", "Leafnode") else None)
        req_rtt = (requester or {}).get("rtt", 0)
        resp_rtt = (answering or {}).get("rtt", 0)
        system = time.time_ns() - now if resp_rtt > 0 else 0
        return {"status": 200, "requestor": requester, "responder": answering, "header": t.header,
                "start": t.ts - req_rtt, "service": max(0, service_rtt - resp_rtt), "system": system,
                "total": req_rtt + service_rtt + system}

    def merged(self, m1: dict, m2: dict) -> None:
        """nats-server's ServiceLatency.merge: the responder's server knows the service time
        and the responder, this one the total; what is left is the system's."""
        responder = m2.get("responder")
        rtt = (responder or {}).get("rtt", 0) if isinstance(responder, dict) else 0
        service = int(m2.get("service") or 0)
        m1["system"] = max(0, m1["service"] - (service + rtt))
        m1["service"] = max(0, service)
        m1["responder"] = responder
        self.send(m1)

    def failed(self, t: Tracking, status: int, error: str) -> None:
        """400 Bad Request, 503 Service Unavailable or 504 Service Timeout."""
        requester = self._requester(t)
        req_rtt = (requester or {}).get("rtt", 0)
        start = (time.time_ns() if status == 400 else t.ts) - req_rtt
        self.send({"status": status, "description": error, "requestor": requester, "header": t.header,
                   "start": start, "service": 0, "system": 0, "total": 0})

    def send(self, m: dict) -> None:
        if self.server.accounts.system is None:
            return                  # nats-server sends internal messages only with a system account
        metric = {"type": METRIC_TYPE, "id": random_token(22), "timestamp": go_time(time.time_ns()),
                  "status": m["status"]}
        for key in ("description", "requestor", "responder"):
            if m.get(key):
                metric[key] = m[key]
        if m.get("header"):
            metric["header"] = {k: m["header"][k] for k in sorted(m["header"])}
        metric.update(start=go_time(m["start"]), service=m["service"], system=m["system"], total=m["total"])
        publish(self.exporter.sublist, self.subject.encode(), None, None, go_json(metric))


class RemoteLatency:
    """The responder's side of a measurement across servers (nats-server's rrTracking and
    remoteLatencyUpdate's sender), and the M2s that come back here for the requests this
    server measures."""

    def __init__(self, server):
        self.server = server
        self.tracking = set()               # clients with requests in c.latency_replies
        self.sweeper = None

    def delivered(self, c, subject: bytes, reply: bytes) -> None:
        """A request from another server with a tracked reply reached client `c`: noted when
        c's account exports the subject as a service (nats-server's trackRemoteReply)."""
        acc = c.state.account if c.state is not None else None
        export = _service_export(acc, subject.decode("utf-8", "surrogateescape")) if acc is not None else None
        if export is None:
            return
        if c.latency_replies is None:
            c.latency_replies = {}
        c.latency_replies[reply] = (acc.name, time.time_ns(), self.server.loop.time())
        self.tracking.add(c)
        if self.sweeper is None:
            self.sweeper = self.server.loop.call_later(1.0, self._sweep)

    def replied(self, c, reply: bytes) -> None:
        """Client `c` answered such a request: its measurement goes to the requester's server."""
        account, start, _ = c.latency_replies.pop(reply)
        if not c.latency_replies:
            self.tracking.discard(c)
        system = self.server.system
        if system is None:
            return
        responder = client_info(c, server=self.server, detailed=True)
        rtt = (responder or {}).get("rtt", 0)
        service = max(0, time.time_ns() - start - rtt)
        m2 = {"type": "", "id": "", "timestamp": GO_ZERO_TIME, "status": 200}
        if responder:
            m2["responder"] = responder
        m2.update(start=go_time(start), service=service, system=0, total=service + rtt)
        body = {"account": account, "req_id": reply.decode("utf-8", "surrogateescape"), "m2": m2}
        target = REMOTE_SUBJECT % reply.split(b".")[-2].decode("utf-8", "surrogateescape")
        system.send(system.account.sublist, target.encode(), None, None, go_json(body))

    def _sweep(self):
        """Requests never answered are forgotten after their export's response threshold."""
        now = self.server.loop.time()
        for c in list(self.tracking):
            replies = c.latency_replies or {}
            for reply in [r for r, (acc_name, _, at) in replies.items()
                          if c.closed or now - at > _threshold(self.server, acc_name)]:
                del replies[reply]
            if not replies:
                self.tracking.discard(c)
        self.sweeper = self.server.loop.call_later(1.0, self._sweep) if self.tracking else None

    def measurement_arrived(self, payload: bytes) -> None:
        """`$SYS.LATENCY.M2.<our hash>`: another server's half of a request measured here."""
        try:
            rl = json.loads(payload)
            account, reply, m2 = rl["account"], rl["req_id"], rl["m2"]
            if not isinstance(m2, dict) or not isinstance(reply, str):
                raise ValueError("not a remote latency measurement")
        except (ValueError, KeyError, TypeError) as e:
            log.error("Error unmarshalling remote latency measurement: %s", e)
            return
        acc = self.server.account_named(account)
        if acc is None:
            log.warning("Could not lookup account %s for latency measurement", _quoted(account))
            return
        plain = reply.encode("utf-8", "surrogateescape")
        if plain.startswith(b"_GR_.") and plain.count(b".") > 3:
            plain = plain.split(b".", 3)[3]
        router = self.server.response_routers.get(acc.name)
        if router is not None:
            router.remote_measurement(plain, m2)


def _kind(c):
    """The connection's kind as nats-server names it ("Client", "Leafnode", "Router",
    "Gateway"), None for an internal publisher."""
    return getattr(getattr(c, "state", None), "kind", None) if c is not None else None


def answered_here(responder) -> bool:
    """Did a client of this server (or an internal one) answer? Otherwise the responder's own
    server measures its half (nats-server's responder.kind != CLIENT)."""
    return _kind(responder) in (None, "Client")


def tracked_reply(reply: bytes, server) -> bytes:
    """A measured request's reply: `.<server hash>.T` added, so the responder's server knows
    where its half goes (nats-server's newServiceReply with tracking)."""
    return reply + (".%s.T" % get_hash(server.name)).encode()


def _service_export(acc, subject: str):
    from natsd.subject import subject_is_subset
    for exp in getattr(acc.config, "exports", None) or ():
        if exp.kind == "service" and subject_is_subset(subject, exp.subject):
            return exp
    return None


def _threshold(server, acc_name):
    """nats-server's lowestServiceExportResponseTime: the shortest response threshold of the
    account's service exports (its default 2 minutes)."""
    acc = server.accounts.accounts.get(acc_name)
    limits = [e.response_threshold for e in (getattr(acc.config, "exports", None) or ())
              if e.kind == "service" and getattr(e, "response_threshold", None)] if acc is not None else []
    return min(limits) if limits else 120.0


def _quoted(text):
    return json.dumps(text)
