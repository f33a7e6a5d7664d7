"""kill -9 inside atomic batch commits: natsd is killed at a seeded random moment while
several publishers commit large batches. After the restart every batch in the stream is whole
(as many messages as its commit counted) or absent, every acknowledged batch is whole, and the
stream takes new batches. Each message of a commit is its own write, so the kill often lands
inside one; the restart then removes the partial batch (and logs it)."""
import asyncio
import json
import random

import nats

from tests.support.jetstream import bh

BATCH = 150                 # messages per batch
PAYLOAD = b"p" * 4096
PUBLISHERS = 3


async def publish_batches(url, acked, stop, prefix):
    """PUBLISHERS tasks commit batch after batch; acked[batch id] = count from the PubAck."""
    nc = await nats.connect(url, max_reconnect_attempts=0)
    await nc.request("$JS.API.STREAM.CREATE.B", json.dumps(
        {"name": "B", "subjects": ["b.>"], "allow_atomic": True}).encode(), timeout=5)

    async def publisher(p):
        k = 0
        while not stop.is_set():
            bid = "%sp%d-%d" % (prefix, p, k)
            k += 1
            try:
                for i in range(1, BATCH):
                    await nc.publish("b.%d" % p, PAYLOAD, headers=bh(bid, i))
                m = await nc.request("b.%d" % p, PAYLOAD, timeout=5, headers=bh(bid, BATCH, "1"))
            except Exception:
                return
            r = json.loads(m.data)
            if "error" not in r:
                acked[bid] = r["count"]
    tasks = [asyncio.create_task(publisher(p)) for p in range(PUBLISHERS)]
    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    try:
        await nc.close()
    except Exception:
        pass


async def stored_batches(url, durable):
    """batch id -> number of messages stored, read through a headers-only pull consumer."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("B")
    sub = await js.pull_subscribe("b.>", durable=durable, config=nats.js.api.ConsumerConfig(
        headers_only=True, ack_policy="none"))
    counts = {}
    seen = 0
    while seen < info.state.messages:
        for m in await sub.fetch(500, timeout=5):
            seen += 1
            bid = m.headers["Nats-Batch-Id"]
            counts[bid] = counts.get(bid, 0) + 1
    await nc.close()
    return counts, info.state


async def one_more_batch(url):
    nc = await nats.connect(url)
    for i in (1, 2):
        m = await nc.request("b.new", b"n", timeout=5, headers=bh("after", i, "1" if i == 2 else None))
    await nc.close()
    return json.loads(m.data)


def test_kill_inside_batch_commits_leaves_only_whole_batches(natsd, tmp_path):
    rng = random.Random(20261124)
    store = str(tmp_path / "store")
    partials = 0
    port = None
    for rnd in range(5):
        args = ("-js", "-sd", store) + (("-p", str(port)) if port else ())
        srv = natsd(*args)
        port = srv.port
        acked = {}

        async def run_and_kill():
            stop = asyncio.Event()
            task = asyncio.create_task(publish_batches(srv.url, acked, stop, "r%d-" % rnd))
            while len(acked) < 2:
                await asyncio.sleep(0.01)
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            srv.kill()
            stop.set()
            await task
        asyncio.run(asyncio.wait_for(run_and_kill(), 60))
        srv = natsd("-js", "-sd", store, "-p", str(port))
        counts, state = asyncio.run(stored_batches(srv.url, "check%d" % rnd))
        partials += "Removed a partial batch write" in srv.log
        broken = {b: n for b, n in counts.items() if n != BATCH and not b.startswith("after")}
        assert not broken, "round %d: partial batches after the restart: %r" % (rnd, broken)
        missing = [b for b, n in acked.items() if counts.get(b) != n]
        assert not missing, "round %d: acknowledged batches lost: %r" % (rnd, missing)
        ack = asyncio.run(one_more_batch(srv.url))
        assert ack["count"] == 2 and ack["seq"] > state.last_seq, ack
        srv.kill()
    print("kills that landed inside a commit: %d of 5" % partials)
