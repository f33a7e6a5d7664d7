"""Unit tests for a replicated stream's snapshot (natsd/jetstream/replicated/snapshots.py) and the copy
between replicas (natsd/jetstream/replicated/catchup.py), on both stores through the store contract: a
copy that is empty, partial, ahead of the snapshot or missing deleted tail messages ends with
exactly the snapshot's messages, sequences and deletes."""
import os
import types

import pytest

from natsd.jetstream.replicated import catchup, snapshots as replsnapshot
from tests.jetstream.test_store import open_store

HDR = b"NATS/1.0\r\nA: b\r\n\r\n"


@pytest.fixture(params=["memory", "file", "file-s2"])
def kind(request):
    return request.param


def fill(s, lo, hi):
    for i in range(lo, hi + 1):
        s.store_raw(i, 1_000 + i, b"s.%d" % (i % 3), HDR if i % 4 == 0 else None, b"p%d" % i)


def leader_store(kind, path, last=100, deleted=(5, 6, 7, 40), first=3):
    s = open_store(kind, path)
    fill(s, 1, last)
    for seq in deleted:
        s.remove(seq)
    s.compact(first)
    return s


def snapshot_of(store, consumers=None, pulls=None):
    st = types.SimpleNamespace(store=store, config={"name": "R3", "subjects": ["s.>"]})
    return replsnapshot.decode(replsnapshot.take(st, consumers or {}, pulls))


def copy(src, dst, lo, hi, index=7):
    """What the Fetcher does, without the network: ask, store, ask again."""
    rid, nxt = 0, lo
    while nxt:
        rid += 1
        data, done = catchup.answer(src, {"from": nxt, "to": hi, "index": index, "id": rid}, True)
        status, got_rid, nxt, recs = catchup.records(data)
        assert status == catchup.OK and got_rid == rid
        for seq, ts, subj, hdr, payload in recs:
            dst.store_raw(seq, ts, subj, hdr, payload)
        assert done == (nxt == 0)


def messages(s):
    out, seq = [], s.first_seq
    while True:
        m = s.load_next(seq)
        if m is None:
            return out
        out.append((m.seq, m.ts, m.subject, m.hdr, m.msg))
        seq = m.seq + 1


def same(a, b, keys=("messages", "bytes", "first_seq", "last_seq", "num_deleted")):
    sa, sb = a.state(), b.state()
    for k in keys:
        assert sa[k] == sb[k], (k, sa, sb)
    assert messages(a) == messages(b)
    assert a.deleted() == b.deleted()


def test_snapshot_names_the_state(kind, tmp_path):
    src = leader_store(kind, tmp_path / "l")
    snap = snapshot_of(src, {"work": {"created": "x", "config": {}, "state": None}})
    assert (snap["first"], snap["last"]) == (3, 100)
    assert snap["deleted"] == [[5, 7], [40, 40]]
    assert snap["consumers"] == {"work": {"created": "x", "config": {}, "state": None}}
    assert replsnapshot.pulls_of(snap) == {}
    snap = snapshot_of(src, pulls={"work": {"_INBOX.b", "_INBOX.a"}, "idle": set()})
    assert snap["pulls"] == {"work": ["_INBOX.a", "_INBOX.b"]}
    assert replsnapshot.pulls_of(snap) == {"work": {"_INBOX.a", "_INBOX.b"}}
    del snap["pulls"]                   # a snapshot of an older natsd
    assert replsnapshot.pulls_of(snap) == {}
    assert replsnapshot.runs([1, 2, 3, 7, 9, 10]) == [[1, 3], [7, 7], [9, 10]]


def catch_up(src, dst, snap):
    """A copy brought to the snapshot: aligned, what it misses copied from the leader's store,
    finished -> what it missed (align's answer; nothing copied when None)."""
    missing = replsnapshot.align(dst, snap)
    if missing:
        copy(src, dst, *missing)
        replsnapshot.finish(dst, snap)
    return missing


def leader_and_copy(kind, tmp_path, **leader):
    """The leader's store (leader_store), its snapshot, and an empty store for the copy."""
    src = leader_store(kind, tmp_path / "l", **leader)
    return src, snapshot_of(src), open_store(kind, tmp_path / "f")


def test_empty_copy_copies_everything(kind, tmp_path):
    src, snap, dst = leader_and_copy(kind, tmp_path)
    assert catch_up(src, dst, snap) == (3, 100)
    same(src, dst)


def test_partial_copy_loses_what_was_deleted_and_copies_the_rest(kind, tmp_path):
    src, snap, dst = leader_and_copy(kind, tmp_path)
    fill(dst, 1, 50)
    assert catch_up(src, dst, snap) == (51, 100)
    same(src, dst)


def test_copy_ahead_of_the_snapshot_is_cut_back(kind, tmp_path):
    """A restarted replica: its copy holds entries applied after the snapshot."""
    src, snap, dst = leader_and_copy(kind, tmp_path)
    fill(dst, 1, 130)
    dst.remove(5)
    assert replsnapshot.align(dst, snap) is None
    same(src, dst)


