# cython: language_level=3, boundscheck=False, wraparound=False
"""Delivery: one message, one match result, framed for each receiving connection.

Client subscribers get `MSG`/`HMSG` appended to their outbound buffer with one memcpy of the
payload. Internal subscriptions (JetStream, system services, imports) are queued and their
Python handlers run once per loop iteration, after all sockets were read.
"""
from libc.string cimport memcmp, memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd._core.conn cimport (Connection, Totals, KIND_CLIENT, KIND_LEAF, KIND_ROUTE, KIND_GATEWAY,
                              queued_bytes, count_message)
from natsd._core.sublist cimport Subscription, SublistResult, Sublist
from natsd._core.fmt cimport put, put_int
from natsd._core import conn as _conn_module

cdef Totals totals = _conn_module.totals
cdef list internal_queue = []
# The batch run_internal is running and its position (the loop's own index): what follows the
# position still waits, as /ipqueuesz counts it
cdef list running_batch = []
cdef Py_ssize_t running_pos = 0
cdef list remote_targets = []          # leaf/route connections reached by the current message
# The leaf cluster the message being routed comes from (a leaf link's cluster, or the origin
# of an LMSG a route passed on): a leaf cluster never gets its own messages back.
cdef bytes cur_origin = None
# The trace (Nats-Trace-Dest) of the message being routed, or None. It is told of each
# delivery decision (its egress events) and, when it traces only, stops the deliveries; what
# it is, the core does not know beyond those calls (natsd/msgtrace.py).
cdef object cur_trace = None
# Set while a message is delivered on this server only (what a stream import republishes:
# every server runs its own import, so it must not travel over routes again)
cdef bint local_delivery = False
cdef unsigned long long route_stamp = 0
# Gateways (set_gateways): `_GR_.<cluster hash>.<server hash>.<reply>` is a reply routed back
# to another cluster. Receivers here see the plain reply; the gateway subsystem remembers
# which routed subject the answer goes to, and decides which replies leave mapped.
DEF GW_SUBJECT_OFFSET = 19
cdef object gateways = None
# account name -> {plain reply: routed reply}: what internal receivers (services, JetStream)
# were handed; their answers, published from Python, go back through the gateway
cdef dict gw_account_replies = {}
cdef bytes cur_account = None          # the account of the message being routed
# who is told of a request from another server with a tracked reply delivered to a client here
# (natsd/accounts/latency.py RemoteLatency.delivered); None while no export measures latency
cdef object latency_hook = None
cdef unsigned long long rng_state = 0x9E3779B97F4A7C15ULL


cdef inline unsigned long long next_random():
    global rng_state
    rng_state ^= rng_state << 13
    rng_state ^= rng_state >> 7
    rng_state ^= rng_state << 17
    return rng_state


cdef inline char* put_sizes_and_payload(char* p, Py_ssize_t hlen, const char* msg, Py_ssize_t tlen):
    """The common end of every message frame: `[hdr-size ]total-size\r\n<msg>\r\n`."""
    if hlen > 0:
        p = put_int(p, hlen)
        p[0] = c' '
        p += 1
    p = put_int(p, tlen)
    p[0] = c'\r'
    p[1] = c'\n'
    p = put(p + 2, msg, tlen)
    p[0] = c'\r'
    p[1] = c'\n'
    return p + 2


cdef inline int commit_frame(Connection c, char* start, char* end, Py_ssize_t tlen) except -1:
    """Account a frame written at start..end of c's buffer and schedule the flush."""
    c.olen += end - start
    count_message(c.kind, tlen, &c.out_msgs, &c.out_bytes, &totals.out_msgs, &totals.out_bytes,
                  &totals.route_out_msgs, &totals.route_out_bytes,
                  &totals.leaf_out_msgs, &totals.leaf_out_bytes)
    c.mark_dirty()
    if c.trace:
        c.handler.trace_out(c, PyBytes_FromStringAndSize(start, end - start - tlen - 4))
    return 0


