"""Snapshots and log compaction of replicated streams (natsd/jetstream/replicated/streams.py,
replsnapshot.py, catchup.py) on three real natsd servers.

- A follower that was down (and lost its disk) while the leader compacted gets the snapshot,
  copies the messages it names (interior deletes included) and ends with a copy identical to
  the others', with its consumers' acks: made leader, it redelivers nothing acknowledged, and
  tells a pull request that waited all along (named only by the snapshot) to ask again.
- The leader killed at a seeded point around its first snapshot, under a window of
  publishes: nothing acknowledged is lost; then past COMPACT_ENTRIES every replica keeps a
  snapshot in place of its log's beginning, and every server killed at once comes back with
  every acknowledged message (its copy cut back to its snapshot, the entries after it
  replayed). `make faults` runs both with 20 seeds.
- The meta group keeps its assignments as a snapshot too: a server that missed the streams
  created and deleted meanwhile gets the leader's.
- A memory stream's log is compacted too, its snapshot written with its messages: a follower
  killed alone, then every server killed at once, come back with what the limits keep.
"""
import asyncio
import json
import random
import shutil
import signal

import nats
import pytest

from natsd.jetstream.replicated.meta import COMPACT_ENTRIES as META_COMPACT
from natsd.jetstream.replicated.streams import COMPACT_ENTRIES
from tests.cluster.test_replicated_consumers import WORK, add_work, consumer_request, fetch, info
from tests.cluster.test_replicated_streams import (STREAM, api, check_acked, converged, create, leader_of,
                                                   local_state, publish_window, stored, stream_elections)
from tests.support.cluster import fault_seeds, js_cluster, kill9, restart_all, restart_member
from tests.support.rawclient import RawClient
from tests.support.waiting import poll

MORE = COMPACT_ENTRIES + 1500           # past one snapshot on every replica


def stream_wal(m, stream="R3"):
    """The stream group's WAL as `m`'s /raftz shows it (None while it has none)."""
    try:
        group = asyncio.run(api(m, "$JS.API.STREAM.INFO.%s" % stream))["cluster"]["raft_group"]
        groups = m.get("/raftz?acc=%24G")       # a stream's group is in its account
    except Exception:
        return None
    for acc in groups.values():
        if group in acc:
            return acc[group]["wal"]
    return None


def compacted(members):
    def check():
        wals = [stream_wal(m) for m in members]
        return all(w is not None and w["first_seq"] > 1 for w in wals) and wals
    wals = poll(check, timeout=30, interval=0.2)
    assert wals, "not every replica compacted its log: %r" % [stream_wal(m) for m in members]
    return wals


