"""JetStream on a natsd cluster of one-replica streams: each stream lives on one server, and
the API answers for the whole cluster (natsd/jetstream/replicated/placement.py). Replicated streams have
their own tests (test_replicated_streams.py)."""
import asyncio

import nats
import pytest
from nats.js.api import StreamConfig

from tests.support.cluster import kill9, restart_member, start_js_cluster
from tests.support.waiting import until


@pytest.fixture
def js_cluster(tmp_path):
    members = start_js_cluster("natsd", tmp_path)
    yield members
    for m in members:
        m.proc.kill()


NOT_YET = (nats.js.errors.NotFoundError, nats.errors.TimeoutError, nats.errors.NoRespondersError)


def test_streams_reachable_from_every_server(js_cluster):
    a, b, c = js_cluster

    async def run():
        na, nb, nc = [await nats.connect(m.url) for m in (a, b, c)]
        ja, jb, jc = na.jetstream(), nb.jetstream(), nc.jetstream()
        await jb.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        here = await jb.stream_info("ORDERS")
        assert here.cluster.leader == "B" and here.cluster.name == "C1"
        # the stream is on B; A and C see it and use it
        info = await until(lambda: ja.stream_info("ORDERS"), 10, ignore=NOT_YET)
        assert info.config.name == "ORDERS" and info.cluster.leader == "B"
        acks = [await jc.publish("orders.%d" % i, b"o%d" % i) for i in range(10)]
        assert [x.seq for x in acks] == list(range(1, 11)) and {x.stream for x in acks} == {"ORDERS"}
        sub = await ja.pull_subscribe("orders.>", durable="proc", stream="ORDERS")
        msgs = await sub.fetch(10, timeout=5)
        assert [m.data for m in msgs] == [b"o%d" % i for i in range(10)]
        assert msgs[0].subject == "orders.0"
        for m in msgs:
            await m.ack_sync()
        ci = await jc.consumer_info("ORDERS", "proc")
        assert ci.num_ack_pending == 0 and ci.delivered.stream_seq == 10
        # a second stream created through C lives on C
        await jc.add_stream(StreamConfig(name="LOGS", subjects=["logs.>"]))
        assert (await ja.stream_info("LOGS")).cluster.leader == "C"
        # a name taken on another server is refused as nats-server refuses a clash
        with pytest.raises(nats.js.errors.BadRequestError) as e:
            await ja.add_stream(StreamConfig(name="ORDERS", subjects=["other.>"]))
        assert e.value.err_code == 10058
        # an unknown stream is unknown everywhere, answered once
        with pytest.raises(nats.js.errors.NotFoundError):
            await na.jetstream().stream_info("NOPE")
        await ja.delete_stream("ORDERS")
        with pytest.raises(nats.js.errors.NotFoundError):
            await jb.stream_info("ORDERS")
        for n in (na, nb, nc):
            await n.close()
    asyncio.run(run())


def test_key_value_across_servers(js_cluster, tmp_path):
    """A bucket made through A is used through B and C, and again after A restarted (its
    recovered streams draw the requests about them once its routes are up)."""
    a, b, c = js_cluster

    async def run():
        na, nb, nc = [await nats.connect(m.url) for m in (a, b, c)]
        kv_a = await na.jetstream().create_key_value(bucket="cfg")
        kv_b = await until(lambda: nb.jetstream().key_value("cfg"), 10, ignore=NOT_YET)
        kv_c = await until(lambda: nc.jetstream().key_value("cfg"), 10, ignore=NOT_YET)
        rev = await kv_b.put("color", b"blue")
        assert (await kv_c.get("color")).value == b"blue"
        assert (await kv_a.get("color")).revision == rev
        watcher = await kv_c.watchall()
        first = await watcher.updates(timeout=5)
        assert first.key == "color" and first.value == b"blue"
        await kv_a.put("size", b"9")
        nxt = None
        for _ in range(5):
            nxt = await watcher.updates(timeout=5)
            if nxt is not None:
                break
        assert nxt.key == "size" and nxt.value == b"9"
        await watcher.stop()
        for n in (na, nb, nc):
            await n.close()
    asyncio.run(run())
    kill9(a)
    js_cluster[0] = restart_member(a, tmp_path)

    async def after():
        nb = await nats.connect(b.url)
        kv = await until(lambda: nb.jetstream().key_value("cfg"), 10, ignore=NOT_YET)
        assert (await until(lambda: kv.get("size"), 10, ignore=NOT_YET)).value == b"9"
        await nb.close()
    asyncio.run(after())
