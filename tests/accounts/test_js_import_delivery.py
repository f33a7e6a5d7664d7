"""JetStream deliveries that cross account imports keep the subject they were stored under.

A push consumer's deliver subject, a pull request's reply inbox or a KV watcher's inbox is
only how a delivery is *routed*; the client receiving it sees the message's stored subject and
the plain `$JS.ACK...` reply (nats-server processMsgResults: "deliver" subjects), also when the
delivery went through a stream import with a prefix or through a service import's response.

Every scenario runs on natsd and on nats-server (`any_server`) with a raw socket client, and
the MSG/HMSG lines are compared field by field (the ack reply's timestamp token aside).
"""
import asyncio
import json
import re
import time

import nats
import pytest

from tests.support.rawclient import RawClient
from tests.support.waiting import run

CONF = """
accounts {
  JSA: {
    jetstream: enabled
    users: [{user: jsa, password: jsa}]
    exports: [
      {stream: "dlv.>"}
      {service: "$JS.API.CONSUMER.MSG.NEXT.ORDERS.pull", response_type: stream}
      {service: "$JS.ACK.ORDERS.pull.>"}
    ]
  }
  IMP: {
    users: [{user: imp, password: imp}]
    imports: [
      {stream: {account: JSA, subject: "dlv.>"}, prefix: "imp"}
      {service: {account: JSA, subject: "$JS.API.CONSUMER.MSG.NEXT.ORDERS.pull"},
       to: "JS.jsa.API.CONSUMER.MSG.NEXT.ORDERS.pull"}
      {service: {account: JSA, subject: "$JS.ACK.ORDERS.pull.>"}}
    ]
  }
}
"""

FRAME_RE = re.compile(rb"(H?MSG) (\S+) (\S+) (?:(\S+) )?(?:(\d+) )?(\d+)\r\n")
ACK_RE = re.compile(r"^\$JS\.ACK\.(\S+)\.(\S+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)$")


def frames(data):
    """(op, subject, reply, header block) of each MSG/HMSG frame in data."""
    out, i = [], 0
    while True:
        m = FRAME_RE.search(data, i)
        if not m:
            return out
        size = int(m.group(6))
        hsize = int(m.group(5)) if m.group(1) == b"HMSG" else 0
        start = m.end()
        out.append((m.group(1).decode(), m.group(2).decode(),
                    m.group(4).decode() if m.group(4) else None, data[start:start + hsize]))
        i = start + size + 2


def collect(c, n, timeout=10.0):
    """Read from raw client c until n MSG/HMSG frames arrived (or fail at the deadline)."""
    deadline = time.monotonic() + timeout
    data = b""
    while len(frames(data)) < n:
        assert time.monotonic() < deadline, "only %r within %ss" % (data, timeout)
        data += c.read_available(0.1, 1.0)
    return frames(data)


def ack_fields(reply):
    """The ack reply without its timestamp: (stream, consumer, dc, sseq, dseq, pending)."""
    m = ACK_RE.match(reply or "")
    assert m, "not a plain $JS.ACK reply: %r" % reply
    g = m.groups()
    return g[0], g[1], int(g[2]), int(g[3]), int(g[4]), int(g[6])


@pytest.fixture
def server(any_server, tmp_path):
    conf = tmp_path / "imp.conf"
    conf.write_text(CONF + 'jetstream { store_dir: "%s" }\n' % (tmp_path / "js"))
    return any_server("-c", str(conf))


def raw_imp(srv):
    c = RawClient(srv.port)
    c.connect(user="imp", **{"pass": "imp"})
    return c


async def jsa(srv):
    return await nats.connect("nats://jsa:jsa@127.0.0.1:%d" % srv.port)


