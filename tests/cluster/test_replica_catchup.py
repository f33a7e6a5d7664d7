"""A server on a slow disk (every fsync/fdatasync delayed by an LD_PRELOAD library the test
compiles), a replica that comes back far behind and one that comes back with no store: the
stream keeps acknowledging through its quorum, loses nothing acknowledged, and the late
replica catches up by itself, reporting its progress in /healthz (nats-server's "stream
catching up", then how far) and in its log until it is current."""
import asyncio
import json
import random
import signal
import urllib.error
import urllib.request

import nats
import pytest

from tests.cluster.test_replicated_streams import (STREAM, api, check_acked, converged, create, created,
                                                   leader_of, publish_window, stream_elections, unanswered)
from tests.support.cluster import fault_seeds, js_cluster, kill9, restart_member, slow_disk_env
from tests.support.waiting import poll
from tests.support.servers import http_status_json


def healthz(m):
    """(status code, body) of /healthz?js-enabled-only=true&details=true."""
    try:
        return http_status_json(m.proc.http_port, "/healthz?js-enabled-only=true&details=true")
    except (TimeoutError, urllib.error.URLError):
        return 0, {}                    # a server on a disk this slow may answer late


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_slow_disk_and_a_leader_kill_lose_nothing(tmp_path, seed):
    """One server syncs 20-80 ms late (seeded which, and how late); a seeded half of the runs
    make it the stream's leader. The leader dies by kill -9 at a seeded point of a windowed
    publish: the quorum goes on (its two fast disks, or one fast and the slow one), every
    acknowledged message is kept, and every copy, the slow one too, ends up identical."""
    rng = random.Random(seed)
    slow_name = rng.choice("ABC")
    slow_env = slow_disk_env(tmp_path, rng.choice([20_000, 50_000, 80_000]))
    with js_cluster("natsd", tmp_path, env=lambda name: slow_env if name == slow_name else None) as members:
        leader = created(members)
        slow = next(m for m in members if m.name == slow_name)
        if rng.random() < 0.5 and leader is not slow:
            r = asyncio.run(api(leader, "$JS.API.STREAM.LEADER.STEPDOWN.R3",
                                json.dumps({"placement": {"preferred": slow_name}}).encode()))
            assert r.get("success") is True, r
            leader = poll(lambda: leader_of(members) is slow and slow, timeout=30)
            assert leader, "the slow server never took the lead"
        entry = rng.choice([m for m in members if m is not leader])
        kill_at = rng.randrange(50, 350)

        def progress(i):
            if i == kill_at:
                leader.proc.proc.send_signal(signal.SIGKILL)
        acked = asyncio.run(publish_window(entry.url, 400, b"s", window=32, on_progress=progress))
        leader.proc.proc.wait(5)
        rest = [m for m in members if m is not leader]
        assert leader_of(rest) in rest
        more = asyncio.run(publish_window(entry.url, 50, b"t"))
        assert len(more) == 50, "the survivors did not take every publish"
        acked.update(more)
        back = restart_member(leader, tmp_path, env=slow_env if leader is slow else None)
        members[members.index(leader)] = back
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        stream_elections(members)


def test_publishes_committed_after_a_stepdown_are_answered(tmp_path):
    """The leader (A) and one follower (B) sync 150 ms late, the other follower (C) at once.
    A step-down to C during a waiting publisher: the publish A proposed last reaches C at
    once, so A hands on before a quorum has it on disk, and it commits under C. A, no longer
    the leader, still answers it when it applies it (before, nobody did: the publisher timed
    out), and every acknowledged message is stored once."""
    slow_env = slow_disk_env(tmp_path, 150_000)
    with js_cluster("natsd", tmp_path, env=lambda name: slow_env if name in "AB" else None) as members:
        a, b, c = members
        asyncio.run(create(a, STREAM))
        if leader_of(members) is not a:
            r = asyncio.run(api(c, "$JS.API.STREAM.LEADER.STEPDOWN.R3", b'{"placement":{"preferred":"A"}}'))
            assert r.get("success") is True, r
            assert poll(lambda: leader_of(members) is a, timeout=30), "A never took the lead"

        def step_down_at(i):
            if i == 5:
                asyncio.get_running_loop().create_task(
                    api(c, "$JS.API.STREAM.LEADER.STEPDOWN.R3", b'{"placement":{"preferred":"C"}}', timeout=10))
        acked = asyncio.run(publish_window(c.url, 15, b"d", window=1, on_progress=step_down_at))
        assert poll(lambda: leader_of(members) is c, timeout=30), "C never took the lead"
        assert not unanswered(acked, 15), "publishes never answered: %r" % unanswered(acked, 15)
        check_acked(c, acked, converged(members, max(acked)))


