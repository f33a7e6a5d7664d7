"""The sublist's match cache (natsd/_core/sublist.pyx): hot subjects are served from it, and
subjects with a registered one-off prefix (the server registers inboxes and acks) never enter
it, so a stream of acks neither fills it (it is dropped when full) nor gets a stale answer.
One-off subjects are kept by their leading tokens instead, where the trie looks no deeper;
a seeded differential test holds that memo to a plain matcher."""
import random

from natsd._core import sublist
from natsd._core.sublist import Sublist, Subscription
from natsd.server import ONE_OFF_PREFIXES


def test_one_off_subjects_skip_the_cache_and_hot_ones_hit_it():
    sublist.set_one_off_prefixes(ONE_OFF_PREFIXES)
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
    sublist.set_one_off_prefixes(())
    try:
        sl = Sublist()
        sl.insert(Subscription(subject=b"$JS.ACK.>", sid=b"1", handler=lambda *a: None))
        sl.match(b"$JS.ACK.S.C.1.1.1.0.0")
        assert sl.cache_size() == 1
    finally:
        sublist.set_one_off_prefixes(ONE_OFF_PREFIXES)


def _naive_match(pattern, subject):
    p, s = pattern.split(b"."), subject.split(b".")
    if b"" in s:
        return False
    for i, tok in enumerate(p):
        if tok == b">":
            return len(s) > i
        if i >= len(s) or (tok != b"*" and tok != s[i]):
            return False
    return len(p) == len(s)


def test_one_off_subjects_by_prefix_match_as_a_plain_matcher_does():
    sublist.set_one_off_prefixes(ONE_OFF_PREFIXES)
    rnd = random.Random(20261127)
    words = [b"S", b"1", b"x"]
    for _round in range(40):
        sl = Sublist()
        subs = []
        for k in range(rnd.randint(1, 6)):
            toks = [b"$JS", b"ACK"] + [rnd.choice(words + [b"*"]) for _ in range(rnd.randint(0, 6))]
            if rnd.random() < 0.6:
                toks.append(b">")
            sub = Subscription(subject=b".".join(toks), sid=b"%d" % k, handler=lambda *a: None)
            sl.insert(sub)
            subs.append(sub)
        for _ in range(300):
            subject = b".".join([b"$JS", b"ACK"] + [rnd.choice(words) for _ in range(rnd.randint(1, 9))])
            if rnd.random() < 0.05:
                subject += b"."                 # an empty token matches nothing
            got = sorted(s.sid for s in sl.match(subject).psubs)
            want = sorted(s.sid for s in subs if _naive_match(s.subject, subject))
            assert got == want, (subject, [s.subject for s in subs])
            if rnd.random() < 0.02:             # interest changes drop the memo
                sub = rnd.choice(subs)
                sl.remove(sub)
                subs.remove(sub)
                if not subs:
                    break
    assert sl.cache_size() == 0


def test_an_ack_stream_is_matched_from_its_prefix():
    sublist.set_one_off_prefixes(ONE_OFF_PREFIXES)
    sl = Sublist()
    acks = Subscription(subject=b"$JS.ACK.S.C.>", sid=b"1", handler=lambda *a: None)
    sl.insert(acks)
    first = sl.match(b"$JS.ACK.S.C.1.1.1.0.0")
    hits = sl.cache_hits
    for i in range(2, 1000):
        assert sl.match(b"$JS.ACK.S.C.1.%d.%d.0.0" % (i, i)) is first
    assert sl.cache_hits == hits + 998
    # a subscription that looks deeper is seen at once, and turns the memo off for that prefix
    deep = Subscription(subject=b"$JS.ACK.S.C.1.7.>", sid=b"2", handler=lambda *a: None)
    sl.insert(deep)
    assert {s.sid for s in sl.match(b"$JS.ACK.S.C.1.7.7.0.0").psubs} == {b"1", b"2"}
    assert sl.match(b"$JS.ACK.S.C.1.8.8.0.0").psubs == [acks]
    hits = sl.cache_hits
    sl.match(b"$JS.ACK.S.C.1.9.9.0.0")
    assert sl.cache_hits == hits
