"""Raft's WAL on the Cython log (natsd/raft/wal.py): the same answers as the in-memory
storage for the same seeded operations, everything back after a reopen, every synced entry
back after a real kill -9 of the writing process, and Raft groups in the deterministic world
running on it through leader kills and crashes of every server."""
import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from natsd.raft.messages import CONFIG, NOOP, NORMAL, Entry
from natsd.raft.storage import MemoryStorage
from natsd.raft.wal import CorruptState, LogStorage
from tests.cluster import test_raft as scenarios
from tests.support.jetstream import records_end
from tests.support.raftsim import World


def observe(s):
    last = s.last_index()
    first = s.snapshot_meta()[0] + 1
    return (s.hard_state(), s.snapshot_meta(), s.snapshot_data(), last,
            [s.term_at(i) for i in range(max(0, first - 2), last + 2)],
            s.entries(first, last) if last >= first else [])


def test_same_answers_as_memory_storage(tmp_path):
    rnd = random.Random(3)
    mem, wal = MemoryStorage(), LogStorage(tmp_path / "g")
    term = 1
    for step in range(400):
        op = rnd.random()
        last = mem.last_index()
        if op < 0.55:
            es = [Entry(term, rnd.choice([NORMAL, NORMAL, NOOP, CONFIG]), os.urandom(rnd.randrange(0, 40)))
                  for _ in range(rnd.randrange(1, 6))]
            for s in (mem, wal):
                s.append(es)
        elif op < 0.65 and last > mem.snapshot_meta()[0]:
            cut = rnd.randrange(mem.snapshot_meta()[0], last)
            for s in (mem, wal):
                s.truncate_after(cut)
        elif op < 0.72 and last > mem.snapshot_meta()[0]:
            at = rnd.randrange(mem.snapshot_meta()[0] + 1, last + 1)
            for s in (mem, wal):
                s.compact(at, s.term_at(at), ("a", "b"), b"snap%d" % step)
        elif op < 0.75:
            at = last + rnd.randrange(1, 20)
            for s in (mem, wal):
                s.install_snapshot(at, term, ("a", "b", "c"), b"leader%d" % step)
        elif op < 0.85:
            term += 1
            vote = rnd.choice(["", "a", "b"])
            for s in (mem, wal):
                s.save_hard_state(term, vote)
        elif op < 0.9:
            wal.close()
            wal = LogStorage(tmp_path / "g")
        assert observe(wal) == observe(mem), step
    wal.close()


def test_a_damaged_state_file_is_refused(tmp_path):
    s = LogStorage(tmp_path / "g")
    s.save_hard_state(4, "b")
    s.close()
    assert LogStorage(tmp_path / "g").hard_state() == (4, "b")
    with open(tmp_path / "g" / "state", "r+b") as f:
        f.seek(6)
        f.write(b"\xff")
    with pytest.raises(CorruptState):
        LogStorage(tmp_path / "g")


WRITER = textwrap.dedent("""
    import sys
    from natsd.raft.messages import Entry, NORMAL
    from natsd.raft.wal import LogStorage
    s = LogStorage(sys.argv[1])
    i = 0
    while True:
        i += 1
        s.append([Entry(1, NORMAL, b"e%d" % i)])
        if i % 7 == 0:
            s.log.sync()
            print(i, flush=True)            # entries up to i are on disk
""")


@pytest.mark.parametrize("seed", range(3))
def test_every_synced_entry_survives_kill_9(tmp_path, seed):
    d = tmp_path / "g"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(d)], stdout=subprocess.PIPE, env=env)
    synced = 0
    want = random.Random(seed).randrange(50, 400)
    for line in p.stdout:
        synced = int(line)
        if synced >= want:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    s = LogStorage(d)
    assert s.last_index() >= synced
    assert [e.data for e in s.entries(1, synced)] == [b"e%d" % i for i in range(1, synced + 1)]
    s.append([Entry(2, NORMAL, b"after")])      # and it goes on from where it is
    assert s.term_at(s.last_index()) == 2
    s.close()


def _world(tmp_path, seed, **kw):
    gen = {}

    def storage(sid):
        gen[sid] = gen.get(sid, 0) + 1
        return LogStorage(tmp_path / ("%s-%d" % (sid, gen[sid])))
    return World(3, seed, storage=storage, **kw)


@pytest.mark.parametrize("seed", range(4))
def test_groups_on_the_wal_survive_kills(tmp_path, seed):
    w = _world(tmp_path, seed, disk=scenarios.SLOW, snapshot_every=50)
    scenarios.elect(w)
    w.run(0.4, load=200)
    w.kill(w.leader())
    scenarios.writes_again_within(w, 3 * scenarios.ET[1] + 1.0)
    w.run(0.3, load=200)
    for s in w.ids:
        w.kill(s)
    for s in w.ids:
        w.restart(s)
    scenarios.elect(w)
    w.run(0.3, load=200)
    victim = next(s for s in w.ids if s != w.leader())
    w.wipe_and_restart(victim)
    w.run(0.5, load=200)
    scenarios.finish(w)


