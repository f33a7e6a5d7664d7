"""The sublist's match cache (natsd/_core/sublist.pyx): hot subjects are served from it, and
subjects with a registered one-off prefix (the server registers inboxes and acks) are matched
every time without entering it, so a stream of acks neither fills it (it is dropped when
full) nor gets a stale answer."""
from natsd._core import sublist
from natsd._core.sublist import Sublist, Subscription
from natsd.server import ONE_OFF_PREFIXES


def test_one_off_subjects_skip_the_cache_and_hot_ones_hit_it():
    sublist.set_uncached_prefixes(ONE_OFF_PREFIXES)
    sl = Sublist()
    acks = Subscription(subject=b"$JS.ACK.S.C.>", sid=b"1", handler=lambda *a: None)
    orders = Subscription(subject=b"orders.*", sid=b"2", handler=lambda *a: None)
    sl.insert(acks)
    sl.insert(orders)
    for i in range(10_000):
        r = sl.match(b"$JS.ACK.S.C.1.%d.%d.0.0" % (i, i))
        assert r.psubs == [acks]
        assert sl.match(b"_INBOX.abc.%d" % i).total == 0
    assert sl.cache_size() == 0
    hits = sl.cache_hits
    for _ in range(3):
        assert sl.match(b"orders.new").psubs == [orders]
    assert sl.cache_size() == 1 and sl.cache_hits == hits + 2
    # a one-off subject is matched afresh: a new subscription is seen at once
    more = Subscription(subject=b"$JS.ACK.>", sid=b"3", handler=lambda *a: None)
    sl.insert(more)
    assert {id(s) for s in sl.match(b"$JS.ACK.S.C.1.1.1.0.0").psubs} == {id(acks), id(more)}


def test_without_prefixes_every_subject_is_cached():
    sublist.set_uncached_prefixes(())
    try:
        sl = Sublist()
        sl.insert(Subscription(subject=b"$JS.ACK.>", sid=b"1", handler=lambda *a: None))
        sl.match(b"$JS.ACK.S.C.1.1.1.0.0")
        assert sl.cache_size() == 1
    finally:
        sublist.set_uncached_prefixes(ONE_OFF_PREFIXES)
