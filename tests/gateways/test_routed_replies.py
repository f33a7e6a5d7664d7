"""The `_GR_.` reply mapping on its own (natsd/gateways/replies.py): nats-server's hashes, which
replies leave mapped (a reply subscription younger than two seconds), and the mappings a
receiving server keeps, each for two seconds from its own request, however much traffic
follows (they must not pile up on a busy responder). The clock is a test clock."""
from natsd._core.conn import Connection
from natsd.gateways.replies import RECENT, RoutedReplies, gw_hash


class Clock:
    """The loop's time and timers, advanced by hand."""

    def __init__(self):
        self.now = 1000.0
        self.timers = []

    def time(self):
        return self.now

    def call_later(self, delay, fn, *args):
        self.timers.append((self.now + delay, fn, args))

    def advance(self, seconds):
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, fn, args in sorted(due, key=lambda t: t[0]):
            fn(*args)


class Gateways:
    def __init__(self, clock):
        self.name = "A"
        self.loop = clock
        self.server = type("S", (), {"id": "NSERVERID"})()


def replies():
    clock = Clock()
    return RoutedReplies(Gateways(clock)), clock


def test_hashes_are_nats_servers():
    # six base-62 digits of SHA-256, as nats-server's getHashSize(name, 6)
    assert len(gw_hash("A")) == 6 and gw_hash("A") == gw_hash("A") != gw_hash("B")
    assert all(chr(b).isalnum() for b in gw_hash("some cluster"))


def test_only_a_recent_reply_subscription_maps_the_reply():
    r, clock = replies()
    assert r.reply_for(b"$G", b"_INBOX.x") is None
    r.recent_subscription("$G", b"_INBOX.*")
    assert r.reply_for(b"$G", b"_INBOX.x") == r.prefix + b"_INBOX.x"
    assert r.reply_for(b"OTHER", b"_INBOX.x") is None
    assert r.reply_for(b"$G", r.prefix + b"_INBOX.x") is None       # routed already
    clock.advance(RECENT + 0.1)
    assert r.reply_for(b"$G", b"_INBOX.x") is None


def test_mappings_expire_one_by_one_under_steady_traffic():
    import socket
    a, b = socket.socketpair()
    try:
        c = Connection(a.fileno())
        r, clock = replies()
        for i in range(50):                 # a request every 0.1 s for 5 s
            r.track(c, b"$G", r.prefix + b"_INBOX.%d" % i)
            clock.advance(0.1)
            assert c.gw_replies is not None and len(c.gw_replies) <= RECENT / 0.1 + 11
        assert b"_INBOX.0" not in c.gw_replies and b"_INBOX.49" in c.gw_replies
        clock.advance(RECENT * 2)
        assert c.gw_replies is None and not r.tracked
        r.track(None, b"SVC", r.prefix + b"_INBOX.z")                 # an internal receiver
        assert r.account_replies == {b"SVC": {b"_INBOX.z": r.prefix + b"_INBOX.z"}}
        clock.advance(RECENT * 2)
        assert r.account_replies == {}
    finally:
        a.close()
        b.close()
