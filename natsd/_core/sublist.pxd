# The subject trie: subscriptions by subject with `*`/`>` wildcards and queue groups,
# plus a result cache keyed by literal subject (one-off subjects: by their leading tokens, when
# the trie looks no deeper) and invalidated by a generation id.

cdef class Subscription:
    cdef public object conn          # the Connection that receives, or None for internal subs
    cdef public bytes subject
    cdef public bytes queue          # None for a plain subscription
    cdef public bytes sid
    cdef public object handler       # internal subscriptions: callable(sub, subject, reply, hdr, msg)
    cdef public long long max_msgs   # auto-unsubscribe after this many deliveries (0 = never)
    cdef public long long delivered
    cdef public bint deny_filter     # deliveries pass a permission check first
    cdef public bint closed
    cdef public int weight           # queue weight (leaf/route interest), 1 for clients
    cdef public object data          # free slot for the owner
    cdef public object owner         # internal subscriptions: the server's internal client they
                                     # belong to (natsd.ids.InternalClient), listed by /subsz
    # Batched internal subscriptions (JetStream ingest, acks): deliveries queue
    # (subject, reply, hdr, payload, origin) tuples in `batch` and the handler is called once per
    # loop iteration as handler(sub, batch) (DESIGN.md principle 2: Python once per batch).
    cdef public bint batched
    cdef public list batch           # None while nothing is queued
    # Internal subscriptions that republish what they receive (imports, response routing) get
    # a JetStream delivery as a link does: the routing subject, and the delivered subject
    # after '@' in the reply (router.deliver); others get what a client would see.
    cdef public bint forwarder
    # Interest that stays on this server: not announced to routes (import forwarders, which
    # every server runs itself, and JetStream's generic API subscription)
    cdef public bint local_only
    # A route's interest on behalf of a leaf node: the leaf's cluster (LS+ with an origin)
    cdef public bytes origin


cdef class SublistResult:
    cdef public list psubs           # plain subscriptions
    cdef public list qsubs           # one list per queue group name; a leaf or route member
                                     # appears `weight` times (its share of the group)
    cdef public Py_ssize_t total
    cdef public bytes account        # the name of the account whose sublist matched


cdef class _Level
cdef class _Node:
    cdef _Level next
    cdef dict psubs                  # Subscription -> None (ordered set)
    cdef dict qsubs                  # queue name -> {Subscription: None}
    cdef bint is_empty(self)


cdef class _Level:
    cdef dict nodes                  # token -> _Node
    cdef _Node pwc                   # `*`
    cdef _Node fwc                   # `>`
    cdef bint is_empty(self)
    cdef _Node get(self, bytes token)
    cdef _Node get_or_add(self, bytes token)
    cdef void prune(self, bytes token, _Node n)


cdef class Sublist:
    cdef _Level root
    cdef dict cache
    cdef dict prefix_cache           # one-off subjects' results by their first PREFIX_TOKENS tokens
    cdef public unsigned long long genid
    cdef public Py_ssize_t count
    cdef public bint cache_enabled
    cdef public long long matches
    cdef public long long cache_hits
    cdef public long long inserts
    cdef public long long removes
    cdef public object on_change     # callable(sub, added: bool) for interest propagation
    cdef dict watched                # literal subject -> [callback()]: called once, when a
                                     # subscription that matches it is inserted (watch)
    cdef public bytes account        # the owning account's name (routes name it in RMSG)

    cpdef insert(self, Subscription sub)
    cpdef bint remove(self, Subscription sub)
    cpdef SublistResult match(self, bytes subject)
    cdef SublistResult match_cached(self, bytes subject)
    cdef void _invalidate(self)
    cpdef set_weight(self, Subscription sub, int weight)
    cdef void _notify(self, bytes subject) except *
