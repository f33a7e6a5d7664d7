"""The `replicas` of nats-server's ClusterInfo and MetaClusterInfo: how one server sees the
members of a Raft group (natsd/cluster/raftgroup.py) it belongs to."""

CURRENT_LAG = 2.0               # a member heard from within this many seconds can be current


def peer_infos(group, me, names, connected):
    """nats-server's PeerInfo list of a group as server `me` sees it: every member but itself
    (itself too while there is no leader), by name; `current` and `lag` as the leader knows
    them, `offline` for a member without a route to this server."""
    out = []
    leader = group.is_leader()
    for p in group.members():
        if p == me and group.leader:
            continue
        heard = group.last_heard(p)
        r = {"name": names.get(p, p),
             "current": heard is not None and heard < CURRENT_LAG
             and (p == group.leader or leader and group.match(p) >= group.node.commit)}
        if p != me and p not in connected:
            r["offline"] = True
        r["active"] = int(heard * 1e9) if heard is not None else 0
        lag = group.node.store.last_index() - group.match(p) if leader else 0
        if lag:
            r["lag"] = lag
        r["peer"] = p
        out.append(r)
    out.sort(key=lambda r: r["name"])
    return out
