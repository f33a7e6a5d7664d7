"""Stream limits under a burst: many publishes read in one loop iteration take natsd's batched
ingest path until one would reach max_msgs or max_bytes, and that one and the rest go through
the full path. The PubAcks (in order) and the stream state must be nats-server's for discard
new and discard old, by count, by bytes and per subject (a KV bucket's history: the short
path removes a subject's oldest message itself), file and memory storage."""
import json

import nats
import pytest

from tests.support.waiting import run, until

N = 120


async def burst(url, cfg):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(**cfg)
    acks = []
    inbox = nc.new_inbox()

    async def cb(m):
        acks.append(json.loads(m.data))
    await nc.subscribe(inbox, cb=cb)
    for i in range(N):                  # pipelined: nats-py writes them out together
        await nc.publish("l.%d" % (i % 3), b"%04d" % i + b"." * (i % 7), reply=inbox)
    await nc.flush()
    assert await until(lambda: len(acks) == N, timeout=10), len(acks)
    st = (await js.stream_info(cfg["name"])).state
    first = await js.get_msg(cfg["name"], st.first_seq) if st.messages else None
    firsts = {}                         # each subject's oldest message left
    for s in range(3):
        firsts[s] = (await js.get_msg(cfg["name"], subject="l.%d" % s, next=True, seq=1)).seq
    await nc.close()
    return ([a["error"]["description"] if "error" in a else a["seq"] for a in acks],
            (st.messages, st.bytes, st.first_seq, st.last_seq), first and first.data,
            firsts)


CASES = [
    dict(max_msgs=50, discard="new"),
    dict(max_msgs=50, discard="old"),
    dict(max_bytes=2000, discard="new"),
    dict(max_bytes=2000, discard="old"),
    dict(max_msgs=70, max_bytes=3000, discard="old"),
    dict(max_msgs_per_subject=1),
    dict(max_msgs_per_subject=3, max_msgs=50, discard="old"),
    dict(max_msgs_per_subject=2, discard="new"),
    dict(max_msgs_per_subject=2, discard="new", discard_new_per_subject=True),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_limits_under_a_burst_match(natsd, reference, tmp_path, storage):
    ours, theirs = [], []
    for i, case in enumerate(CASES):
        cfg = dict(name="L%d" % i, subjects=["l.*"], storage=storage, **case)
        ours.append(run(burst)(natsd("-js", "-sd", str(tmp_path / ("a%d" % i))).url, cfg))
        theirs.append(run(burst)(reference("-js", "-sd", str(tmp_path / ("b%d" % i))).url, cfg))
    for o, t in zip(ours, theirs):
        assert o == t
    assert any(isinstance(s, str) for s in ours[0][0])      # discard new did refuse some
