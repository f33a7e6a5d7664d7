"""Pull requests of a pull consumer: parse `$JS.API.CONSUMER.MSG.NEXT` bodies, queue, expire.

Owns: the request body forms (empty = 1, a decimal batch, JSON `{batch, expires, no_wait,
max_bytes, idle_heartbeat, ...}`), the request limits (409 Exceeded MaxRequestBatch /
MaxRequestExpires / MaxRequestMaxBytes / MaxWaiting), the waiting queue (served in turn, a
request with batch left moves to the back as in nats-server), `max_bytes` accounting (409
Message Size Exceeds MaxBytes, 409 Batch Completed), expiry (408 Request Timeout with
Nats-Pending-Messages / Nats-Pending-Bytes), `no_wait` at end of stream (404 No Messages),
per-request idle heartbeats, 409 Consumer Deleted when the consumer is deleted and 409 Server
Shutdown (with what the request still wanted) when its server shuts down. A consumer that stops
otherwise (lame duck mode, or its server no longer leads) tells its requests nothing, as
nats-server: a replicated consumer's next leader tells them 409 Leadership Change. A request
that leaves the queue unserved (expired, refused, its client gone) is reported to the consumer
(Consumer.pulls_changed), so that its replicas forget it too.

Priority groups (nats-server 2.11+, consumers with `priority_policy`): a JSON request names its
`group`; `overflow` serves a request carrying `min_pending`/`min_ack_pending` only past those
thresholds; `pinned_client` pins the group to one requester (`Pins`: the id sent back in
`Nats-Pin-Id`, renewed by each request of the pinned client, dropped after `priority_timeout`
or by CONSUMER.UNPIN, 423 for a stale id); `prioritized` keeps the queue ordered by the
request's `priority` (0 first), first come first served within one priority.
"""
import collections
import time

from natsd.jetstream.engine import gojson
from natsd.ids import random_token
from natsd.gofmt import go_duration, go_time

NS = 1_000_000_000
NO_PRIORITY = 2 ** 31 - 1               # a request without a priority group sorts last


def status_hdr(code, text, pending=None):
    h = "NATS/1.0 %d %s\r\n" % (code, text)
    if pending is not None:
        h += "Nats-Pending-Messages: %d\r\nNats-Pending-Bytes: %d\r\n" % pending
    return (h + "\r\n").encode()


class BadRequest(Exception):
    pass


# JSApiConsumerGetNextRequest with its inline PriorityGroup, as Go's json.Unmarshal reads it
_NEXT_REQ = {"expires": ("time.Duration", "int"), "batch": ("int", "int"),
             "max_bytes": ("int", "int"), "no_wait": ("bool", "bool"),
             "idle_heartbeat": ("time.Duration", "int"), "group": ("string", "str"),
             "min_pending": ("int64", "int"), "min_ack_pending": ("int64", "int"),
             "id": ("string", "str"), "priority": ("int", "int")}


def parse_next_request(body):
    """-> dict(batch, expires, max_bytes, no_wait, hb, group) or raise BadRequest with Go's
    decoding error. `group` (the priority group fields) is set for every JSON request."""
    req = body.strip() if body else b""
    out = {"batch": 1, "expires": 0, "max_bytes": 0, "no_wait": False, "hb": 0, "group": None}
    if not req:
        return out
    if req[:1] == b"{":
        d = gojson.decode_plain(req, _NEXT_REQ)
        if d is None:
            try:
                d = gojson.unmarshal(gojson.loads_node(req), _NEXT_REQ, "", strict=False, data=bytes(req))
            except gojson.JSONError as e:
                raise BadRequest(str(e))
        out["batch"] = d.get("batch", 0)
        out["expires"] = d.get("expires", 0)
        out["max_bytes"] = d.get("max_bytes", 0)
        out["no_wait"] = d.get("no_wait", False)
        out["hb"] = d.get("idle_heartbeat", 0)
        out["group"] = {"group": d.get("group", ""), "id": d.get("id", ""),
                        "min_pending": d.get("min_pending", 0),
                        "min_ack_pending": d.get("min_ack_pending", 0),
                        "priority": d.get("priority", 0)}
        if out["hb"] > 0 and out["hb"] * 2 > out["expires"]:
            raise BadRequest("heartbeat value too large")
        return out
    try:
        out["batch"] = int(req)
    except ValueError:
        pass
    return out


