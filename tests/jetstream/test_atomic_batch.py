"""Atomic batch publish (allow_atomic, Nats-Batch-Id / -Sequence / -Commit), natsd against the
reference nats-server: the same batches, the same replies (empty for staged messages, the PubAck
with batch and count for the commit), the same errors, the same stored messages, and the
stream_batch_abandoned advisories. Nothing of a refused batch is stored. A restart keeps what
was committed and nothing of a batch that was still open."""
import asyncio
import json

import nats

from tests.support.jetstream import across_a_kill, api, bh, compared_on_both, stream_contents
from tests.support.waiting import until


BATCHES = [
    # committed with "1", and with an end-of-batch marker
    [("a.1", bh("b1", 1)), ("a.2", bh("b1", 2)), ("a.3", bh("b1", 3, "1"))],
    [("a.4", bh("b2", 1)), ("a.5", bh("b2", 2)), ("a.x", bh("b2", 3, "eob"))],
    # a gap, a batch that starts late, an end marker first, a bad commit value
    [("a.6", bh("b3", 1)), ("a.7", bh("b3", 3)), ("a.8", bh("b3", 4, "1"))],
    [("a.9", bh("b4", 2, "1"))],
    [("a.9", bh("b5", 1, "eob"))],
    [("a.9", bh("b6", 1)), ("a.9", bh("b6", 2, "yes")), ("a.9", bh("b6", 3, "1"))],
    # header rules: sequence missing or not a number, an id too long, too large
    [("a.9", {"Nats-Batch-Id": "b7", "Nats-Batch-Commit": "1"})],
    [("a.9", bh("b8", "x", "1"))],
    [("a.9", bh("i" * 65, 1, "1"))],
    [("a.9", bh("b9", 1001, "1"))],
    # checked at the commit: Nats-Expected-Last-Msg-Id, duplicate ids, expected sequences
    [("a.9", bh("c1", 1, **{"Nats-Expected-Last-Msg-Id": "x"})), ("a.9", bh("c1", 2, "1"))],
    [("a.9", bh("c2", 1, **{"Nats-Msg-Id": "m"})), ("a.9", bh("c2", 2, "1", **{"Nats-Msg-Id": "m"}))],
    [("a.10", bh("c3", 1)), ("a.11", bh("c3", 2, "1", **{"Nats-Expected-Last-Sequence": "6"}))],
    [("a.12", bh("c4", 1)), ("a.13", bh("c4", 2, "1", **{"Nats-Expected-Last-Sequence": "99"}))],
    [("a.14", bh("c5", 1, **{"Nats-Msg-Id": "z"})), ("a.15", bh("c5", 2, "1"))],
    [("a.16", bh("c6", 1, "1", **{"Nats-Msg-Id": "z"}))],
    # refused while storing (a TTL the stream does not allow, on the second message): the first is not kept either
    [("a.17", bh("c7", 1)), ("a.18", bh("c7", 2, "1", **{"Nats-TTL": "5s"}))],
    [("a.19", bh("c8", 1, "1"))],
]


@compared_on_both
async def test_atomic_batches_match(nc, js):
    out = []
    adv = []

    async def on_adv(m):
        d = json.loads(m.data)
        adv.append((d["batch"], d["reason"], d["stream"]))
    await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>", cb=on_adv)
    for name, extra in (("A", {"allow_atomic": True}), ("P", {})):
        await nc.request("$JS.API.STREAM.CREATE." + name, json.dumps(
            dict(name=name, subjects=[name.lower() + ".>"], **extra)).encode(), timeout=2)
    out.append(("plain", json.loads((await nc.request("p.1", b"x", timeout=2,
                                                     headers=bh("p", 1, "1"))).data)))
    for batch in BATCHES:
        replies = []
        for subject, headers in batch:
            try:
                m = await nc.request(subject, subject.encode(), timeout=2, headers=headers)
                replies.append(json.loads(m.data) if m.data else "empty")
            except nats.errors.TimeoutError:
                replies.append("timeout")
        out.append(replies)
    await until(lambda: len(adv) >= 2, 5)          # b3 and b5, left incomplete
    await asyncio.sleep(0.2)                        # and no other
    out.append(("advisories", sorted(adv)))
    out.append(("stored", await stream_contents(nc, "A")))
    return out


def test_open_batch_is_lost_and_commits_survive_a_kill(natsd, tmp_path):
    async def before(nc, js):
        await api(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"], "allow_atomic": True})
        for i in (1, 2):
            await nc.request("a.c", b"c", timeout=2, headers=bh("done", i, "1" if i == 2 else None))
        for i in (1, 2, 3):
            assert (await nc.request("a.o", b"o", timeout=2, headers=bh("open", i))).data == b""

    async def after(nc, js):
        n, last, msgs = await stream_contents(nc, "A")
        assert (n, last, [m[1] for m in msgs]) == (2, 2, ["a.c", "a.c"])
        # the open batch is gone: its next message finds no batch
        r = json.loads((await nc.request("a.o", b"o", timeout=2, headers=bh("open", 4, "1"))).data)
        assert r["error"]["err_code"] == 10176
    across_a_kill(natsd, str(tmp_path / "d"), before, after)
