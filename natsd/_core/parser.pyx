# cython: language_level=3, boundscheck=False, wraparound=False
"""The client protocol parser.

One pass over the bytes of a read: each control line is found with memchr, its arguments are
offsets into the buffer, and a message payload is taken as a slice of the same buffer and
handed to the router without a copy. A command that is not complete yet is left unconsumed
(the caller keeps those bytes for the next read), and `rneed` says how many bytes it needs.

PUB/HPUB, PING and PONG never leave C. CONNECT, SUB, UNSUB, INFO and -ERR go to the
connection's Python handler: they are control operations.
"""
from libc.string cimport memchr, memcmp, strlen
from libc.stdlib cimport malloc, free
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd._core.conn cimport Connection, Totals, KIND_LEAF, KIND_ROUTE, KIND_GATEWAY, now_mono, count_message
from natsd._core.sublist cimport SublistResult, Sublist
from natsd._core.router cimport route, route_queues, route_from_link, trace_with
from natsd._core import conn as _conn_module

cdef Totals totals = _conn_module.totals

DEF MAX_ARGS = 6
cdef list NO_QUEUES = []                # queue filter that selects no queue group

cdef struct Args:
    int n
    const char* p[MAX_ARGS]
    Py_ssize_t len[MAX_ARGS]


cdef inline bint is_space(char ch):
    return ch == c' ' or ch == c'\t'


cdef inline bint is_sep(char ch, bint cr):
    # nats-server splits PUB and HPUB arguments on spaces and tabs, the others on CR too
    return is_space(ch) or (cr and ch == c'\r')


cdef inline char upper(char ch):
    if c'a' <= ch <= c'z':
        return ch - 32
    return ch


cdef inline bint op_is(const char* p, Py_ssize_t n, const char* name, Py_ssize_t k):
    """Case-insensitive match of the op name, followed by whitespace or the end of line."""
    cdef Py_ssize_t i
    if n < k:
        return False
    for i in range(k):
        if upper(p[i]) != name[i]:
            return False
    return n == k or is_space(p[k])


cdef const char* CLIENT_OPS[10]
CLIENT_OPS[:] = [b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"CONNECT", b"INFO",
                 b"+OK", b"-ERR"]
cdef const char* LEAF_OPS[9]
LEAF_OPS[:] = [b"LS+", b"LS-", b"LMSG", b"HMSG", b"RS+", b"RS-", b"RMSG", b"A+", b"A-"]


cdef bint op_prefix_ok(const char* p, Py_ssize_t n, int kind):
    """Could these bytes (a command without its line end yet) still become a valid op?
    Lets garbage be refused at once, as nats-server's byte-wise parser does."""
    cdef Py_ssize_t k = 0, j
    cdef const char* name
    cdef int i
    while k < n and not is_space(p[k]):
        k += 1
    for i in range(10 + (0 if kind == 0 else 4 if kind == KIND_LEAF else 7 if kind == KIND_ROUTE else 9)):
        name = CLIENT_OPS[i] if i < 10 else LEAF_OPS[i - 10]
        j = 0
        while j < k and name[j] != 0 and upper(p[j]) == name[j]:
            j += 1
        if j == k and (k == n or name[j] == 0):
            return True
    return False


cdef inline int split_tokens(const char* p, Py_ssize_t n, bint cr, const char** ptrs,
                             Py_ssize_t* lens, int* count, int cap):
    """Split on spaces/tabs (and CRs when cr) into ptrs/lens (room for cap), their number in
    *count. Returns -1 when there are more than cap."""
    # not noexcept: with it gcc compiles parse()'s HPUB path ~10% slower (bench_parser).
    # The count lives in a local until the end: written through `count` at every token, it
    # would be reloaded after each store to ptrs/lens (they might alias it).
    cdef Py_ssize_t i = 0, start
    cdef int k = 0
    while i < n:
        while i < n and is_sep(p[i], cr):
            i += 1
        if i >= n:
            break
        start = i
        while i < n and not is_sep(p[i], cr):
            i += 1
        if k == cap:
            count[0] = k
            return -1
        ptrs[k] = p + start
        lens[k] = i - start
        k += 1
    count[0] = k
    return 0


