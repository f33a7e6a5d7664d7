"""Streams through nats-py against natsd: create/info/update/delete, publish acks, dedup,
expected-* headers, limits and discard policies, retention, purge variants, msg get/delete,
rollups, TTLs, republish, subject transforms, domains and non-JetStream accounts."""
import asyncio
import json

import nats
import nats.js.errors
import pytest
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType

from tests.support.jetstream import api, on_js_server
from tests.support.waiting import run, until


@on_js_server
async def test_create_info_defaults(nc, js):
    si = await js.add_stream(name="ORDERS", subjects=["orders.>"])
    c = si.config
    assert c.name == "ORDERS" and c.subjects == ["orders.>"]
    assert c.retention == RetentionPolicy.LIMITS and c.storage == StorageType.FILE
    assert c.max_msgs == -1 and c.max_bytes == -1 and c.discard == DiscardPolicy.OLD
    assert c.duplicate_window == 120.0 and c.num_replicas == 1
    assert si.state.messages == 0 and si.state.first_seq == 0 and si.state.last_seq == 0
    raw = await api(nc, "$JS.API.STREAM.INFO.ORDERS")
    assert raw["type"] == "io.nats.jetstream.api.v1.stream_info_response"
    assert raw["cluster"]["leader"] and raw["created"].endswith("Z")
    assert raw["config"]["metadata"]["_nats.level"] == "5"
    # default subjects = [name]
    si = await js.add_stream(name="PLAIN")
    assert si.config.subjects == ["PLAIN"]


@on_js_server
async def test_create_idempotent_and_conflicts(nc, js):
    await js.add_stream(name="S", subjects=["foo.>"])
    await js.add_stream(name="S", subjects=["foo.>"])           # identical: fine
    r = await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["bar"]})
    assert r["error"]["err_code"] == 10058
    r = await api(nc, "$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["foo.a"]})
    assert r["error"]["err_code"] == 10065
    r = await api(nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "num_replicas": 3})
    assert r["error"] == {"code": 500, "err_code": 10074,
                          "description": "replicas > 1 not supported in non-clustered mode"}
    r = await api(nc, "$JS.API.STREAM.CREATE.X", {"name": "Y"})
    assert r["error"]["err_code"] == 10056
    r = await api(nc, "$JS.API.STREAM.CREATE.X", b"{bad")
    assert r["error"]["err_code"] == 10025
    r = await api(nc, "$JS.API.STREAM.CREATE.X", {"name": "X", "bogus": 1})
    assert r["error"]["description"] == 'invalid JSON: json: unknown field "bogus"'
    names = await api(nc, "$JS.API.STREAM.NAMES")
    assert names["streams"] == ["S"] and names["limit"] == 1024


@on_js_server
async def test_publish_ack_and_no_ack(nc, js):
    await js.add_stream(name="S", subjects=["s.*"])
    ack = await js.publish("s.a", b"hello")
    assert ack.stream == "S" and ack.seq == 1 and not ack.duplicate
    await nc.publish("s.b", b"plain pub is stored too")
    await nc.flush()
    assert (await js.stream_info("S")).state.messages == 2
    await js.add_stream(name="NA", subjects=["na"], no_ack=True)
    with pytest.raises(nats.errors.TimeoutError):
        await nc.request("na", b"x", timeout=0.5)
    assert (await js.stream_info("NA")).state.messages == 1


@on_js_server
async def test_dedup_msg_id(nc, js):
    await js.add_stream(name="D", subjects=["d"], duplicate_window=5)
    a1 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "m1"})
    a2 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "m1"})
    assert a1.seq == a2.seq == 1 and a2.duplicate
    a3 = await js.publish("d", b"2", headers={"Nats-Msg-Id": "m2"})
    assert a3.seq == 2
    assert (await js.stream_info("D")).state.messages == 2


