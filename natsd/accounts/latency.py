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
"""
from __future__ import annotations

import random
import time

from natsd._core.router import publish
from natsd.accounts.clientinfo import client_info
from natsd.gofmt import go_json, go_time
from natsd.headers import mime_headers
from natsd.ids import random_token

METRIC_TYPE = "io.nats.server.metric.v1.service_latency"

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
        """The first response came from `responder` (nats-server's sendTrackingLatency)."""
        now = time.time_ns()
        service_rtt = now - t.ts
        requester = self._requester(t)
        answering = client_info(responder, server=self.server, detailed=True)
        req_rtt = (requester or {}).get("rtt", 0)
        resp_rtt = (answering or {}).get("rtt", 0)
        system = time.time_ns() - now if resp_rtt > 0 else 0
        self._send(200, None, t, requester, answering, t.ts - req_rtt,
                   max(0, service_rtt - resp_rtt), system, req_rtt + service_rtt + system)

    def failed(self, t: Tracking, status: int, error: str) -> None:
        """400 Bad Request, 503 Service Unavailable or 504 Service Timeout."""
        requester = self._requester(t)
        req_rtt = (requester or {}).get("rtt", 0)
        start = (time.time_ns() if status == 400 else t.ts) - req_rtt
        self._send(status, error, t, requester, None, start, 0, 0, 0)

    def _send(self, status, error, t, requester, responder, start, service, system, total):
        if self.server.accounts.system is None:
            return                  # nats-server sends internal messages only with a system account
        metric = {"type": METRIC_TYPE, "id": random_token(22), "timestamp": go_time(time.time_ns()),
                  "status": status}
        if error:
            metric["description"] = error
        if requester is not None:
            metric["requestor"] = requester
        if responder is not None:
            metric["responder"] = responder
        if t.header:
            metric["header"] = {k: t.header[k] for k in sorted(t.header)}
        metric.update(start=go_time(start), service=service, system=system, total=total)
        publish(self.exporter.sublist, self.subject.encode(), None, None, go_json(metric))