cdef int write_msg(Connection c, Connection pub, bytes sid, const char* subj, Py_ssize_t slen,
                   const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                   Py_ssize_t tlen) except -1:
    """Frame one message for a client: HMSG when it has headers and the client takes them."""
    cdef Py_ssize_t sidlen = PyBytes_GET_SIZE(sid)
    cdef bint with_hdr = hlen > 0 and c.headers
    if hlen > 0 and not with_hdr:
        msg += hlen
        tlen -= hlen
    c.reserve(slen + sidlen + rlen + tlen + 64)
    cdef char* start = c.obuf + c.olen
    cdef char* p = start
    if with_hdr:
        p = put(p, "HMSG ", 5)
    else:
        p = put(p, "MSG ", 4)
    p = put(p, subj, slen)
    p[0] = c' '
    p = put(p + 1, PyBytes_AS_STRING(sid), sidlen)
    p[0] = c' '
    p += 1
    if rlen > 0:
        p = put(p, reply, rlen)
        p[0] = c' '
        p += 1
    p = put_sizes_and_payload(p, hlen if with_hdr else 0, msg, tlen)
    commit_frame(c, start, p, tlen)
    if (queued_bytes(c) > c.stall_limit and pub is not None and pub is not c
            and not pub.stalled):
        c.stall_publisher(pub)
    return 0


