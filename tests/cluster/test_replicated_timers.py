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
import nats.js.errors

from tests.cluster.test_replicated_copies import copies_hold
from tests.cluster.test_replicated_streams import api, create, leader_of, local_state
from tests.support.cluster import js_cluster, kill9, restart_member
from tests.support.waiting import poll


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


def lead_from(members, stream, member):
    """Hand the stream's leadership to `member` (a stepdown naming it preferred)."""
    def moved():
        if leader_of(members, stream) is member:
            return True
        try:
            asyncio.run(api(members[0], "$JS.API.STREAM.LEADER.STEPDOWN.%s" % stream,
                            json.dumps({"placement": {"preferred": member.name}}).encode()))
        except Exception:
            pass
        return False
    assert poll(moved, timeout=30, interval=0.5)


async def last_seq_of(member, stream, subject):
    nc = await nats.connect(member.url)
    try:
        r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.%s" % stream,
                                         json.dumps({"last_by_subj": subject}).encode(), timeout=5)).data)
        return r["message"]["seq"]
    finally:
        await nc.close()


async def publish(member, subject, data=b"v", headers=None):
    """One publish, asked again while the group has no leader to take it (kill -9 of a member
    just now): -> its PubAck's sequence."""
    nc = await nats.connect(member.url)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                return (await nc.jetstream().publish(subject, data, headers=headers, timeout=1)).seq
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await nc.close()


def test_a_replicated_stream_fires_a_schedule_once_and_every_copy_stores_it(tmp_path):
    """The schedule fires while a follower is down; a message follows. The follower, back,
    must hold the produced message and the next one under the leader's sequences: had it
    fired the schedule itself, after catching up, it would hold them the other way round."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "SC", "subjects": ["sc.>"], "num_replicas": 3,
                                        "allow_msg_schedules": True}))
        leader = leader_of(members, "SC")
        i = next(i for i, m in enumerate(members) if m is not leader)
        live = [m for m in members if m is not members[i]]
        kill9(members[i])
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
        assert asyncio.run(publish(live[0], "sc.job", b"run", {
            "Nats-Schedule": "@at " + at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "Nats-Schedule-Target": "sc.out"})) == 1
        copies_reach(live, "SC", 2)             # fired: the produced message is seq 2
        assert asyncio.run(publish(live[1], "sc.after")) == 3
        members[i] = restart_member(members[i], tmp_path)
        state = copies_reach(members, "SC", 3)
        time.sleep(0.6)                         # a copy firing on its own would store seq 4
        state = copies_reach(members, "SC", 3)
        assert (state["messages"], state["first_seq"], state["last_seq"]) == (2, 2, 3)
        lead_from(members, "SC", members[i])
        assert asyncio.run(last_seq_of(members[i], "SC", "sc.out")) == 2
        assert asyncio.run(last_seq_of(members[i], "SC", "sc.after")) == 3


def test_a_replicated_kv_stores_each_delete_marker_once_on_every_copy(tmp_path):
    """A KV bucket with limit markers (subject_delete_marker_ttl): a value whose TTL ends is
    replaced by a MaxAge marker, the leader's entry. Made while a follower is down and
    followed by another put, it must sit on the follower under the leader's sequence."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "KV_M", "subjects": ["$KV.M.>"], "num_replicas": 3,
                                        "max_msgs_per_subject": 1, "allow_msg_ttl": True,
                                        "subject_delete_marker_ttl": 60_000_000_000,
                                        "allow_rollup_hdrs": True, "allow_direct": True}))
        leader = leader_of(members, "KV_M")
        i = next(i for i, m in enumerate(members) if m is not leader)
        live = [m for m in members if m is not members[i]]
        kill9(members[i])
        assert asyncio.run(publish(live[0], "$KV.M.a", b"v", {"Nats-TTL": "1s"})) == 1
        copies_reach(live, "KV_M", 2)           # the marker that replaced it
        assert asyncio.run(publish(live[1], "$KV.M.b")) == 3
        members[i] = restart_member(members[i], tmp_path)
        copies_reach(members, "KV_M", 3)
        time.sleep(0.6)                         # a marker of a copy's own would come by now
        state = copies_reach(members, "KV_M", 3)
        assert (state["messages"], state["first_seq"], state["last_seq"]) == (2, 2, 3)
        lead_from(members, "KV_M", members[i])
        assert asyncio.run(last_seq_of(members[i], "KV_M", "$KV.M.a")) == 2
        assert asyncio.run(last_seq_of(members[i], "KV_M", "$KV.M.b")) == 3
