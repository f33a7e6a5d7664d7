"""Where a Raft group's fdatasync runs (natsd/raft/group.py `_may_sync_inline`, what the group
offers the loop with each sync): a leader's always on the sync threads; a follower's may run
on the loop thread (the loop still decides: idle, syncs quick), but not when clients or leaf
nodes published on this server since its previous sync, whose messages and PubAcks would
wait out the whole sync. The group is the real RaftGroup and the counters are the server's
real ones; the test records what each sync was offered."""
from types import SimpleNamespace as NS

import pytest

from natsd._core.conn import totals
from natsd.raft.node import FOLLOWER, LEADER
from natsd.raft.group import RaftGroup


@pytest.fixture(autouse=True)
def counters_restored():
    """The counters are this process's; other tests in it see them as they were."""
    kept = totals.in_msgs, totals.route_in_msgs, totals.leaf_in_msgs
    yield
    totals.in_msgs, totals.route_in_msgs, totals.leaf_in_msgs = kept


def group(role):
    g = RaftGroup.__new__(RaftGroup)
    g.node = NS(role=role)
    g.outside_msgs = totals.in_msgs - totals.route_in_msgs
    return g


def test_a_follower_syncs_inline_only_while_no_client_publishes_here():
    g = group(FOLLOWER)
    offers = [g._may_sync_inline()]
    totals.route_in_msgs += 5           # Raft traffic and routed messages do not count
    totals.in_msgs += 5
    offers.append(g._may_sync_inline())
    totals.in_msgs += 1                 # a client's (or a leaf node's) publish does
    offers.append(g._may_sync_inline())
    offers.append(g._may_sync_inline())  # none since the last sync: inline again
    totals.in_msgs += 3
    totals.leaf_in_msgs += 3
    offers.append(g._may_sync_inline())
    assert offers == [True, True, False, True, False]


def test_a_leader_never_syncs_inline():
    g = group(LEADER)
    offers = [g._may_sync_inline()]
    totals.in_msgs += 1
    offers.append(g._may_sync_inline())
    assert offers == [False, False]
