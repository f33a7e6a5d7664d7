"""Mirrors and sources on one server (natsd/jetstream/engine/sourcing.py): a mirror keeps the origin's
sequences, timestamps, subjects, headers and bytes; sources add `Nats-Stream-Source` with new
local sequences (two origins, a filtered source); restart resume without loss or duplicates;
origin publishes while the mirror is being created; internal consumers stay hidden; the
`mirror` / `sources` keys of stream info compared with nats-server."""
import asyncio
import json

import pytest
from nats.js.api import StreamConfig, StreamSource

from natsd.ids import get_hash
from natsd.jetstream.engine.sourcing import iname, parse_ack_reply
from tests.support.jetstream import with_jetstream
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(120) if hasattr(pytest.mark, "timeout") else []


async def count(js, name, n, timeout=15.0):
    async def ok():
        return (await js.stream_info(name)).state.messages == n
    assert await until(ok, timeout), (name, (await js.stream_info(name)).state)


def js_conf(tmp_path, name="js.conf"):
    conf = tmp_path / name
    conf.write_text('jetstream { store_dir: "%s" }\n' % (tmp_path / "data"))
    return str(conf)


def test_helpers():
    assert get_hash("$JS.leaf.API") == "mSx7q4yJ"
    assert iname({"name": "test", "external": {"api": "$JS.leaf.API"}}) == "test:mSx7q4yJ > >"
    assert iname({"name": "O", "filter_subject": "a.*"}) == "O a.* >"
    assert iname({"name": "O", "subject_transforms": [{"src": "a.*", "dest": "b.$1"}]}) == "O a.* b.$1"
    assert parse_ack_reply("$JS.ACK.S.C.1.5.3.1700000000000000000.2") == \
        ("S", "C", 1, 5, 3, 1700000000000000000, 2)
    assert parse_ack_reply("$JS.ACK.dom.hash.S.C.1.5.3.17.0.rnd")[:7] == ("S", "C", 1, 5, 3, 17, 0)
    assert parse_ack_reply("$JS.ACK.S.C.1") is None


def test_local_mirror_is_byte_for_byte(natsd, tmp_path):
    async def main(nc, js):
        await js.add_stream(name="O", subjects=["o.>"])
        for i in range(5):
            await js.publish("o.%d" % i, b"msg %d" % i, headers={"H": str(i)} if i % 2 else None)
        await js.delete_msg("O", 2)     # a gap in the origin
        await js.add_stream(StreamConfig(name="M", mirror=StreamSource(name="O")))
        await js.publish("o.x", b"after")
        await count(js, "M", 5)
        o = (await js.stream_info("O")).state
        m = (await js.stream_info("M")).state
        assert (m.messages, m.bytes, m.first_seq, m.last_seq) == (o.messages, o.bytes, o.first_seq, o.last_seq)
        for seq in (1, 3, 4, 5, 6):
            a, b = await js.get_msg("O", seq), await js.get_msg("M", seq)
            assert (a.subject, a.data, a.headers, a.seq, a.time) == (b.subject, b.data, b.headers, b.seq, b.time)
        # clients cannot publish into a mirror (no subjects) and no consumer shows up on O
        assert (await js.stream_info("O")).state.consumer_count == 0
        r = json.loads((await nc.request("$JS.API.CONSUMER.NAMES.O", b"")).data)
        assert r["consumers"] == [] and r["total"] == 0
        mi = json.loads((await nc.request("$JS.API.STREAM.INFO.M", b"")).data)["mirror"]
        assert mi["name"] == "O" and mi["lag"] == 0 and mi["active"] >= 0 and "error" not in mi
    with_jetstream(natsd("-c", js_conf(tmp_path)), main)


async def identity(nc, stream):
    info = json.loads((await nc.request("$JS.API.STREAM.INFO." + stream, b"")).data)
    return get_hash(info["created"])