class WaitingRequest:
    __slots__ = ("reply", "n", "d", "b", "expires", "no_wait", "hb", "hbt", "received", "pg")

    def __init__(self, reply, n, b, expires, no_wait, hb, now, pg=None):
        self.reply = reply
        self.pg = pg                    # the priority group fields of a JSON request
        self.n = n
        self.d = 0
        self.b = b
        self.expires = expires          # loop time or None
        self.no_wait = no_wait
        self.hb = hb if hb > 0 else 0   # seconds; a negative idle_heartbeat is none
        self.hbt = now + self.hb if self.hb else None
        self.received = now

    @property
    def priority(self):
        return self.pg["priority"] if self.pg is not None else NO_PRIORITY


class Pins:
    """The pinned client of a `pinned_client` consumer: its id, since when, its TTL timer."""

    def __init__(self, consumer):
        self.o = consumer
        self.id = ""
        self.since_ns = None
        self.timer = None

    def assign(self, wr):
        if wr.pg is None or not wr.pg["group"]:
            return False
        self.id = random_token()
        self.since_ns = time.time_ns()
        wr.pg["id"] = self.id
        self.renew(wr.pg["group"])
        self.o.advisory("PINNED", "io.nats.jetstream.advisory.v1.consumer_group_pinned",
                        account=self.o.account.name, group=wr.pg["group"], pinned_id=self.id)
        return True

    def renew(self, group):
        if self.timer is not None:
            self.timer.cancel()
        ttl = self.o.cfg["priority_timeout"] / NS
        self.timer = self.o.loop.call_later(ttl, self._expired, group)

    def _expired(self, group):
        self.timer = None
        if self.id and not self.o.closed:
            self.unpin(group, "timeout")

    def clear(self):
        self.id, self.since_ns = "", None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def unpin(self, group, reason):
        self.clear()
        self.o.advisory("UNPINNED", "io.nats.jetstream.advisory.v1.consumer_group_unpinned",
                        account=self.o.account.name, group=group, reason=reason)
        self.o.kick()


