"""Drop-in on a nats-server cluster's data (natsd/jetstream/replicated/fromnatsserver.py): three
nats-server 2.15 servers write R3 streams (deletes, headers, a work queue part-acked, a mirror,
a source with a subject transform), R3 durable consumers part-way (acks, a nak redelivered), an
R3 KV bucket with history, deletes and a purge, an R3 object store and a one-replica stream; then three natsd servers start on the
same store directories and what clients read is compared, message by message, with what
nats-server served. The natsd cluster then goes on: publishes replicate, the consumers deliver
from where they were, the mirror goes on mirroring, a stream's leader can go.

The way back for a cluster: its backups, restored into a nats-server cluster, read the same.

Also: a cluster stopped by `kill -9` (each server's committed log entries the store had not
written are replayed into its copy, the others stay log entries: every acknowledged message is
there, an acknowledged delete done), with one server's
conversion interrupted half-way before natsd starts, and another's copy of the stream damaged
(refused, its file named; that server copies the stream from the others).
"""
import asyncio
import base64
import os

import pytest

from tests.cluster.test_replicated_streams import leader_of, local_state
from tests.jetstream.test_nats_server_store import buckets, diff, durable_part_way, view as store_view
from tests.jetstream.test_snapshot import restore, take_snapshot
from tests.support.cluster import kill9, start_js_cluster
from tests.support.jetstream import api, connect, until_answered
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll, run

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server is not installed")

STREAMS = ["ORDERS", "WQ", "MIRROR", "SOURCED", "ONE", "KV_cfg", "OBJ_files"]


