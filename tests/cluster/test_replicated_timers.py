"""What a replicated stream does on its own, beside what publishers send: republishing, message
schedules firing and subject delete markers. nats-server's leader does each once and its
followers store what the leader proposes; so must natsd's, or each replica would publish a
copy, store a scheduled message or a marker of its own, and the copies' sequences would part.
After each: every replica holds the same messages under the same sequences (copies_hold)."""
import asyncio
import datetime
import json
import time

import nats

from tests.cluster.clusterhelp import js_cluster
from tests.cluster.test_replicated_copies import copies_hold
from tests.cluster.test_replicated_streams import create, leader_of, local_state
from tests.conftest import poll


def copies_reach(members, stream, last_seq, timeout=20):
    """Every member's copy has reached `last_seq` and all are the same -> that state."""
    def check():
        states = [local_state(m, stream) for m in members]
        if any(s is None or s["last_seq"] < last_seq for s in states):
            return None
        keys = {(s["messages"], s["first_seq"], s["last_seq"], s["bytes"]) for s in states}
        return states[0] if len(keys) == 1 else None
    state = poll(check, timeout=timeout, interval=0.2)
    assert state, [local_state(m, stream) for m in members]
    return state


def test_a_replicated_stream_republishes_each_message_once(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "RP", "subjects": ["rp.>"], "num_replicas": 3,
                                        "republish": {"src": "rp.>", "dest": "out.>"}}))
        leader_of(members, "RP")

        async def run():
            nc = await nats.connect(members[1].url)
            got = []

            async def cb(m):
                got.append((m.subject, m.headers["Nats-Sequence"], m.headers["Nats-Last-Sequence"]))
            await nc.subscribe("out.>", cb=cb)
            await nc.flush()
            js = nc.jetstream()
            for k in "abab":
                await js.publish("rp." + k, k.encode())
            await nc.flush()
            deadline = time.monotonic() + 5
            while len(got) < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)        # a second copy would have arrived by now
            await nc.close()
            return got
        got = asyncio.run(run())
        # once each; Nats-Last-Sequence is the subject's previous message, as nats-server's
        assert sorted(got) == [("out.a", "1", "0"), ("out.a", "3", "1"), ("out.b", "2", "0"), ("out.b", "4", "2")]
        copies_hold(members, "RP", 4)


def test_a_replicated_stream_fires_a_schedule_once(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "SC", "subjects": ["sc.>"], "num_replicas": 3,
                                        "allow_msg_schedules": True}))
        leader_of(members, "SC")
        at = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1))

        async def schedule():
            nc = await nats.connect(members[2].url)
            ack = await nc.jetstream().publish("sc.job", b"run", headers={
                "Nats-Schedule": "@at " + at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Nats-Schedule-Target": "sc.out"})
            await nc.close()
            return ack.seq
        assert asyncio.run(schedule()) == 1
        # fired: the produced message is stored once (seq 2) and the one-shot schedule purged
        state = copies_reach(members, "SC", 2)
        time.sleep(0.5)                         # a replica firing on its own would store seq 3
        state = copies_reach(members, "SC", 2)
        assert (state["messages"], state["first_seq"], state["last_seq"]) == (1, 2, 2)

        async def target():
            nc = await nats.connect(members[0].url)
            r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.SC", b'{"last_by_subj":"sc.out"}',
                                             timeout=5)).data)
            await nc.close()
            return r["message"]["seq"]
        assert asyncio.run(target()) == 2


def test_a_replicated_kv_stores_each_delete_marker_once(tmp_path):
    """A KV bucket with limit markers (subject_delete_marker_ttl): when a key's value reaches
    max_age it is replaced by one MaxAge marker on every replica, under one sequence."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "KV_M", "subjects": ["$KV.M.>"], "num_replicas": 3,
                                        "max_msgs_per_subject": 1, "max_age": 1_000_000_000,
                                        "allow_msg_ttl": True, "subject_delete_marker_ttl": 60_000_000_000,
                                        "allow_rollup_hdrs": True, "allow_direct": True}))
        leader_of(members, "KV_M")

        async def put():
            nc = await nats.connect(members[1].url)
            js = nc.jetstream()
            for k in ("a", "b"):
                await js.publish("$KV.M." + k, b"v")
            await nc.close()
        asyncio.run(put())
        # the values expire; each key keeps one marker (seqs 3 and 4) on every replica
        copies_reach(members, "KV_M", 4)
        time.sleep(0.5)                         # markers of a replica's own would come by now
        state = copies_reach(members, "KV_M", 4)
        assert (state["messages"], state["first_seq"], state["last_seq"]) == (2, 3, 4)