def test_deleted_tail_is_skipped(kind, tmp_path):
    """The snapshot's last messages were deleted: the copy has nothing to copy for them, and
    its next message still takes the stream's next sequence."""
    src, snap, dst = leader_and_copy(kind, tmp_path, deleted=(5, 99, 100))
    catch_up(src, dst, snap)
    assert dst.last_seq == 100
    same(src, dst)
    assert dst.store_msg(b"s.1", None, b"next")[0] == 101


def test_copy_of_a_purged_stream(kind, tmp_path):
    src = open_store(kind, tmp_path / "l")
    fill(src, 1, 20)
    src.purge()
    snap = snapshot_of(src)
    assert (snap["first"], snap["last"]) == (21, 20)
    dst = open_store(kind, tmp_path / "f")
    fill(dst, 1, 4)
    catch_up(src, dst, snap)
    assert (dst.state()["messages"], dst.last_seq) == (0, 20)
    assert dst.store_msg(b"s.1", None, b"next")[0] == 21


def test_answers_come_in_chunks_and_not_before_the_snapshot(kind, tmp_path, monkeypatch):
    monkeypatch.setattr(catchup, "CHUNK_BYTES", 40)
    src = leader_store(kind, tmp_path / "l")
    data, done = catchup.answer(src, {"from": 3, "to": 100, "index": 1, "id": 9}, True)
    status, rid, nxt, recs = catchup.records(data)
    assert (status, rid, done) == (catchup.OK, 9, False)
    assert 1 < len(recs) < 20 and nxt == recs[-1][0] + 1
    assert [r[0] for r in recs] == [3, 4] + list(range(8, 8 + len(recs) - 2))
    assert recs[1][3] == HDR and recs[0][3] is None
    data, done = catchup.answer(src, {"from": 3, "to": 100, "index": 1, "id": 10}, False)
    assert catchup.records(data)[:3] == (catchup.NOT_YET, 10, 3) and not done


def test_malformed_snapshots_and_answers_are_refused():
    with pytest.raises(ValueError):
        replsnapshot.decode(b'{"v": 99}')
    with pytest.raises(ValueError):
        replsnapshot.decode(b'{"v": 1, "first": 1}')
    with pytest.raises(ValueError):
        replsnapshot.decode(b"not json")
    data, _ = catchup.answer(types.SimpleNamespace(load_next=lambda seq: None),
                             {"from": 1, "to": 5, "index": 0, "id": 1}, True)
    assert catchup.records(data) == (catchup.OK, 1, 0, [])
    good = catchup.answer(types.SimpleNamespace(
        load_next=lambda seq: types.SimpleNamespace(seq=1, ts=5, subject=b"a", hdr=None, msg=b"xyz")
        if seq <= 1 else None), {"from": 1, "to": 1, "index": 0, "id": 2}, True)[0]
    with pytest.raises(ValueError):
        catchup.records(good[:-2])


def test_copy_all_hands_a_memory_store_over(kind, tmp_path):
    src = leader_store(kind, tmp_path / "l", deleted=(5, 6, 99, 100))
    dst = open_store("memory", tmp_path / "f")
    replsnapshot.copy_all(src, dst)
    # (a file store counts its record overhead in bytes, a memory store does not)
    same(src, dst, ("messages", "first_seq", "last_seq", "num_deleted"))
    assert dst.last_seq == 100


def test_memory_copy_comes_back_from_the_messages_written_with_its_snapshot(tmp_path):
    """A memory copy's messages beside its snapshot: read back and finished with the snapshot,
    the copy is the one that was written (deleted tail included), with nobody to copy from."""
    src = leader_store("memory", tmp_path / "l", deleted=(5, 6, 99, 100))
    snap = snapshot_of(src)
    replsnapshot.write_messages(str(tmp_path), 42, src.messages())
    back = open_store("memory", tmp_path / "f")
    for rec in replsnapshot.read_messages(str(tmp_path), 42):
        back.store_raw(*rec)
    replsnapshot.finish(back, snap)
    assert replsnapshot.align(back, snap) is None
    same(src, back)
    assert back.last_seq == 100


def test_messages_file_that_is_damaged_or_of_another_snapshot_is_not_used(tmp_path, caplog):
    src = leader_store("memory", tmp_path / "l")
    d = str(tmp_path)
    replsnapshot.write_messages(d, 7, src.messages())
    assert len(replsnapshot.read_messages(d, 7)) == src.num_msgs
    assert replsnapshot.read_messages(d, 8) is None                 # none for that snapshot
    path = replsnapshot.messages_path(d, 7)
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0xFF                                                # a flipped bit
    open(path, "wb").write(bytes(data))
    assert replsnapshot.read_messages(d, 7) is None
    open(path, "wb").write(bytes(data[:40]))                        # cut short
    assert replsnapshot.read_messages(d, 7) is None
    assert "cannot be used" in caplog.text
    open(replsnapshot.messages_path(d, 5) + ".tmp", "wb").write(b"half")   # a crash mid-write
    replsnapshot.write_messages(d, 9, [])
    replsnapshot.drop_messages(d, 9)
    assert sorted(n for n in os.listdir(d) if n.startswith("messages-")) == ["messages-5.tmp", "messages-9"]
    replsnapshot.drop_messages(d, 9, unfinished=True)
    assert [n for n in os.listdir(d) if n.startswith("messages-")] == ["messages-9"]
    assert replsnapshot.read_messages(d, 9) == []
