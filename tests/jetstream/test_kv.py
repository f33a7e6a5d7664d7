"""Key/Value buckets through nats-py (unmodified) against natsd: KV_<b> streams with rollups,
direct get, expected-last-subject-sequence, delete/purge markers, keys/history/watch."""
import asyncio

import nats.js.errors
import pytest

from tests.support.jetstream import api, initial_values, on_js_server
from tests.support.waiting import until


@on_js_server
async def test_kv_put_get_update_create(nc, js):
    kv = await js.create_key_value(bucket="cfg", history=5)
    assert await kv.put("a.b", b"v1") == 1
    e = await kv.get("a.b")
    assert e.value == b"v1" and e.revision == 1
    assert await kv.update("a.b", b"v2", last=1) == 2
    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
        await kv.update("a.b", b"v3", last=1)
    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
        await kv.create("a.b", b"x")
    assert (await kv.get("a.b", revision=1)).value == b"v1"
    si = await js.stream_info("KV_cfg")
    c = si.config
    assert c.subjects == ["$KV.cfg.>"] and c.max_msgs_per_subject == 5
    assert c.allow_rollup_hdrs and c.deny_delete


@on_js_server
async def test_kv_delete_purge(nc, js):
    kv = await js.create_key_value(bucket="b", history=10)
    await kv.put("k", b"1")
    await kv.put("k", b"2")
    await kv.delete("k")
    with pytest.raises(nats.js.errors.KeyNotFoundError):
        await kv.get("k")
    assert await kv.create("k", b"again") == 4          # create over a delete marker
    await kv.purge("k")
    with pytest.raises(nats.js.errors.KeyNotFoundError):
        await kv.get("k")
    st = (await js.stream_info("KV_b")).state
    assert st.messages == 1                              # only the purge marker remains
    await kv.put("x", b"1")
    await kv.purge_deletes(olderthan=-1)
    st = (await js.stream_info("KV_b")).state
    assert st.messages == 1


@on_js_server
async def test_kv_keys_history_watch(nc, js):
    kv = await js.create_key_value(bucket="w", history=5)
    await kv.put("k1", b"a")
    await kv.put("k1", b"b")
    await kv.put("k2", b"c")
    assert sorted(await kv.keys()) == ["k1", "k2"]
    h = await kv.history("k1")
    assert [e.value for e in h] == [b"a", b"b"]
    w = await kv.watchall()
    assert sorted(await asyncio.wait_for(initial_values(w), 5)) == [("k1", b"b"), ("k2", b"c")]
    await kv.put("k3", b"d")
    e = await asyncio.wait_for(w.updates(timeout=5), 6)
    assert e.key == "k3" and e.value == b"d"
    await w.stop()


@on_js_server
async def test_kv_ttl_and_bucket_ops(nc, js):
    kv = await js.create_key_value(bucket="t", ttl=1)
    await kv.put("k", b"v")
    async def gone():
        try:
            await kv.get("k")
            return False
        except nats.js.errors.KeyNotFoundError:
            return True
    assert await until(gone, 5)
    names = await api(nc, "$JS.API.STREAM.NAMES", {"subject": "$KV.t.>"})
    assert names["streams"] == ["KV_t"]
    assert await js.delete_key_value("t")
    with pytest.raises(nats.js.errors.BucketNotFoundError):
        await js.key_value("t")
