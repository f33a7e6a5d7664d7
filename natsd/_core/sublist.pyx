# cython: language_level=3, boundscheck=False, wraparound=False
"""The subject trie (sublist): subscriptions indexed by token, with `*` and `>` wildcards
and queue groups, and a bounded cache of match results per literal subject; and one-time
watches (watch()) that the insert of a matching subscription calls back.

The cache is dropped whenever the generation id moves (any insert or remove), so a cached
result is always exact. Matching a cached subject costs one dict lookup.
"""

from libc.string cimport memcmp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from natsd._core.logfmt cimport nlog_match      # the C subject matcher (nlog.h), shared with the log

cdef Py_ssize_t CACHE_MAX = 4096
# One-off subjects (each published about once: reply inboxes, acks) stay out of the match
# cache, which they would only churn. They are registered at start (set_one_off_prefixes),
# each with a memo depth: a one-off subject with more tokens than that keeps its match under
# its first `memo_tokens` tokens when the walk through the trie consulted none beyond them,
# since every subject with that prefix then matches the same subscriptions (an ack against its
# consumer's wildcard subscription). The sublist knows none of them by name.
DEF ONE_OFF_MAX = 8
cdef tuple _uncached = ()               # the registered prefixes
cdef Py_ssize_t _memo_tokens[ONE_OFF_MAX]


def set_one_off_prefixes(prefixes):
    """Register the prefixes of one-off subjects, each with how many leading tokens its
    subjects' matches are kept under (0: not kept): ((prefix, memo_tokens), ...), replacing
    what was registered before."""
    global _uncached
    pairs = [(bytes(p), int(t)) for p, t in prefixes if p]
    if len(pairs) > ONE_OFF_MAX:
        raise ValueError("at most %d one-off subject prefixes" % ONE_OFF_MAX)
    for i, (_, tokens) in enumerate(pairs):
        _memo_tokens[i] = tokens
    _uncached = tuple(p for p, _ in pairs)


cdef inline Py_ssize_t _one_off(bytes subject):
    """-1 for a subject the match cache may hold; for a one-off subject, the number of leading
    tokens its match is kept under (0: none)."""
    cdef bytes p
    cdef Py_ssize_t n = PyBytes_GET_SIZE(subject), k, i = 0
    for p in _uncached:
        k = PyBytes_GET_SIZE(p)
        if n > k and memcmp(PyBytes_AS_STRING(subject), PyBytes_AS_STRING(p), k) == 0:
            return _memo_tokens[i]
        i += 1
    return -1


cdef bytes STAR = b"*"
cdef bytes GT = b">"


cdef class Subscription:
    def __cinit__(self):
        self.weight = 1

    def __init__(self, conn=None, subject=b"", sid=b"", queue=None, handler=None):
        self.conn = conn
        self.subject = subject
        self.sid = sid
        self.queue = queue if queue else None
        self.handler = handler

    def __repr__(self):
        return "<Subscription %r sid=%r queue=%r>" % (self.subject, self.sid, self.queue)


cdef class SublistResult:
    def __cinit__(self):
        self.psubs = []
        self.qsubs = []
        self.total = 0

    def __len__(self):
        return self.total


cdef SublistResult EMPTY_RESULT = SublistResult()


cdef class _Node:
    def __cinit__(self):
        self.next = None
        self.psubs = {}
        self.qsubs = None

    cdef bint is_empty(self):
        return not self.psubs and not self.qsubs and (self.next is None or self.next.is_empty())


cdef class _Level:
    def __cinit__(self):
        self.nodes = {}
        self.pwc = None
        self.fwc = None

    cdef bint is_empty(self):
        return not self.nodes and self.pwc is None and self.fwc is None

    cdef _Node get(self, bytes token):
        if token == STAR:
            return self.pwc
        if token == GT:
            return self.fwc
        return self.nodes.get(token)

    cdef _Node get_or_add(self, bytes token):
        cdef _Node n = self.get(token)
        if n is None:
            n = _Node()
            if token == STAR:
                self.pwc = n
            elif token == GT:
                self.fwc = n
            else:
                self.nodes[token] = n
        return n

    cdef void prune(self, bytes token, _Node n):
        if token == STAR:
            self.pwc = None
        elif token == GT:
            self.fwc = None
        else:
            self.nodes.pop(token, None)


