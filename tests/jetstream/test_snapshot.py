"""Stream snapshot and restore over the raw JetStream API, driven exactly as the
`nats stream backup|restore` CLI does it (nats-py has no snapshot API): chunks with
`$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>` replies acked with empty messages, the end
marker, restore chunks acked one by one, the empty message that ends a restore answered with
`stream_create_response`. Round trip natsd -> natsd (messages, deletes, headers, timestamps,
consumers with their state), error cases (10130, 10015, 10059, 10062), the frozen config while a
snapshot streams, and the end marker nats-server sends (compared with the reference)."""
import asyncio
import base64
import json

import pytest

from tests.support.jetstream import api, connect, until_answered, with_jetstream
from tests.support.waiting import run


@pytest.fixture
def sd(tmp_path):
    return str(tmp_path / "store")


async def take_snapshot(nc, stream, ack=True, **opts):
    """-> (snapshot response, archive bytes, end marker (headers, data), chunk replies)."""
    inbox = nc.new_inbox()
    chunks, replies = [], []
    done = asyncio.get_running_loop().create_future()

    async def cb(m):
        if not m.data:
            if not done.done():
                done.set_result(m)
            return
        chunks.append(m.data)
        replies.append(m.reply)
        if m.reply and ack:
            await nc.publish(m.reply, b"")
    sub = await nc.subscribe(inbox, cb=cb)
    req = {"deliver_subject": inbox}
    req.update(opts)
    resp = await api(nc, "$JS.API.STREAM.SNAPSHOT.%s" % stream, req)
    if "error" in resp:
        await sub.unsubscribe()
        return resp, None, None, replies
    end = await asyncio.wait_for(done, 15)
    await sub.unsubscribe()
    return resp, b"".join(chunks), end, replies


async def restore(nc, stream, snap_resp, archive, chunk=4096):
    r = await api(nc, "$JS.API.STREAM.RESTORE.%s" % stream,
                  {"config": snap_resp["config"], "state": snap_resp["state"]})
    if "error" in r:
        return r
    ds = r["deliver_subject"]
    assert ds.startswith("$JS.SNAPSHOT.RESTORE.%s." % stream)
    for i in range(0, len(archive), chunk):
        # (a cluster's restore may take its first chunk before its interest crossed the routes)
        m = await until_answered(lambda: nc.request(ds, archive[i:i + chunk], timeout=5))
        assert m.data == b""
    m = await nc.request(ds, b"", timeout=10)
    return json.loads(m.data)


