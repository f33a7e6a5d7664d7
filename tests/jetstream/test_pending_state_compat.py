"""Consumer state files written before pending moved into natsd/jetstream/engine/pending.pyx still load.

OLD_STATE is a state.json verbatim as the dict-based code (commit 252bc80) wrote it for: stream
OLD with 20 messages on old.<i % 3>, durable explicit-ack pull consumer C, Fetch(10), AckSync
of stream seqs 1, 2 and 5, NAK of 7, then Fetch(3) (7 redelivered, then 11 and 12). That server
reported delivered 13/12, ack floor 2/2, 9 pending acks, 1 redelivered, 8 pending messages.
"""
import asyncio
import glob
import json
import os
import types

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from natsd.jetstream.engine import persist
from tests.support.jetstream import with_jetstream

OLD_STATE = (
    '{"delivered":{"consumer_seq":13,"stream_seq":12},"ack_floor":{"consumer_seq":2,'
    '"stream_seq":2},"pending":{"3":[3,1795475893869476702],"4":[4,1795475893869476702],'
    '"6":[6,1795475893869476702],"7":[11,1795475894071731082],"8":[8,1795475893869476702],'
    '"9":[9,1795475893869476702],"10":[10,1795475893869476702],"11":[12,1795475894071758804],'
    '"12":[13,1795475894071758804]},"redelivered":{"7":2},"last_delivered_ns":'
    '1795475894071758804,"last_ack_ns":1795475893870923334}')

OLD_META = (
    '{"name":"C","created":"2026-11-23T23:18:13.867537971Z","created_ns":1795475893867537971,'
    '"config":{"durable_name":"C","name":"C","deliver_policy":"all","ack_policy":"explicit",'
    '"ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,'
    '"max_ack_pending":1000,"num_replicas":0,"metadata":{"_nats.req.level":"0"}}}')


def test_pending_from_old_json_in_any_key_order():
    old = json.loads(OLD_STATE)["pending"]
    want = sorted((int(k), v[0], v[1]) for k, v in old.items())
    assert persist.pending_from_json(old).items() == want
    rev = dict(reversed(list(old.items())))         # a dict's order is insertion order
    assert persist.pending_from_json(rev).items() == want
    assert persist.pending_from_json(None).items() == []
    assert persist.pending_from_json({}).items() == []
    # junk that no consumer wrote is skipped, not fatal
    junk = dict(old, **{"x": [1, 2], "0": [1, 2], "13": [5], "14": "no"})
    assert persist.pending_from_json(junk).items() == want


def test_state_of_writes_the_old_format():
    old = json.loads(OLD_STATE)
    o = types.SimpleNamespace(dseq=14, sseq=13, adflr=2, asflr=2,
                              pending=persist.pending_from_json(old["pending"]),
                              rdc={7: 2}, lss=None, last_delivered_ns=old["last_delivered_ns"],
                              last_ack_ns=old["last_ack_ns"])
    st = json.loads(json.dumps(persist.state_of(o)))
    assert st == old


@pytest.mark.parametrize("ack_wait_s", [1])
def test_old_state_file_loads_and_behaves(natsd, tmp_path, ack_wait_s):
    sd = str(tmp_path / "store")
    srv = natsd("-js", "-sd", sd)

    async def make(nc, js):
        await js.add_stream(name="OLD", subjects=["old.*"])
        for i in range(1, 21):
            await js.publish("old.%d" % (i % 3), b"m%d" % i)
        await js.add_consumer("OLD", ConsumerConfig(durable_name="C",
                                                    ack_policy=AckPolicy.EXPLICIT, ack_wait=30))
    with_jetstream(srv, make)
    assert srv.stop() == 0
    cdirs = glob.glob(os.path.join(sd, "**", "streams", "OLD", "consumers", "C"), recursive=True)
    assert len(cdirs) == 1
    meta = json.loads(OLD_META)
    meta["config"]["ack_wait"] = ack_wait_s * 1_000_000_000    # so the test sees redelivery
    with open(os.path.join(cdirs[0], "meta.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(cdirs[0], "state.json"), "w") as f:
        f.write(OLD_STATE)

    srv2 = natsd("-js", "-sd", sd)

    async def check(nc, js):
        ci = await js.consumer_info("OLD", "C")
        assert (ci.delivered.consumer_seq, ci.delivered.stream_seq) == (13, 12)
        assert (ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq) == (2, 2)
        assert ci.num_ack_pending == 9 and ci.num_redelivered == 1 and ci.num_pending == 8
        # ack the oldest pending (stream 3, delivery 3): the floor moves to it
        await nc.publish("$JS.ACK.OLD.C.1.3.3.0.0", b"+ACK")
        await nc.flush()
        await asyncio.sleep(0.1)
        ci = await js.consumer_info("OLD", "C")
        assert ci.num_ack_pending == 8
        assert (ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq) == (3, 3)
        # after the ack wait the rest comes back first, in stream order, with its delivery
        # count, then the messages never delivered
        await asyncio.sleep(ack_wait_s + 0.5)
        sub = await js.pull_subscribe_bind("C", "OLD")
        got = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(got) < 16 and loop.time() < deadline:
            try:
                msgs = await sub.fetch(16 - len(got), timeout=1)
            except Exception:
                continue
            got += [(m.metadata.sequence.stream, m.metadata.num_delivered) for m in msgs]
            for m in msgs:
                await m.ack_sync()
        assert got == [(4, 2), (6, 2), (7, 3), (8, 2), (9, 2), (10, 2), (11, 2), (12, 2)] + \
            [(s, 1) for s in range(13, 21)]
        ci = await js.consumer_info("OLD", "C")
        assert ci.num_ack_pending == 0 and ci.num_pending == 0
        assert (ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq) == (29, 20)
    with_jetstream(srv2, check)
