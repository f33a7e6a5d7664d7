"""Raft (natsd/raft/node.py) in the deterministic world of tests/support/raftsim.py: elections,
replication, commit on a quorum of durable copies, snapshots, membership changes, leader
transfer, and the faults of the clustering issue (kill -9 of the leader, of a follower, of all
servers at once, partitions with clients on both sides, a server back with an empty disk, a slow
disk, a lossy network), each under load and repeated with 20 seeds. After each: every
acknowledged command is applied exactly once, at its index, on every server; no term had two
leaders; the group takes writes again soon after a quorum is back."""
import pytest

from natsd.raft import node as raft, messages as raftmsg
from natsd.raft.node import MAX_APPEND_BYTES, NotLeader
from tests.support.raftsim import World

SEEDS = range(20)
ET = (0.3, 0.6)
SLOW = (0.002, 0.01)        # disk sync latency in the kill tests: many entries are in flight


def elect(w, timeout=5.0):
    t0 = w.now
    while w.leader() is None:
        assert w.now - t0 < timeout, "seed %d: no leader after %.1fs" % (w.seed, timeout)
        w.run(0.01)
    return w.leader()


def writes_again_within(w, limit):
    """The time until a new command is acknowledged; fails past `limit` seconds."""
    t0 = w.now
    while True:
        before = len(w.acked)
        w.propose()
        w.run(0.02)
        if len(w.acked) > before:
            return w.now - t0
        assert w.now - t0 < limit, "seed %d: no write accepted within %.1fs" % (w.seed, limit)


def finish(w):
    w.settle()
    w.check_acked()
    assert w.acked, "seed %d: nothing was acknowledged" % w.seed


