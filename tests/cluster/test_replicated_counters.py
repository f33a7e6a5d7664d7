"""Counter streams (`allow_msg_counter`) with three replicas on three real natsd servers: every
replica applies the increments in log order, so each copy holds the same running values, and a
kill -9 of the stream's leader in the middle of windowed increments loses no acknowledged one:
afterwards the k-th stored increment carries the value k, every PubAck's value is the one stored
at its sequence, and each replica's own files (read once the servers are stopped) hold the same
messages."""
import asyncio
import base64
import glob
import json
import os
import random
import signal

import nats
import pytest

from natsd.jetstream.engine.store import FileStore
from tests.cluster.test_replicated_streams import api, converged, create, leader_of
from tests.support.cluster import fault_seeds, js_cluster, restart_member

STREAM = {"name": "R3", "subjects": ["cnt.>"], "num_replicas": 3, "allow_msg_counter": True}


async def increment_window(url, count, window=16, on_progress=None):
    """`count` increments of cnt.x by one, up to `window` in flight -> {seq: value} acked."""
    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    acked = {}
    sem = asyncio.Semaphore(window)

    async def one():
        try:
            msg = await nc.request("cnt.x", b"", timeout=2, headers={"Nats-Incr": "1"})
            ack = json.loads(msg.data)
        except Exception:
            return
        finally:
            sem.release()
        if "error" not in ack:
            assert ack["seq"] not in acked, "two PubAcks named sequence %d" % ack["seq"]
            acked[ack["seq"]] = int(ack["val"])

    tasks = []
    for i in range(count):
        await sem.acquire()
        tasks.append(asyncio.create_task(one()))
        if on_progress is not None:
            on_progress(i)
    await asyncio.gather(*tasks)
    await nc.close()
    return acked


def stored_values(member, last):
    """[(seq, value)] of the stream's live messages, as `member` serves them."""
    async def run():
        nc = await nats.connect(member.url)
        out = []
        for seq in range(1, last + 1):
            r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.R3",
                                             json.dumps({"seq": seq}).encode(), timeout=5)).data)
            if "message" in r:
                out.append((seq, int(json.loads(base64.b64decode(r["message"]["data"]))["val"])))
        await nc.close()
        return out
    return asyncio.run(run())


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_counter_leader_killed_loses_no_acked_increment(tmp_path, seed):
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        created = asyncio.run(create(rng.choice(members), STREAM))
        assert created["config"]["allow_msg_counter"] is True, created
        leader = leader_of(members)
        entry = rng.choice([m for m in members if m is not leader])
        kill_at = rng.randrange(40, 160)

        def progress(i):
            if i == kill_at:
                leader.proc.proc.send_signal(signal.SIGKILL)
        acked = asyncio.run(increment_window(entry.url, 200, on_progress=progress))
        leader.proc.proc.wait(5)
        alive = [m for m in members if m is not leader]
        assert leader_of(alive) in alive        # (with no leader, nobody takes cnt.x: no responders)
        more = asyncio.run(increment_window(entry.url, 40))
        assert len(more) == 40, "the survivors did not take every increment"
        acked.update(more)
        members[members.index(leader)] = restart_member(leader, tmp_path)
        state = converged(members, max(acked))
        values = stored_values(leader_of(members), state["last_seq"])
        assert [v for _, v in values] == list(range(1, len(values) + 1)), "a running value skipped or repeated"
        at = dict(values)
        for seq, value in acked.items():
            assert at.get(seq) == value, "acked seq %d with value %d; stored %r" % (seq, value, at.get(seq))
        last = asyncio.run(api(leader_of(members), "$JS.API.STREAM.MSG.GET.R3",
                               json.dumps({"last_by_subj": "cnt.x"}).encode()))
        assert json.loads(base64.b64decode(last["message"]["data"]))["val"] == str(len(values))
        for m in members:
            m.proc.kill()
        copies = []
        for m in members:
            (path,) = glob.glob(os.path.join(str(tmp_path), "store-" + m.name, "jetstream", "*", "_js_", "S-*", "copy", "msgs"))
            store = FileStore(path)
            copies.append([(sm.seq, sm.hdr, bytes(sm.msg)) for sm in map(store.load, range(1, state["last_seq"] + 1))
                           if sm is not None])
            store.close()
        assert [(seq, json.loads(body)["val"]) for seq, _, body in copies[0]] == [(q, str(v)) for q, v in values]
        assert copies[1] == copies[0] and copies[2] == copies[0], "the replicas' copies differ"
