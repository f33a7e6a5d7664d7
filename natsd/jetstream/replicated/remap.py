"""Changing the servers of a replicated stream (the meta leader decides, natsd/jetstream/replicated/meta.py;
each stream group's leader carries it out, natsd/jetstream/replicated/streams.py). Pure functions of
peer ids and a peerselect.Pool, so the choices are testable and the same on every server.

- remove_peer: `$JS.API.STREAM.PEER.REMOVE` takes one server out and puts another in its place
  (nats-server refuses a removal it cannot replace: JSPeerRemapErr);
- rescale: a `num_replicas` update adds servers or drops members, keeping the stream's current
  leader (which asked) and the earliest members;
- move: a `placement` update gives the stream servers that meet the new placement, keeping
  those of its current ones that do.
New servers are chosen by the stream's placement rules (natsd/jetstream/replicated/peerselect.py).
"""
from natsd.jetstream.engine import errors as E
from natsd.jetstream.replicated.peerselect import meets


def remove_peer(key, peers, peer, pool, placement):
    """-> the new member list with `peer` replaced; raises ApiError."""
    if peer not in peers:
        raise E.error("JSClusterPeerNotMemberErr")
    stay = [p for p in peers if p != peer]
    try:
        spare = pool.without(peer).select(key, len(peers), placement, stay)[-1]
    except E.ApiError:
        raise E.error("JSPeerRemapErr") from None
    return [p if p != peer else spare for p in peers]


def rescale(key, peers, n, pool, placement, keep):
    """-> the member list for `n` replicas; raises ApiError when too few servers are there."""
    if n >= len(peers):
        return pool.select(key, n, placement, peers)
    kept = [keep] if keep in peers else []
    return kept + [p for p in peers if p != keep][:n - len(kept)]


def move(key, peers, pool, placement):
    """-> the member list under a new placement: the current members that meet it (in order),
    then new ones; raises ApiError when the placement cannot be met."""
    by_id = {s.id: s for s in pool.servers}
    meeting = [p for p in peers if p in by_id and meets(by_id[p], placement, pool.rules)]
    return pool.select(key, len(peers), placement, meeting)
