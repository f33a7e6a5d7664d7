"""Scaling a stream between one replica and several on a cluster: the two conversions of a
replicated stream (natsd/jetstream/replicated/streams.py, `rs` here) and their answers, which
nats-server 2.15 gives at once (the group as it is, and `desired`).

- Up: the one-replica stream's files become its new group's copy on its server, and its state
  (its consumers' included) the group's first snapshot, at entry 1 of term 1; the other
  servers copy from that server, which leads first (they cannot lead before they have it).
  A consumer that now counts the stream's replicas (`num_replicas` 0, but not an ephemeral
  of a limits stream) gets a group of its own, as on nats-server, which starts from the
  state the snapshot has (natsd/jetstream/replicated/consumergroup.py).
- Down: the leader's copy becomes a one-replica stream of its server, with its consumers and
  their committed state; the other servers drop theirs (natsd/jetstream/replicated/meta.py).
- Moved: a one-replica stream whose new placement its server does not meet becomes, the
  same way, a group of its server and one that meets it (the assignment's `origin` says
  `one`: the server to end on and the configuration to end with). Once that server has every
  message the leader hands leadership to it, and it asks the meta group for the scale down
  that keeps it alone. A cancel points `one` back at the server the stream came from.
A memory stream's messages are copied from store to store, as they are not on disk.
"""
import logging
import os
import shutil
import time

from natsd.raft.node import NotLeader
from natsd.raft.wal import seed
from natsd.gofmt import go_time
from natsd.jetstream.engine import advisories, consumerconfig as cc, errors as E, persist, snapshot
from natsd.jetstream.replicated import snapshots as replsnapshot

log = logging.getLogger("natsd")


def adopt(rs, st):
    """A one-replica stream scaled up: its files become this server's copy, and its state
    (with its consumers') the group's first snapshot, at entry 1 of term 1, so that this
    server leads first and the others copy from it."""
    rows = {name: {"created": o.created, "config": cc.to_json(o.cfg), "state": persist.state_of(o)}
            for name, o in st.consumers.items() if rs.consumers.wants(o.cfg, st)}
    for name, row in rows.items():      # those that now count the stream's replicas get
        if rs.consumers.wants_group(st.consumers[name].cfg, st):    # groups, as on nats-server
            row["group"], row["peers"] = rs.consumers.new_group(st.consumers[name].cfg, st)
    data = replsnapshot.take(st, rows)
    shutil.rmtree(rs.dir, ignore_errors=True)
    os.makedirs(rs.dir)
    os.rename(st.dir, rs.local_dir)
    shutil.rmtree(os.path.join(rs.local_dir, "consumers"), ignore_errors=True)
    seed(os.path.join(rs.dir, "raft"), 1, 1, rs.peers, data)
    log.info("JetStream stream '%s > %s' is now replicated on %d servers: its messages here "
             "are the group's first state", rs.jsa.name, st.name, len(rs.peers))


def scale_down_answer(rs, cfg):
    """The answer to an update to one replica, given at once as nats-server gives it: the
    group as it is, the configuration asked, and where the stream comes from."""
    info = rs.stream.info()
    info["config"] = cfg
    info["cluster"]["desired"] = {"created": go_time(time.time_ns()), "name": rs.meta.routes.name,
                                  "origin": {"replicas": len(rs.peers)}}
    return info


def become_one(rs, cfg):
    """Scaled down to one replica, kept here: the group stops, the copy becomes a
    one-replica stream of this server (its files, its consumers with their committed
    state)."""
    jsa, st = rs.jsa, rs.stream
    docs = [{"name": name, "config": row["config"], "created_ns": row["created"], "state": row["state"]}
            for name, row in rs.consumers.committed_rows().items()]
    rs.stop()
    jsa.release_stream(st.name)
    target = jsa.stream_dir(st.name)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(rs.local_dir, target)
    shutil.rmtree(rs.dir, ignore_errors=True)
    one = jsa.add_stream(dict(cfg, num_replicas=1), st.created, recovering=True)
    if not one.file:
        replsnapshot.copy_all(st.store, one.store)      # a memory stream's messages
        one.reread_store()
    one.save_meta()
    snapshot.restore_consumers(one, docs)
    log.info("JetStream stream '%s > %s' has one replica now, on this server", jsa.name, one.name)


MOVE_ASK_AGAIN = 2.0                    # seconds before the server moved to asks the meta group again


def move_one_step(rs, one):
    """On the group's leader, each reconcile step of a one-replica move (or its cancel) once
    the members are the assigned ones: wait until the server the stream ends on has every
    entry, hand leadership to it, and there ask for the scale down that keeps the stream on
    it alone (its copy then has everything the group committed)."""
    g, me = rs.group, rs.meta.peer
    if me != one["to"]:
        if not g.caught_up(one["to"]) or rs.is_copying(one["to"]):
            return
        try:
            rs.transfer_leadership(one["to"])
        except (ValueError, NotLeader):
            pass                        # a change is in flight: the next step tries again
        return
    now = time.monotonic()
    if now - rs.move_asked >= MOVE_ASK_AGAIN:
        rs.move_asked = now
        rs.meta.request("del", rs.jsa, {"name": rs.stream.name, "keep": me, "cfg": one["cfg"]}, None)


def answer_scale_up(rs, assignment):
    """The update that scaled a one-replica stream up, answered as nats-server does: at
    once, by the stream's server, with the stream on it alone and the servers it is going
    to (`desired`, with where it came from)."""
    names = rs.meta.peer_names
    info = rs.stream.info()
    desired, origin = rs.peers, {"replicas": 1}
    one = (assignment.get("origin") or {}).get("one")
    if one is not None:
        # a move: the server it goes to, and the placement it had
        desired = [one["to"]]
        if assignment["origin"].get("placement"):
            origin["placement"] = assignment["origin"]["placement"]
    info["cluster"] = {
        "name": rs.meta.routes.name, "raft_group": rs.group_name, "system_account": True,
        "traffic_account": rs.server.accounts.system.name,
        "replicas": [{"name": rs.meta.name, "current": True, "active": 0, "peer": rs.meta.peer}],
        "desired": {"created": go_time(assignment["created"]), "name": rs.meta.routes.name,
                    "replicas": [{"name": names.get(p, p), "peer": p} for p in desired],
                    "origin": origin}}
    rs.meta.answer(rs.jsa.name, assignment["reply"], assignment.get("via"),
                   E.api_response("stream_update_response", info))
    advisories.stream_action(rs.stream, "modify")
