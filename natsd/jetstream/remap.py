"""Changing the servers of a replicated stream (the meta leader decides, natsd/jetstream/meta.py;
each stream group's leader carries it out, natsd/jetstream/replicated.py). Pure functions of
peer ids, so the choices are easy to test and the same on every server.

- remove_peer: `$JS.API.STREAM.PEER.REMOVE` takes one server out and puts a spare one in its
  place (nats-server refuses a removal it cannot replace: JSPeerRemapErr).
- rescale: a `num_replicas` update adds spare servers or drops members, keeping the stream's
  current leader (which asked) and the earliest members.

A spare is a connected JetStream server that is not a member; they are taken in a rotation by
the stream's name, as placement does for a new stream.
"""
import zlib

from natsd.jetstream import errors as E


def spares(key, peers, candidates):
    """The candidates that are not members, rotated by the stream's (account, name)."""
    out = sorted(p for p in candidates if p not in peers)
    if out:
        k = zlib.crc32(("%s.%s" % key).encode()) % len(out)
        out = out[k:] + out[:k]
    return out


def remove_peer(key, peers, peer, candidates):
    """-> the new member list with `peer` replaced; raises ApiError."""
    if peer not in peers:
        raise E.error("JSClusterPeerNotMemberErr")
    spare = spares(key, peers, candidates)
    if not spare:
        raise E.error("JSPeerRemapErr")
    return [p if p != peer else spare[0] for p in peers]


def rescale(key, peers, n, candidates, keep):
    """-> the member list for `n` replicas; raises ApiError when too few servers are there."""
    if n >= len(peers):
        spare = spares(key, peers, candidates)
        if len(spare) < n - len(peers):
            raise E.error("JSClusterNoPeersErrF", err="no suitable peers for placement")
        return list(peers) + spare[:n - len(peers)]
    kept = [keep] if keep in peers else []
    return kept + [p for p in peers if p != keep][:n - len(kept)]