cdef int deliver(Subscription sub, Connection pub, const char* subj, Py_ssize_t slen,
                 const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                 const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1:
    """Deliver to one subscription. Returns 1 if delivered, 0 if skipped.

    `subj` is the subject the message was matched (routed) by; `dsubj`, when not NULL, the
    subject its receivers see (a JetStream delivery: the subject it was stored under)."""
    cdef Connection c
    cdef bytes isubj, ireply
    cdef object ihdr
    if sub.closed:
        return 0
    if gateways is not None and rlen > GW_SUBJECT_OFFSET and memcmp(reply, "_GR_.", 5) == 0:
        c = <Connection>sub.conn if sub.conn is not None else None
        if sub.handler is not None or c.kind == KIND_CLIENT:
            # the receiver sees the plain reply; its answer is sent back where it came from
            gateways.track_reply(c if sub.handler is None else None, cur_account,
                                 PyBytes_FromStringAndSize(reply, rlen))
            reply += GW_SUBJECT_OFFSET
            rlen -= GW_SUBJECT_OFFSET
    if sub.handler is not None:
        if pub is not None and sub.conn is pub and not pub.echo:
            return 0
        ihdr = PyBytes_FromStringAndSize(msg, hlen) if hlen else None
        if cur_trace is not None and not sub.forwarder:
            # the trace decides what an internal service gets (a stream: the message marked
            # as traced already; traced only: nothing)
            ihdr = cur_trace.internal_delivery(sub, PyBytes_FromStringAndSize(subj, slen), ihdr)
            if ihdr is False:
                return 1
        if dsubj == NULL:
            isubj = PyBytes_FromStringAndSize(subj, slen)
            ireply = PyBytes_FromStringAndSize(reply, rlen) if rlen else None
        elif sub.forwarder:
            # imports and response routing republish elsewhere: they route by `subj` and carry
            # the delivered subject on, in the reply as a remote link does
            isubj = PyBytes_FromStringAndSize(subj, slen)
            ireply = encoded_reply(reply, rlen, dsubj, dlen)
        else:
            isubj = PyBytes_FromStringAndSize(dsubj, dlen)
            ireply = PyBytes_FromStringAndSize(reply, rlen) if rlen else None
        if sub.batched:
            # one handler call per loop iteration; the sub itself marks the batch's place in
            # internal_queue (at its first message), so order against other internal work holds
            item = (isubj, ireply, ihdr, PyBytes_FromStringAndSize(msg + hlen, tlen - hlen), pub)
            if sub.batch is None:
                sub.batch = [item]
                internal_queue.append(sub)
            else:
                sub.batch.append(item)
            totals.out_msgs += 1
            totals.out_bytes += tlen
            return _after_delivery(sub)
        # an import carries the trace on to its republish
        internal_queue.append((sub, isubj, ireply, ihdr,
                               PyBytes_FromStringAndSize(msg + hlen, tlen - hlen), pub,
                               cur_trace.carried() if cur_trace is not None and sub.forwarder else None))
        totals.out_msgs += 1
        totals.out_bytes += tlen
        return _after_delivery(sub)
    c = <Connection>sub.conn
    if c is pub and not pub.echo:
        if cur_trace is not None:
            cur_trace.not_delivered(c, sub, "no echo")
        return 0
    if c.closed:
        if cur_trace is not None:
            cur_trace.not_delivered(c, sub, "client closed")
        return 0
    if c.kind == KIND_CLIENT and dsubj != NULL:
        subj = dsubj                    # clients see the delivered subject
        slen = dlen
    if c.kind != KIND_CLIENT and not link_accepts(c, pub, subj, slen):
        return 0
    if sub.deny_filter and c.handler.delivery_denied(c, sub, PyBytes_FromStringAndSize(subj, slen)):
        if cur_trace is not None:
            cur_trace.not_delivered(c, sub, "subscription denies")
        return 0
    if c.kind != KIND_CLIENT:
        # leaf/route: remembered and framed once per connection at the end of route()
        if c.route_stamp != route_stamp:
            c.route_stamp = route_stamp
            c.route_queues = None
            remote_targets.append(c)
        if sub.queue is not None:
            if c.route_queues is None:
                c.route_queues = [sub.queue]
            else:
                c.route_queues.append(sub.queue)
        if rlen and c.track_replies:
            c.handler.allow_reply(c, PyBytes_FromStringAndSize(reply, rlen))
        return 1
    if cur_trace is not None:
        cur_trace.delivered(c, sub)
        if cur_trace.only:
            return 1                    # counts as delivered (no "no responders")
    write_msg(c, pub, sub.sid, subj, slen, reply, rlen, msg, hlen, tlen)
    if rlen and c.track_replies:
        c.handler.allow_reply(c, PyBytes_FromStringAndSize(reply, rlen))
    if (latency_hook is not None and rlen > 3 and reply[rlen - 2] == c'.' and reply[rlen - 1] == c'T'
            and pub is not None and pub.kind != KIND_CLIENT):
        latency_hook(c, PyBytes_FromStringAndSize(subj, slen), PyBytes_FromStringAndSize(reply, rlen))
    return _after_delivery(sub)


cdef inline bint link_accepts(Connection c, Connection pub, const char* subj, Py_ssize_t slen):
    """May a message from `pub` go on to the leaf or route link `c`? (nats-server's rules.)
    A message crosses one route at most, and what our hub sent us stays off routes (the hub
    reaches every server of the cluster itself). From a route, a message goes down to the
    leafs we are the hub of, not up to our own hub (a service reply excepted). A leaf cluster
    never gets its own messages back."""
    if (c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY) and local_delivery:
        return False
    if pub is None:
        return True
    if c.kind == KIND_ROUTE:
        return pub.kind != KIND_ROUTE and not (pub.kind == KIND_LEAF and pub.spoke)
    if c.kind == KIND_GATEWAY:
        # one hop: what came over a route or a gateway went to the gateways where it started
        return pub.kind != KIND_ROUTE and pub.kind != KIND_GATEWAY
    if ((pub.kind == KIND_ROUTE or pub.kind == KIND_GATEWAY) and c.spoke
            and not (slen > 4 and memcmp(subj, "_R_.", 4) == 0)):
        return False
    return cur_origin is None or c.origin is None or cur_origin != c.origin


cdef inline int _after_delivery(Subscription sub) except -1:
    sub.delivered += 1
    if sub.max_msgs > 0:
        if sub.delivered >= sub.max_msgs:
            sub.closed = True
            if sub.conn is not None:
                (<Connection>sub.conn).handler.auto_unsubscribed(sub.conn, sub)
    return 1


cdef int route(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
               const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
               Py_ssize_t tlen) except -1:
    """Deliver to every plain subscription and to one member of each queue group."""
    return route_queues(pub, res, subj, slen, reply, rlen, msg, hlen, tlen, None, False)


# A delivery that crosses a link or an import carries the subject it was stored under in its
# reply, `<reply>@<subject>`, and receivers see that subject and the plain reply. Which replies
# may carry one is registered at start (set_delivery_replies: a prefix, and how many dots come
# before the '@', since names may hold '@' too); the router knows none by name.
DEF DELIVERY_PREFIX_MAX = 32
cdef char delivery_prefix[DELIVERY_PREFIX_MAX]
cdef Py_ssize_t delivery_prefix_len = 0
cdef int delivery_dots = 0


def set_delivery_replies(bytes prefix, int dots):
    """Register the replies that carry a delivered subject: those starting with `prefix` whose
    '@' comes after at least `dots` dots (b"" turns the form off)."""
    global delivery_prefix_len, delivery_dots
    if PyBytes_GET_SIZE(prefix) > DELIVERY_PREFIX_MAX:
        raise ValueError("a delivery reply prefix of at most %d bytes" % DELIVERY_PREFIX_MAX)
    memcpy(delivery_prefix, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
    delivery_prefix_len = PyBytes_GET_SIZE(prefix)
    delivery_dots = dots


cdef inline Py_ssize_t delivery_idx(const char* reply, Py_ssize_t rlen) noexcept:
    """Offset of the '@' of a registered delivery reply, or -1."""
    cdef Py_ssize_t i
    cdef int dots = 0
    if (delivery_prefix_len == 0 or rlen <= delivery_prefix_len
            or memcmp(reply, delivery_prefix, delivery_prefix_len) != 0):
        return -1
    for i in range(rlen):
        if reply[i] == c'.':
            dots += 1
        elif reply[i] == c'@' and dots >= delivery_dots:
            return i
    return -1


def split_delivery(bytes reply):
    """A delivery reply `<reply>@<subject>` -> (`<reply>`, `<subject>`); any other reply ->
    (reply, None)."""
    if reply is None:
        return None, None
    cdef Py_ssize_t rlen = PyBytes_GET_SIZE(reply)
    cdef Py_ssize_t at = delivery_idx(PyBytes_AS_STRING(reply), rlen)
    if 0 <= at < rlen - 1:
        return reply[:at], reply[at + 1:]
    return reply, None


cdef bytes encoded_reply(const char* reply, Py_ssize_t rlen, const char* dsubj, Py_ssize_t dlen):
    """`<reply>@<delivered subject>`: how a delivery crosses a link or an import."""
    if rlen == 0:
        return None
    cdef bytes out = PyBytes_FromStringAndSize(NULL, rlen + 1 + dlen)
    cdef char* p = PyBytes_AS_STRING(out)
    p = put(p, reply, rlen)
    p[0] = c'@'
    put(p + 1, dsubj, dlen)
    return out


cdef int route_queues(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
                      const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                      Py_ssize_t tlen, list only_queues, bint no_plain) except -1:
    """route() with the leaf-node rules: `only_queues` limits which queue groups take part
    (a message a remote already routed to those groups), `no_plain` skips plain subscribers.

    A delivery reply `<reply>@<subject>` (set_delivery_replies: a delivery that came over a
    link or through an import) is split: receivers see `<subject>` and the plain reply."""
    cdef Py_ssize_t at
    if delivery_prefix_len and rlen > delivery_prefix_len and reply[0] == delivery_prefix[0]:
        at = delivery_idx(reply, rlen)
        if 0 <= at < rlen - 1:
            return route_deliver(pub, res, subj, slen, reply + at + 1, rlen - at - 1, reply, at,
                                 msg, hlen, tlen, only_queues, no_plain)
    return route_deliver(pub, res, subj, slen, NULL, 0, reply, rlen, msg, hlen, tlen,
                         only_queues, no_plain)


cdef int route_deliver(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
                       const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                       const char* msg, Py_ssize_t hlen, Py_ssize_t tlen, list only_queues,
                       bint no_plain) except -1:
    """Routing by `subj`, delivering as `dsubj` when that is not NULL (see deliver())."""
    global route_stamp, cur_origin, cur_account
    cdef Subscription sub
    cdef list group
    cdef int delivered = 0
    cdef bytes saved_origin = cur_origin
    cdef bytes saved_account = cur_account
    cur_account = res.account
    if pub is not None and pub.kind == KIND_LEAF:
        cur_origin = pub.origin
    elif pub is None or pub.kind != KIND_ROUTE:
        cur_origin = None
    route_stamp += 1
    try:
        if not no_plain:
            for sub in res.psubs:
                delivered += deliver(sub, pub, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen)
        for group in res.qsubs:
            if only_queues is not None and (<Subscription>group[0]).queue not in only_queues:
                continue
            delivered += deliver_queue(group, pub, subj, slen, dsubj, dlen, reply, rlen, msg,
                                       hlen, tlen)
        if remote_targets:
            flush_remote(res.account, pub, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen)
    finally:
        cur_origin = saved_origin
        cur_account = saved_account
    return delivered


cdef int deliver_queue(list group, Connection pub, const char* subj, Py_ssize_t slen,
                       const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                       const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1:
    """One member of a queue group gets the message, from a random start (nats-server's
    choice). Members on this server come first: a leaf member is only remembered (and used if
    nobody local takes it); a route member (a whole server's share, weighted) is taken at once
    when the message comes from here, never when it came over a route (one hop), and a
    route's member on behalf of a leaf cluster only as a last resort."""
    cdef Py_ssize_t i, n = len(group)
    cdef Py_ssize_t start = <Py_ssize_t>(next_random() % <unsigned long long>n)
    cdef Subscription sub, rsub = None
    cdef Connection c
    cdef Subscription gsub = None
    cdef bint from_route = pub is not None and pub.kind == KIND_ROUTE
    for i in range(n):
        sub = <Subscription>group[(start + i) % n]
        if sub.closed:
            continue
        c = <Connection>sub.conn if sub.conn is not None else None
        if c is None or c.kind == KIND_CLIENT:
            if deliver(sub, pub, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen):
                return 1
            continue
        if c is pub or not link_accepts(c, pub, subj, slen):
            continue
        if c.kind == KIND_GATEWAY:
            if gsub is None:
                gsub = sub              # another cluster's members: when ours have none
            continue
        if c.kind == KIND_LEAF:
            if rsub is None or (<Connection>rsub.conn).kind == KIND_ROUTE:
                rsub = sub
            continue
        if sub.origin is not None or from_route:
            if rsub is None and (cur_origin is None or cur_origin != sub.origin):
                rsub = sub
            continue
        rsub = sub
        break
    if rsub is not None:
        return deliver(rsub, pub, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen)
    if gsub is not None:
        return deliver(gsub, pub, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen)
    return 0


cdef int flush_remote(bytes acc, Connection pub, const char* subj, Py_ssize_t slen,
                      const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                      const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1:
    """Frame the current message once for every link it reached.

    Leaf links: `LMSG subj [reply] size`, `LMSG subj + reply q1 q2 size`, `LMSG subj | q1 size`
    (HMSG with `hdr total` sizes when there are headers).
    Routes: `RMSG acc subj ...` the same way (HMSG with headers; no account on a pinned
    route), or `LMSG origin acc subj ... hdr total` for a leaf's message when the peer knows
    leaf origins.
    A delivered subject different from the routing one travels after '@' in the reply, as
    nats-server sends it."""
    global remote_targets
    cdef list targets = remote_targets
    cdef Connection c
    cdef bytes origin = None
    remote_targets = []
    if pub is not None and pub.kind == KIND_LEAF:
        origin = pub.origin
    cdef object onward
    cdef bytes relabeled
    for c in targets:
        if cur_trace is not None:
            # a traced message: as the trace says (not at all, or as its next hop)
            onward = cur_trace.crosses_link(c, PyBytes_FromStringAndSize(msg, hlen))
            if onward is False:
                c.route_queues = None
                continue
            relabeled = <bytes>onward + PyBytes_FromStringAndSize(msg + hlen, tlen - hlen)
            frame_remote(c, acc, origin, subj, slen, dsubj, dlen, reply, rlen,
                         PyBytes_AS_STRING(relabeled), PyBytes_GET_SIZE(onward),
                         PyBytes_GET_SIZE(relabeled))
            continue
        frame_remote(c, acc, origin, subj, slen, dsubj, dlen, reply, rlen, msg, hlen, tlen)
    return 0


cdef int frame_remote(Connection c, bytes acc, bytes origin, const char* subj, Py_ssize_t slen,
                      const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                      const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1:
    """Frame one message for the leaf or route link `c` (flush_remote's formats), with the
    queue names in c.route_queues, if any; `origin` names the leaf a message came from."""
    cdef bytes q
    cdef Py_ssize_t qlen = 0, extra = 0
    cdef Py_ssize_t xlen = dlen + 1 if dsubj != NULL and rlen > 0 else 0
    cdef Py_ssize_t fh, ft                  # header and total sizes of this frame
    cdef const char* fmsg
    cdef bint lmsg = False
    cdef char* p
    cdef char* start
    cdef bytes mapped
    if c.kind == KIND_GATEWAY and rlen > 0:
        # a reply whose subscription may not have reached the other cluster yet leaves
        # routed back to this server (`_GR_.` prefixed)
        mapped = gateways.reply_for(acc, PyBytes_FromStringAndSize(reply, rlen))
        if mapped is not None:
            reply, rlen = PyBytes_AS_STRING(mapped), PyBytes_GET_SIZE(mapped)
    if c.route_queues is not None:
        for q in c.route_queues:
            qlen += PyBytes_GET_SIZE(q) + 1
    fmsg, fh, ft = msg, hlen, tlen
    if c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY:
        lmsg = origin is not None and c.lnoc
        if lmsg:
            extra += PyBytes_GET_SIZE(origin) + 1
        if c.route_account is None:
            if acc is None:
                raise RuntimeError("a routed message without its account")
            extra += PyBytes_GET_SIZE(acc) + 1
        if fh > 0 and not c.headers and not lmsg:
            fmsg, ft, fh = msg + hlen, tlen - hlen, 0      # the peer takes no headers
    c.reserve(slen + rlen + xlen + qlen + extra + ft + 64)
    p = c.obuf + c.olen
    start = p
    if lmsg:
        p = put(p, "LMSG ", 5)
        p = put(p, PyBytes_AS_STRING(origin), PyBytes_GET_SIZE(origin))
        p[0] = c' '
        p += 1
    elif fh > 0:
        p = put(p, "HMSG ", 5)
    elif c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY:
        p = put(p, "RMSG ", 5)
    else:
        p = put(p, "LMSG ", 5)
    if (c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY) and c.route_account is None:
        p = put(p, PyBytes_AS_STRING(acc), PyBytes_GET_SIZE(acc))
        p[0] = c' '
        p += 1
    p = put(p, subj, slen)
    p[0] = c' '
    p += 1
    if c.route_queues is not None:
        p = put(p, "+ ", 2) if rlen > 0 else put(p, "| ", 2)
    if rlen > 0:
        p = put(p, reply, rlen)
        if xlen:
            p[0] = c'@'
            p = put(p + 1, dsubj, dlen)
        p[0] = c' '
        p += 1
    if c.route_queues is not None:
        for q in c.route_queues:
            p = put(p, PyBytes_AS_STRING(q), PyBytes_GET_SIZE(q))
            p[0] = c' '
            p += 1
    if lmsg and fh == 0:
        p[0] = c'0'                     # an origin LMSG always has a header size
        p[1] = c' '
        p += 2
    p = put_sizes_and_payload(p, fh, fmsg, ft)
    c.route_queues = None
    commit_frame(c, start, p, ft)
    return 0


def publish(Sublist sl, bytes subject, bytes reply=None, bytes hdr=None, bytes payload=b"",
            Connection origin=None):
    """Publish from Python (internal clients, imports). Returns the number of deliveries."""
    if gw_account_replies and gateway_answer(sl, subject, reply, hdr, payload):
        return 1
    return publish_bytes(origin, sl, subject, None, reply, hdr, payload, None, False)


cdef bint gateway_answer(Sublist sl, bytes subject, bytes reply, bytes hdr, bytes payload) except -1:
    """An internal receiver answers a request that came through a gateway: the answer goes
    straight back to the routed reply it stands for. True when it did."""
    cdef dict replies = gw_account_replies.get(sl.account)
    if replies is None:
        return False
    routed = replies.get(subject)
    if routed is None:
        return False
    gateways.answer(sl.account, routed, reply, hdr, payload)
    return True


cdef int publish_bytes(Connection origin, Sublist sl, bytes subject, bytes seen_as, bytes reply,
                       bytes hdr, bytes payload, list queues, bint no_plain) except -1:
    """The Python-object entry shared by publish(), publish_local(), publish_delivery() and
    route_remote(): route_queues() by `subject`, or route_deliver() seen as `seen_as` when
    that is not None."""
    cdef bytes msg = (hdr + payload) if hdr else payload
    cdef Py_ssize_t hlen = PyBytes_GET_SIZE(hdr) if hdr else 0
    cdef Py_ssize_t rlen = PyBytes_GET_SIZE(reply) if reply else 0
    cdef const char* r = PyBytes_AS_STRING(reply) if rlen else NULL
    cdef SublistResult res = sl.match_cached(subject)
    if res.total == 0:
        return 0
    if seen_as is None:
        return route_queues(origin, res, PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject),
                            r, rlen, PyBytes_AS_STRING(msg), hlen, PyBytes_GET_SIZE(msg), queues,
                            no_plain)
    return route_deliver(origin, res, PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject),
                         PyBytes_AS_STRING(seen_as), PyBytes_GET_SIZE(seen_as), r, rlen,
                         PyBytes_AS_STRING(msg), hlen, PyBytes_GET_SIZE(msg), queues, no_plain)


def publish_local(Sublist sl, bytes subject, bytes reply=None, bytes hdr=None, bytes payload=b""):
    """publish() to this server's subscribers only, not to routes."""
    global local_delivery
    local_delivery = True
    try:
        return publish_bytes(None, sl, subject, None, reply, hdr, payload, None, False)
    finally:
        local_delivery = False


def publish_delivery(Sublist sl, bytes target, bytes subject, bytes reply=None, bytes hdr=None,
                     bytes payload=b"", bytes group=None):
    """A JetStream delivery: routed by `target` (a deliver or reply subject), seen by clients
    as `subject` (the stored subject; on links and imports it travels as `reply@subject`).
    With `group` only that queue group takes part (a push consumer's deliver_group).
    Returns the number of deliveries."""
    return publish_bytes(None, sl, target, subject, reply, hdr, payload,
                         [group] if group else None, group is not None)


def publish_many(Sublist sl, list pairs):
    """Publish (subject, payload) pairs without reply or headers: a batch of PubAcks after one
    group-commit sync, in one call from Python. Each goes through route(), so imports, leaf
    nodes and permissions see it as a publish() would."""
    cdef bytes subject, payload
    cdef SublistResult res
    cdef Py_ssize_t n = 0
    for subject, payload in pairs:
        if gw_account_replies and gateway_answer(sl, subject, None, None, payload):
            n += 1
            continue
        res = sl.match_cached(subject)
        if res.total:
            n += route(None, res, PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject), NULL, 0,
                       PyBytes_AS_STRING(payload), 0, PyBytes_GET_SIZE(payload))
    return n


cdef int route_from_link(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
                         const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                         Py_ssize_t tlen, list only_queues, bytes origin) except -1:
    """A message a leaf or route link sent us; `origin` is the leaf cluster an LMSG from a
    route names (None otherwise)."""
    global cur_origin
    cdef bytes saved = cur_origin
    cur_origin = origin
    try:
        return route_queues(pub, res, subj, slen, reply, rlen, msg, hlen, tlen, only_queues, False)
    finally:
        cur_origin = saved


def route_remote(Connection pub, Sublist sl, bytes subject, bytes reply, bytes hdr, bytes payload,
                 list queues=None):
    """Route a message that came from a leaf/route connection (queue-group rules applied)."""
    return publish_bytes(pub, sl, subject, None, reply, hdr, payload, queues, False)


def deliver_to(Subscription sub, bytes subject, bytes reply=None, bytes hdr=None,
               bytes payload=b"", bytes account=None):
    """Deliver one message to one subscription (no-responders status, direct replies).
    A leaf/route subscriber is framed at once (deliver() only queues such targets); a route
    subscriber needs the `account` the message belongs to."""
    global route_stamp
    cdef bytes msg = (hdr + payload) if hdr else payload
    cdef Py_ssize_t hlen = PyBytes_GET_SIZE(hdr) if hdr else 0
    cdef Py_ssize_t rlen = PyBytes_GET_SIZE(reply) if reply else 0
    cdef const char* r = PyBytes_AS_STRING(reply) if rlen else NULL
    route_stamp += 1
    n = deliver(sub, None, PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject), NULL, 0, r, rlen,
                PyBytes_AS_STRING(msg), hlen, PyBytes_GET_SIZE(msg))
    if remote_targets:
        flush_remote(account, None, PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject), NULL,
                     0, r, rlen, PyBytes_AS_STRING(msg), hlen, PyBytes_GET_SIZE(msg))
    return n