cdef inline int split_args(const char* p, Py_ssize_t n, Args* a, bint cr):
    """split_tokens into a. Returns -1 when there are more than MAX_ARGS."""
    return split_tokens(p, n, cr, a.p, a.len, &a.n, MAX_ARGS)


cdef inline Py_ssize_t parse_size(const char* p, Py_ssize_t n):
    """A non-negative decimal of at most 9 digits (nats-server's parseSize), or -1."""
    cdef Py_ssize_t v = 0, i
    if n == 0 or n > 9:
        return -1
    for i in range(n):
        if p[i] < c'0' or p[i] > c'9':
            return -1
        v = v * 10 + (p[i] - c'0')
    return v


cdef inline bint literal_subject_ok(const char* s, Py_ssize_t n):
    """Pedantic check of a publish subject: non-empty tokens and no wildcards."""
    cdef Py_ssize_t i, tok = 0
    if n == 0:
        return False
    for i in range(n):
        if s[i] == c'.':
            if tok == 0:
                return False
            tok = 0
        elif s[i] == c'*' or s[i] == c'>':
            return False
        else:
            tok += 1
    return tok > 0


# Replies routed back through gateways (`_GR_.<cluster hash>.<server hash>.<reply>`) are
# recognised on route and gateway links once this server has a gateway
DEF GW_SUBJECT_OFFSET = 19
cdef bint gw_routing = False


def set_gateway_routing(bint on):
    global gw_routing
    gw_routing = on


cdef tuple _reserved_replies = ()       # reply prefixes the server generates itself


def set_reserved_replies(prefixes):
    """Register the reply prefixes the server generates itself (natsd.auth.authenticator's table: service
    imports, JetStream acks, gateways); a client PUB whose reply starts with one (or is one,
    as nats-server) is a reply violation. The parser knows none of them by name."""
    global _reserved_replies
    _reserved_replies = tuple(bytes(p) for p in prefixes)


cdef inline bint reserved_reply(const char* r, Py_ssize_t n):
    cdef bytes p
    cdef Py_ssize_t k
    for p in _reserved_replies:
        k = PyBytes_GET_SIZE(p)
        if n >= k and memcmp(r, PyBytes_AS_STRING(p), k) == 0:
            return True
    return False


cdef inline bytes to_bytes(const char* p, Py_ssize_t n):
    return PyBytes_FromStringAndSize(p, n)


cdef int protocol_error(Connection c, str log_text, bint send_err) except -1:
    c.handler.protocol_error(c, log_text, send_err)
    return 0


cdef int arg_error(Connection c, str what, const char* p, Py_ssize_t n) except -1:
    """A malformed command's arguments: logged as nats-server words it, connection closed."""
    c.handler.arg_error(c, what, to_bytes(p, n))
    return 0