def test_sync_async_reports_what_it_covered(tmp_path):
    s = LogStorage(tmp_path / "g")
    s.append([Entry(1, NORMAL, b"a"), Entry(1, NORMAL, b"b")])
    queued, got = [], []
    s.sync_async(lambda job, done: queued.append((job, done)), got.append)
    s.append([Entry(1, NORMAL, b"c")])          # after the sync started: not covered by it
    s.truncate_after(1)                         # and a truncation takes one back
    job, done = queued.pop()
    done(job(), None)
    assert got == [1]
    s.close()


def test_entries_keep_when_they_were_appended(tmp_path):
    import time
    s = LogStorage(tmp_path / "g")
    before = time.time_ns()
    s.append([Entry(7, NORMAL, b"a"), Entry(9, CONFIG, b"b")])
    after = time.time_ns()
    s.log.sync()
    s.close()
    s = LogStorage(tmp_path / "g")
    assert [(e.term, e.kind, e.data) for e in s.entries(1, 2)] == [(7, NORMAL, b"a"), (9, CONFIG, b"b")]
    assert before <= s.appended_at(1) <= s.appended_at(2) <= after
    assert s.appended_at(3) == 0 and s.appended_at(0) == 0
    s.close()


def test_a_log_written_before_natsd_kept_times_still_reads(tmp_path):
    """An earlier natsd wrote the bare kind as subject and the term as timestamp."""
    from natsd._core.logopen import open_log
    os.makedirs(tmp_path / "g")
    old = open_log(str(tmp_path / "g" / "wal"), block_size=4 * 1024 * 1024, sync_marks=False,
                   zero_ahead=True)
    old.append(1, 3, b"1", None, b"")
    old.append(2, 5, b"0", None, b"cmd")
    old.sync()
    old.close()
    s = LogStorage(tmp_path / "g")
    assert [s.term_at(i) for i in (1, 2)] == [3, 5]
    assert [(e.term, e.kind, e.data) for e in s.entries(1, 2)] == [(3, NOOP, b""), (5, NORMAL, b"cmd")]
    assert s.appended_at(2) == 0
    s.append([Entry(6, NORMAL, b"new")])
    s.log.sync()
    s.close()
    s = LogStorage(tmp_path / "g")
    assert [s.term_at(i) for i in (1, 2, 3)] == [3, 5, 6] and s.appended_at(3) > 0
    s.close()


def _header_mark(path):
    with open(path, "rb") as f:
        return int.from_bytes(f.read(16)[8:], "little")


def test_syncs_leave_the_wal_header_mark_alone(tmp_path):
    """The WAL cuts a damaged tail back instead of keeping its indexes, so its syncs do not
    rewrite the block header's high-water mark (one page less per fdatasync); a stream's log
    does."""
    from natsd._core.logopen import open_log
    s = LogStorage(tmp_path / "g")
    for i in range(1, 41):
        s.append([Entry(1, NORMAL, b"entry-%d" % i)])
        s.log.sync()
    blk = tmp_path / "g" / "wal" / "1.blk"
    assert _header_mark(blk) == 0 and not s.log.sync_marks
    s.log.abandon()
    os.truncate(blk, records_end(blk) - 5)             # the last entry torn
    s = LogStorage(tmp_path / "g")
    assert s.last_index() == 39 and s.log.lost_tail is None
    assert [e.data for e in s.entries(38, 39)] == [b"entry-38", b"entry-39"]
    s.append([Entry(2, NORMAL, b"after")])
    assert s.last_index() == 40 and s.term_at(40) == 2
    s.close()

    lg = open_log(str(tmp_path / "stream"))
    for i in range(1, 6):
        lg.append(i, 0, b"s", None, b"m%d" % i)
        lg.sync()
    assert lg.sync_marks and _header_mark(tmp_path / "stream" / "1.blk") == 5
    lg.close()


def test_wal_keeps_zeros_ahead_of_its_records(tmp_path, caplog):
    """The WAL's block file runs ahead of its entries in zeros (an append's fdatasync then needs
    no journal commit); after a crash the zeros read as the block's end, not as damage, and
    every entry is back; a clean close and a truncation leave the file at the entries' end."""
    s = LogStorage(tmp_path / "g")
    for i in range(1, 301):
        s.append([Entry(1, NORMAL, b"entry-%d" % i)])
        if i % 10 == 0:
            s.log.sync()
    blk = tmp_path / "g" / "wal" / "1.blk"
    end = records_end(blk)
    assert s.log.zero_ahead and os.path.getsize(blk) >= end + 128 * 1024
    s.log.sync()
    s.log.abandon()                                     # kill -9: the zeros stay
    caplog.clear()
    s = LogStorage(tmp_path / "g")
    assert "corrupt" not in caplog.text and "lost" not in caplog.text
    assert s.last_index() == 300 and s.entries(300, 300)[0].data == b"entry-300"
    assert os.path.getsize(blk) == end                  # cut back on open
    s.append([Entry(2, NORMAL, b"more")])
    s.truncate_after(250)                               # a conflicting suffix goes
    assert records_end(blk) < end
    s.append([Entry(3, NORMAL, b"after the cut")])
    s.close()
    assert os.path.getsize(blk) == records_end(blk)    # a clean close leaves no zeros
    s = LogStorage(tmp_path / "g")
    assert s.last_index() == 251 and s.entries(251, 251)[0].data == b"after the cut"
    assert s.term_at(251) == 3 and s.term_at(250) == 1
    s.close()