def test_codec_round_trip_and_malformed():
    msgs = [raftmsg.VoteRequest(3, "a", 10, 2, True, False),
            raftmsg.VoteResponse(3, "b", True, True),
            raftmsg.Append(4, "a", 9, 2, (raftmsg.Entry(4, raftmsg.NORMAL, b"x" * 300),
                                          raftmsg.Entry(4, raftmsg.CONFIG, b"a\nb")), 8),
            raftmsg.AppendResponse(4, "c", False, 0, 7),
            raftmsg.Snapshot(5, "a", 100, 4, ("a", "b", "c"), b"state"),
            raftmsg.SnapshotResponse(5, "b", 100), raftmsg.TimeoutNow(6, "a")]
    for m in msgs:
        data = raftmsg.encode(m)
        assert raftmsg.decode(data) == m
        for cut in (1, len(data) // 2, len(data) - 1):
            with pytest.raises(raftmsg.MalformedMessage):
                raftmsg.decode(data[:cut])
        with pytest.raises(raftmsg.MalformedMessage):
            raftmsg.decode(data + b"\0")
    with pytest.raises(raftmsg.MalformedMessage):
        raftmsg.decode(b"\x09" + bytes(10))


def test_a_catch_up_is_sent_in_appends_of_at_most_max_append_bytes(monkeypatch):
    """A follower back after ten entries of a third of MAX_APPEND_BYTES each gets them in
    Appends that stay within MAX_APPEND_BYTES (a route carries each as one message), and
    applies all ten."""
    w = World(3, seed=4)
    lead = elect(w)
    late = next(s for s in w.ids if s != lead)
    w.kill(late)
    big = b"x" * (MAX_APPEND_BYTES // 3)
    for i in range(10):
        w.nodes[lead].propose(b"c%d-" % i + big, w.now)
        w._flush(lead)
    w.run(0.5)
    sent = []
    encode = raftmsg.encode

    def counting(msg, blobs=None):
        if type(msg) is raftmsg.Append and msg.entries:
            sent.append(sum(len(e.data) for e in msg.entries))
        return encode(msg, blobs)
    monkeypatch.setattr(raftmsg, "encode", counting)
    w.restart(late)
    w.run(2.0)
    assert len([c for _, c in w.applied[late] if c.startswith("c")]) == 10
    assert sent and max(sent) <= MAX_APPEND_BYTES, sent


@pytest.mark.parametrize("n", [1, 3, 5])
def test_elects_one_leader_and_replicates(n):
    w = World(n, seed=1)
    lead = elect(w)
    for _ in range(50):
        assert w.propose(lead)
    w.run(0.5)
    finish(w)
    assert len(w.acked) == 50
    follower = next((s for s in w.ids if s != lead), None)
    if follower:
        with pytest.raises(NotLeader):
            w.nodes[follower].propose(b"x", w.now)


def test_a_follower_acknowledges_only_what_is_on_its_disk():
    """With both followers' disks stalled, the leader commits nothing (its own copy is one of
    three); once one follower's disk answers, the entries commit."""
    w = World(3, seed=2)
    lead = elect(w)
    w.run(0.2)
    base = w.nodes[lead].commit
    for s in w.ids:
        if s != lead:
            w.slow_disk(s, 1000.0)
    for _ in range(5):
        w.propose(lead)
    w.run(0.5)
    assert w.nodes[lead].commit == base
    slow = [s for s in w.ids if s != lead]
    w.disk[slow[0]] = (0.0001, 0.0002)
    w.kill(slow[0])                      # its stalled sync is lost with it: a restart re-syncs
    w.restart(slow[0])
    w.run(1.0)
    assert w.nodes[lead].commit >= base + 5


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_the_leader_under_load(seed):
    w = World(3, seed, disk=SLOW)
    elect(w)
    w.run(0.5, load=200)
    w.kill(w.leader())
    took = writes_again_within(w, 3 * ET[1] + 1.0)
    assert took < 3 * ET[1] + 1.0
    w.run(0.5, load=200)
    finish(w)


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_a_follower_then_all_at_once(seed):
    w = World(3, seed, disk=SLOW)
    lead = elect(w)
    w.run(0.3, load=200)
    w.kill(next(s for s in w.ids if s != lead))
    w.run(0.5, load=200)
    for s in w.ids:
        w.kill(s)
    for s in w.ids:
        w.restart(s)
    elect(w)
    w.run(0.5, load=200)
    finish(w)


@pytest.mark.parametrize("seed", SEEDS)
def test_partition_with_clients_on_both_sides(seed):
    w = World(5, seed)
    old = elect(w)
    w.run(0.3, load=200)
    minority = [old, next(s for s in w.ids if s != old)]
    w.partition(minority)
    t0 = w.now
    while w.now - t0 < 2.0:             # clients keep writing to the old leader too
        w.propose(old)
        w.run(0.01, load=100)
    with pytest.raises(NotLeader):      # check quorum: the cut-off leader stepped down
        w.nodes[old].propose(b"late", w.now)
    stale = [c for c, p in w.proposals.items() if p[0] == old and p[1] == w.nodes[old].term]
    w.heal()
    writes_again_within(w, 3 * ET[1] + 1.0)
    finish(w)
    assert not any(c in w.acked for c in stale[-50:]), "minority leader acknowledged writes"


@pytest.mark.parametrize("snapshots", [True, False])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_server_back_with_an_empty_disk_catches_up(seed, snapshots):
    """With snapshots the leader sends one; without, it must notice that entries the server
    acknowledged are gone and send them again (a memory stream's group never compacts)."""
    w = World(3, seed, snapshot_every=40) if snapshots else World(3, seed)
    lead = elect(w)
    w.run(0.5, load=300)
    victim = next(s for s in w.ids if s != lead)
    w.wipe_and_restart(victim)
    w.run(0.5, load=300)
    finish(w)
    assert w.nodes[victim].members == tuple(w.ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_slow_disk_and_lossy_network(seed):
    w = World(3, seed, drop=0.05, delay=(0.0005, 0.02))
    lead = elect(w, timeout=10)
    w.slow_disk(lead, 0.05)
    w.run(1.0, load=100)
    w.slow_disk(lead, 0.0002)
    w.kill(w.leader() or lead)
    w.run(1.0, load=100)
    finish(w)


def test_membership_changes_and_leader_transfer():
    w = World(4, seed=5)
    # s3 starts outside the group: the group is s0..s2
    for s in w.ids:
        w.kill(s)
        w.stores[s] = w.new_storage(s)
    w.ids = ["s0", "s1", "s2", "s3"]
    for s in ["s0", "s1", "s2"]:
        w._boot(s, ("s0", "s1", "s2"))
    w._boot("s3", None)
    lead = elect(w)
    w.run(0.3, load=100)
    w.nodes[lead].add_member("s3", w.now)
    w.run(0.5, load=100)
    assert all(w.nodes[s].members == ("s0", "s1", "s2", "s3") for s in w.ids)
    target = next(s for s in w.ids if s != lead)
    w.nodes[lead].transfer_leadership(target, w.now)
    w.run(0.5)
    assert w.leader() == target
    w.nodes[target].remove_member(lead, w.now)
    w.run(1.0, load=100)
    assert lead not in w.nodes[target].members
    w.kill(lead)
    w.ids.remove(lead)
    w.incarnation.pop(lead)
    w.run(0.5, load=100)
    finish(w)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_new_member_joins_with_the_log_and_the_leader_can_die_at_once(seed):
    """A server added to a group of three first gets the log as a learner (not counted, no
    vote asked); it joins once it has it. Then the leader adds it and dies before the new
    member hears of the change (their link is cut): the two old followers need its vote
    (three of four), and it gives it, since it holds the log."""
    w = World(4, seed=seed)
    for s in w.ids:
        w.kill(s)
        w.stores[s] = w.new_storage(s)
    for s in ["s0", "s1", "s2"]:
        w._boot(s, ("s0", "s1", "s2"))
    w._boot("s3", None)
    lead = elect(w)
    w.run(0.3, load=100)
    node = w.nodes[lead]
    node.add_learner("s3", w.now)
    w.run(0.3, load=100)
    assert node.members == ("s0", "s1", "s2") and w.nodes["s3"].members == ("s0", "s1", "s2")
    assert node.match_index["s3"] >= node.commit - 10, "the learner did not get the log"
    assert node.role == "leader" and w.nodes["s3"].role == "follower"
    w.cut = {frozenset((lead, "s3"))}
    node.add_member("s3", w.now)
    w._flush(lead)
    w.run(0.2, load=100)
    assert "s3" in node.members and node.commit >= node.config_index, "the change did not commit"
    assert "s3" not in w.nodes["s3"].members
    w.kill(lead)
    w.ids.remove(lead)
    w.incarnation.pop(lead)
    w.heal()
    writes_again_within(w, 5.0)
    w.run(0.5, load=100)
    assert "s3" in w.nodes["s3"].members
    finish(w)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_member_that_is_not_electable_never_leads(seed):
    """A member still copying what a snapshot names (electable False) votes and acknowledges
    but neither campaigns nor takes a leader transfer (the leader then steps down anyway, as
    nats-server's does); the other two carry the group."""
    w = World(3, seed)
    lead = elect(w)
    copying = next(s for s in w.ids if s != lead)
    w.nodes[copying].electable = False
    w.run(0.3, load=100)
    assert w.leader() == lead
    term = w.nodes[lead].term
    w.nodes[lead].transfer_leadership(copying, w.now)
    w.run(1.5)
    assert w.leader() not in (None, copying)
    # the transfer could not happen: the leader stepped down all the same, and was elected anew
    assert w.nodes[w.leader()].term > term
    w.kill(w.leader())
    w.run(2.0, load=100)
    assert w.leader() not in (None, copying)
    w.restart(lead)
    w.nodes[copying].electable = True
    finish(w)


def test_stale_and_malformed_messages_are_ignored():
    """A message from an old term changes nothing; garbage is refused by the codec."""
    w = World(3, seed=9)
    lead = elect(w)
    w.run(0.2, load=100)
    node = w.nodes[next(s for s in w.ids if s != lead)]
    before = (node.term, node.commit, node.store.last_index())
    node.step(raftmsg.Append(node.term - 1, "s9", node.store.last_index(), 0,
                             (raftmsg.Entry(0, raftmsg.NORMAL, b"evil"),), 10 ** 6), w.now)
    node.step(raftmsg.VoteRequest(node.term - 1, "s9", 10 ** 6, 10 ** 6), w.now)
    assert (node.term, node.commit, node.store.last_index()) == before
    assert all(m.term >= node.term and not getattr(m, "granted", False) and not getattr(m, "success", False)
               for _, m in node.outbox)
    node.outbox.clear()
    finish(w)


@pytest.mark.parametrize("seed", range(5))
def test_what_a_slow_follower_has_not_acknowledged_stays_within_max_inflight_bytes(monkeypatch, seed):
    """A follower whose disk is slow acknowledges late, while the leader keeps taking large
    entries (the other follower makes the quorum): the bytes sent to it and not yet
    acknowledged (or refused, after which the leader starts again) stay within
    MAX_INFLIGHT_BYTES plus one Append, and once its disk is fast again it has every entry."""
    cap = 2 << 20
    monkeypatch.setattr(raft, "MAX_INFLIGHT_BYTES", cap)
    w = World(3, seed=seed)
    lead = elect(w)
    slow = next(s for s in w.ids if s != lead)
    w.slow_disk(slow, 0.3)
    sent, acked, worst = [], [0], [0]
    flush = w._flush

    def watching(sid):
        for dst, msg in w.nodes[sid].outbox:
            if sid == lead and dst == slow and type(msg) is raftmsg.Append and msg.entries:
                sent.append((msg.prev_index + len(msg.entries), sum(len(e.data) for e in msg.entries)))
            if sid == slow and type(msg) is raftmsg.AppendResponse:
                if msg.success:
                    acked[0] = max(acked[0], msg.match_index)
                else:               # (the simulator reorders): the leader sends it all again
                    sent.clear()
        worst[0] = max(worst[0], sum(n for hi, n in sent if hi > acked[0]))
        flush(sid)
    monkeypatch.setattr(w, "_flush", watching)
    big = b"x" * (200 << 10)
    for i in range(60):
        w.nodes[lead].propose(b"c%d-" % i + big, w.now)
        w._flush(lead)
        w.run(0.01)
    assert w.leader() == lead
    w.disk[slow] = (0.0001, 0.0003)
    w.run(3.0)
    assert len([c for _, c in w.applied[slow] if c.startswith("c")]) == 60
    assert sent and worst[0] <= cap + MAX_APPEND_BYTES, worst[0]


@pytest.mark.parametrize("seed", SEEDS[:5])
def test_an_observer_applies_the_log_without_a_vote(seed):
    """A group of two members and an observer (Node.observe: a consumer group with fewer
    replicas than its stream): the observer applies every committed command, is not counted
    (with it dead the two commit; with one member dead nothing commits), and never leads,
    even with no leader; a leader elected later observes it again and it catches up."""
    w = World(3, seed=seed)
    for s in w.ids:
        w.kill(s)
        w.stores[s] = w.new_storage(s)
    for s in ["s0", "s1"]:
        w._boot(s, ("s0", "s1"))
    w._boot("s2", None)
    lead = elect(w)
    w.nodes[lead].observe(["s2"], ["s0", "s1", "s2"], w.now)
    w.run(0.5, load=100)
    assert w.applied["s2"] and w.applied["s2"][-1][0] >= w.nodes[lead].commit - 20, "the observer is behind"
    w.kill("s2")
    writes_again_within(w, 1.0)                 # not counted: the two members commit
    w.restart("s2")
    other = next(s for s in ("s0", "s1") if s != lead)
    w.kill(lead)
    w.run(2.0, load=100)
    before = len(w.acked)
    w.run(1.0, load=100)
    assert len(w.acked) == before, "one of two members committed alone"
    assert w.leader() is None and w.nodes["s2"].role != "leader"
    w.restart(lead)
    lead = elect(w)
    assert lead != "s2" and w.nodes["s2"].members == ("s0", "s1")
    w.nodes[lead].observe(["s2"], ["s0", "s1", "s2"], w.now)
    writes_again_within(w, 5.0)
    w.run(1.0, load=100)
    w.run(0.5)
    assert w.applied["s2"] == w.applied[lead] == w.applied[other], "seed %d: the observer differs" % seed
    w.check_acked()