def test_leadership_back_within_the_grace_second_stores_each_publish_once(tmp_path):
    """C leads, hands on to A and, while C still takes publishes in its grace second (to pass
    them on), A hands back to C, with a publisher on C all the while. A publish both C's grace
    subscription and A's took is A's to propose (or drop): C, leading again, must not propose
    its copy as well. Every publish is stored once."""
    slow_env = slow_disk_env(tmp_path, 20_000)
    with js_cluster("natsd", tmp_path, env=lambda name: slow_env if name in "AB" else None) as members:
        a, b, c = members
        asyncio.run(create(c, STREAM))
        for _ in range(3):
            if leader_of(members) is c:
                break
            asyncio.run(api(a, "$JS.API.STREAM.LEADER.STEPDOWN.R3", b'{"placement":{"preferred":"C"}}'))
            poll(lambda: leader_of(members) is c, timeout=10)
        assert leader_of(members) is c, "C never took the lead"

        async def there_and_back():
            moved = 0
            for to in "AC" * 8:
                body = json.dumps({"placement": {"preferred": to}}).encode()
                for _ in range(200):    # asked again until the leader it names is not busy
                    try:
                        if (await api(a, "$JS.API.STREAM.LEADER.STEPDOWN.R3", body, timeout=0.2)).get("success"):
                            moved += 1
                            break
                    except Exception:
                        pass
                    await asyncio.sleep(0.01)
            return moved

        moves = []

        def moves_at(i):              # publishing until the moves are over
            if i == 3:
                moves.append(asyncio.get_running_loop().create_task(there_and_back()))
            return bool(moves) and moves[0].done()
        acked = asyncio.run(publish_window(c.url, 20000, b"g", window=8, on_progress=moves_at))
        # (a hand-off may fail under load: the leader keeps the lead, the next move is moot)
        assert moves[0].result() >= 8, "only %d of the 16 step-downs were taken" % moves[0].result()
        leader = leader_of(members)
        check_acked(leader, acked, converged(members, max(acked)))


def one_follower_down(members):
    """The R3 stream created, one of its followers killed -> (that follower, a live server
    to publish through)."""
    leader = created(members)
    late = next(m for m in members if m is not leader)
    kill9(late)
    return late, next(m for m in members if m is not late)


@pytest.mark.parametrize("count,window,progress,log_lines", [
    # behind by fewer messages than a snapshot holds: the leader sends its log (a small
    # window: a few messages per entry, so the late replica lacks many entries)
    (6000, 4, "entries", ("is catching up with its leader: applied", "caught up with its leader")),
    # behind the leader's snapshot: the snapshot, then the messages it names, copied
    (10000, 256, "messages its snapshot names", ("copies messages 1-", r"copied \d+ messages from")),
])
def test_replica_far_behind_catches_up_and_says_so(tmp_path, count, window, progress, log_lines):
    with js_cluster("natsd", tmp_path) as members:
        late, entry = one_follower_down(members)
        acked = asyncio.run(publish_window(entry.url, count, b"f", window=window))
        assert len(acked) == count
        # back with a disk whose every sync takes a second: the catch-up takes a few
        late = restart_member(late, tmp_path, env=slow_disk_env(tmp_path, 1_000_000))
        members[:] = [late if m.name == late.name else m for m in members]

        def reported():
            code, body = healthz(late)
            texts = [e["error"] for e in body.get("errors") or []]
            return code == 503 and any("is catching up from" in t and progress in t for t in texts) and texts
        texts = poll(reported, timeout=60, interval=0.05)
        assert texts, healthz(late)
        assert "JetStream stream '$G > R3' is not current: stream catching up" in texts
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        assert poll(lambda: healthz(late)[0] == 200, timeout=30), healthz(late)
        for line in log_lines:
            late.proc.wait_log(line, timeout=10)


@pytest.mark.parametrize("seed", fault_seeds([1]))
def test_replica_restarted_with_an_empty_store_rebuilds_everything(tmp_path, seed):
    """kill -9 of a seeded server (the stream's leader or a follower), its store directory
    deleted, more writes, then the server comes back empty: it rejoins the meta group, is given
    the stream again and rebuilds it from the leader's log (past a snapshot: test_compaction.py);
    then another server is killed and the rebuilt one is part of the quorum that carries on."""
    import shutil
    rng = random.Random(seed)
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(rng.choice(members), STREAM))
        leader_of(members)
        lost = rng.choice(members)
        acked = asyncio.run(publish_window(rng.choice(members).url, rng.randrange(100, 400), b"e"))
        kill9(lost)
        shutil.rmtree(str(tmp_path / ("store-" + lost.name)))
        rest = [m for m in members if m is not lost]
        acked.update(asyncio.run(publish_window(rng.choice(rest).url, rng.randrange(1, 300), b"f")))
        back = restart_member(lost, tmp_path)
        members[members.index(lost)] = back
        state = converged(members, max(acked))
        assert state["messages"] >= len(acked)
        other = rng.choice([m for m in members if m is not back])
        kill9(other)
        rest = [m for m in members if m is not other]
        assert leader_of(rest) in rest
        more = asyncio.run(publish_window(back.url, 50, b"g"))
        assert len(more) == 50
        acked.update(more)
        state = converged(rest, max(acked))
        check_acked(leader_of(rest), acked, state)
        stream_elections(members)


def test_replica_behind_by_large_messages_catches_up(tmp_path):
    """A follower that was down while messages of max_payload (1 MiB) were stored catches
    up: an Append carrying one of them is larger than max_payload, and routes take it (as
    nats-server's routes take messages of any size) instead of closing, again and again."""
    big = 1 << 20
    with js_cluster("natsd", tmp_path) as members:
        late, entry = one_follower_down(members)

        async def publish_big():
            nc = await nats.connect(entry.url)
            js = nc.jetstream(timeout=10)
            acks = await asyncio.gather(*(js.publish("r3.big", bytes([65 + i]) * big) for i in range(8)))
            await nc.close()
            return {a.seq: bytes([65 + i]) * big for i, a in enumerate(acks)}
        acked = asyncio.run(publish_big())
        assert len(acked) == 8
        late = restart_member(late, tmp_path)
        members[:] = [late if m.name == late.name else m for m in members]
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)
        for m in members:
            assert "Maximum Payload" not in m.proc.log, m.proc.log