cdef Py_ssize_t parse(Connection c, char* buf, Py_ssize_t n) except -1:
    """Process complete commands in buf[0:n]. Returns the number of bytes consumed."""
    cdef Py_ssize_t i = 0, lend, clen, size, hsize, need, pstart
    cdef const char* line
    cdef const char* nl
    cdef Args a
    cdef char op
    cdef const char* reply
    cdef Py_ssize_t rlen
    cdef bytes subj_b
    c.rneed = 0
    while i < n:
        if c.closing:
            return n
        nl = <const char*>memchr(buf + i, c'\n', n - i)
        if nl == NULL:
            if n - i > c.max_control_line:
                c.handler.control_line_exceeded(c)
                return n
            if not op_prefix_ok(buf + i, n - i, c.kind):
                protocol_error(c, "Unknown Protocol Operation", True)
                return n
            return i
        lend = nl - buf
        line = buf + i
        clen = lend - i
        if clen > 0 and (line[clen - 1] == c'\r' or memchr(line, c'\r', clen) != NULL):
            # nats-server drops the byte before the LF once a CR came anywhere in the line
            # ("SUB > 3\r\x00\n" subscribes sid 3)
            clen -= 1
        if clen > c.max_control_line:
            c.handler.control_line_exceeded(c)
            return n
        if clen == 0:
            protocol_error(c, "Unknown Protocol Operation", True)
            return n
        op = upper(line[0])
        if c.trace:
            c.handler.trace_in(c, to_bytes(line, clen))
        if (not c.connected and op != c'C' and not (op == c'I' and c.kind != 0)
                and c.handler.auth_pending(c)):
            return n                    # (a link may offer compression in an INFO first)

        if c.kind != 0 and (op == c'L' or op == c'H' and op_is(line, clen, "HMSG", 4)
                            or op == c'R' and (c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY)):
            i = remote_op(c, buf, n, i, line, clen, lend, op)
            if i < 0:
                return n if i == -2 else -i - 3
            continue

        if c.kind == KIND_GATEWAY and op == c'A' and clen > 3 and (line[1] == c'+' or line[1] == c'-') \
                and line[2] == c' ':
            c.handler.account_interest(c, line[1] == c'+', to_bytes(line + 3, clen - 3))
            i = lend + 1
            continue

        # ---- PUB / HPUB: the hot path ----
        if op == c'P' and op_is(line, clen, "PUB", 3) or op == c'H' and op_is(line, clen, "HPUB", 4):
            if op == c'H':
                if not c.headers:
                    protocol_error(c, "message headers not supported", False)
                    return n
                if split_args(line + 5, clen - 5, &a, False) < 0 or a.n < 3 or a.n > 4:
                    arg_error(c, "processHeaderPub Parse Error", line + 5, clen - 5)
                    return n
                hsize = parse_size(a.p[a.n - 2], a.len[a.n - 2])
                size = parse_size(a.p[a.n - 1], a.len[a.n - 1])
                if hsize < 0:
                    arg_error(c, "processHeaderPub Bad or Missing Header Size", line + 5, clen - 5)
                    return n
                if size < 0:
                    arg_error(c, "processHeaderPub Bad or Missing Total Size", line + 5, clen - 5)
                    return n
                if hsize > size:
                    arg_error(c, "processHeaderPub Header Size larger then TotalSize", line + 5, clen - 5)
                    return n
                a.n -= 2
            else:
                if split_args(line + 4, clen - 4, &a, False) < 0 or a.n < 2 or a.n > 3:
                    arg_error(c, "processPub Parse Error", line + 4, clen - 4)
                    return n
                size = parse_size(a.p[a.n - 1], a.len[a.n - 1])
                if size < 0:
                    arg_error(c, "processPub Bad or Missing Size", line + 4, clen - 4)
                    return n
                hsize = 0
                a.n -= 1
            if size > c.max_payload:
                c.handler.max_payload_exceeded(c, size)
                return n
            pstart = lend + 1
            need = pstart + size + 2
            if need > n:
                c.rneed = need - i
                return i
            if buf[pstart + size] != c'\r' or buf[pstart + size + 1] != c'\n':
                protocol_error(c, "Unknown Protocol Operation", True)
                return n
            if c.trace:
                c.handler.trace_payload(c, to_bytes(buf + pstart, size), hsize)
            i = need
            c.in_msgs += 1
            c.in_bytes += size
            totals.in_msgs += 1
            totals.in_bytes += size
            if a.n == 2:
                reply = a.p[1]
                rlen = a.len[1]
            else:
                reply = NULL
                rlen = 0
            if c.pedantic and not literal_subject_ok(a.p[0], a.len[0]):
                # nats-server reports the bad subject and still delivers the message
                c.handler.send_err(c, "Invalid Publish Subject")
            if hsize > 0 and c.kind == 0 and (has_header_key(buf + pstart, hsize, "Nats-Trace-Dest", False)
                                              or c.external_traces
                                              and has_header_key(buf + pstart, hsize, "traceparent", True)):
                publish_traced(c, &a, reply, rlen, buf + pstart, hsize, size)
            else:
                publish_client(c, &a, reply, rlen, buf + pstart, hsize, size)
            continue

        i = lend + 1
        if op == c'P' and op_is(line, clen, "PING", 4):
            c.write("PONG\r\n", 6)
            if c.connect_info_due:
                c.connect_info_due = False
                c.handler.send_connect_info(c)
        elif op == c'P' and op_is(line, clen, "PONG", 4):
            if c.pings_out > 0:             # the answer to our PING: the round trip
                c.rtt = now_mono() - c.rtt_start
            c.pings_out = 0
            if c.kind == KIND_ROUTE:
                c.handler.pong(c)           # a pooled route opens the next one after it
        elif op == c'S' and op_is(line, clen, "SUB", 3):
            if split_args(line + 4, clen - 4, &a, True) < 0 or a.n < 2 or a.n > 3:
                arg_error(c, "processSub Parse Error", line + 4, clen - 4)
                return n
            c.handler.sub(c, to_bytes(a.p[0], a.len[0]),
                          to_bytes(a.p[1], a.len[1]) if a.n == 3 else None,
                          to_bytes(a.p[a.n - 1], a.len[a.n - 1]))
        elif op == c'U' and op_is(line, clen, "UNSUB", 5):
            if clen <= 6 or split_args(line + 6, clen - 6, &a, True) < 0 or a.n < 1:
                protocol_error(c, "Unknown Protocol Operation", True)
                return n
            if a.n > 2:
                arg_error(c, "processUnsub Parse Error", line + 6, clen - 6)
                return n
            size = 0
            if a.n == 2:
                size = parse_size(a.p[1], a.len[1])
                if size < 0:
                    size = 0                    # nats-server: a bad max means "unsubscribe now"
            c.handler.unsub(c, to_bytes(a.p[0], a.len[0]), size)
        elif op == c'C' and op_is(line, clen, "CONNECT", 7):
            c.handler.connect(c, to_bytes(line + 8, clen - 8) if clen > 8 else b"")
            if c.stalled:
                return i                # credentials being checked off the loop: wait
        elif op == c'I' and op_is(line, clen, "INFO", 4):
            c.handler.info(c, to_bytes(line + 5, clen - 5) if clen > 5 else b"")
            if c.decode_switch:
                return i                # what follows is compressed: the caller decodes it
        elif op == c'+' and op_is(line, clen, "+OK", 3):
            pass
        elif op == c'-' and op_is(line, clen, "-ERR", 4):
            c.handler.client_error(c, to_bytes(line + 5, clen - 5) if clen > 5 else b"")
            return n
        else:
            protocol_error(c, "Unknown Protocol Operation", True)
            return n
    return i


