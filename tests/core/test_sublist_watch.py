"""Sublist.watch (natsd/_core/sublist.pyx): a callback called once, when a subscription that
matches a watched literal subject is inserted; plain, wildcard and queue subscriptions alike,
none for one that does not match, none after unwatch. A seeded differential test holds the
wildcard check to the sublist's own match."""
import random

from natsd._core.sublist import Sublist, Subscription


def _sub(subject, queue=None):
    return Subscription(subject=subject, sid=b"1", queue=queue, handler=lambda *a: None)


def test_a_watch_is_called_once_by_the_first_matching_insert():
    sl = Sublist()
    calls = []
    sl.watch(b"d.x", lambda: calls.append("x"))
    sl.watch(b"d.x", lambda: calls.append("x2"))
    sl.watch(b"d.y", lambda: calls.append("y"))
    assert sl.watching() == 3
    sl.insert(_sub(b"d.z"))
    sl.insert(_sub(b"e.*"))
    assert calls == []
    sl.insert(_sub(b"d.x", queue=b"q"))
    assert calls == ["x", "x2"]
    sl.insert(_sub(b"d.x"))
    assert calls == ["x", "x2"] and sl.watching() == 1
    sl.insert(_sub(b"d.>"))
    assert calls == ["x", "x2", "y"] and sl.watching() == 0


def test_unwatch_forgets_the_callback():
    sl = Sublist()
    calls = []

    def cb():
        calls.append(1)
    sl.watch(b"a.b", cb)
    sl.unwatch(b"a.b", cb)
    sl.unwatch(b"a.b", cb)          # twice is harmless
    sl.insert(_sub(b"a.b"))
    assert calls == [] and sl.watching() == 0


def test_wildcard_inserts_fire_exactly_the_watches_the_sublist_would_match():
    rnd = random.Random(20261207)
    tokens = [b"a", b"b", b"c"]
    for _ in range(300):
        literals = {b".".join(rnd.choice(tokens) for _ in range(rnd.randint(1, 4))) for _ in range(6)}
        pattern = b".".join(rnd.choice(tokens + [b"*", b"*", b">"]) for _ in range(rnd.randint(1, 4)))
        if b">" in pattern[:-1]:
            pattern = pattern[:pattern.index(b">") + 1]
        sl = Sublist()
        fired = set()
        for lit in literals:
            sl.watch(lit, lambda lit=lit: fired.add(lit))
        probe = Sublist()
        probe.insert(_sub(pattern))
        expected = {lit for lit in literals if probe.match(lit).total}
        sl.insert(_sub(pattern))
        assert fired == expected, (pattern, literals)