async def delete_msgs(m, seqs):
    for seq in seqs:
        r = await api(m, "$JS.API.STREAM.MSG.DELETE.R3", json.dumps({"seq": seq}).encode())
        assert r.get("success"), r


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_follower_behind_the_snapshot_copies_what_it_names(tmp_path, seed):
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        leader = leader_of(members)
        add_work(leader)
        acked = asyncio.run(publish_window(leader.url, 200, b"a"))
        done = asyncio.run(fetch(leader.url, 60, ack=True))
        assert len(done) == 60
        late = rng.choice([m for m in members if m is not leader])
        kill9(late)
        shutil.rmtree(str(tmp_path / ("store-" + late.name)))    # back with an empty disk
        # a pull request that waits all along: the late server knows it from the snapshot alone
        add_work(leader, dict(WORK, durable_name="idle", filter_subject="none.yet"))
        other = next(m for m in members if m is not leader and m is not late)
        waiting = RawClient(other.proc.port).connect()
        body = json.dumps({"batch": 1, "expires": 600_000_000_000}).encode()
        waiting.send(b"SUB _WAIT 1\r\nPUB $JS.API.CONSUMER.MSG.NEXT.R3.idle _WAIT %d\r\n%s\r\n"
                     % (len(body), body))
        waiting.sync()
        assert poll(lambda: asyncio.run(consumer_request(leader, "INFO", "idle"))["num_waiting"] == 1,
                    timeout=10)
        # deletes and acks the late server never sees, then enough for a snapshot
        gone = sorted(rng.sample(range(61, 200), 5))
        asyncio.run(delete_msgs(leader, gone))
        for seq in gone:
            acked.pop(seq)
        done += asyncio.run(fetch(leader.url, 40, ack=True))
        acked.update(asyncio.run(publish_window(leader.url, MORE, b"b", window=256)))
        compacted([m for m in members if m is not late])
        late = restart_member(late, tmp_path)
        members[:] = [late if m.name == late.name else m for m in members]
        state = converged(members, max(acked))
        assert state["messages"] == len(acked)
        late.proc.wait_log(r"copied \d+ messages from", timeout=10)
        # the copy made from the snapshot leads: the stream and its consumer go on from it (a
        # step-down is asked again only once the last one had its time to move the leadership)
        def led_by_late():
            asyncio.run(api(leader_of(members), "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                            json.dumps({"placement": {"preferred": late.name}}).encode()))
            return poll(lambda: leader_of(members) is late, timeout=5)
        assert poll(led_by_late, timeout=60, interval=0), "the stream's leadership never moved"
        # the consumers have groups of their own (natsd/jetstream/replicated/consumergroup.py): they
        # move to the late server too, which knows them from its snapshot and their logs
        for name in ("idle", "work"):
            body = json.dumps({"placement": {"preferred": late.name}}).encode()
            r = asyncio.run(consumer_request(leader_of(members), "LEADER.STEPDOWN", name, body))
            assert r.get("success"), r
        # leadership went straight to the late server (a preferred stepdown goes nowhere else)
        waiting.read_until(b"HMSG _WAIT 1 ", timeout=10)
        waiting.read_line()             # the sizes
        assert waiting.read_line() == b"NATS/1.0 409 Leadership Change"
        waiting.close()
        check_acked(late, acked, state)
        o = info(late)
        assert o["ack_floor"]["stream_seq"] >= 100, o
        acked_seqs = {seq for seq, _ in done}
        got = asyncio.run(fetch(late.url, 30, ack=True))
        assert got and not acked_seqs & {seq for seq, _ in got}, got


def meta_wal(m):
    try:
        return m.get("/raftz")["$SYS"]["_meta_"]["wal"]
    except Exception:
        return None


async def ask(m, subject):
    """A request asked again while nobody answers (a stream whose leader was killed elects
    another first)."""
    for _ in range(20):
        try:
            return await api(m, subject)
        except nats.errors.TimeoutError:
            continue
    raise AssertionError("nobody answered " + subject)


def meta_leader_without(members, name):
    """The member that leads the meta group and shows `name` offline (new streams avoid it),
    or None."""
    for m in members:
        try:
            mc = m.get("/jsz")["meta_cluster"]
        except Exception:
            continue
        if mc.get("leader") == m.name and any(r["name"] == name and r.get("offline")
                                              for r in mc.get("replicas") or ()):
            return m
    return None


async def churn(m, count, prefix="T", replicas=2, delete=True):
    """Create (and delete) `count` replicated streams: one meta entry each way."""
    nc = await nats.connect(m.url)
    try:
        for i in range(count):
            cfg = {"name": "%s%d" % (prefix, i), "subjects": ["%s%d" % (prefix, i)], "num_replicas": replicas}
            for _ in range(50):
                try:
                    r = json.loads((await nc.request("$JS.API.STREAM.CREATE." + cfg["name"],
                                                     json.dumps(cfg).encode(), timeout=5)).data)
                except nats.errors.TimeoutError:
                    continue
                if r.get("error", {}).get("err_code") != 10008:
                    break
                await asyncio.sleep(0.1)
            assert "config" in r, r
            if delete:
                r = json.loads((await nc.request("$JS.API.STREAM.DELETE." + cfg["name"], b"", timeout=5)).data)
                assert r.get("success"), r
    finally:
        await nc.close()


def test_meta_group_compacts_and_a_server_far_behind_gets_its_snapshot(tmp_path):
    """Past meta.COMPACT_ENTRIES the meta group keeps the assignments as a snapshot. A server
    down meanwhile gets the leader's snapshot: it drops the streams deleted since and keeps
    the others; every server killed at once then starts from its own snapshot."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        leader = leader_of(members)
        late = next(m for m in members if m is not leader)
        acked = asyncio.run(publish_window(leader.url, 100, b"m"))
        asyncio.run(churn(leader, 3, prefix="D", replicas=3, delete=False))
        assert poll(lambda: local_state(late, "D2") is not None, timeout=10)
        kill9(late)
        rest = [m for m in members if m is not late]
        entry = poll(lambda: meta_leader_without(rest, late.name), timeout=20)
        assert entry, "no meta leader saw %s go" % late.name
        for name in ("D0", "D1", "D2"):
            r = asyncio.run(ask(entry, "$JS.API.STREAM.DELETE." + name))
            assert r.get("success"), r
        asyncio.run(churn(entry, META_COMPACT // 2 + 2))
        assert poll(lambda: all((meta_wal(m) or {}).get("first_seq", 0) > 1 for m in rest), timeout=20), \
            [meta_wal(m) for m in rest]
        late = restart_member(late, tmp_path)
        members[:] = [late if m.name == late.name else m for m in members]
        late.proc.wait_log("installed a snapshot", timeout=30)
        state = converged(members, max(acked))
        assert state["messages"] == 100
        assert poll(lambda: all(local_state(late, d) is None for d in ("D0", "D1", "D2")), timeout=10)
        kill9(*members)
        restart_all(members, tmp_path)
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        assert all(local_state(m, name) is None for m in members for name in ("D0", "T0", "T1"))


@pytest.mark.parametrize("seed", fault_seeds([3]))
def test_leader_kill9_around_a_snapshot_loses_no_acked_message(tmp_path, seed):
    """The leader is killed at a seeded point around its first snapshot while publishers
    keep a window in flight on a surviving server; it comes back, catches up (from the new
    leader's log or snapshot) and every acknowledged message is on every copy once. Then
    every server is killed at once and comes back with all of them."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[rng.randrange(3)], STREAM))
        leader = leader_of(members)
        others = [m for m in members if m is not leader]
        entry = rng.choice(others)
        kill_at = rng.randrange(COMPACT_ENTRIES - 1500, COMPACT_ENTRIES + 1500)

        def progress(i):
            if i == kill_at:
                leader.proc.proc.send_signal(signal.SIGKILL)
        acked = asyncio.run(publish_window(entry.url, MORE, b"k", window=128, on_progress=progress))
        leader.proc.proc.wait(5)
        assert leader_of(others) is not leader
        more = asyncio.run(publish_window(entry.url, 2000, b"l", window=128))
        assert len(more) == 2000
        acked.update(more)
        back = restart_member(leader, tmp_path)
        members[members.index(leader)] = back
        state = converged(members, max(acked))
        # publishes in flight when the leader died may be stored without their PubAck
        assert state["messages"] >= len(acked)
        check_acked(leader_of(members), acked, state)
        # then every server killed at once: each copy is cut back to its own snapshot and
        # the entries after it are replayed
        wals = compacted(members)
        assert all(w["messages"] < state["last_seq"] for w in wals), wals
        acked.update(asyncio.run(publish_window(entry.url, 300, b"m", window=32)))
        kill9(*members)
        restart_all(members, tmp_path)
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        more = asyncio.run(publish_window(members[0].url, 20, b"n"))
        assert len(more) == 20 and min(more) == state["last_seq"] + 1
        stream_elections(members)


KEEP = 300
MEMORY = dict(STREAM, storage="memory", max_msgs=KEEP)


def check_kept(member, acked, state):
    """The stream holds the last KEEP acknowledged messages at their PubAcks' sequences."""
    assert state["messages"] == KEEP, state
    have = stored(member, state["last_seq"], state["first_seq"])
    assert sorted(have) == list(range(state["last_seq"] - KEEP + 1, state["last_seq"] + 1))
    for seq, payload in have.items():
        if seq in acked:
            assert payload == acked[seq], "acked seq %d: stored %r, acked %r" % (seq, payload, acked[seq])
    assert all(seq in acked for seq in have if seq <= max(acked)), "a kept message was never acked"


@pytest.mark.parametrize("seed", fault_seeds([4]))
def test_memory_stream_log_is_compacted_and_survives_every_server_killed(tmp_path, seed):
    """A memory stream (max_msgs) past COMPACT_ENTRIES: every replica compacts its log, the
    messages written beside the snapshot. A seeded follower is killed and restarted, then all
    three at once: each copy is read back from its own disk (nobody else has it), the entries
    after the snapshot replayed, and the stream takes writes. Before, a memory stream's log
    kept its whole history."""
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[rng.randrange(3)], MEMORY))
        entry = members[rng.randrange(3)]
        acked = asyncio.run(publish_window(entry.url, MORE, b"p", window=128))
        assert len(acked) == MORE
        wals = compacted(members)
        assert all(w["messages"] < MORE // 2 for w in wals), wals
        state = converged(members, MORE)
        check_kept(leader_of(members), acked, state)

        leader = leader_of(members)
        victim = rng.choice([m for m in members if m is not leader])
        kill9(victim)
        acked.update(asyncio.run(publish_window(leader.url, rng.randrange(1, 200), b"q", window=32)))
        members[members.index(victim)] = restart_member(victim, tmp_path)
        state = converged(members, max(acked))
        check_kept(leader_of(members), acked, state)

        acked.update(asyncio.run(publish_window(leader.url, rng.randrange(1, 200), b"r", window=32)))
        kill9(*members)
        restart_all(members, tmp_path)
        state = converged(members, max(acked))
        assert state["last_seq"] == max(acked)
        check_kept(leader_of(members), acked, state)
        more = asyncio.run(publish_window(members[rng.randrange(3)].url, 20, b"s"))
        assert len(more) == 20 and min(more) == state["last_seq"] + 1
        stream_elections(members)
