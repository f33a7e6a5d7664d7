"""Message tracing: a client's message with a `Nats-Trace-Dest` header is followed through
this server, and one event (nats-server's MsgTraceEvent JSON) is published to that subject
in the publisher's account once the message has gone everywhere it goes here. A message with
an external W3C `traceparent` header (sampled) is traced the same way where its account has
a `msg_trace` destination (config, or `trace` in the account JWT), for its share of messages.

The events, as nats-server writes them: `in` (where it came from, with any ingress error),
`sm` (a subject mapping), `se` (a stream export into another account), `si` (a service
import), `js` (a stream that took it; not its store's outcome), `eg` (each connection it went
to, or why not). With `Nats-Trace-Only: true` the message is traced and not delivered:
clients, streams and other internal services do not see it.

The router (natsd/_core/router.pyx) reports each delivery decision through the calls below
(`delivered`, `not_delivered`, `internal_delivery`, `crosses_link`); imports carry the trace to their republish
(`carried`, `arrived`). Over routes and leaf links the trace goes on as in nats-server: a peer
that speaks protocol 3 gets the message with its hop (`Nats-Trace-Hop`: 1, 2, ... here; 1.1,
1.2, ... one hop on) and sends its own event; a message that arrives with one is traced here
as that hop. A peer on an older protocol gets no trace-only message, and the egress says no
event comes back from it (its hop is counted all the same, as nats-server counts it).
"""
from __future__ import annotations

import logging
import random
import time

from natsd._core.router import publish, set_trace
from natsd.gofmt import go_json, go_quote, go_time
from natsd.headers import accept_encoding, encoded, put_last, set_header
from natsd.protocol import KIND_CLIENT, KIND_GATEWAY, KIND_LEAF, KIND_ROUTE
from natsd.subject import is_valid_literal_subject

log = logging.getLogger("natsd")

TRACE_DEST = "Nats-Trace-Dest"
TRACE_ONLY = "Nats-Trace-Only"
TRACE_ORIGIN_ACCOUNT = "Nats-Trace-Origin-Account"
TRACE_HOP = "Nats-Trace-Hop"            # which hop of the trace a message that crossed a link is
MSG_TRACE_PROTO = 3                     # a peer's proto from which it traces what it gets
TRACE_DISABLED = "trace disabled"      # not a valid subject: what a stopped trace's header says

# nats-server's connection kinds as the events number them
_GO_KIND = {KIND_CLIENT: 0, KIND_ROUTE: 1, KIND_GATEWAY: 2, KIND_LEAF: 4}

NOT_DELIVERED = {
    "no echo": "Not delivered because of no echo",
    "subscription denies": "Not delivered because subscription denies this subject",
    "client closed": "Not delivered because client is closed",
}
ONLY_NO_SUPPORT = "Not delivered because remote does not support message tracing"
NO_SUPPORT = ("Message delivered but remote does not support message tracing so no trace "
              "event generated from there")


def trace_headers(hdr: bytes):
    """The header block as nats-server's trace reads it (names keep their case, values in
    order, empty names or values skipped) and whether only an external `traceparent` (any
    case, sampled flag set) asks for the trace -> (headers, external), or None when nothing
    asks for one or the trace was stopped upstream."""
    if not hdr.startswith(b"NATS/1.0\r\n"):
        return None
    out: dict[str, list[str]] = {}
    dest_found = parent_found = False
    i = len(b"NATS/1.0\r\n")
    while i < len(hdr):
        colon = hdr.find(b":", i)
        if colon < 0:
            break
        key = hdr[i:colon]
        j = colon + 1
        while j < len(hdr) and hdr[j] in b" \t":
            j += 1
        nl = hdr.find(b"\r\n", j)
        if nl < 0:
            break
        val = hdr[j:nl].rstrip(b" \t")
        if key and val:
            if not parent_found and key.lower() == b"traceparent":
                parent_found = _sampled_traceparent(val)
            elif not dest_found and key == TRACE_DEST.encode():
                if val == TRACE_DISABLED.encode():
                    return None
                dest_found = True
            out.setdefault(key.decode("utf-8", "surrogateescape"), []).append(
                val.decode("utf-8", "surrogateescape"))
        i = nl + 2
    if not dest_found and not parent_found:
        return None
    return out, not dest_found


