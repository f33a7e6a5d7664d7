"""A push consumer with nobody on its deliver subject waits for a subscriber (the account's
sublist calls it back, natsd/jetstream/engine/consumer.py _watch_interest) and delivers as
soon as one comes: a subscriber, the same again after it left, a deliver group's queue
subscriber, and one for a deliver subject changed by an update. The same scenario against
nats-server delivers the same messages to the same subscribers.

A wildcard subscriber that matches the deliver subject, and a queue subscriber of a consumer
without a deliver group, are no subscribers for nats-server: at creation or later, nothing is
delivered to them, on either server."""
import json
import time

from tests.support.rawclient import RawClient, parse_msgs


def _take(c, n, timeout=5.0):
    """The (subject, payload) of the MSG frames read until n came or the deadline passed."""
    data, deadline = b"", time.monotonic() + timeout
    while len(parse_msgs(data)) < n and time.monotonic() < deadline:
        data += c.read_available(quiet=0.05, timeout=max(0.05, deadline - time.monotonic()))
    return [(m[0], m[-1]) for m in parse_msgs(data)]


def _consumer(c, name, **cfg):
    cfg = dict({"durable_name": name, "ack_policy": "none"}, **cfg)
    r = c.request(b"$JS.API.CONSUMER.DURABLE.CREATE.S." + name.encode(),
                  json.dumps({"stream_name": "S", "config": cfg}).encode(), timeout=5)
    assert b'"error"' not in r, r


def scenario(srv):
    with RawClient(srv.port) as c:
        c.connect()
        assert b'"error"' not in c.request(b"$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s.>"]}', timeout=5)
        _consumer(c, "P", deliver_subject="d.x", filter_subject="s.p")
        _consumer(c, "G", deliver_subject="g.x", deliver_group="grp", filter_subject="s.g")
        for i in range(3):
            c.request(b"s.p", b"a%d" % i, timeout=5)
            c.request(b"s.g", b"g%d" % i, timeout=5)
        time.sleep(0.3)                 # the consumer has found nobody and waits (no state shows it)
        out = []
        c.send(b"SUB d.x 7\r\n")
        out.append(_take(c, 3))
        c.send(b"UNSUB 7\r\n")
        c.sync()
        for i in range(2):
            c.request(b"s.p", b"b%d" % i, timeout=5)
        time.sleep(0.3)
        c.send(b"SUB d.x 8\r\n")      # back again
        out.append(_take(c, 2))
        c.send(b"UNSUB 8\r\n")
        c.sync()
        c.send(b"SUB g.x grp 9\r\n")  # the group's queue subscriber
        out.append(_take(c, 3))
        c.send(b"UNSUB 9\r\n")
        c.sync()
        _consumer(c, "P", deliver_subject="e.x", filter_subject="s.p")
        c.request(b"s.p", b"c0", timeout=5)
        time.sleep(0.3)
        c.send(b"SUB e.x 10\r\n")     # the new deliver subject
        out.append(_take(c, 1))
        return out


def wildcard_and_stray_queue(srv):
    with RawClient(srv.port) as c:
        c.connect()
        assert b'"error"' not in c.request(b"$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s.>"]}', timeout=5)
        c.send(b"SUB d.* 7\r\nSUB q.x qq 8\r\n")
        c.sync()
        _consumer(c, "P", deliver_subject="d.x")
        _consumer(c, "Q", deliver_subject="q.x")
        c.send(b"PUB s.1 1\r\nx\r\n")
        first = parse_msgs(c.read_available(quiet=0.5, timeout=3))
        c.send(b"SUB d.x 9\r\n")     # the exact subject: now P delivers (to it, at least)
        later = parse_msgs(c.read_available(quiet=0.5, timeout=3))
        return first, (b"s.1", b"9") in [(m[0], m[1]) for m in later]


def test_wildcard_and_stray_queue_subscribers_get_nothing_as_on_nats_server(natsd, reference, tmp_path):
    ours = wildcard_and_stray_queue(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = wildcard_and_stray_queue(reference("-js", "-sd", str(tmp_path / "b")))
    assert ours == theirs
    assert ours == ([], True)


def test_a_push_consumer_delivers_when_a_subscriber_comes_as_nats_server_does(natsd, reference, tmp_path):
    ours = scenario(natsd("-js", "-sd", str(tmp_path / "a")))
    theirs = scenario(reference("-js", "-sd", str(tmp_path / "b")))
    assert ours == theirs
    assert [len(x) for x in ours] == [3, 2, 3, 1]