cdef inline void _collect(_Node n, list psubs, dict groups):
    cdef list members
    cdef Subscription s
    cdef int k
    if n.psubs:
        psubs.extend(n.psubs)
    if n.qsubs:
        for q, subs in (<dict>n.qsubs).items():
            members = groups.get(q)
            if members is None:
                members = groups[q] = list(<dict>subs)
            else:
                members.extend(<dict>subs)
            # a leaf or route member stands for `weight` members over there: it gets that
            # share of the group's messages (nats-server's remote queue weights)
            for s in <dict>subs:
                for k in range(1, s.weight):
                    members.append(s)


cdef Py_ssize_t _match_level(_Level lvl, list tokens, Py_ssize_t i, list psubs, dict groups):
    """Collect the matches of tokens[i:] below lvl; returns the deepest token index the walk
    looked at (its result depends on no token after that one)."""
    cdef Py_ssize_t ntok = len(tokens), deepest = i, d
    cdef _Node n
    while lvl is not None:
        if i > deepest:
            deepest = i
        if lvl.fwc is not None:
            _collect(lvl.fwc, psubs, groups)
        if lvl.pwc is not None:
            if i == ntok - 1:
                _collect(lvl.pwc, psubs, groups)
            elif lvl.pwc.next is not None:
                d = _match_level(lvl.pwc.next, tokens, i + 1, psubs, groups)
                if d > deepest:
                    deepest = d
        n = lvl.nodes.get(tokens[i]) if lvl.nodes else None
        if n is None:
            break
        if i == ntok - 1:
            _collect(n, psubs, groups)
            break
        lvl = n.next
        i += 1
    return deepest


cdef Py_ssize_t _prefix_end(bytes subject, Py_ssize_t tokens):
    """The length of the subject's first `tokens` tokens, or -1 when it has no more tokens
    than that or an empty token (which matches nothing)."""
    cdef const char* s = PyBytes_AS_STRING(subject)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(subject), i, dots = 0, end = -1
    if n == 0 or s[0] == b'.' or s[n - 1] == b'.':
        return -1
    for i in range(n):
        if s[i] == b'.':
            if s[i - 1] == b'.':
                return -1
            dots += 1
            if dots == tokens:
                end = i
    return end