async def read_all(nc, stream):
    si = await api(nc, "$JS.API.STREAM.INFO.%s" % stream)
    out = {}
    for seq in range(si["state"]["first_seq"], si["state"]["last_seq"] + 1):
        r = await api(nc, "$JS.API.STREAM.MSG.GET.%s" % stream, {"seq": seq})
        if "error" in r:
            continue
        msg = r["message"]
        out[seq] = (msg["subject"], base64.b64decode(msg.get("data", "")),
                    base64.b64decode(msg.get("hdrs", "")), msg["time"])
    return si, out


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_snapshot_restore_round_trip(natsd, sd, storage):
    srv = natsd("-js", "-sd", sd)

    async def go(nc, js):
        await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "storage": storage,
                                                   "duplicate_window": 60_000_000_000})
        for i in range(300):
            hdrs = {"Nats-Msg-Id": "id-%d" % i, "X-I": str(i)} if i % 3 == 0 else None
            await js.publish("s.%d" % (i % 7), b"payload-%d-" % i + b"x" * (i % 200), headers=hdrs)
        await js.delete_msg("S", 5)
        await js.delete_msg("S", 300)            # a trailing delete keeps last_seq
        await api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.S.D",
                  {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}})
        psub = await js.pull_subscribe("s.>", "D", stream="S")
        msgs = await psub.fetch(10, timeout=2)
        for m in msgs[:4]:
            await m.ack_sync()
        before_info, before = await read_all(nc, "S")
        cinfo = await js.consumer_info("S", "D")

        resp, archive, end, replies = await take_snapshot(nc, "S", chunk_size=2048, window_size=4096)
        assert resp["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
        assert resp["config"]["name"] == "S" and resp["state"]["messages"] == 298
        assert archive.startswith(b"\xff\x06\x00\x00S2sTwO")     # nats-server's: an S2 stream (of a tar)
        assert all(r.startswith("$JS.SNAPSHOT.ACK.S.") for r in replies[:-1])
        assert not replies[-1] or replies[-1].split(".")[-2] == "2048"
        tok = replies[0].split(".")
        assert tok[-2] == "2048" and tok[-1] == "1" and len(tok) == 7
        assert end.headers and end.headers.get("Status") == "204"

        # existing name -> 10130
        r = await api(nc, "$JS.API.STREAM.RESTORE.S", {"config": resp["config"], "state": resp["state"]})
        assert r["error"]["err_code"] == 10130 and r["error"]["code"] == 400

        await api(nc, "$JS.API.STREAM.DELETE.S")
        r = await restore(nc, "S", resp, archive)
        assert r["type"] == "io.nats.jetstream.api.v1.stream_create_response", r
        assert "error" not in r, r
        assert r["config"]["name"] == "S" and r["state"]["messages"] == 298
        after_info, after = await read_all(nc, "S")
        assert after == before
        for k in ("messages", "bytes", "first_seq", "last_seq", "num_deleted", "first_ts"):
            assert after_info["state"][k] == before_info["state"][k], k
        # as nats-server 2.15 restores its version 2 backups: created is the restore's time
        assert after_info["created"] > before_info["created"]
        c2 = await js.consumer_info("S", "D")
        assert c2.delivered.stream_seq == cinfo.delivered.stream_seq
        assert c2.ack_floor.stream_seq == cinfo.ack_floor.stream_seq
        assert c2.num_ack_pending == cinfo.num_ack_pending == 6
        # the stream is live: dedup state came back, new publishes continue the sequence
        ack = await js.publish("s.0", b"dup", headers={"Nats-Msg-Id": "id-3"})
        assert ack.duplicate and ack.seq == 4
        ack = await js.publish("s.0", b"new")
        assert ack.seq == 301
    with_jetstream(srv, go)
    if storage == "file":
        srv.stop()
        srv2 = natsd("-js", "-sd", sd)

        @run
        async def again():
            nc = await connect(srv2)
            si = await api(nc, "$JS.API.STREAM.INFO.S")
            assert si["state"]["messages"] == 299 and si["state"]["last_seq"] == 301
            ci = await api(nc, "$JS.API.CONSUMER.INFO.S.D")
            assert ci["num_ack_pending"] == 6
            await nc.close()
        again()


def test_snapshot_no_consumers_and_restore_under_new_server(natsd, tmp_path):
    a = natsd("-js", "-sd", str(tmp_path / "a"))
    b = natsd("-js", "-sd", str(tmp_path / "b"))

    @run
    async def go():
        nc = await connect(a)
        js = nc.jetstream()
        await js.add_stream(name="K", subjects=["k"])
        for i in range(50):
            await js.publish("k", b"%d" % i)
        await js.add_consumer("K", durable_name="C", ack_policy="explicit")
        resp, archive, end, _ = await take_snapshot(nc, "K", no_consumers=True)
        assert "error" not in resp
        # small archive: one short chunk, no ack reply, end marker is a plain empty message
        # (nats-server only sets the 204 header after a full chunk)
        assert not end.headers
        await nc.close()
        nc2 = await connect(b)
        r = await restore(nc2, "K", resp, archive, chunk=100)
        assert "error" not in r, r
        assert r["state"]["messages"] == 50 and r["state"]["consumer_count"] == 0
        names = await api(nc2, "$JS.API.CONSUMER.NAMES.K")
        assert names["consumers"] == []
        m = await nc2.jetstream().get_msg("K", 50)
        assert m.data == b"49"
        await nc2.close()
    go()


def test_snapshot_errors(natsd, sd):
    srv = natsd("-js", "-sd", sd)

    async def go(nc, js):
        await js.add_stream(name="E", subjects=["e"])
        r = await api(nc, "$JS.API.STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"})
        assert r["error"]["err_code"] == 10059
        r = await api(nc, "$JS.API.STREAM.SNAPSHOT.E", {"deliver_subject": ""})
        assert r["error"]["err_code"] == 10015
        r = await api(nc, "$JS.API.STREAM.SNAPSHOT.E", {"deliver_subject": "a.*"})
        assert r["error"]["err_code"] == 10015
        r = await api(nc, "$JS.API.STREAM.SNAPSHOT.E", b"")
        assert r["error"]["err_code"] == 10003
        r = await api(nc, "$JS.API.STREAM.RESTORE.E", b"")
        assert r["error"]["err_code"] == 10003
        r = await api(nc, "$JS.API.STREAM.RESTORE.X", {"config": {"name": "Y"}, "state": {}})
        assert r["error"]["err_code"] == 10056
        # garbage archive -> restore failed 10062, nothing created
        r = await api(nc, "$JS.API.STREAM.RESTORE.G", {"config": {"name": "G", "subjects": ["g"]},
                                                         "state": {}})
        ds = r["deliver_subject"]
        await nc.request(ds, b"not a snapshot at all", timeout=5)
        m = await nc.request(ds, b"", timeout=5)
        r = json.loads(m.data)
        assert r["error"]["err_code"] == 10062 and r["error"]["description"].startswith("restore failed: ")
        r = await api(nc, "$JS.API.STREAM.INFO.G")
        assert r["error"]["err_code"] == 10059
    with_jetstream(srv, go)