async def populate(nc):
    js = nc.jetstream()
    await api(nc, "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"], "num_replicas": 3})
    for i in range(200):
        hdrs = {"X-I": str(i)} if i % 3 == 0 else None
        await until_answered(lambda: js.publish("orders.%d" % (i % 7), b"order-%d-" % i + b"x" * (i % 50),
                                                headers=hdrs))
    for seq in (5, 100, 200):
        await api(nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": seq})
    await durable_part_way(nc, timeout=5)
    # a one-replica durable of the R3 stream: its position is on one server's disk only
    await api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.ONE_R",
              {"stream_name": "ORDERS", "config": {"durable_name": "ONE_R", "ack_policy": "explicit",
                                                    "num_replicas": 1, "ack_wait": 60_000_000_000}})
    one = await js.pull_subscribe("orders.>", "ONE_R", stream="ORDERS")
    for m in await until_answered(lambda: one.fetch(9, timeout=5)):
        if m.metadata.sequence.stream % 2:
            await m.ack_sync()

    await api(nc, "$JS.API.STREAM.CREATE.WQ", {"name": "WQ", "subjects": ["wq"], "retention": "workqueue",
                                               "num_replicas": 3})
    for i in range(20):
        await until_answered(lambda: js.publish("wq", b"job-%d" % i))
    wsub = await js.pull_subscribe("wq", "W", stream="WQ")
    for m in await until_answered(lambda: wsub.fetch(7, timeout=5)):
        await m.ack_sync()

    # a mirror of ORDERS and a stream that sources WQ with a subject transform
    await api(nc, "$JS.API.STREAM.CREATE.MIRROR", {"name": "MIRROR", "mirror": {"name": "ORDERS"}, "num_replicas": 3})
    await api(nc, "$JS.API.STREAM.CREATE.SOURCED", {
        "name": "SOURCED", "num_replicas": 3,
        "sources": [{"name": "WQ", "subject_transforms": [{"src": "wq", "dest": "from.wq"}]}]})
    for name, count in (("MIRROR", 197), ("SOURCED", 13)):
        for _ in range(200):
            info = await api(nc, "$JS.API.STREAM.INFO.%s" % name)
            if info.get("state", {}).get("messages") == count:
                break
            await asyncio.sleep(0.05)
        assert info["state"]["messages"] == count, info

    await api(nc, "$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["one"], "num_replicas": 1})
    for i in range(10):
        await until_answered(lambda: js.publish("one", b"one-%d" % i))

    await buckets(nc, replicas=3)


async def view(nc):
    return await store_view(nc, STREAMS)


def as_restored(view):
    """What a restore cannot keep: a stream's creation time (the restore's) and, where its last
    sequence is deleted, the last time (a version 2 backup carries none: nats-server's restore
    takes the last stored message's, of its own backups alike)."""
    out = {}
    for k, v in view.items():
        if k in STREAMS:
            v = {f: x for f, x in v.items() if f != "created"}
            v["state"] = {f: x for f, x in v["state"].items() if f != "last_ts"}
        out[k] = v
    return out


async def _with(members, fn):
    nc = await connect(members[0].proc)
    try:
        return await fn(nc)
    finally:
        await nc.close()


def read_view(members):
    """view() of a cluster that may still be settling: asked again while a request goes
    unanswered or a KV watch finds nothing (nats-server 2.15 too, right after a write)."""
    got = {}

    def ok():
        try:
            got["view"] = run(_with(members, view))
            return True
        except Exception as e:
            got["error"] = e
            return False
    if not poll(ok, 30, 0.2):
        raise got["error"]
    return got["view"]


def assert_serves(members, theirs, shape=lambda v: v):
    """What `members` serve (`shape`d) is `theirs`, once the groups have elected their leaders
    (the consumers' own groups last) and the consumers counted what they have pending (a
    request meanwhile may go unanswered, or a KV watch find nothing, on either server)."""
    got = {}

    def same():
        try:
            got["view"] = shape(run(_with(members, view)))
        except Exception as e:          # a request no leader answered yet, an empty KV watch
            got["view"] = repr(e)
            return False
        return got["view"] == theirs
    poll(same, 30, 0.2)
    assert got["view"] == theirs, diff(got["view"], theirs)


def stop_all(members):
    """SIGTERM each member (nats-server snapshots its groups on a clean stop) and wait."""
    for m in members:
        m.proc.proc.terminate()
    for m in members:
        assert m.proc.proc.wait(20) == 0


def written_by_nats_server(tmp_path, js=""):
    """A nats-server cluster populated, what it serves, then stopped cleanly."""
    ref = start_js_cluster("nats-server", tmp_path, js=js)
    try:
        run(_with(ref, populate))
        theirs = read_view(ref)
        stop_all(ref)
    finally:
        for m in ref:
            m.proc.kill()
    return theirs


def natsd_on(tmp_path):
    """A natsd cluster of the same server names on the store directories in `tmp_path`."""
    return start_js_cluster("natsd", tmp_path)


def test_a_natsd_cluster_starts_on_a_nats_server_clusters_store(tmp_path):
    theirs = written_by_nats_server(tmp_path)
    assert theirs["ORDERS"]["replicas"] == 3 and theirs["ONE"]["replicas"] == 1

    ours = natsd_on(tmp_path)
    try:
        assert_serves(ours, theirs)
        for m in ours:
            kept = os.path.join(str(tmp_path), "store-" + m.name, "nats-server-original", "jetstream")
            assert os.path.isdir(os.path.join(kept, "$SYS", "_js_", "_meta_"))
            assert os.path.isdir(os.path.join(kept, "$G", "streams", "ORDERS"))
            assert any("Converted nats-server's JetStream cluster state: 6 replicated streams, 6 of them here"
                       in line for line in m.proc.lines)

        async def goes_on(nc):
            js = nc.jetstream()
            ack = await js.publish("orders.9", b"after")
            assert ack.seq == 201
            sub = await js.pull_subscribe("orders.>", "D", stream="ORDERS")
            nxt = await sub.fetch(1, timeout=5)
            assert nxt[0].metadata.sequence.stream == 14 and nxt[0].data == b"order-13-" + b"x" * 13
            await nxt[0].ack_sync()
            wsub = await js.pull_subscribe("wq", "W", stream="WQ")
            job = await wsub.fetch(1, timeout=5)
            assert job[0].data == b"job-7"
            await job[0].ack_sync()
            for _ in range(200):        # the mirror goes on from where nats-server's stopped
                mirror = await api(nc, "$JS.API.STREAM.INFO.MIRROR")
                if mirror.get("state", {}).get("last_seq") == 201:
                    break
                await asyncio.sleep(0.05)
            assert mirror["state"]["last_seq"] == 201 and mirror["state"]["messages"] == 198, mirror["state"]
        run(_with(ours, goes_on))

        # the stream's leader goes: another replica leads with every message
        leader = leader_of(ours, "ORDERS")
        kill9(leader)
        rest = [m for m in ours if m is not leader]
        assert leader_of(rest, "ORDERS") is not leader

        async def survived(nc):
            info = await api(nc, "$JS.API.STREAM.INFO.ORDERS")
            assert info["state"]["last_seq"] == 201 and info["state"]["messages"] == 198
            r = await api(nc, "$JS.API.STREAM.MSG.GET.ORDERS", {"seq": 201})
            assert r["message"]["subject"] == "orders.9"
        run(_with(rest, survived))
    finally:
        for m in ours:
            m.proc.kill()


def test_a_nats_server_cluster_killed_then_an_interrupted_conversion_keeps_every_acked_message(tmp_path):
    ref = start_js_cluster("nats-server", tmp_path)
    acked = {}
    try:
        async def publish(nc):
            js = nc.jetstream()
            await api(nc, "$JS.API.STREAM.CREATE.K", {"name": "K", "subjects": ["k.*"], "num_replicas": 3})
            for i in range(500):
                ack = await until_answered(lambda: js.publish("k.%d" % (i % 5), b"k-%d" % i))
                acked[ack.seq] = ("k.%d" % (i % 5), b"k-%d" % i)
                if i == 497:            # a delete among the last entries (the store may lack it)
                    r = await api(nc, "$JS.API.STREAM.MSG.DELETE.K", {"seq": 250})
                    assert r.get("success") is True, r
                    del acked[250]
        run(_with(ref, publish))
        kill9(*ref)
    finally:
        for m in ref:
            m.proc.kill()
    # server B's conversion stopped half-way: nats-server's groups set aside, natsd's half built
    sys_dir = os.path.join(str(tmp_path), "store-B", "jetstream", "$SYS")
    os.rename(os.path.join(sys_dir, "_js_"), os.path.join(sys_dir, ".nats-server-_js_"))
    os.makedirs(os.path.join(sys_dir, ".natsd-_js_.building", "_meta_"))
    with open(os.path.join(sys_dir, ".natsd-_js_.building", "_meta_", "state"), "wb") as f:
        f.write(b"half")
    # server C's copy of the stream is damaged: refused with its file named, copied from the others
    damaged = os.path.join(str(tmp_path), "store-C", "jetstream", "$G", "streams", "K", "meta.sum")
    with open(damaged, "wb") as f:
        f.write(b"0" * 16)

    ours = natsd_on(tmp_path)
    try:
        b = next(m for m in ours if m.name == "B")
        assert any("Resuming the conversion" in line for line in b.proc.lines)
        c = next(m for m in ours if m.name == "C")
        assert any("Could not convert nats-server's replica of stream '$G > K'" in line and
                   "meta.inf: does not match its meta.sum" in line for line in c.proc.lines), c.proc.log

        async def check(nc):
            info = await api(nc, "$JS.API.STREAM.INFO.K")
            assert info["state"]["last_seq"] == 500 and info["state"]["messages"] == 499
            gone = await api(nc, "$JS.API.STREAM.MSG.GET.K", {"seq": 250})
            assert gone["error"]["err_code"] == 10037, gone
            for seq, (subject, data) in sorted(acked.items()):
                r = await api(nc, "$JS.API.STREAM.MSG.GET.K", {"seq": seq})
                assert r["message"]["subject"] == subject
                assert base64.b64decode(r["message"]["data"]) == data
        leader_of(ours, "K")
        run(_with(ours, check))
        for m in ours:          # each server's own copy is whole
            assert poll(lambda: (local_state(m, "K") or {}).get("messages") == 499, 20), local_state(m, "K")
            assert os.path.isdir(os.path.join(str(tmp_path), "store-" + m.name, "nats-server-original",
                                              "jetstream", "$SYS", "_js_"))
    finally:
        for m in ours:
            m.proc.kill()


def test_an_encrypted_nats_server_clusters_store_and_a_wrong_key(tmp_path):
    """Sealed with `jetstream { key, cipher }` (its Raft groups under their own names): natsd
    with another key names the file it cannot open and leaves every file as it was; with the
    same key it serves what nats-server served."""
    sealed = "key: 'the-cluster-key'\ncipher: chachapoly"
    theirs = written_by_nats_server(tmp_path, js=sealed)

    wrong = start_js_cluster("natsd", tmp_path, js="key: 'not-the-key'\ncipher: chachapoly", elected=False)
    try:
        for m in wrong:
            assert any("Could not convert nats-server's JetStream cluster state" in line and
                       "_meta_/meta.inf: cannot be decrypted" in line for line in m.proc.lines), m.proc.log
            js_dir = os.path.join(str(tmp_path), "store-" + m.name, "jetstream", "$SYS", "_js_")
            assert os.path.isfile(os.path.join(js_dir, "_meta_", "tav.idx"))      # nats-server's, untouched
            assert not os.path.exists(os.path.join(js_dir, "_meta_", "state"))
    finally:
        for m in wrong:
            m.proc.kill()

    ours = start_js_cluster("natsd", tmp_path, js=sealed)
    try:
        assert_serves(ours, theirs)
    finally:
        for m in ours:
            m.proc.kill()


def test_the_way_back_for_a_cluster_is_its_backups(tmp_path):
    """Each stream of a natsd cluster (R3 streams with their consumers, KV, objects, an R1
    stream) backed up (STREAM.SNAPSHOT) and restored into a nats-server cluster reads the same."""
    ours = start_js_cluster("natsd", tmp_path / "natsd")
    try:
        run(_with(ours, populate))
        mine = read_view(ours)

        async def backups(nc):
            out = {}
            for name in STREAMS:
                resp, archive, _end, _ = await take_snapshot(nc, name, chunk_size=64 * 1024)
                assert "error" not in resp, resp
                out[name] = (resp, archive)
            return out
        archives = run(_with(ours, backups))
    finally:
        for m in ours:
            m.proc.kill()
    ref = start_js_cluster("nats-server", tmp_path / "nats-server")
    try:
        async def restore_all(nc):
            for name, (resp, archive) in archives.items():
                done = await restore(nc, name, resp, archive, chunk=32 * 1024)
                assert "error" not in done, done
        run(_with(ref, restore_all))
        assert_serves(ref, as_restored(mine), as_restored)
    finally:
        for m in ref:
            m.proc.kill()