cdef int run_internal() except -1:
    """Run queued internal deliveries; handlers may publish more, which run in turn."""
    global internal_queue, running_batch, running_pos
    cdef int rounds = 0
    while internal_queue and rounds < 64:
        running_batch = internal_queue
        internal_queue = []
        running_pos = 0
        while running_pos < len(running_batch):
            item = running_batch[running_pos]
            running_pos += 1
            try:
                deliver_internal(item)
            except Exception:
                import logging
                logging.getLogger("natsd").exception("internal subscription handler failed")
        rounds += 1
    running_batch = []
    running_pos = 0
    return 0


cdef inline deliver_internal(item):
    """One queued delivery: a batching subscription's messages, or one message's fields."""
    cdef Subscription sub
    cdef list msgs
    if type(item) is Subscription:
        sub = <Subscription>item
        msgs = sub.batch
        sub.batch = None
        if not sub.closed and msgs:
            sub.handler(sub, msgs)
        return
    global cur_trace
    sub = <Subscription>item[0]
    trace = item[6]
    if trace is None:
        if not sub.closed:
            sub.handler(sub, item[1], item[2], item[3], item[4], item[5])
        return
    cur_trace = trace
    try:
        if not sub.closed:
            sub.handler(sub, item[1], item[2], item[3], item[4], item[5])
    finally:
        cur_trace = None
        trace.arrived()