cdef int publish_client(Connection c, Args* a, const char* reply, Py_ssize_t rlen,
                        const char* msg, Py_ssize_t hsize, Py_ssize_t size) except -1:
    """A client's PUB/HPUB once its payload is in: reply and permission checks, +OK, then the
    subject mappings (Python) or the router."""
    cdef SublistResult res
    cdef object routed
    if rlen > 3 and c.kind == 0 and reserved_reply(reply, rlen):
        c.handler.reserved_reply(c, to_bytes(reply, rlen))
        return 0
    if c.kind == 0 and a.len[0] > 5 and memcmp(a.p[0], "_GR_.", 5) == 0:
        c.handler.publish_denied(c, to_bytes(a.p[0], a.len[0]))    # gateways' routed replies
        return 0
    if c.pub_allowed is not None and not _pub_allowed(c, a.p[0], a.len[0]):
        return 0
    if c.verbose:
        c.write("+OK\r\n", 5)           # nats-server acknowledges before delivering
    if c.latency_replies:
        # the answer to a measured request from another server: its latency goes back there
        routed = to_bytes(a.p[0], a.len[0])
        if routed in c.latency_replies:
            c.handler.latency_reply(c, routed)
    if c.gw_replies:
        # the answer to a request that came through a gateway: back to where it came from
        routed = c.gw_replies.get(to_bytes(a.p[0], a.len[0]))
        if routed is not None:
            c.handler.gateway_reply(c, routed, to_bytes(reply, rlen) if rlen else None,
                                    to_bytes(msg, hsize) if hsize else None,
                                    to_bytes(msg + hsize, size - hsize))
            return 0
    if c.has_mappings:
        c.handler.publish_mapped(c, to_bytes(a.p[0], a.len[0]),
                                 to_bytes(reply, rlen) if rlen else None,
                                 to_bytes(msg, hsize) if hsize else None,
                                 to_bytes(msg + hsize, size - hsize))
        return 0
    res = c.lookup(a.p[0], a.len[0])
    if res.total == 0 or route(c, res, a.p[0], a.len[0], reply, rlen, msg, hsize, size) == 0:
        if rlen and c.no_responders:
            c.handler.no_responders(c, to_bytes(a.p[0], a.len[0]), to_bytes(reply, rlen))
    return 0


