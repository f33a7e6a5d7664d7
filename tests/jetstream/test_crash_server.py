"""Crash test at server level: kill -9 natsd at a random moment while a client publishes
asynchronously (raw PUBs with reply inboxes, a window of pending PubAcks) into a file stream;
after a restart every message that got a PubAck is present exactly once, at the acknowledged
sequence, with its payload, and there is no sequence hole below the highest acked sequence.
Twenty short runs (about 0.3-0.8 s of publishing each)."""
import asyncio
import json
import random
import signal

import nats
import pytest

from tests.support.jetstream import api, connect
from tests.support.waiting import run

WINDOW = 256


async def publish_until_killed(srv, kill_after):
    acked = {}
    nc = await nats.connect(srv.url, allow_reconnect=False, max_reconnect_attempts=0)
    r = await api(nc, "$JS.API.STREAM.CREATE.CRASH", {"name": "CRASH", "subjects": ["crash.>"],
                                                       "storage": "file"})
    assert "error" not in r, r
    inbox = nc.new_inbox()
    sem = asyncio.Semaphore(WINDOW)

    async def on_ack(m):
        i = int(m.subject.rsplit(".", 1)[1])
        try:
            a = json.loads(m.data)
        except ValueError:
            a = {}
        if "seq" in a and "error" not in a:
            acked[i] = a["seq"]
        sem.release()
    await nc.subscribe(inbox + ".*", cb=on_ack)
    await nc.flush()
    loop = asyncio.get_running_loop()
    killed_at = loop.time() + kill_after
    i = 0
    try:
        while True:
            if loop.time() >= killed_at:
                srv.proc.send_signal(signal.SIGKILL)
                break
            try:
                await asyncio.wait_for(sem.acquire(), 2)
            except asyncio.TimeoutError:
                break
            await nc.publish("crash.%d" % (i % 13), b"payload-%d" % i, reply="%s.%d" % (inbox, i))
            i += 1
            if i % 64 == 0:
                await asyncio.sleep(0)
    finally:
        try:
            await nc.close()
        except Exception:
            pass
    return acked, i


async def read_back(srv):
    nc = await connect(srv)
    js = nc.jetstream()
    si = await js.stream_info("CRASH")
    psub = await js.pull_subscribe("crash.>", durable=None, stream="CRASH",
                                   config=nats.js.api.ConsumerConfig(ack_policy="none"))
    stored = {}
    want = si.state.messages
    while len(stored) < want:
        try:
            msgs = await psub.fetch(min(2000, want - len(stored)), timeout=2)
        except nats.errors.TimeoutError:
            break
        for m in msgs:
            seq = m.metadata.sequence.stream
            assert seq not in stored
            stored[seq] = m.data
    await nc.close()
    return si, stored


@pytest.mark.parametrize("run_no", range(10))
def test_kill9_during_async_publish(natsd, tmp_path, run_no):
    rnd = random.Random(run_no * 7919 + 17)
    sd = str(tmp_path / "store")
    srv = natsd("-js", "-sd", sd)
    acked, sent = run(publish_until_killed)(srv, rnd.uniform(0.3, 0.8))
    srv.proc.wait(10)
    assert len(acked) >= 100, "only %d messages acknowledged before the kill" % len(acked)
    srv2 = natsd("-js", "-sd", sd)
    si, stored = run(read_back)(srv2)
    assert len(stored) == si.state.messages
    by_payload = {}
    for seq, data in stored.items():
        i = int(data.split(b"-")[1])
        assert i not in by_payload, "message %d stored twice (seqs %d, %d)" % (i, by_payload[i], seq)
        by_payload[i] = seq
    for i, seq in acked.items():
        assert stored.get(seq) == b"payload-%d" % i, \
            "acked message %d (seq %d) missing or wrong after kill -9 (run %d)" % (i, seq, run_no)
    top = max(acked.values())
    holes = [s for s in range(1, top + 1) if s not in stored]
    assert not holes, "sequence holes below the highest acked sequence %d: %s" % (top, holes[:10])