def test_local_sources_with_header(any_server, tmp_path):
    """The 6-field header (nats-server 2.15): the origin's identity last."""
    async def main(nc, js):
        await js.add_stream(name="A", subjects=["a.>"])
        await js.add_stream(name="B", subjects=["b.>"])
        await js.publish("a.1", b"a1")
        await js.publish("b.1", b"b1", headers={"Nats-Msg-Id": "x"})
        await js.add_stream(StreamConfig(name="S", subjects=["s.>"],
                                         sources=[StreamSource(name="A"), StreamSource(name="B")]))
        await js.publish("a.2", b"a2")
        await js.publish("s.local", b"local")          # local publishes still allowed
        await count(js, "S", 4)
        got = {}
        for seq in range(1, 5):
            m = await js.get_msg("S", seq)
            got[m.data] = (m.subject, (m.headers or {}).get("Nats-Stream-Source"))
        ida, idb = await identity(nc, "A"), await identity(nc, "B")
        assert got[b"a1"] == ("a.1", "A 1 > > a.1 " + ida)
        assert got[b"a2"] == ("a.2", "A 2 > > a.2 " + ida)
        assert got[b"b1"] == ("b.1", "B 1 > > b.1 " + idb)
        assert got[b"local"] == ("s.local", None)
        # per-origin order kept
        seqs = {}
        for seq in range(1, 5):
            m = await js.get_msg("S", seq)
            seqs.setdefault(m.subject[0], []).append(seq)
        assert seqs["a"] == sorted(seqs["a"])
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.S", b"")).data)
        by = {s["name"]: s for s in info["sources"]}
        assert by["A"]["seq"] == 2 and by["B"]["seq"] == 1 and by["A"]["lag"] == 0
    with_jetstream(any_server("-c", js_conf(tmp_path)), main)


def test_recreated_origin_is_sourced_from_the_start(any_server, tmp_path):
    """A source whose origin stream is deleted and created again notices the new identity
    (the origin refuses the old one, 10225) and copies the new stream from its first message."""
    async def main(nc, js):
        await js.add_stream(name="A", subjects=["a.>"])
        for i in range(3):
            await js.publish("a.x", b"old%d" % i)
        await js.add_stream(StreamConfig(name="S", sources=[StreamSource(name="A")]))
        await count(js, "S", 3)
        old = await identity(nc, "A")
        await js.delete_stream("A")
        await js.add_stream(name="A", subjects=["a.>"])
        new = await identity(nc, "A")
        assert new != old
        await js.publish("a.x", b"new0")
        await count(js, "S", 4, timeout=40)
        m = await js.get_msg("S", 4)
        assert (m.data, m.headers["Nats-Stream-Source"]) == (b"new0", "A 1 > > a.x " + new)
    with_jetstream(any_server("-c", js_conf(tmp_path)), main)


def test_filtered_source_and_transform(natsd, tmp_path):
    async def main(nc, js):
        await js.add_stream(name="O", subjects=["o.>"])
        for s in ("o.a", "o.b", "o.a", "o.c"):
            await js.publish(s, s.encode())
        r = await nc.request("$JS.API.STREAM.CREATE.F", json.dumps({
            "name": "F", "storage": "file",
            "sources": [{"name": "O", "filter_subject": "o.a"},
                        {"name": "O", "subject_transforms": [{"src": "o.c", "dest": "t.c"}]}]}).encode())
        assert "error" not in json.loads(r.data), r.data
        await count(js, "F", 3)
        hdrs = sorted([(m.subject, m.headers["Nats-Stream-Source"])
                       for m in [await js.get_msg("F", s) for s in (1, 2, 3)]])
        ido = " " + await identity(nc, "O")
        assert hdrs == [("o.a", "O 1 o.a > o.a" + ido), ("o.a", "O 3 o.a > o.a" + ido),
                        ("t.c", "O 4 o.c t.c o.c" + ido)]
    with_jetstream(natsd("-c", js_conf(tmp_path)), main)


def test_restart_resume(natsd, tmp_path):
    conf = js_conf(tmp_path)
    srv = natsd("-c", conf)

    async def phase1(nc, js):
        await js.add_stream(name="O", subjects=["o.>"])
        await js.add_stream(StreamConfig(name="M", mirror=StreamSource(name="O")))
        await js.add_stream(StreamConfig(name="S", sources=[StreamSource(name="O")]))
        for i in range(10):
            await js.publish("o.x", b"%d" % i)
        await count(js, "M", 10)
        await count(js, "S", 10)
    with_jetstream(srv, phase1)
    srv.stop()

    async def phase2(nc, js):
        for i in range(10, 15):
            await js.publish("o.x", b"%d" % i)
        await count(js, "M", 15)
        await count(js, "S", 15)
        await asyncio.sleep(1.5)        # nothing more arrives (no duplicates)
        assert (await js.stream_info("S")).state.messages == 15
        assert (await js.stream_info("M")).state.last_seq == 15
        data = [(await js.get_msg("S", s)).data for s in range(1, 16)]
        assert data == [b"%d" % i for i in range(15)]
    with_jetstream(natsd("-c", conf), phase2)


