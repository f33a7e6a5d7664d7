"""A replicated stream moved to other servers while servers die (natsd/jetstream/replicated/remap.py,
the meta group's "peers" assignments, ReplicatedStream._reconcile): a placement update moves
an R3 stream from A, B, C to B, C, D during windowed publishing, and kill -9 takes one server
at a seeded point: the stream's leader, a follower that stays, the server that joins (D) or
the one that leaves (A). The victim comes back; the move finishes on B, C, D with every
acknowledged message there once, at its PubAck's sequence, and A keeps no copy."""
import asyncio
import json
import random
import signal

import pytest

from tests.cluster.test_placement import cfg, first_create, servers_of
from tests.cluster.test_replicated_streams import (api, check_acked, converged, leader_of, local_state,
                                                   publish_window, stream_elections)
from tests.support.cluster import fault_seeds, js_cluster, restart_member
from tests.support.waiting import poll

TAGS = {"A": ["old"], "B": ["old", "new"], "C": ["old", "new"], "D": ["new"]}
VICTIMS = ("leader", "staying", "joining", "leaving")


def tagged(name):
    return "server_tags: [%s]" % ", ".join('"%s"' % t for t in TAGS[name])


CASES = [(v, s) for s in fault_seeds([1]) for v in VICTIMS]


@pytest.mark.parametrize("victim,seed", CASES, ids=["%s-%d" % c for c in CASES])
def test_move_with_a_server_killed_loses_no_acked_message(tmp_path, victim, seed):
    rng = random.Random("%s-%d" % (victim, seed))
    with js_cluster("natsd", tmp_path, names="ABCD", extra=tagged) as members:
        by = {m.name: m for m in members}
        first_create(by["B"], cfg("R3", ["old"], replicas=3, subjects=["r3.>"]))
        leader = leader_of(members)
        acked = asyncio.run(publish_window(by["B"].url, 100, b"before"))
        if victim == "leader":
            dead = leader
        elif victim == "staying":
            dead = by[rng.choice([n for n in "BC" if n != leader.name])]
        else:
            dead = by["D" if victim == "joining" else "A"]
        alive = [m for m in members if m is not dead]
        entry = by["C"] if dead is not by["C"] else by["B"]
        r = asyncio.run(api(entry, "$JS.API.STREAM.UPDATE.R3",
                            json.dumps(cfg("R3", ["new"], replicas=3, subjects=["r3.>"])).encode()))
        assert r.get("config", {}).get("placement") == {"tags": ["new"]}, r
        kill_at = rng.randrange(0, 200)

        def progress(i):
            if i == kill_at:
                dead.proc.proc.send_signal(signal.SIGKILL)
        acked.update(asyncio.run(publish_window(entry.url, 300, b"during", on_progress=progress)))
        dead.proc.proc.wait(5)
        # the survivors hold a quorum of every membership the move passes through: the
        # stream has a leader among them (a publish while it has none gets no responders,
        # as on nats-server)
        assert leader_of(alive) in alive
        members[members.index(dead)] = restart_member(dead, tmp_path, tagged(dead.name))
        by = {m.name: m for m in members}
        more = asyncio.run(publish_window(entry.url, 50, b"after"))
        assert len(more) == 50, "the stream did not take writes again: %d of 50 acked" % len(more)
        acked.update(more)

        def moved():
            try:
                info = asyncio.run(api(by["A"], "$JS.API.STREAM.INFO.R3"))
            except Exception:
                return False
            return servers_of(info) == {"B", "C", "D"} and "desired" not in info.get("cluster", {})
        assert poll(moved, timeout=40, interval=0.25), asyncio.run(api(by["B"], "$JS.API.STREAM.INFO.R3"))
        assert poll(lambda: local_state(by["A"]) is None, timeout=20), "the server left keeps a copy"
        new = [by[n] for n in "BCD"]
        state = converged(new, max(acked))
        check_acked(leader_of(new), acked, state)
        assert state["messages"] == len(acked)
        stream_elections(members)