cdef bint has_header_key(const char* hdr, Py_ssize_t hsize, const char* key, bint any_case) noexcept:
    """Does the header block hold a line `key:` (in any case of letters when `any_case`), as
    nats-server's trace reads the trace headers?"""
    cdef Py_ssize_t klen = strlen(key)
    cdef const char* p = hdr
    cdef const char* end = hdr + hsize - klen - 3         # CR LF key ':'
    cdef Py_ssize_t k
    while p <= end:
        p = <const char*>memchr(p, c'\r', end - p + 1)
        if p == NULL:
            return False
        if p[1] == c'\n' and p[2 + klen] == c':':
            if any_case:
                k = 0
                while k < klen and upper(p[2 + k]) == upper(key[k]):
                    k += 1
                if k == klen:
                    return True
            elif memcmp(p + 2, key, klen) == 0:
                return True
        p += 1
    return False


cdef int publish_traced(Connection c, Args* a, const char* reply, Py_ssize_t rlen,
                        const char* msg, Py_ssize_t hsize, Py_ssize_t size) except -1:
    """A client's message with a trace header (`Nats-Trace-Dest`, or `traceparent` where the
    account traces those): the handler starts its trace (or says to drop the message, or
    gives the header block to send it with untraced), the router reports to the trace while
    it delivers, and the trace's event goes out once every hop is known."""
    cdef bytes retold
    trace = c.handler.message_trace(c, to_bytes(a.p[0], a.len[0]), to_bytes(msg, hsize), size)
    if trace is None:
        return publish_client(c, a, reply, rlen, msg, hsize, size)
    if trace is False:
        return 0
    if type(trace) is bytes:
        # published untraced under the header block the handler gave
        retold = <bytes>trace + to_bytes(msg + hsize, size - hsize)
        return publish_client(c, a, reply, rlen, PyBytes_AS_STRING(retold), PyBytes_GET_SIZE(trace),
                              PyBytes_GET_SIZE(retold))
    trace_with(trace)
    try:
        publish_client(c, a, reply, rlen, msg, hsize, size)
    finally:
        trace_with(None)
        trace.routed()
    return 0


cdef struct RemoteArgs:
    const char* origin             # LMSG over a route: the leaf cluster it comes from
    Py_ssize_t olen
    const char* acc                # route: the account, unless the route is pinned to one
    Py_ssize_t alen
    const char* subj
    Py_ssize_t slen
    const char* reply
    Py_ssize_t rlen
    Py_ssize_t hsize
    Py_ssize_t size                # -1 after a protocol error


