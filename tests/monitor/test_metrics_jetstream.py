"""`/metrics` with JetStream: per-stream and per-consumer figures, consumer lag included,
checked against what the JetStream API reports for the same stream and consumer."""
import asyncio

import nats

from tests.monitor.test_metrics_and_options import families, value


def test_stream_and_consumer_figures_follow_the_api(natsd, tmp_path):
    srv = natsd("-js", "-sd", str(tmp_path), "-m", "-1")

    async def workload():
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(10):
            await js.publish("orders.new", b"order %d" % i)
        sub = await js.pull_subscribe("orders.>", durable="proc")
        msgs = await sub.fetch(4)
        for m in msgs[:3]:
            await m.ack()                   # one fetched message stays unacknowledged
        info = await js.consumer_info("ORDERS", "proc")
        sinfo = await js.stream_info("ORDERS")
        await nc.close()
        return sinfo, info

    sinfo, cinfo = asyncio.run(workload())
    fams = families(srv.http_port)
    labels = {"account": "$G", "stream": "ORDERS"}
    assert value(fams, "natsd_stream_messages", **labels) == sinfo.state.messages == 10
    assert value(fams, "natsd_stream_bytes", **labels) == sinfo.state.bytes
    assert value(fams, "natsd_stream_consumers", **labels) == 1
    clabels = dict(labels, consumer="proc")
    assert value(fams, "natsd_consumer_pending_messages", **clabels) == cinfo.num_pending == 6
    assert value(fams, "natsd_consumer_ack_pending_messages", **clabels) == cinfo.num_ack_pending == 1
    assert value(fams, "natsd_jetstream_storage_bytes") == sinfo.state.bytes