def test_push_delivery_through_prefixed_stream_import(server):
    """MSG <stored subject> <sid> $JS.ACK... although the client subscribed to imp.dlv.w1."""
    c = raw_imp(server)
    c.send(b"SUB imp.dlv.w1 1\r\n")
    c.sync()

    async def scenario():
        nc = await jsa(server)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.publish("orders.new", b"one", headers={"X-Tag": "a"})
        await js.publish("orders.old", b"two")
        await nc.request("$JS.API.CONSUMER.CREATE.ORDERS", json.dumps({
            "stream_name": "ORDERS", "config": {
                "name": "push", "deliver_subject": "dlv.w1", "ack_policy": "explicit",
                "deliver_policy": "all"}}).encode(), timeout=5)
        await nc.close()
    run(scenario())
    got = collect(c, 2)
    c.close()
    assert [(op, subj) for op, subj, _, _ in got] == [("HMSG", "orders.new"), ("MSG", "orders.old")]
    assert ack_fields(got[0][2]) == ("ORDERS", "push", 1, 1, 1, 1)
    assert ack_fields(got[1][2]) == ("ORDERS", "push", 1, 2, 2, 0)
    assert b"X-Tag: a\r\n" in got[0][3]


def test_kv_watch_through_prefixed_stream_import(server):
    """A KV watcher's push consumer in the exporter, delivered through the import: the
    importing client sees `$KV.<bucket>.<key>` as nats-server delivers it."""
    c = raw_imp(server)
    c.send(b"SUB imp.dlv.kv 1\r\n")
    c.sync()

    async def scenario():
        nc = await jsa(server)
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="cfg")
        await kv.put("color", b"blue")
        await nc.request("$JS.API.CONSUMER.CREATE.KV_cfg", json.dumps({
            "stream_name": "KV_cfg", "config": {
                "deliver_subject": "dlv.kv", "ack_policy": "none", "deliver_policy": "last_per_subject",
                "flow_control": False, "headers_only": False,
                "filter_subject": "$KV.cfg.>", "replay_policy": "instant"}}).encode(), timeout=5)
        await nc.close()

    async def second_put():
        nc = await jsa(server)
        await (await nc.jetstream().key_value("cfg")).put("size", b"xl")
        await nc.close()
    run(scenario())
    # Both servers deliver the first message after answering the create, so the second put
    # waits for it: otherwise the first delivery's pending count (0 or 1) is a race.
    got = collect(c, 1)
    run(second_put())
    got += collect(c, 1)
    c.close()
    assert [subj for _, subj, _, _ in got] == ["$KV.cfg.color", "$KV.cfg.size"]
    assert [ack_fields(reply)[2:] for _, _, reply, _ in got] == [(1, 1, 1, 0), (1, 2, 2, 0)]


def test_pull_through_service_import(server):
    """A pull request through a service import: the reply comes back through the response
    mapping, and the client sees the stored subject and the plain ack reply."""
    async def setup():
        nc = await jsa(server)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.publish("orders.new", b"one")
        await nc.request("$JS.API.CONSUMER.CREATE.ORDERS", json.dumps({
            "stream_name": "ORDERS", "config": {"name": "pull", "ack_policy": "explicit"}}).encode(),
            timeout=5)
        await nc.close()
    run(setup())
    c = raw_imp(server)
    c.send(b"SUB _INBOX.me 1\r\n")
    c.send(b'PUB JS.jsa.API.CONSUMER.MSG.NEXT.ORDERS.pull _INBOX.me 11\r\n{"batch":1}\r\n')
    data = c.read_until(b"one\r\n", 5)
    (op, subj, reply, _), = frames(data)
    assert (op, subj) == ("MSG", "orders.new")
    assert ack_fields(reply) == ("ORDERS", "pull", 1, 1, 1, 0)
    # the ack goes back through the ack import
    c.send(b"PUB %s 4\r\n+ACK\r\n" % reply.encode())
    c.sync()
    c.close()

    async def check():
        nc = await jsa(server)
        js = nc.jetstream()
        for _ in range(100):
            ci = await js.consumer_info("ORDERS", "pull")
            if ci.ack_floor.stream_seq == 1:
                break
            await asyncio.sleep(0.05)
        await nc.close()
        return ci
    ci = run(check())
    assert ci.ack_floor.stream_seq == 1 and ci.num_ack_pending == 0