cdef Py_ssize_t remote_op(Connection c, char* buf, Py_ssize_t n, Py_ssize_t i, const char* line,
                          Py_ssize_t clen, Py_ssize_t lend, char op) except? -1:
    """The link dialects. Leaf nodes: LS+/LS- interest, LMSG/HMSG messages. Routes: RS+/RS-
    interest and RMSG/HMSG messages per account, LS+/LS-/LMSG for a leaf's interest and
    messages with the leaf's origin cluster. Interest goes to the handler (control path);
    messages are routed here.
    Returns the new offset, -2 after a fatal error, or -(i+3) when more bytes are needed."""
    cdef bint route_link = c.kind == KIND_ROUTE or c.kind == KIND_GATEWAY
    if c.kind == KIND_GATEWAY and op == c'L':
        protocol_error(c, "Unknown Protocol Operation", True)     # gateways speak no LS+/LMSG
        return -2
    if op_is(line, clen, "RS+", 3) or op_is(line, clen, "RS-", 3) or (
            route_link and (op_is(line, clen, "LS+", 3) or op_is(line, clen, "LS-", 3))):
        if not route_link:
            protocol_error(c, "Unknown Protocol Operation", True)
            return -2
        # `[origin ]acc subject[ queue weight]` (the handler checks the shape)
        c.handler.route_interest(c, line[0] == c'L', line[2] == c'+',
                                 to_bytes(line + 4, clen - 4) if clen > 4 else b"")
        return lend + 1
    if op_is(line, clen, "LS+", 3) or op_is(line, clen, "LS-", 3):
        return leaf_interest(c, line, clen, lend)
    cdef int kind_of_msg               # 0 LMSG/HMSG from a leaf, 1 RMSG, 2 HMSG, 3 LMSG (route)
    if route_link:
        if op_is(line, clen, "RMSG", 4):
            kind_of_msg = 1
        elif op == c'H':
            kind_of_msg = 2
        elif op_is(line, clen, "LMSG", 4):
            kind_of_msg = 3
        else:
            protocol_error(c, "Unknown Protocol Operation", True)
            return -2
    elif op == c'H' or op_is(line, clen, "LMSG", 4):
        kind_of_msg = 0
    else:
        protocol_error(c, "Unknown Protocol Operation", True)
        return -2
    # `subject [reply] sizes` or `subject +|| [reply] queue... sizes`, after the origin and
    # the account on a route: as many arguments as the control line holds
    cdef RemoteArgs ra
    cdef list queues = remote_msg_args(c, line + 5, clen - 5, kind_of_msg, op == c'H', &ra)
    if ra.size < 0:
        return -2
    return remote_msg(c, buf, n, i, lend, &ra, queues)


cdef Py_ssize_t leaf_interest(Connection c, const char* line, Py_ssize_t clen,
                              Py_ssize_t lend) except? -1:
    """LS+/LS- from a leaf node: `subject[ queue[ weight]]`."""
    cdef Args a
    if split_args(line + 4, clen - 4, &a, True) < 0 or a.n < 1 or a.n > 3:
        arg_error(c, "processLeafSub Parse Error", line + 4, clen - 4)
        return -2
    if line[2] == c'+':
        c.handler.leaf_sub(c, to_bytes(a.p[0], a.len[0]),
                           to_bytes(a.p[1], a.len[1]) if a.n >= 2 else None,
                           parse_size(a.p[2], a.len[2]) if a.n == 3 else 1)
    else:
        c.handler.leaf_unsub(c, to_bytes(a.p[0], a.len[0]),
                             to_bytes(a.p[1], a.len[1]) if a.n >= 2 else None)
    return lend + 1


cdef list MSG_ARG_ERRORS = ["processLeafMsgArgs", "processRoutedMsgArgs",
                            "processRoutedHeaderMsgArgs", "processRoutedOriginClusterMsgArgs"]


