# Connection: one socket's read buffer, outbound buffer, protocol flags and counters.
from natsd._core.sublist cimport Sublist, SublistResult
from natsd._core.tls cimport TlsSession
from natsd._core.codec cimport StreamCodec, Bytes

cdef enum ConnKind:
    KIND_CLIENT = 0
    KIND_LEAF = 1
    KIND_ROUTE = 2
    KIND_GATEWAY = 3

cdef class Totals:
    """Server-wide message counters (all connections, closed ones included)."""
    cdef public long long in_msgs
    cdef public long long in_bytes
    cdef public long long out_msgs
    cdef public long long out_bytes
    cdef public long long slow_consumers
    cdef public long long stalls           # publishers paused for a subscriber (varz stalled_clients)
    # of the above, what came from and went to routes and leaf nodes
    cdef public long long route_in_msgs
    cdef public long long route_in_bytes
    cdef public long long route_out_msgs
    cdef public long long route_out_bytes
    cdef public long long leaf_in_msgs
    cdef public long long leaf_in_bytes
    cdef public long long leaf_out_msgs
    cdef public long long leaf_out_bytes

cdef class Connection:
    cdef readonly int fd
    cdef public long long cid
    cdef public int kind
    cdef public object handler          # Python protocol object: control operations
    cdef public object state            # Python-side per-connection state
    cdef public Sublist sublist         # the bound account's subscriptions
    cdef public dict subs               # sid -> Subscription

    # protocol flags (set from CONNECT)
    cdef public bint verbose
    cdef public bint pedantic
    cdef public bint echo
    cdef public bint headers
    cdef public bint no_responders
    cdef public bint connected          # CONNECT processed
    cdef public bint trace              # -V: parser reports each op to the handler
    cdef public bint connect_info_due   # send INFO{connect_info} after the first PONG (protocol 1)

    # permissions: None when unrestricted; else subject(bytes) -> bool, filled by the handler
    cdef public dict pub_allowed
    cdef public bint track_replies      # deliveries with a reply are reported (allow_responses)
    cdef public bint has_mappings       # publishes go through the account's subject mappings
    cdef public bint external_traces    # the account traces `traceparent` messages (msg_trace)

    # limits
    cdef public Py_ssize_t max_payload
    cdef public Py_ssize_t max_control_line
    cdef public Py_ssize_t max_pending

    # read side: bytes of an incomplete command kept between reads
    cdef char* rbuf
    cdef Py_ssize_t rlen
    cdef Py_ssize_t rcap
    cdef public Py_ssize_t rneed        # bytes needed before parsing can progress

    # TLS (None for plaintext): once active, what is queued in obuf is encrypted at flush time
    # into xbuf, the ciphertext waiting for the socket
    cdef public TlsSession tls
    cdef public bint tls_active         # bytes on the wire are TLS from now on (both ways)
    cdef public bint tls_sniff          # the first byte read decides: TLS or plaintext
    # A codec between the wire (after TLS) and the protocol: WebSocket frames, S2 streams
    cdef public StreamCodec codec
    # set when a codec starts in the middle of what was read (route/leaf compression, after
    # an INFO): the parser stops there and the rest of the read goes through the codec
    cdef public bint decode_switch
    cdef Bytes encoded
    cdef char* xbuf
    cdef Py_ssize_t xstart
    cdef Py_ssize_t xlen
    cdef Py_ssize_t xcap

    # write side
    cdef char* obuf
    cdef Py_ssize_t ostart
    cdef Py_ssize_t olen
    cdef Py_ssize_t ocap
    cdef public bint dirty
    cdef public bint closing
    cdef public bint closed
    cdef public bint want_write
    cdef public object close_reason
    cdef public double blocked_since    # monotonic time a write first stalled, 0 if not stalled
    cdef public Py_ssize_t stall_limit  # queued bytes past which publishers to us are paused
    cdef public bint stalled            # we stopped reading this connection (back-pressure)
    cdef public list waiters            # publishers paused because of our queue
    cdef public double last_sent        # when the socket last took bytes from us
    cdef public double stall_until      # as a paused publisher: read again at this time at the latest

    # statistics
    cdef public long long in_msgs
    cdef public long long in_bytes
    cdef public long long out_msgs
    cdef public long long out_bytes
    cdef public int pings_out
    cdef public double rtt_start        # when our last PING went out (monotonic)
    cdef public double rtt              # the last round trip measured by PING/PONG, seconds
    cdef public double last_activity

    # Links. A route carries every account: RMSG/RS+ name theirs (looked up in
    # route_sublists, one dict shared by all routes), except on a route pinned to one account
    # (route_account), whose `sublist` is that account's.
    cdef public dict route_sublists     # account name (bytes) -> Sublist
    cdef public bytes route_account     # pinned route: its account, absent from the protocol
    cdef public bint lnoc               # route peer takes LS+/LMSG with a leaf's origin cluster
    # A leaf link where we are the spoke (the remote is our hub): what comes from it does not
    # go on to routes, and what comes from routes does not go up to it (the hub has a link to
    # every server of our cluster).
    cdef public bint spoke
    cdef public bytes origin            # leaf link: the remote's cluster name, None without one
    # A client that received requests from another cluster (their replies routed back through
    # a gateway): reply subject -> the routed `_GR_.` subject it stands for, or None
    cdef public dict gw_replies
    # requests that came from another server with a tracked reply (`.T`): reply -> when, for
    # the service latency its answer reports back (natsd/accounts/latency.py RemoteLatency)
    cdef public dict latency_replies
    # A connection that does not speak NATS (MQTT): what is read (after TLS and codecs) goes
    # to handler.raw_data(c, bytes) instead of the parser
    cdef public bint raw_reader

    # router bookkeeping for leaf/route connections: one framed message per connection
    cdef unsigned long long route_stamp
    cdef list route_queues

    # publisher-side match cache (last subject published)
    cdef bytes last_subj
    cdef unsigned long long last_gen
    cdef SublistResult last_res
    cdef Sublist last_sl

    cdef int reserve(self, Py_ssize_t n) except -1
    cdef int write(self, const char* p, Py_ssize_t n) except -1
    cdef inline void mark_dirty(self)
    cdef inline bint plaintext(self)
    cdef int flush(self) except -1
    cdef int flush_layered(self) except -1
    cdef bint took(self, Py_ssize_t n)
    cdef int after_send(self, int err) except -1
    cdef int to_wire(self, const char* p, Py_ssize_t n) except -1
    cdef char* xreserve(self, Py_ssize_t k) except NULL
    cdef int _sent(self, Py_ssize_t left) except -1
    cdef SublistResult lookup(self, const char* subj, Py_ssize_t slen)
    cdef int keep_unparsed(self, const char* p, Py_ssize_t n) except -1
    cdef int keep_more(self, const char* p, Py_ssize_t n) except -1
    cdef void stall_publisher(self, Connection pub)
    cdef void release_waiters(self)

cdef inline void count_message(int kind, Py_ssize_t size, long long* conn_msgs, long long* conn_bytes,
                               long long* all_msgs, long long* all_bytes,
                               long long* route_msgs, long long* route_bytes,
                               long long* leaf_msgs, long long* leaf_bytes) noexcept nogil:
    """One message of `size` bytes in or out of a connection of `kind`: counted on the
    connection, in the server totals and, for a route or a leaf link, in that kind's totals."""
    conn_msgs[0] += 1
    conn_bytes[0] += size
    all_msgs[0] += 1
    all_bytes[0] += size
    if kind == KIND_ROUTE:
        route_msgs[0] += 1
        route_bytes[0] += size
    elif kind == KIND_LEAF:
        leaf_msgs[0] += 1
        leaf_bytes[0] += size

cdef inline Py_ssize_t queued_bytes(Connection c):
    """Bytes waiting for c's socket: plaintext not yet sent or encrypted, and ciphertext."""
    return c.olen - c.ostart + c.xlen - c.xstart

cdef double now_mono() noexcept nogil
cdef list take_resumed()
cdef double next_resume()
cdef int flush_dirty() except -1
