"""Sublist and router micro-benchmarks: Sublist.insert/remove/match with the result cache hit
(same subject) and missed (cache_enabled = False), wildcard-heavy tries (10k subscriptions
with `*` and `>`), and natsd._core.router.publish() fan-out to N internal subscriptions
(including draining the internal delivery queue)."""
import random

import pytest

from natsd._core import router
from natsd._core.sublist import Sublist, Subscription


def _literal_subs(n, prefix=b"foo"):
    return [Subscription(None, b"%s.bar.%d.baz" % (prefix, i), b"%d" % i) for i in range(n)]


def _wildcard_subs(n, seed=1):
    """A mixed trie: literals, `*` in random positions, and `>` tails (about 1/3 each)."""
    rnd = random.Random(seed)
    subs = []
    for i in range(n):
        toks = [b"svc", b"r%d" % rnd.randrange(20), b"e%d" % rnd.randrange(50), b"k%d" % rnd.randrange(100)]
        kind = i % 3
        if kind == 1:
            toks[rnd.randrange(1, 4)] = b"*"
        elif kind == 2:
            cut = rnd.randrange(1, 4)
            toks = toks[:cut] + [b">"]
        subs.append(Subscription(None, b".".join(toks), b"%d" % i))
    return subs


def _literal_subjects(n, seed=2):
    rnd = random.Random(seed)
    return [b"svc.r%d.e%d.k%d" % (rnd.randrange(20), rnd.randrange(50), rnd.randrange(100)) for _ in range(n)]


# ---- insert / remove ----

def test_insert_remove_1k(benchmark):
    subs = _literal_subs(1000)

    def run():
        sl = Sublist()
        for s in subs:
            sl.insert(s)
        for s in subs:
            sl.remove(s)
        return sl

    sl = benchmark(run)
    assert sl.count == 0
    benchmark.extra_info["ops"] = 2000


def test_insert_remove_wildcards_10k(benchmark):
    subs = _wildcard_subs(10_000)

    def run():
        sl = Sublist()
        for s in subs:
            sl.insert(s)
        for s in subs:
            assert sl.remove(s)
        return sl

    sl = benchmark(run)
    assert sl.count == 0
    benchmark.extra_info["ops"] = 20_000


def test_insert_remove_one_into_10k(benchmark):
    """Churn on a big sublist: one insert + one remove (each also drops the cache)."""
    sl = Sublist()
    for s in _wildcard_subs(10_000):
        sl.insert(s)
    extra = Subscription(None, b"svc.r1.e1.extra", b"x")

    def run():
        sl.insert(extra)
        sl.remove(extra)

    benchmark(run)


# ---- match ----

@pytest.fixture(scope="module")
def literal_10k():
    sl = Sublist()
    for s in _literal_subs(10_000):
        sl.insert(s)
    return sl


@pytest.fixture(scope="module")
def wildcard_10k():
    sl = Sublist()
    for s in _wildcard_subs(10_000):
        sl.insert(s)
    return sl


@pytest.mark.parametrize("cache", [True, False], ids=["cache_hit", "cache_miss"])
def test_match_literal_10k(benchmark, literal_10k, cache):
    sl = literal_10k
    sl.cache_enabled = cache
    subj = b"foo.bar.5000.baz"
    try:
        r = benchmark(sl.match, subj)
    finally:
        sl.cache_enabled = True
    assert len(r) == 1


@pytest.mark.parametrize("cache", [True, False], ids=["cache_hit", "cache_miss"])
def test_match_wildcard_10k(benchmark, wildcard_10k, cache):
    sl = wildcard_10k
    sl.cache_enabled = cache
    subj = _literal_subjects(1)[0]
    try:
        r = benchmark(sl.match, subj)
    finally:
        sl.cache_enabled = True
    benchmark.extra_info["matched"] = len(r)


@pytest.mark.parametrize("cache", [True, False], ids=["cache_warm", "cache_off"])
def test_match_wildcard_10k_1k_subjects(benchmark, wildcard_10k, cache):
    """1000 different subjects per round (fits the 4096-entry cache when it is on)."""
    sl = wildcard_10k
    sl.cache_enabled = cache
    subjects = _literal_subjects(1000)
    match = sl.match

    def run():
        n = 0
        for s in subjects:
            n += len(match(s))
        return n

    try:
        benchmark(run)
    finally:
        sl.cache_enabled = True
    benchmark.extra_info["ops"] = len(subjects)


def test_match_no_interest(benchmark, wildcard_10k):
    wildcard_10k.cache_enabled = False
    try:
        r = benchmark(wildcard_10k.match, b"other.subject.entirely")
    finally:
        wildcard_10k.cache_enabled = True
    assert len(r) == 0


# ---- router.publish fan-out to internal subscriptions ----

@pytest.mark.parametrize("nsubs", [1, 10, 100, 1000])
def test_publish_fanout_internal(benchmark, nsubs):
    sl = Sublist()
    count = [0]

    def handler(sub, subject, reply, hdr, payload, origin=None):
        count[0] += 1

    for i in range(nsubs):
        sl.insert(Subscription(None, b"fan.out", b"%d" % i, None, handler))
    payload = b"x" * 128
    publish, drain = router.publish, router.drain_internal

    def run():
        n = publish(sl, b"fan.out", None, None, payload)
        drain()
        return n

    n = benchmark(run)
    assert n == nsubs
    assert count[0] % nsubs == 0
    benchmark.extra_info["deliveries"] = nsubs


def test_publish_queue_group_internal(benchmark):
    """One queue group of 100 members: one delivery per publish, random member."""
    sl = Sublist()

    def handler(*a):
        pass

    for i in range(100):
        sl.insert(Subscription(None, b"work.q", b"%d" % i, b"workers", handler))
    publish, drain = router.publish, router.drain_internal

    def run():
        n = publish(sl, b"work.q", b"_INBOX.x", None, b"hello")
        drain()
        return n

    assert benchmark(run) == 1


def test_publish_no_interest(benchmark, wildcard_10k):
    assert benchmark(router.publish, wildcard_10k, b"nobody.here", None, None, b"x") == 0