cdef list remote_msg_args(Connection c, const char* p, Py_ssize_t n, int kind_of_msg,
                          bint with_hdr, RemoteArgs* ra):
    """Split an LMSG/RMSG/HMSG control line into ra; returns its queue names (None: no queue
    part). ra.size is -1 after a protocol error."""
    cdef Py_ssize_t cap = n // 2 + 1, k, first_q, size, lead = 0     # cap: room for every token
    cdef const char** ptrs = <const char**>malloc(cap * sizeof(const char*))
    cdef Py_ssize_t* lens = <Py_ssize_t*>malloc(cap * sizeof(Py_ssize_t))
    cdef Py_ssize_t i
    cdef int na
    cdef str what = MSG_ARG_ERRORS[kind_of_msg]
    ra.size = -1
    ra.origin = ra.acc = NULL
    ra.olen = ra.alen = 0
    if ptrs == NULL or lens == NULL:
        free(ptrs)
        free(lens)
        raise MemoryError()
    if kind_of_msg == 3:
        with_hdr = True                         # an origin LMSG always has a header size
    try:
        split_tokens(p, n, True, ptrs, lens, &na, <int>cap)
        if kind_of_msg == 3:
            lead += 1
        if kind_of_msg != 0 and c.route_account is None:
            lead += 1
        k = na - (2 if with_hdr else 1)          # index of the first size argument
        if k < lead + 1:
            arg_error(c, what + " Parse Error", p, n)
            return None
        size = parse_size(ptrs[na - 1], lens[na - 1])
        ra.hsize = parse_size(ptrs[na - 2], lens[na - 2]) if with_hdr else 0
        if ra.hsize < 0:
            arg_error(c, what + " Bad or Missing Header Size", p, n)
            return None
        if size < 0:
            arg_error(c, what + " Bad or Missing Size", p, n)
            return None
        if ra.hsize > size:
            arg_error(c, what + " Header Size larger then TotalSize", p, n)
            return None
        if kind_of_msg == 3:
            ra.origin = ptrs[0]
            ra.olen = lens[0]
        if kind_of_msg != 0 and c.route_account is None:
            ra.acc = ptrs[lead - 1]
            ra.alen = lens[lead - 1]
        ra.subj = ptrs[lead]
        ra.slen = lens[lead]
        ra.reply = NULL
        ra.rlen = 0
        if k == lead + 2:
            ra.reply = ptrs[lead + 1]
            ra.rlen = lens[lead + 1]
        elif k > lead + 2:
            if lens[lead + 1] != 1 or (ptrs[lead + 1][0] != c'+' and ptrs[lead + 1][0] != c'|'):
                arg_error(c, what + " Bad or Missing Reply Indicator", ptrs[lead + 1],
                          lens[lead + 1])
                return None
            first_q = lead + 2
            if ptrs[lead + 1][0] == c'+':
                ra.reply = ptrs[lead + 2]
                ra.rlen = lens[lead + 2]
                first_q = lead + 3
            ra.size = size
            return [to_bytes(ptrs[i], lens[i]) for i in range(first_q, k)]
        ra.size = size
        return None
    finally:
        free(ptrs)
        free(lens)