cdef class Sublist:
    """Subscriptions of one account."""

    def __cinit__(self, account=None):
        self.root = _Level()
        self.cache = {}
        self.prefix_cache = {}
        self.cache_enabled = True
        self.account = account

    cpdef insert(self, Subscription sub):
        cdef list tokens = sub.subject.split(b".")
        cdef _Level lvl = self.root
        cdef _Node n = None
        cdef Py_ssize_t i, last = len(tokens) - 1
        for i in range(last + 1):
            n = lvl.get_or_add(tokens[i])
            if i < last:
                if n.next is None:
                    n.next = _Level()
                lvl = n.next
        if sub.queue is None:
            n.psubs[sub] = None
        else:
            if n.qsubs is None:
                n.qsubs = {}
            group = n.qsubs.get(sub.queue)
            if group is None:
                n.qsubs[sub.queue] = {sub: None}
            else:
                (<dict>group)[sub] = None
        self.count += 1
        self.inserts += 1
        self._invalidate()
        if self.on_change is not None:
            self.on_change(sub, True)
        if self.watched:
            self._notify(sub.subject)

    def watch(self, bytes subject, callback):
        """callback() once, when a subscription that matches the literal `subject` is inserted
        (nats-server's sublist RegisterNotification, for one insert). A push consumer with no
        subscriber on its deliver subject waits this way instead of asking again and again.
        It runs inside insert(): it should only schedule its work."""
        if self.watched is None:
            self.watched = {}
        waiting = self.watched.get(subject)
        if waiting is None:
            self.watched[subject] = [callback]
        else:
            (<list>waiting).append(callback)

    def unwatch(self, bytes subject, callback):
        """Forget a watch() not yet called back."""
        if not self.watched:
            return
        waiting = self.watched.get(subject)
        if waiting is not None and callback in waiting:
            (<list>waiting).remove(callback)
            if not waiting:
                del self.watched[subject]

    def watching(self):
        """The number of watches waiting (monitoring, tests)."""
        return sum(len(w) for w in self.watched.values()) if self.watched else 0

    cdef void _notify(self, bytes subject) except *:
        cdef list fired
        if b"*" not in subject and b">" not in subject:
            fired = self.watched.pop(subject, None)
            if fired is None:
                return
        else:
            fired = []
            for watched in [w for w in self.watched
                            if nlog_match(subject, len(subject), <bytes>w, len(<bytes>w))]:
                fired.extend(self.watched.pop(watched))
        for callback in fired:
            callback()

    cpdef bint remove(self, Subscription sub):
        cdef list tokens = sub.subject.split(b".")
        cdef list path = []
        cdef _Level lvl = self.root
        cdef _Node n = None
        cdef Py_ssize_t i, last = len(tokens) - 1
        for i in range(last + 1):
            if lvl is None:
                return False
            n = lvl.get(tokens[i])
            if n is None:
                return False
            path.append((lvl, tokens[i], n))
            lvl = n.next
        if sub.queue is None:
            if n.psubs.pop(sub, 0) is not None:
                return False
        else:
            group = n.qsubs.get(sub.queue) if n.qsubs else None
            if group is None or (<dict>group).pop(sub, 0) is not None:
                return False
            if not group:
                del n.qsubs[sub.queue]
        # prune empty nodes bottom-up
        for i in range(len(path) - 1, -1, -1):
            lvl, tok, n = path[i]
            if n.next is not None and n.next.is_empty():
                n.next = None
            if n.is_empty():
                lvl.prune(tok, n)
            else:
                break
        self.count -= 1
        self.removes += 1
        self._invalidate()
        if self.on_change is not None:
            self.on_change(sub, False)
        return True

    cdef void _invalidate(self):
        self.genid += 1
        if self.cache:
            self.cache.clear()
        if self.prefix_cache:
            self.prefix_cache.clear()

    cpdef set_weight(self, Subscription sub, int weight):
        """A remote queue member's weight changed: cached results hold the old share."""
        if sub.weight != weight:
            sub.weight = weight
            self._invalidate()

    cpdef SublistResult match(self, bytes subject):
        return self.match_cached(subject)

    cdef SublistResult match_cached(self, bytes subject):
        cdef object hit
        # one-off subjects (set_one_off_prefixes: each published about once): caching them whole
        # only evicts the hot entries (the cache is dropped when full) and churns the
        # allocator; they are kept by prefix instead, where their registration and the trie
        # allow
        cdef Py_ssize_t memo = _one_off(subject)
        cdef bint one_off = memo >= 0
        cdef bint cacheable = self.cache_enabled and not one_off
        cdef Py_ssize_t pend = -1, deepest = -1
        cdef bytes prefix = None
        self.matches += 1
        if cacheable:
            hit = self.cache.get(subject)
            if hit is not None:
                self.cache_hits += 1
                return <SublistResult>hit
        elif memo > 0 and self.cache_enabled:
            pend = _prefix_end(subject, memo)
            if pend > 0:
                prefix = subject[:pend]
                hit = self.prefix_cache.get(prefix)
                if hit is not None:
                    self.cache_hits += 1
                    return <SublistResult>hit
        cdef list psubs = []
        cdef dict groups = {}
        cdef list tokens = subject.split(b".")
        if b"" not in tokens:               # an empty token matches nothing, as in nats-server
            deepest = _match_level(self.root, tokens, 0, psubs, groups)
        cdef SublistResult r
        if not psubs and not groups:
            r = EMPTY_RESULT
        else:
            r = SublistResult()
            r.psubs = psubs
            r.qsubs = list(groups.values())
            r.total = len(psubs) + len(groups)
            r.account = self.account
        if cacheable:
            if len(self.cache) >= CACHE_MAX:
                self.cache.clear()
            self.cache[subject] = r
        elif prefix is not None and deepest < memo:
            if len(self.prefix_cache) >= CACHE_MAX:
                self.prefix_cache.clear()
            self.prefix_cache[prefix] = r
        return r

    def all_subscriptions(self):
        """Every subscription (monitoring, interest propagation); not for the hot path."""
        out = []
        stack = [self.root]
        while stack:
            lvl = <_Level>stack.pop()
            nodes = list(lvl.nodes.values())
            if lvl.pwc is not None:
                nodes.append(lvl.pwc)
            if lvl.fwc is not None:
                nodes.append(lvl.fwc)
            for n in nodes:
                out.extend((<_Node>n).psubs)
                if (<_Node>n).qsubs:
                    for g in (<_Node>n).qsubs.values():
                        out.extend(g)
                if (<_Node>n).next is not None:
                    stack.append((<_Node>n).next)
        return out

    def cache_size(self):
        return len(self.cache)

    def has_interest(self, bytes subject):
        return self.match_cached(subject).total > 0
