"""Mirrors, sources, KV and object store on replicated streams: the group's leader runs the copying and every
copied message goes through the group (natsd/jetstream/replicated/streams.py, K_SRC entries), so every
replica stores the same messages under the same sequences; after kill -9 of the leader the
next one carries on without a gap or a duplicate."""
import asyncio
import json
import random

import nats

from tests.cluster.test_replicated_streams import api, create, leader_of, local_state
from tests.support.cluster import js_cluster, kill9
from tests.support.waiting import poll


async def publish(url, subject, n, prefix):
    nc = await nats.connect(url)
    js = nc.jetstream()
    for i in range(n):
        await js.publish(subject, b"%s-%d" % (prefix, i))
    await nc.close()


def copies_hold(members, stream, n):
    """Every member's copy of `stream` has n messages, all with the same sequences and times."""
    def check():
        states = [local_state(m, stream) for m in members]
        if any(s is None for s in states):
            return False
        keys = {(s["messages"], s["first_seq"], s["last_seq"], s["bytes"], s["first_ts"], s["last_ts"])
                for s in states}
        return len(keys) == 1 and states[0]["messages"] == n and states[0]
    state = poll(check, timeout=40, interval=0.2)
    assert state, [local_state(m, stream) for m in members]
    return state


def origin_seqs(member, stream, last):
    """The origin sequences named by the Nats-Stream-Source headers of `stream`, in order."""
    async def run():
        nc = await nats.connect(member.url)
        out = []
        for seq in range(1, last + 1):
            r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.%s" % stream,
                                             json.dumps({"seq": seq}).encode(), timeout=5)).data)
            hdrs = __import__("base64").b64decode(r["message"].get("hdrs") or b"").decode()
            src = next(line for line in hdrs.split("\r\n") if line.startswith("Nats-Stream-Source:"))
            out.append(int(src.split(" ")[2]))
        await nc.close()
        return out
    return asyncio.run(run())


def test_source_and_mirror_on_replicated_streams_survive_the_leader(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], {"name": "ORIGIN", "subjects": ["o.>"], "num_replicas": 3}))
        asyncio.run(create(members[0], {"name": "AGG", "num_replicas": 3, "sources": [{"name": "ORIGIN"}]}))
        asyncio.run(create(members[0], {"name": "MIR", "num_replicas": 3, "mirror": {"name": "AGG"}}))
        asyncio.run(publish(members[1].url, "o.a", 60, b"x"))
        copies_hold(members, "AGG", 60)
        copies_hold(members, "MIR", 60)
        leader = leader_of(members, "AGG")
        kill9(leader)
        others = [m for m in members if m is not leader]
        for name in ("ORIGIN", "AGG", "MIR"):   # the first leader of all three, often
            leader_of(others, name)
        asyncio.run(publish(others[0].url, "o.b", 40, b"y"))
        agg = copies_hold(others, "AGG", 100)
        copies_hold(others, "MIR", 100)
        assert origin_seqs(leader_of(others, "AGG"), "AGG", agg["last_seq"]) == list(range(1, 101))
        # the mirror keeps the sequences of what it mirrors
        mir = asyncio.run(api(others[1], "$JS.API.STREAM.INFO.MIR"))["state"]
        assert (mir["first_seq"], mir["last_seq"]) == (1, 100), mir


async def created(make):
    """make() again while the cluster has no meta leader yet (the first create of a test)."""
    for _ in range(100):
        try:
            return await make()
        except Exception:
            await asyncio.sleep(0.2)
    raise AssertionError("never created")


def kill_the_leader(members, stream):
    """kill -9 of `stream`'s leader; -> the other members, once they have elected another."""
    leader = leader_of(members, stream)
    kill9(leader)
    others = [m for m in members if m is not leader]
    leader_of(others, stream)
    return others


def test_kv_bucket_with_three_replicas(tmp_path):
    with js_cluster("natsd", tmp_path) as members:
        async def setup():
            nc = await nats.connect(members[0].url)
            js = nc.jetstream()
            kv = await created(lambda: js.create_key_value(bucket="cfg", replicas=3, history=3))
            for i in range(5):
                await kv.put("color", b"blue-%d" % i)
            await kv.put("size", b"xl")
            await nc.close()
        asyncio.run(setup())
        others = kill_the_leader(members, "KV_cfg")

        async def after():
            nc = await nats.connect(others[0].url)
            kv = await nc.jetstream().key_value("cfg")
            for _ in range(100):
                try:
                    got = await kv.get("color")
                    break
                except Exception:
                    await asyncio.sleep(0.2)
            hist = [e.value for e in await kv.history("color")]
            await kv.put("size", b"s")
            size = (await kv.get("size")).value
            await nc.close()
            return got.value, hist, size
        value, hist, size = asyncio.run(after())
        assert value == b"blue-4" and hist == [b"blue-2", b"blue-3", b"blue-4"] and size == b"s"
        copies_hold(others, "KV_cfg", 5)      # color: its last 3; size: both


def test_object_store_with_three_replicas(tmp_path):
    """An R3 object store bucket: an object of several chunks written through one server is
    read whole through another after kill -9 of the bucket's leader; the survivors take a new
    object and a delete, and their copies agree."""
    blob = random.Random(7).randbytes(300_000)      # three chunks of nats-py's 128 KiB
    with js_cluster("natsd", tmp_path) as members:
        async def setup():
            from nats.js.api import ObjectStoreConfig
            nc = await nats.connect(members[0].url)
            js = nc.jetstream()
            obs = await created(lambda: js.create_object_store("files", config=ObjectStoreConfig(replicas=3)))
            info = await obs.put("blob", blob)
            await obs.put("note", b"a small one")
            await nc.close()
            return info
        put = asyncio.run(setup())
        assert put.size == len(blob) and put.chunks == 3
        others = kill_the_leader(members, "OBJ_files")

        async def after():
            nc = await nats.connect(others[1].url)
            obs = await nc.jetstream().object_store("files")
            got = await obs.get("blob")
            await obs.put("later", b"x" * 1000)
            await obs.delete("note")
            names = sorted((o.name, bool(o.deleted)) for o in await obs.list())
            await nc.close()
            return got, names
        got, names = asyncio.run(after())
        assert got.data == blob and got.info.digest == put.digest
        assert names == [("blob", False), ("later", False), ("note", True)]
        state = asyncio.run(api(others[0], "$JS.API.STREAM.INFO.OBJ_files"))["state"]
        copies_hold(others, "OBJ_files", state["messages"])