def test_config_frozen_while_snapshot_streams(natsd, sd):
    srv = natsd("-js", "-sd", sd)

    async def go(nc, js):
        await js.add_stream(name="F", subjects=["f"])
        for i in range(100):
            await js.publish("f", b"y" * 2000)
        inbox = nc.new_inbox()
        got = []

        async def cb(m):
            got.append(m)
        sub = await nc.subscribe(inbox, cb=cb)
        # a window of one chunk that we do not ack: the transfer stalls after the first chunk
        r = await api(nc, "$JS.API.STREAM.SNAPSHOT.F",
                      {"deliver_subject": inbox, "chunk_size": 1024, "window_size": 1024})
        assert "error" not in r
        await asyncio.sleep(0.2)
        assert len(got) == 1
        upd = await api(nc, "$JS.API.STREAM.UPDATE.F", {"name": "F", "subjects": ["f"], "max_msgs": 5})
        assert upd["error"]["err_code"] == 10069, upd
        r2 = await api(nc, "$JS.API.STREAM.SNAPSHOT.F", {"deliver_subject": inbox + ".2"})
        assert r2["error"]["err_code"] == 10064 and "in progress" in r2["error"]["description"]
        # the receiver goes away: the transfer ends, the config can change again
        await sub.unsubscribe()
        await nc.publish(got[0].reply, b"")      # one ack lets the sender notice
        await asyncio.sleep(0.2)
        upd = await api(nc, "$JS.API.STREAM.UPDATE.F", {"name": "F", "subjects": ["f"], "max_msgs": 5})
        assert "error" not in upd, upd
    with_jetstream(srv, go)
    srv.wait_log(r"Snapshot for stream '\$G > F' failed .*no interest")


def test_end_marker_like_reference(reference, natsd, tmp_path):
    """The wire shape (ack reply tokens, end marker) matches nats-server's."""
    shapes = []
    for srv in (reference("-js", "-sd", str(tmp_path / "ref")), natsd("-js", "-sd", str(tmp_path / "n"))):
        async def go(nc, js):
            await js.add_stream(name="W", subjects=["w"])
            for i in range(400):
                await js.publish("w", bytes(range(256)) * 4)     # incompressible enough
            resp, archive, end, replies = await take_snapshot(nc, "W", chunk_size=1024)
            shapes.append((sorted(resp), [len(r.split(".")) for r in replies[:2]],
                           replies[0].split(".")[-1], end.headers, end.data))
        with_jetstream(srv, go)
    ref, ours = shapes
    assert ref[0] == ours[0] == ["config", "state", "type"]
    assert ref[1] == ours[1] == [7, 7]
    assert ref[2] == ours[2] == "1"
    assert ref[3] == ours[3] and ref[4] == ours[4] == b""