@on_js_server
async def test_expected_headers(nc, js):
    await js.add_stream(name="E", subjects=["e.>"])
    await js.publish("e.a", b"1", headers={"Nats-Msg-Id": "x1"})
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("e.a", b"2", headers={"Nats-Expected-Stream": "OTHER"})
    assert ei.value.err_code == 10060
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("e.a", b"2", headers={"Nats-Expected-Last-Sequence": "5"})
    assert ei.value.err_code == 10071 and ei.value.description == "wrong last sequence: 1"
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("e.a", b"2", headers={"Nats-Expected-Last-Msg-Id": "nope"})
    assert ei.value.err_code == 10070 and ei.value.description == "wrong last msg ID: x1"
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("e.b", b"2", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
    assert ei.value.err_code == 10071 and ei.value.description == "wrong last sequence: 0"
    ack = await js.publish("e.b", b"2", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert ack.seq == 2
    ack = await js.publish("e.a", b"3", headers={"Nats-Expected-Last-Sequence": "2",
                                                 "Nats-Expected-Last-Msg-Id": "x1",
                                                 "Nats-Expected-Stream": "E"})
    assert ack.seq == 3
    ack = await js.publish("e.c", b"4", headers={
        "Nats-Expected-Last-Subject-Sequence": "3",
        "Nats-Expected-Last-Subject-Sequence-Subject": "e.a"})
    assert ack.seq == 4


@on_js_server
async def test_limits_discard_old(nc, js):
    await js.add_stream(name="L", subjects=["l.*"], max_msgs=3, max_msgs_per_subject=2)
    for i in range(5):
        await js.publish("l.a" if i % 2 == 0 else "l.b", b"%d" % i)
    st = (await js.stream_info("L")).state
    assert st.messages == 3 and st.last_seq == 5 and st.first_seq == 3
    await js.add_stream(name="B", subjects=["b"], max_bytes=200)
    for i in range(10):
        await js.publish("b", b"x" * 40)
    st = (await js.stream_info("B")).state
    assert st.bytes <= 200 and st.last_seq == 10 and st.messages >= 1


@on_js_server
async def test_limits_discard_new(nc, js):
    await js.add_stream(name="N", subjects=["n.*"], max_msgs=2, discard=DiscardPolicy.NEW)
    await js.publish("n.a", b"1")
    await js.publish("n.a", b"2")
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("n.a", b"3")
    assert ei.value.err_code == 10077 and ei.value.description == "maximum messages exceeded"
    await js.add_stream(name="NB", subjects=["nb"], max_bytes=100, discard=DiscardPolicy.NEW)
    await js.publish("nb", b"x" * 40)
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("nb", b"x" * 40)
    assert ei.value.description == "maximum bytes exceeded"
    await js.add_stream(name="NP", subjects=["np.*"], max_msgs_per_subject=1,
                        discard=DiscardPolicy.NEW, discard_new_per_subject=True)
    await js.publish("np.a", b"1")
    await js.publish("np.b", b"1")
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("np.a", b"2")
    assert ei.value.description == "maximum messages per subject exceeded"
    await js.add_stream(name="MS", subjects=["ms"], max_msg_size=10)
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("ms", b"0123456789abc")
    assert ei.value.err_code == 10054


@on_js_server
async def test_max_age_expires_on_timer(nc, js):
    await js.add_stream(name="AGE", subjects=["age"], max_age=0.5)
    for _ in range(3):
        await js.publish("age", b"x")
    assert (await js.stream_info("AGE")).state.messages == 3

    async def empty():
        return (await js.stream_info("AGE")).state.messages == 0
    assert await until(empty, 5)
    st = (await js.stream_info("AGE")).state
    assert st.first_seq == 4 and st.last_seq == 3


@on_js_server
async def test_retention_workqueue_and_interest(nc, js):
    await js.add_stream(name="WQ", subjects=["wq"], retention=RetentionPolicy.WORK_QUEUE)
    await js.publish("wq", b"1")
    assert (await js.stream_info("WQ")).state.messages == 1
    await js.add_stream(name="INT", subjects=["int"], retention=RetentionPolicy.INTEREST)
    ack = await js.publish("int", b"1")
    assert ack.seq == 1
    st = (await js.stream_info("INT")).state
    assert st.messages == 0 and st.last_seq == 1          # nobody interested: not kept
    r = await api(nc, "$JS.API.STREAM.UPDATE.WQ", {"name": "WQ", "subjects": ["wq"], "retention": "limits"})
    assert r["error"]["err_code"] == 10052


@on_js_server
async def test_purge_variants(nc, js):
    await js.add_stream(name="P", subjects=["p.*"])
    for i in range(10):
        await js.publish("p.a" if i < 6 else "p.b", b"%d" % i)
    assert await js.purge_stream("P", subject="p.a", keep=2)
    st = (await js.stream_info("P")).state
    assert st.messages == 6
    r = await api(nc, "$JS.API.STREAM.PURGE.P", {"seq": 8})
    assert r["success"] and r["purged"] == 3
    r = await api(nc, "$JS.API.STREAM.PURGE.P", {"seq": 2, "keep": 1})
    assert r["error"]["err_code"] == 10003
    r = await api(nc, "$JS.API.STREAM.PURGE.P")
    assert r == {"type": "io.nats.jetstream.api.v1.stream_purge_response", "success": True, "purged": 3}
    st = (await js.stream_info("P")).state
    assert st.messages == 0 and st.first_seq == 11 and st.last_seq == 10


@on_js_server
async def test_msg_get_delete_and_deny(nc, js):
    await js.add_stream(name="G", subjects=["g.*"])
    await js.publish("g.a", b"one", headers={"X": "y"})
    await js.publish("g.b", b"two")
    m = await js.get_msg("G", 1)
    assert m.data == b"one" and m.subject == "g.a" and m.headers["X"] == "y"
    m = await js.get_last_msg("G", "g.b")
    assert m.seq == 2 and m.data == b"two"
    r = await api(nc, "$JS.API.STREAM.MSG.GET.G", {"seq": 9})
    assert r["error"] == {"code": 404, "err_code": 10037, "description": "no message found"}
    r = await api(nc, "$JS.API.STREAM.MSG.GET.G", {"next_by_subj": "g.b", "seq": 1})
    assert r["message"]["seq"] == 2
    assert await js.delete_msg("G", 1)
    r = await api(nc, "$JS.API.STREAM.MSG.DELETE.G", {"seq": 1})
    assert r["error"]["err_code"] == 10057
    si = await js.stream_info("G")
    assert si.state.messages == 1
    await js.add_stream(name="DD", subjects=["dd"], deny_delete=True, deny_purge=True)
    await js.publish("dd", b"x")
    r = await api(nc, "$JS.API.STREAM.MSG.DELETE.DD", {"seq": 1})
    assert r["error"]["description"] == "message delete not permitted"
    r = await api(nc, "$JS.API.STREAM.PURGE.DD")
    assert r["error"]["err_code"] == 10110


@on_js_server
async def test_update_and_seal(nc, js):
    await js.add_stream(name="U", subjects=["u"])
    await js.publish("u", b"1")
    si = await js.update_stream(name="U", subjects=["u", "u2"], max_msgs=10)
    assert si.config.max_msgs == 10 and si.config.subjects == ["u", "u2"]
    await js.publish("u2", b"2")
    r = await api(nc, "$JS.API.STREAM.UPDATE.U", {"name": "U", "subjects": ["u"], "storage": "memory"})
    assert r["error"]["description"] == "stream configuration update can not change storage type"
    r = await api(nc, "$JS.API.STREAM.CREATE.Z", {"name": "Z", "sealed": True})
    assert r["error"]["err_code"] == 10052
    si = await js.update_stream(name="U", subjects=["u", "u2"], sealed=True)
    assert si.config.sealed and si.config.deny_delete and si.config.deny_purge
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("u", b"x")
    assert ei.value.err_code == 10109
    r = await api(nc, "$JS.API.STREAM.UPDATE.NOPE", {"name": "NOPE"})
    assert r["error"]["err_code"] == 10059
    assert await js.delete_stream("U")
    r = await api(nc, "$JS.API.STREAM.DELETE.U")
    assert r["error"]["err_code"] == 10059


@on_js_server
async def test_rollup_and_ttl(nc, js):
    await js.add_stream(name="RU", subjects=["ru.*"], allow_rollup_hdrs=True, allow_msg_ttl=True)
    for i in range(3):
        await js.publish("ru.a", b"%d" % i)
    await js.publish("ru.b", b"b")
    await js.publish("ru.a", b"roll", headers={"Nats-Rollup": "sub"})
    st = (await js.stream_info("RU")).state
    assert st.messages == 2
    await js.publish("ru.c", b"all", headers={"Nats-Rollup": "all"})
    st = (await js.stream_info("RU")).state
    assert st.messages == 1 and st.first_seq == 6
    await js.publish("ru.t", b"short", headers={"Nats-TTL": "1s"})
    assert (await js.stream_info("RU")).state.messages == 2

    async def gone():
        return (await js.stream_info("RU")).state.messages == 1
    assert await until(gone, 5)
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("ru.t", b"x", headers={"Nats-TTL": "bogus"})
    assert ei.value.err_code == 10165
    await js.add_stream(name="NR", subjects=["nr"])
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("nr", b"x", headers={"Nats-Rollup": "sub"})
    assert ei.value.err_code == 10111
    with pytest.raises(nats.js.errors.APIError) as ei:
        await js.publish("nr", b"x", headers={"Nats-TTL": "5s"})
    assert ei.value.err_code == 10166


@on_js_server
async def test_republish_and_subject_transform(nc, js):
    got = []
    async def cb(m):
        got.append(m)
    sub = await nc.subscribe("rp.>", cb=cb)
    await nc.flush()
    cfg = {"name": "RP", "subjects": ["src.>"], "republish": {"src": "src.>", "dest": "rp.>"}}
    r = await api(nc, "$JS.API.STREAM.CREATE.RP", cfg)
    assert "error" not in r, r
    await js.publish("src.x", b"payload")
    assert await until(lambda: got, 3)
    m = got[0]
    assert m.subject == "rp.x" and m.data == b"payload"
    assert m.headers["Nats-Stream"] == "RP" and m.headers["Nats-Sequence"] == "1"
    assert m.headers["Nats-Last-Sequence"] == "0"
    await sub.unsubscribe()
    cfg = {"name": "TR", "subjects": ["in.*"], "subject_transform": {"src": "in.*", "dest": "out.{{wildcard(1)}}"}}
    r = await api(nc, "$JS.API.STREAM.CREATE.TR", cfg)
    assert "error" not in r, r
    await js.publish("in.k", b"v")
    m = await js.get_msg("TR", 1)
    assert m.subject == "out.k"


@on_js_server
async def test_account_info_counts(nc, js):
    await js.add_stream(name="A", subjects=["a"])
    await js.publish("a", b"x")
    await api(nc, "$JS.API.STREAM.INFO.NOPE")
    info = await api(nc, "$JS.API.INFO")
    assert info["streams"] == 1 and info["storage"] > 0
    assert info["api"]["level"] == 5 and info["api"]["total"] >= 2 and info["api"]["errors"] >= 1
    assert info["limits"]["max_streams"] == -1
    ai = await js.account_info()
    assert ai.streams == 1


@on_js_server
async def test_memory_storage_stream(nc, js):
    await js.add_stream(name="M", subjects=["m"], storage=StorageType.MEMORY)
    for i in range(5):
        await js.publish("m", b"x")
    st = (await js.stream_info("M")).state
    assert st.messages == 5 and st.bytes == 5 * (1 + 1 + 16)


def test_domain_and_non_js_accounts(natsd, tmp_path):
    conf = tmp_path / "js.conf"
    conf.write_text("""
jetstream { store_dir: "%s", domain: hub }
accounts {
  JS: { jetstream: enabled, users: [{user: a, password: a}] }
  NOJS: { users: [{user: b, password: b}] }
}
""" % (tmp_path / "sd"))
    srv = natsd("-c", str(conf))

    @run
    async def scenario():
        nc = await nats.connect(srv.url, user="a", password="a")
        info = await api(nc, "$JS.hub.API.INFO")
        assert info["domain"] == "hub"
        await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s"]})
        m = await nc.request("s", b"x", timeout=2)
        assert json.loads(m.data) == {"stream": "S", "seq": 1, "domain": "hub"}
        nc2 = await nats.connect(srv.url, user="b", password="b")
        r = await api(nc2, "$JS.API.INFO")
        assert r["error"] == {"code": 503, "err_code": 10039,
                              "description": "JetStream not enabled for account"}
        await nc.close()
        await nc2.close()
    scenario()


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_purge_up_to_a_sequence_that_leaves_nothing(natsd, reference, tmp_path, storage):
    """A purge with `seq` that leaves an empty stream: first sequence last + 1, in both of
    natsd's stores (the file store kept `seq` before), as nats-server's memory store reports
    it. nats-server 2.15.1's file store reports first 2 and 2 deleted here, naming a purged
    message as the first: natsd keeps its two stores alike rather than copy that."""
    async def scenario(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="E", subjects=["e.*"], storage=storage)
        for subj in ("e.x", "e.y", "e.x"):
            await js.publish(subj, b"m")
        async def state():
            st = (await api(nc, "$JS.API.STREAM.INFO.E"))["state"]
            return {k: st.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted")}
        out = [await api(nc, "$JS.API.STREAM.PURGE.E", {"filter": "e.x"}),
               await api(nc, "$JS.API.STREAM.PURGE.E", {"seq": 3}),
               await api(nc, "$JS.API.STREAM.MSG.DELETE.E", {"seq": 3}),
               await state(),
               (await js.publish("e.x", b"n")).seq,
               await state()]
        await nc.close()
        return out
    ours = asyncio.run(scenario(natsd("-js", "-sd", str(tmp_path / "natsd")).url))
    theirs = asyncio.run(scenario(reference("-js", "-sd", str(tmp_path / "ref")).url))
    assert ours[3] == {"messages": 0, "first_seq": 4, "last_seq": 3, "num_deleted": None}
    if storage == "file":
        assert theirs[3] == {"messages": 0, "first_seq": 2, "last_seq": 3, "num_deleted": 2}
        ours[3] = theirs[3]             # the one difference, above
    assert ours == theirs
