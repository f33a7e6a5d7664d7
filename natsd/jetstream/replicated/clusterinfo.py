"""How one server sees a Raft group (natsd/raft/group.py) it belongs to, as
nats-server's ClusterInfo and MetaClusterInfo show it (`replicas`), and the leader stepdown
that the meta, stream and consumer groups share."""
from natsd.raft.node import NotLeader
from natsd.gofmt import go_time
from natsd.jetstream.engine import errors as E
from natsd.ids import get_hash

CURRENT_LAG = 2.0               # a member heard from within this many seconds can be current


def peer_infos(group, me, names, connected, everyone=False):
    """nats-server's PeerInfo list of a group as server `me` sees it: every member but itself
    (itself too while there is no leader, or with `everyone`: advisories list them all), by
    name; `current` and `lag` as the leader knows them, `offline` for a member without a route
    to this server."""
    out = []
    leader = group.is_leader()
    for p in group.members():
        if p == me and group.leader and not everyone:
            continue
        heard = group.last_heard(p)
        r = {"name": names.get(p, p),
             "current": heard is not None and heard < CURRENT_LAG
             and (p == group.leader or leader and group.match(p) >= group.node.commit)}
        if p != me and p not in connected:
            r["offline"] = True
        r["active"] = int(heard * 1e9) if heard is not None else 0
        # nats-server's Peers(): what a quorum committed that the replica has not persisted
        # (entries not committed yet are no lag: a current replica has none)
        lag = max(group.node.commit - group.match(p), 0) if leader else 0
        if lag:
            r["lag"] = lag
        r["peer"] = p
        out.append(r)
    out.sort(key=lambda r: r["name"])
    return out


def cluster_info(meta, group, group_name):
    """nats-server's ClusterInfo of a stream's or a consumer's group (`meta`: the meta group,
    which knows the servers' names and routes)."""
    names = meta.peer_names
    out = {"name": meta.routes.name, "raft_group": group_name}
    if group.leader:
        out["leader"] = names.get(group.leader, group.leader)
    if group.leader_since is not None and group.is_leader():
        out["leader_since"] = go_time(group.leader_since)
    out["system_account"] = True    # the group's traffic is in the system account
    out["traffic_account"] = meta.server.accounts.system.name
    replicas = peer_infos(group, meta.peer, names, meta.connected)
    if replicas:
        out["replicas"] = replicas
    return out


def step_down(group, me, placement, clusters, transfer=None):
    """Hand leadership to the placement's `preferred` server, or else to the most up-to-date
    member heard from lately (in the placement's cluster); nats-server's errors.
    clusters: peer id -> cluster name; transfer(target): how (group.transfer_leadership)."""
    members = [p for p in group.members() if p != me]
    preferred = placement.get("preferred") or ""
    if preferred:
        target = get_hash(preferred)
        if target == me:
            raise E.error("JSClusterNoPeersErrF", err='preferred server "%s" is already leader' % preferred)
        if target not in members:
            raise E.error("JSClusterNoPeersErrF", err='preferred server "%s" not known' % preferred)
    else:
        cluster = placement.get("cluster") or ""
        live = [p for p in members if (group.last_heard(p) or 1e9) < CURRENT_LAG
                and (not cluster or clusters.get(p) == cluster)]
        if not live:
            raise E.error("JSClusterNoPeersErrF", err="no replacement peer connected")
        target = max(live, key=group.match)
    try:
        (transfer or group.transfer_leadership)(target)
    except (NotLeader, ValueError) as e:
        raise E.error("JSRaftGeneralErrF", err=str(e))