class PullQueue:
    def __init__(self, consumer, max_waiting):
        self.o = consumer
        self.max = max_waiting
        self.q = collections.deque()
        self.timer = None
        self.timer_at = None
        self.policy = consumer.cfg["priority_policy"]
        self.pins = Pins(consumer)

    def count(self):
        self._expire()
        return len(self.q)

    def has_requests(self):
        return bool(self.q)

    # ---- new requests ----

    def request(self, reply, body, hdr=None):
        o = self.o
        cfg = o.cfg
        loop = o.loop
        try:
            r = parse_next_request(body)
        except BadRequest as e:
            o.send_status(reply, status_hdr(400, "Bad Request - %s" % e))
            return
        batch, expires, max_bytes, no_wait = r["batch"], r["expires"], r["max_bytes"], r["no_wait"]
        if cfg["max_batch"] > 0 and batch > cfg["max_batch"]:
            o.send_status(reply, status_hdr(409, "Exceeded MaxRequestBatch of %d" % cfg["max_batch"]))
            return
        if expires > 0 and cfg["max_expires"] > 0 and expires > cfg["max_expires"]:
            o.send_status(reply, status_hdr(409, "Exceeded MaxRequestExpires of %s"
                                            % go_duration(cfg["max_expires"])))
            return
        if max_bytes > 0 and cfg["max_bytes"] > 0 and max_bytes > cfg["max_bytes"]:
            o.send_status(reply, status_hdr(409, "Exceeded MaxRequestMaxBytes of %d" % cfg["max_bytes"]))
            return
        pg = r["group"]
        if pg is not None:
            err = self._check_group(pg)
            if err:
                o.send_status(reply, err)
                return
        now = loop.time()
        o.last_activity = now
        if len(self.q) >= self.max:
            self._expire()
        if no_wait:
            pending = o.num_pending_fast() + len(o.rdq_set)
            if pending == 0 and expires == 0:
                o.send_status(reply, status_hdr(404, "No Messages"))
                return
            if pending > 0:
                self._expire()
                if pending < sum(w.n for w in self.q):     # the waiting ones take them all
                    o.send_status(reply, status_hdr(408, "Requests Pending"))
                    return
        if len(self.q) >= self.max:
            if not r["hb"]:
                o.send_status(reply, status_hdr(409, "Exceeded MaxWaiting"))
            return
        wr = WaitingRequest(reply, batch, max_bytes, now + expires / NS if expires > 0 else None,
                            no_wait, r["hb"] / NS, now, pg)
        if self.policy == "prioritized":
            self._insert(wr)
        else:
            self.q.append(wr)
        self._arm()
        o.kick()

    def _check_group(self, pg):
        """nats-server's priority checks of a request -> a status header, or None."""
        policy = self.policy
        if (pg["min_pending"] or pg["min_ack_pending"]) and policy != "overflow":
            return status_hdr(400, "Bad Request - Not a Overflow Priority consumer")
        if pg["id"] and policy != "pinned_client":
            return status_hdr(400, "Bad Request - Not a Pinned Client Priority consumer")
        if not 0 <= pg["priority"] <= 9:
            return status_hdr(400, "Bad Request - Priority must be between 0 and 9")
        if policy == "none":
            return None
        if not pg["group"]:
            return status_hdr(400, "Bad Request - Priority Group missing")
        if pg["group"] not in self.o.cfg["priority_groups"]:
            return status_hdr(400, "Bad Request - Invalid Priority Group")
        if self.pins.id:
            if pg["id"] == self.pins.id:
                self.pins.renew(pg["group"])
            elif pg["id"]:
                return status_hdr(423, "Nats-Pin-Id mismatch")
        return None

    def _insert(self, wr):
        """Prioritized: behind every request of the same or a better priority."""
        q = self.q
        i = len(q)
        while i > 0 and q[i - 1].priority > wr.priority:
            i -= 1
        q.insert(i, wr)

    # ---- serving ----

    def next_for(self, sz):
        """The request to receive a message of `sz` bytes (batch accounted), or None."""
        o = self.o
        now = o.loop.time()
        sl = o.account.sublist
        q = self.q
        pins = self.pins if self.policy == "pinned_client" else None
        cycled = 0
        while q:
            wr = q[0]
            if wr.expires is not None and now >= wr.expires:
                q.popleft()
                o.send_status(wr.reply, status_hdr(408, "Request Timeout", (wr.n, wr.b)))
                o.pulls_changed()
                continue
            assigned = False
            if pins is not None:
                rid = wr.pg["id"] if wr.pg is not None else ""
                if not pins.id and not rid:
                    assigned = pins.assign(wr)
                elif rid and rid != pins.id:            # an old pin: tell the client
                    q.popleft()
                    o.send_status(wr.reply, status_hdr(423, "Nats-Wrong-Pin-Id", (wr.n, wr.b)))
                    o.pulls_changed()
                    continue
                elif pins.id and not rid:               # not the pinned client: wait
                    q.rotate(-1)
                    cycled += 1
                    if cycled >= len(q):
                        return None
                    continue
            if self.policy == "overflow" and not self._past_thresholds(wr.pg):
                q.rotate(-1)
                cycled += 1
                if cycled >= len(q):
                    return None
                continue
            if wr.b > 0:
                if sz <= wr.b:
                    wr.b -= sz
                    if wr.b == 0:
                        wr.n = 1
                else:
                    q.popleft()
                    o.send_status(wr.reply, status_hdr(409, "Message Size Exceeds MaxBytes",
                                                       (wr.n, wr.b)))
                    if assigned:
                        pins.clear()
                    o.pulls_changed()
                    continue
            if sl.match(wr.reply.encode()).total == 0:
                q.popleft()
                o.pulls_changed()
                continue
            wr.d += 1
            wr.n -= 1
            if wr.n <= 0:
                q.popleft()
            elif len(q) > 1:
                q.popleft()
                if self.policy == "prioritized":
                    self._insert(wr)
                else:
                    q.append(wr)
            if wr.n > 0 and wr.hb:
                wr.hbt = now + wr.hb
            return wr
        return None

    def _past_thresholds(self, pg):
        """Overflow: a request with min_pending / min_ack_pending is served only once the
        consumer has that many messages pending / awaiting acks."""
        if pg is None or not (pg["min_pending"] or pg["min_ack_pending"]):
            return True
        o = self.o
        return bool((pg["min_pending"] and pg["min_pending"] <= o.npc + 1) or
                    (pg["min_ack_pending"] and pg["min_ack_pending"] <= len(o.pending)))

    def pin_header(self, hdr):
        """The Nats-Pin-Id header a pinned_client consumer adds to what it delivers."""
        line = b"Nats-Pin-Id: " + self.pins.id.encode() + b"\r\n\r\n"
        if not hdr:
            return b"NATS/1.0\r\n" + line
        return hdr[:-2] + line

    def group_state(self):
        """Consumer info `priority_groups` (nats-server reports the first group)."""
        groups = self.o.cfg["priority_groups"]
        if not groups:
            return None
        st = {"group": groups[0]}
        if self.pins.id:
            st["pinned_client_id"] = self.pins.id
        st["pinned_ts"] = go_time(self.pins.since_ns)
        return [st]

    def after_delivery(self, wr):
        if wr.n <= 0 and wr.b > 0:
            self.o.send_status(wr.reply, status_hdr(409, "Batch Completed", (wr.n, wr.b)))

    # ---- housekeeping ----

    def _expire(self):
        now = self.o.loop.time()
        if not self.q:
            return
        keep = collections.deque()
        for wr in self.q:
            if wr.expires is not None and now >= wr.expires:
                self.o.send_status(wr.reply, status_hdr(408, "Request Timeout", (wr.n, wr.b)))
            else:
                keep.append(wr)
        self._keep(keep)

    def process(self, eos=False):
        """Expire, answer no_wait requests at end of stream, heartbeats; re-arm the timer."""
        o = self.o
        now = o.loop.time()
        sl = o.account.sublist
        keep = collections.deque()
        for wr in self.q:
            expired = wr.expires is not None and now >= wr.expires
            if expired:
                o.send_status(wr.reply, status_hdr(408, "Request Timeout", (wr.n, wr.b)))
                continue
            if eos and wr.no_wait and (wr.expires is None or wr.d > 0):
                o.send_status(wr.reply, status_hdr(404, "No Messages"))
                continue
            if sl.match(wr.reply.encode()).total == 0:
                continue
            if wr.hbt is not None and now >= wr.hbt:
                o.send_status(wr.reply, ("NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\n"
                                         "Nats-Last-Stream: %d\r\n\r\n" % (o.dseq - 1, o.sseq - 1)).encode())
                wr.hbt = now + wr.hb
            keep.append(wr)
        self._keep(keep)
        if keep:
            o.last_activity = now
        self._arm()

    def _keep(self, keep):
        """The requests still waiting after housekeeping; the consumer hears if any left."""
        gone = len(keep) != len(self.q)
        self.q = keep
        if gone:
            self.o.pulls_changed()

    def _arm(self):
        nxt = None
        for wr in self.q:
            for t in (wr.expires, wr.hbt):
                if t is not None and (nxt is None or t < nxt):
                    nxt = t
        if nxt is None:
            return
        if self.timer is not None and self.timer_at is not None and self.timer_at <= nxt:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = nxt
        self.timer = self.o.loop.call_later(max(0.0, nxt - self.o.loop.time()) + 0.001, self._fire)

    def _fire(self):
        self.timer = None
        self.timer_at = None
        if self.o.closed:
            return
        # as nats-server's wake-up of the delivery loop: a pass that ends one-shot (no_wait)
        # requests, so one held at max_ack_pending hears 404 at its first heartbeat or expiry
        self.process(eos=True)
        self.o.kick()

    def replies(self):
        """The reply subjects of the requests waiting now."""
        return {wr.reply for wr in self.q}

    def server_shutdown(self):
        """The server shuts down: each waiting request hears it, with what it still wanted."""
        for wr in self.q:
            self.o.send_status(wr.reply, status_hdr(409, "Server Shutdown", (wr.n, wr.b)))
        self.q.clear()

    def close(self, deleted):
        self.pins.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if deleted:
            for wr in self.q:
                self.o.send_status(wr.reply, status_hdr(409, "Consumer Deleted"))
        self.q.clear()
