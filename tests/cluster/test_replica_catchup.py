"""A replica on a slow disk (every fsync/fdatasync delayed by an LD_PRELOAD library the test
compiles) and a replica that comes back far behind: the stream keeps acknowledging through the
quorum of fast disks, loses nothing acknowledged, and the slow replica catches up by itself,
reporting its progress in /healthz (nats-server's "stream catching up", then how far) and in
its log until it is current."""
import asyncio
import json
import urllib.error
import urllib.request

import pytest

from tests.cluster.clusterhelp import js_cluster, kill9, restart_member, slow_disk_env
from tests.cluster.test_replicated_streams import (STREAM, check_acked, converged, create, leader_of,
                                                   publish_window)
from tests.conftest import poll


def healthz(m):
    """(status code, body) of /healthz?js-enabled-only=true&details=true."""
    url = "http://127.0.0.1:%d/healthz?js-enabled-only=true&details=true" % m.proc.http_port
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (TimeoutError, urllib.error.URLError):
        return 0, {}                    # a server on a disk this slow may answer late


def test_slow_follower_disk_loses_nothing(tmp_path):
    """One follower syncs 50 ms late: the leader's quorum is the two fast servers, every
    publish is acknowledged, and the slow copy ends up identical."""
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        leader = leader_of(members)
        slow = next(m for m in members if m is not leader)
        kill9(slow)
        slow = restart_member(slow, tmp_path, env=slow_disk_env(tmp_path, 50_000))
        members[:] = [slow if m.name == slow.name else m for m in members]
        entry = next(m for m in members if m is not slow)
        acked = asyncio.run(publish_window(entry.url, 400, b"s", window=32))
        assert len(acked) == 400
        state = converged(members, max(acked))
        check_acked(leader_of(members), acked, state)


@pytest.mark.parametrize("count,progress,log_lines", [
    # behind by fewer entries than a snapshot holds: the leader sends its log
    (6000, "entries", ("is catching up with its leader: applied", "caught up with its leader")),
    # behind the leader's snapshot: the snapshot, then the messages it names, copied
    (10000, "messages its snapshot names", ("copies messages 1-", r"copied \d+ messages from")),
])
def test_replica_far_behind_catches_up_and_says_so(tmp_path, count, progress, log_lines):
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        leader = leader_of(members)
        late = next(m for m in members if m is not leader)
        kill9(late)
        entry = next(m for m in members if m is not late)
        acked = asyncio.run(publish_window(entry.url, count, b"f", window=256))
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


def test_replica_restarted_with_an_empty_store_rebuilds_everything(tmp_path):
    """kill -9 of a follower, its store directory deleted, more writes, then the server comes
    back empty: it rejoins the meta group, is given the stream again and rebuilds it from the
    leader's log (past a snapshot: test_compaction.py); then the old leader is killed and the
    rebuilt server is part of the quorum that carries on."""
    import shutil
    with js_cluster("natsd", tmp_path) as members:
        asyncio.run(create(members[0], STREAM))
        leader = leader_of(members)
        lost = next(m for m in members if m is not leader)
        acked = asyncio.run(publish_window(leader.url, 300, b"e"))
        kill9(lost)
        shutil.rmtree(str(tmp_path / ("store-" + lost.name)))
        acked.update(asyncio.run(publish_window(leader.url, 200, b"f")))
        back = restart_member(lost, tmp_path)
        members[members.index(lost)] = back
        state = converged(members, max(acked))
        assert state["messages"] == 500
        kill9(leader)
        rest = [m for m in members if m is not leader]
        assert leader_of(rest) in rest
        more = asyncio.run(publish_window(back.url, 50, b"g"))
        assert len(more) == 50
        acked.update(more)
        state = converged(rest, max(acked))
        check_acked(leader_of(rest), acked, state)