cdef int trace_with(object trace) except -1:
    """Route what follows as the message `trace` follows (None: untraced)."""
    global cur_trace
    cur_trace = trace
    return 0


def set_latency_hook(hook):
    """hook(client, subject, reply) for each request from another server whose reply says its
    latency is measured (ends `.T`), delivered to a client here; None: nobody measures."""
    global latency_hook
    latency_hook = hook


def set_gateways(hooks):
    """The gateway subsystem (None: no gateway): `track_reply(conn or None, account, routed)`
    when a routed reply is delivered here (to a client, or to an internal receiver),
    `reply_for(account, reply)` -> the reply a message leaves with for another cluster (None:
    unchanged), `answer(account, routed, ...)` for an internal answer to a routed reply, and
    `account_replies`, the dict of those (account -> {plain reply: routed}) it keeps."""
    global gateways, gw_account_replies
    gateways = hooks
    gw_account_replies = hooks.account_replies if hooks is not None else {}


def set_trace(trace):
    """trace_with() for Python (an import that stops the trace it carries)."""
    trace_with(trace)


def current_trace():
    """The trace of the message being routed, or None (for the handlers' own events)."""
    return cur_trace


def drain_internal():
    run_internal()


def has_internal():
    return len(internal_queue) > 0


def internal_pending():
    """How many internal deliveries wait right now (/ipqueuesz): those queued, and those of
    the batch being run that come after the running one."""
    return len(internal_queue) + len(running_batch) - running_pos