def test_origin_publishes_while_mirror_is_created(natsd, tmp_path):
    async def main(nc, js):
        await js.add_stream(name="O", subjects=["o.>"])
        stop = asyncio.Event()
        sent = 0

        async def pump():
            nonlocal sent
            while not stop.is_set():
                await js.publish("o.p", b"%d" % sent)
                sent += 1
                if sent % 20 == 0:
                    await asyncio.sleep(0)
        task = asyncio.ensure_future(pump())
        await asyncio.sleep(0.2)
        await js.add_stream(StreamConfig(name="M", mirror=StreamSource(name="O")))
        await js.add_stream(StreamConfig(name="S", sources=[StreamSource(name="O")]))
        await asyncio.sleep(0.5)
        stop.set()
        await task
        await count(js, "M", sent, 20)
        await count(js, "S", sent, 20)
        m = (await js.stream_info("M")).state
        assert (m.first_seq, m.last_seq) == (1, sent)
        seen = [int((await js.get_msg("S", s)).headers["Nats-Stream-Source"].split(" ")[1])
                for s in range(1, sent + 1)]
        assert seen == list(range(1, sent + 1))
    with_jetstream(natsd("-c", js_conf(tmp_path)), main)


def _shape(si):
    """Keys and value types of a StreamSourceInfo (values such as active differ)."""
    out = {}
    for k, v in si.items():
        if isinstance(v, dict):
            out[k] = _shape(v)
        else:
            out[k] = type(v).__name__
    return out


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_stream_info_keys_differential(kind, natsd, reference, tmp_path):
    async def main(nc, js):
        await js.add_stream(name="O", subjects=["o.>"])
        await js.publish("o.a", b"x")
        await js.add_stream(StreamConfig(name="M", mirror=StreamSource(name="O")))
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps({
            "name": "S", "sources": [{"name": "O", "filter_subject": "o.a"},
                                     {"name": "NOPE"}]}).encode())
        await nc.request("$JS.API.STREAM.CREATE.X", json.dumps({
            "name": "X", "sources": [{"name": "O", "external": {"api": "$JS.other.API", "deliver": ""}}]}).encode())
        await count(js, "M", 1)
        await count(js, "S", 1)

        async def errored():
            d = json.loads((await nc.request("$JS.API.STREAM.INFO.S", b"")).data)
            return any("error" in s for s in d["sources"])
        await until(errored, 10)
        out = {}
        for name in ("M", "S", "X"):
            d = json.loads((await nc.request("$JS.API.STREAM.INFO." + name, b"")).data)
            if "mirror" in d:
                out[name] = _shape(d["mirror"])
            else:
                out[name] = sorted((json.dumps(_shape(s), sort_keys=True) for s in d["sources"]))
        d = json.loads((await nc.request("$JS.API.STREAM.INFO.S", b"")).data)
        errs = sorted(s.get("error", {}).get("err_code", 0) for s in d["sources"])
        return out, errs
    got = with_jetstream((natsd if kind == "natsd" else reference)("-js", "-sd", str(tmp_path / "d")), main)
    expected_shape = {
        "M": {"name": "str", "lag": "int", "active": "int"},
        "S": sorted([json.dumps({"name": "str", "lag": "int", "seq": "int", "active": "int",
                                 "filter_subject": "str"}, sort_keys=True),
                     json.dumps({"name": "str", "lag": "int", "active": "int",
                                 "error": {"code": "int", "err_code": "int", "description": "str"}},
                                sort_keys=True)]),
    }
    assert got[0]["M"] == expected_shape["M"]
    assert got[0]["S"] == expected_shape["S"]
    x = json.loads(got[0]["X"][0])
    assert x["external"] == {"api": "str", "deliver": "str"}
    assert got[1] == [0, 10059]