cdef Py_ssize_t remote_msg(Connection c, char* buf, Py_ssize_t n, Py_ssize_t i, Py_ssize_t lend,
                           RemoteArgs* ra, list queues) except? -1:
    """Route one link message whose arguments are in ra (its payload follows the line)."""
    cdef Py_ssize_t size = ra.size, hsize = ra.hsize
    cdef Py_ssize_t pstart = lend + 1
    cdef Py_ssize_t need = pstart + size + 2
    cdef object sl
    if size > c.max_payload:
        c.handler.max_payload_exceeded(c, size)
        return -2
    if need > n:
        c.rneed = need - i
        return -(i + 3)
    if buf[pstart + size] != c'\r' or buf[pstart + size + 1] != c'\n':
        protocol_error(c, "Unknown Protocol Operation", True)
        return -2
    count_message(c.kind, size, &c.in_msgs, &c.in_bytes, &totals.in_msgs, &totals.in_bytes,
                  &totals.route_in_msgs, &totals.route_in_bytes,
                  &totals.leaf_in_msgs, &totals.leaf_in_bytes)
    if ra.acc != NULL:
        # a route names the account of each message: its sublist becomes the one to match in
        sl = c.route_sublists.get(to_bytes(ra.acc, ra.alen))
        if sl is None:
            sl = c.handler.unknown_account(c, to_bytes(ra.acc, ra.alen), to_bytes(ra.subj, ra.slen))
            if sl is None:
                return need
        c.sublist = <Sublist>sl
    if c.pub_allowed is not None and not _pub_allowed(c, ra.subj, ra.slen):
        return need                             # denied import (deny_imports, JetStream domains)
    if gw_routing and ra.acc != NULL and ra.slen > GW_SUBJECT_OFFSET and memcmp(ra.subj, "_GR_.", 5) == 0:
        # a reply routed back through a gateway: for this cluster, maybe for another server
        c.handler.routed_reply(c, to_bytes(ra.acc, ra.alen), to_bytes(ra.subj, ra.slen),
                               to_bytes(ra.reply, ra.rlen) if ra.rlen else None,
                               to_bytes(buf + pstart, hsize) if hsize else None,
                               to_bytes(buf + pstart + hsize, size - hsize))
        return need
    if hsize > 0 and has_header_key(buf + pstart, hsize, "Nats-Trace-Dest", False):
        route_link_traced(c, ra, buf + pstart, hsize, size, queues)
    else:
        route_link_msg(c, ra, buf + pstart, hsize, size, queues)
    return need


cdef int route_link_traced(Connection c, RemoteArgs* ra, const char* msg, Py_ssize_t hsize,
                           Py_ssize_t size, list queues) except -1:
    """A link message with a trace header: traced here as the hop it is (publish_traced's
    way)."""
    trace = c.handler.message_trace(c, to_bytes(ra.subj, ra.slen), to_bytes(msg, hsize), size)
    if trace is False:
        return 0
    if trace is None:
        return route_link_msg(c, ra, msg, hsize, size, queues)
    trace_with(trace)
    try:
        route_link_msg(c, ra, msg, hsize, size, queues)
    finally:
        trace_with(None)
        trace.routed()
    return 0


cdef int route_link_msg(Connection c, RemoteArgs* ra, const char* msg, Py_ssize_t hsize,
                        Py_ssize_t size, list queues) except -1:
    """Deliver a link message: through the account's mappings (Python) or the router."""
    cdef SublistResult res
    if c.has_mappings:
        # the handler maps the subject and applies the queue filter itself
        c.handler.remote_message(c, to_bytes(ra.subj, ra.slen),
                                 to_bytes(ra.reply, ra.rlen) if ra.rlen else None,
                                 to_bytes(msg, hsize) if hsize else None,
                                 to_bytes(msg + hsize, size - hsize), queues)
        return 0
    res = c.lookup(ra.subj, ra.slen)
    if res.total:
        # no queue names: the sender already served queue groups itself (nats-server
        # delivers such a message to plain subscribers only)
        route_from_link(c, res, ra.subj, ra.slen, ra.reply, ra.rlen, msg, hsize,
                        size, queues if queues is not None else NO_QUEUES,
                        to_bytes(ra.origin, ra.olen) if ra.olen else None)
    return 0


cdef bint _pub_allowed(Connection c, const char* s, Py_ssize_t n) except -1:
    cdef bytes subj = to_bytes(s, n)
    cdef object ok = c.pub_allowed.get(subj)
    if ok is None:
        ok = c.handler.check_publish(c, subj)
    return ok
