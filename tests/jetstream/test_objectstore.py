"""Object store through nats-py (unmodified) against natsd: OBJ_<b> streams, chunked put/get
with digest, info, list, delete, seal."""
import base64
import json

import nats.js.errors
import pytest

from tests.support.jetstream import on_js_server


@on_js_server
async def test_object_put_get_info_list_delete(nc, js):
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


@on_js_server
async def test_object_overwrite_and_seal(nc, js):
    ob = await js.create_object_store("s")
    await ob.put("x", b"1" * 1000)
    await ob.put("x", b"2" * 10)
    assert (await ob.get("x")).data == b"2" * 10
    await ob.seal()
    assert (await js.stream_info("OBJ_s")).config.sealed
    with pytest.raises(Exception):
        await ob.put("y", b"nope")


@on_js_server
async def test_object_watch_and_links(nc, js):
    """watch() sees puts and deletes as they happen; a link (meta with options.link, what
    `nats object` and nats.go write) is followed by nats-py's get to the linked object."""
    ob = await js.create_object_store("w")
    await ob.put("first", b"one")
    watcher = await ob.watch()
    seen = []
    async def drain(n):
        while len(seen) < n:
            e = await watcher.updates(timeout=5)
            if e is not None:
                seen.append((e.name, bool(e.deleted)))
    await drain(1)                                   # the initial value
    await ob.put("second", b"two")
    await ob.delete("first")
    await drain(3)
    assert seen == [("first", False), ("second", False), ("first", True)]

    link = {"name": "alias", "bucket": "w", "nuid": "LINKNUID", "size": 0, "chunks": 0,
            "digest": "", "options": {"link": {"bucket": "w", "name": "second"}}}
    subject = "$O.w.M." + base64.urlsafe_b64encode(b"alias").decode()
    await js.publish(subject, json.dumps(link).encode(), headers={"Nats-Rollup": "sub"})
    assert (await ob.get_info("alias")).is_link()
    assert (await ob.get("alias")).data == b"two"