def _sampled_traceparent(val: bytes) -> bool:
    """A W3C `traceparent` (version-trace-parent-flags) whose flags have the sampled bit."""
    parts = val.split(b"-")
    if len(parts) != 4 or len(parts[3]) != 2:
        return False
    try:
        return int(parts[3], 16) & 1 == 1
    except ValueError:
        return False


def start(server, c, subject: bytes, hdr: bytes, size: int):
    """The trace of a client's message; None when it is not traced; False when it must be
    dropped (traced only but not traceable; its destination denied to the publisher); or the
    header block to publish it with instead, untraced (an external trace not sampled: the
    header says so, for the servers it goes on to)."""
    parsed = trace_headers(hdr)
    if parsed is None:
        return None
    headers, external = parsed
    link = c.kind != KIND_CLIENT
    if external and link:
        return None                     # `traceparent` is taken up where the client published
    only = not external and headers.get(TRACE_ONLY, [""])[0].lower() in ("1", "true", "on")
    proto = c.handler
    if TRACE_ORIGIN_ACCOUNT in headers:
        log.error("%sMessage tracing disabled because of header %s with value=%s", proto._prefix(c),
                  go_quote(TRACE_ORIGIN_ACCOUNT), go_quote(headers[TRACE_ORIGIN_ACCOUNT][0]))
        return False if only else None
    account = (server.accounts.get(c.sublist.account.decode()) if c.kind in (KIND_ROUTE, KIND_GATEWAY)
               else c.state.account)
    if account is None:
        return False if only else None
    if external:
        # `traceparent`: the account's `msg_trace` says where, and how often
        dest = account.trace_dest
        if not dest:
            return None
        if not _sampled(account.trace_sampling):
            return put_last(hdr, TRACE_DEST, TRACE_DISABLED)
    else:
        dest = headers[TRACE_DEST][0]
    if not is_valid_literal_subject(dest):
        log.error("%sDestination %s is not valid, won't be able to trace events",
                  proto._prefix(c), go_quote(dest))
        return False if only else None
    if not link and not _may_publish(server, c, dest):
        return False
    ingress = {"type": "in", "ts": _now(), "kind": _GO_KIND[c.kind], "cid": c.cid}
    name = proto.peer_name(c)
    if name:
        ingress["name"] = name
    ingress.update({"acc": account.name, "subj": subject.decode("utf-8", "surrogateescape")})
    hop = headers.get(TRACE_HOP, [""])[0] if link else ""
    return MessageTrace(server, account, dest, only, headers, size, ingress,
                        accept_encoding(hdr), hop)


def _sampled(sampling: int) -> bool:
    """nats-server's draw: a sampling outside 1..99 is every message."""
    return sampling <= 0 or sampling >= 100 or random.randrange(100) <= sampling


def _may_publish(server, c, dest):
    """May the publisher send to the trace destination? (A refusal answers as a publish
    violation does.)"""
    if dest.startswith("_GR_.") or (dest.startswith("$NRG.") and not c.state.account.is_system):
        c.handler.publish_denied(c, dest.encode())
        return False
    if c.pub_allowed is None:
        return True
    ok = c.pub_allowed.get(dest.encode())
    return ok if ok is not None else c.handler.check_publish(c, dest.encode())


def _now():
    return go_time(time.time_ns())


