"""Object store through nats-py (unmodified) against natsd: OBJ_<b> streams, chunked put/get
with digest, info, list, delete, seal."""
import pytest
import nats.js.errors

from tests.jetstream.jshelp import connect, run


@pytest.fixture
def js_server(natsd, tmp_path):
    return natsd("-js", "-sd", str(tmp_path))


@run
async def test_object_put_get_info_list_delete(js_server):
    nc = await connect(js_server)
    js = nc.jetstream()
    ob = await js.create_object_store("files")
    data = bytes(range(256)) * 1200                      # 307200 bytes = 3 chunks
    info = await ob.put("a/b.bin", data, meta=None)
    assert info.size == len(data) and info.chunks == 3
    r = await ob.get("a/b.bin")
    assert r.data == data
    assert (await ob.get_info("a/b.bin")).size == len(data)
    await ob.put("small", b"tiny")
    assert sorted(o.name for o in await ob.list()) == ["a/b.bin", "small"]
    await ob.delete("a/b.bin")
    with pytest.raises(nats.js.errors.ObjectNotFoundError):
        await ob.get_info("a/b.bin")
    si = await js.stream_info("OBJ_files")
    assert si.config.subjects == ["$O.files.C.>", "$O.files.M.>"]
    assert si.config.allow_rollup_hdrs and si.config.discard == "new"
    await nc.close()


@run
async def test_object_overwrite_and_seal(js_server):
    nc = await connect(js_server)
    js = nc.jetstream()
    ob = await js.create_object_store("s")
    await ob.put("x", b"1" * 1000)
    await ob.put("x", b"2" * 10)
    assert (await ob.get("x")).data == b"2" * 10
    await ob.seal()
    assert (await js.stream_info("OBJ_s")).config.sealed
    with pytest.raises(Exception):
        await ob.put("y", b"nope")
    await nc.close()