class MessageTrace:
    """One traced message: its events so far, and whether it goes anywhere (`only`)."""

    def __init__(self, server, account, dest, only, headers, size, ingress, encoding, hop=""):
        self.server = server
        self.account = account
        self.dest = dest
        self.only = only
        self.encoding = encoding
        self.request = {"header": dict(sorted(headers.items()))}
        if size:
            self.request["msgsize"] = size
        self.events = [ingress]
        self.hop = hop                  # this server's place in the trace ("" where it began)
        self.hops = 0                   # links it went on over, traced
        self._sub_view = None           # a stream import's view of its importer's subscriptions
        self._waiting = 0               # import deliveries still to run with this trace
        self._routed = False
        self._sent = False

    # ---- what the router reports ----

    def delivered(self, c, sub):
        self._egress(c, sub, "")

    def not_delivered(self, c, sub, why):
        self._egress(c, sub, NOT_DELIVERED[why])

    def internal_delivery(self, sub, subject: bytes, hdr):
        """What an internal subscription (not an import) gets of the message: a stream
        (its `js` event) the message with the trace marked done, so what it stores does not
        trace again; traced only, nothing (False)."""
        stream = sub.data if getattr(sub.data, "is_stream", False) else None
        if stream is not None:
            self.events.append({"type": "js", "ts": _now(), "stream": stream.name,
                                "subject": subject.decode("utf-8", "surrogateescape")})
        if self.only:
            return False
        return set_header(hdr, TRACE_DEST, TRACE_DISABLED) if stream is not None else hdr

    def crosses_link(self, c, hdr: bytes):
        """How the message goes on over this route or leaf link: as the next hop, numbered
        in its header (`Nats-Trace-Hop`: the bytes of the new header block). A peer that
        traces (protocol 3) sends its own event for that hop, and decides itself what it
        delivers of a trace-only message; to one that does not, a trace-only message does not
        go at all (False) and any other goes with a note that no event comes back."""
        self.hops += 1
        hop = "%s.%d" % (self.hop, self.hops) if self.hop else str(self.hops)
        if getattr(c.state, "peer_proto", 0) >= MSG_TRACE_PROTO:
            self._egress(c, None, "", hop)
        elif self.only:
            self._egress(c, None, ONLY_NO_SUPPORT, hop)
            return False
        else:
            self._egress(c, None, NO_SUPPORT, hop)
        return put_last(hdr, TRACE_HOP, hop)

    def carried(self):
        """An import took the message; it republishes it later, traced."""
        self._waiting += 1
        return self

    def arrived(self):
        """An import that carried the trace has republished."""
        self._waiting -= 1
        self._send_when_done()

    def routed(self):
        """The publisher's own routing is over."""
        self._routed = True
        self._send_when_done()

    # ---- what the handlers report ----

    def ingress_error(self, text):
        self.events[0]["error"] = text

    def mapped(self, to: str):
        self.events.append({"type": "sm", "ts": _now(), "to": to})

    def stream_export(self, importer, to: str, exporter_view):
        """A stream import republishes into `importer`; its subscribers are named as the
        exporter sees them (`exporter_view`) from now on."""
        self.events.append({"type": "se", "ts": _now(), "acc": importer.name, "to": to})
        self._sub_view = exporter_view

    def service_import(self, exporter, frm: str, to: str):
        self.events.append({"type": "si", "ts": _now(), "acc": exporter.name, "from": frm, "to": to})

    def through_import(self, allowed: bool, hdr):
        """A message an import republishes (its event added already) -> (republish it?, the
        headers to republish with). Where the export (service) or the import (stream) does
        not allow tracing, a trace-only message stops there and any other goes on untraced,
        its header saying so."""
        if allowed:
            return True, hdr
        if self.only:
            return False, hdr
        set_trace(None)
        return True, put_last(hdr, TRACE_DEST, TRACE_DISABLED)

    # ---- the event ----

    def _egress(self, c, sub, error, hop=""):
        e = {"type": "eg", "ts": _now(), "kind": _GO_KIND[c.kind], "cid": c.cid}
        name = c.handler.peer_name(c)
        if name:
            e["name"] = name
        if hop:
            e["hop"] = hop
        if c.kind in (KIND_CLIENT, KIND_LEAF):
            acc = getattr(c.state, "account", None)
            if acc is not None and acc.name != self.events[0]["acc"]:
                e["acc"] = acc.name
        if c.kind == KIND_CLIENT and sub is not None:
            e["sub"] = sub.subject.decode("utf-8", "surrogateescape")
            if self._sub_view is not None:
                e["sub"] = self._sub_view(e["sub"])
            if sub.queue:
                e["queue"] = sub.queue.decode("utf-8", "surrogateescape")
        if error:
            e["error"] = error
        self.events.append(e)

    def _send_when_done(self):
        if self._sent or not self._routed or self._waiting:
            return
        self._sent = True
        system = self.server.system
        if system is None:
            return                      # no system account: nats-server sends no event either
        event = {"server": system.server_info(), "request": self.request}
        if self.hops:
            event["hops"] = self.hops
        event["events"] = self.events
        body = go_json(event)
        hdr, body = encoded(self.encoding, body)
        publish(self.account.sublist, self.dest.encode(), None, hdr, body)
