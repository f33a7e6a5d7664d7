"""Start-up conversion of a nats-server cluster member's JetStream: the replicated streams (and
their consumers) that nats-server's meta group had assigned become natsd's, on each server of
the cluster, before the meta group starts (ClusterLayer.start).

What nats-server left: its Raft groups in `<store_dir>/jetstream/$SYS/_js_/` (`_meta_`, one
`S-R<n>F-…` per stream, one `C-R<n>F-…` per consumer; natsd/jetstream/nsfs/raftdir.py reads
them) and each stream's files where a one-replica stream's are, `<account>/streams/<name>`.

What natsd makes of them, on every server alone (each reads only its own disk):
- its meta group starts from a snapshot at the last index nats-server's knew committed, with
  the same members (peer ids are nats-server's) and one assignment per replicated stream,
  with nats-server's group name, servers and creation time (the one-replica streams are the
  account conversion's, natsd/jetstream/nsfs/convert.py, as on a single server); the entries
  after it keep their places as no-ops (an assignment among them, from a `kill -9` in the
  middle of a create, is logged and not carried over);
- each replicated stream this server holds gets its group directory: its copy, restored
  from the stream's files plus the messages and message deletes of committed log entries
  the store had not written yet (a `kill -9`; any other operation there refuses the
  replica, which then copies the stream from the others), and its Raft storage: a snapshot
  at the index and term of its nats-server group's last entry known committed, naming that
  copy and the stream's consumers (from the meta assignments, each with its own `o.dat`
  state; a consumer of more than one replica keeps its nats-server group name and servers),
  then the entries after it as natsd entries at the same indexes and terms (its messages,
  its message delete, or a no-op), which the next leader commits if it has them, as
  nats-server's would. (The messages of one such entry take its first message's time:
  natsd's entry carries one.)
Servers at different indexes of a group are then brought in line by natsd's Raft as after any
restart: the one with the most of the log leads, a replica behind gets its snapshot and
copies what it lacks. Consumer positions are their `o.dat`s (a consumer's own nats-server
log is not replayed). A one-replica consumer of a replicated stream has its position on the
one server nats-server ran it on: it keeps a group of that one server (natsd's own
one-replica consumers ride in the stream's group).

Steps, each surviving a crash:
1. `_js_` is renamed to `.nats-server-_js_` beside it (nothing copied, nothing of the
   original written);
2. natsd's groups are built in `.natsd-_js_.building` (removed and begun again after a crash)
   and synced, then renamed to `_js_`: from here the conversion is done;
3. the replicated streams' directories and `.nats-server-_js_` move to
   `<store_dir>/nats-server-original/jetstream/…`, where they stay until the operator removes
   them.
A stream that cannot be read is logged with the file at fault and left out of this server's
copies; its group copies it from another replica.
"""
import json
import logging
import os
import shutil
import time

from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine.snapshot import restore_image
from natsd.jetstream.nsfs import convert as nsfs_convert
from natsd.jetstream.nsfs.codec import FormatError
from natsd.jetstream.nsfs.raftdir import ENTRY_NORMAL, RaftDir, is_raft_dir, meta_assignments, stream_log_after
from natsd.jetstream.nsfs.reader import read_stream_dir
from natsd.jetstream.nsfs.writer import fsync_dir
from natsd.jetstream.replicated import snapshots as replsnapshot
from natsd.jetstream.replicated.consumers import replica_count
from natsd.jetstream.replicated.streams import K_OP, encode_batch
from natsd.jetstream.replicated.meta import SNAPSHOT_VERSION
from natsd.raft.messages import NOOP, NORMAL, Entry
from natsd.raft.wal import seed

log = logging.getLogger("natsd")

ASIDE = ".nats-server-_js_"
BUILDING = ".natsd-_js_.building"


def convert(engine, peer):
    """Convert the nats-server cluster state of this server (peer id `peer`), if there is one ->
    False when there is one that could not be converted (left as it was: natsd's meta group
    must not start on it)."""
    sys_dir = os.path.join(engine.store_dir, engine.server.accounts.system.name)
    js_dir = os.path.join(sys_dir, "_js_")
    aside = os.path.join(sys_dir, ASIDE)
    if not os.path.isdir(aside):
        if not is_raft_dir(os.path.join(js_dir, "_meta_")):
            return True
        os.rename(js_dir, aside)
        fsync_dir(sys_dir)
        log.info("Converting the JetStream cluster state nats-server left in %s (its files are kept "
                 "until the conversion is complete)", js_dir)
    elif not os.path.isdir(js_dir):
        log.info("Resuming the conversion of the JetStream cluster state nats-server left in %s", js_dir)
    if not os.path.isdir(js_dir):
        t0 = time.monotonic()
        try:
            streams = _build(engine, peer, aside, os.path.join(sys_dir, BUILDING))
        except (OSError, ValueError, KeyError, TypeError) as e:   # FormatError is a ValueError
            shutil.rmtree(os.path.join(sys_dir, BUILDING), ignore_errors=True)
            os.rename(aside, js_dir)        # back where nats-server keeps it
            fsync_dir(sys_dir)
            log.error("Could not convert nats-server's JetStream cluster state: %s (its files are left as "
                      "they are; JetStream runs without a metadata group until a start converts them)", e)
            return False
        os.rename(os.path.join(sys_dir, BUILDING), js_dir)
        fsync_dir(sys_dir)
        log.info("Converted nats-server's JetStream cluster state: %d replicated streams, %d of them "
                 "here, in %.3fs", len(streams), sum(1 for _k, here in streams if here),
                 time.monotonic() - t0)
    _keep_originals(engine, aside)
    return True


def _build(engine, peer, aside, building):
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    keys = engine.nats_server_keys()
    meta = RaftDir(os.path.join(aside, "_meta_"), "_meta_", keys)
    assignments = []
    converted = []
    for (account, name), sa in sorted(meta_assignments(meta).items()):
        peers = list(sa["group"].get("peers") or ())
        if len(peers) < 2:
            continue                    # one replica: the account's conversion
        jsa = engine.jsas.get(account)
        if jsa is None:
            log.error("  nats-server's replicated stream '%s > %s' is in an account without JetStream "
                      "here: not converted", account, name)
            continue
        try:
            cfg = jsa.nats_server_config(dict(sa["config"]))
        except Exception as e:
            log.error("  nats-server's replicated stream '%s > %s' has a configuration natsd refuses: %s",
                      account, name, e)
            continue
        assignments.append({"op": "add", "acc": account, "cfg": cfg, "peers": peers,
                            "group": sa["group"]["name"], "created": sa["created"], "reply": "", "via": ""})
        here = peer in peers
        if here:
            here = _convert_replica(jsa, sa, cfg, peers, aside, building, keys)
        converted.append(((account, name), here))
    index, term = meta.committed
    data = json.dumps({"v": SNAPSHOT_VERSION, "assignments": assignments}, separators=(",", ":")).encode()
    tail = meta.uncommitted()
    for idx, _t, items in tail:
        if any(etype == ENTRY_NORMAL and data for etype, data in items):
            log.warning("  nats-server's meta entry %d, not known to be committed, is not carried over "
                        "(natsd keeps its place in the log)", idx)
    seed(os.path.join(building, "_meta_"), index, max(term, 1), meta.peers, data,
         [Entry(t, NOOP, b"") for _i, t, _items in tail], meta.term)
    _sync_tree(building)
    return converted


def _convert_replica(jsa, sa, cfg, peers, aside, building, keys):
    """This server's copy of a replicated stream -> whether it was made."""
    name, group = cfg["name"], sa["group"]["name"]
    source = jsa.stream_dir(name)
    t0 = time.monotonic()
    image = None
    try:
        if not nsfs_convert.is_nats_server_stream(source):
            raise FormatError("%s: no nats-server stream there" % source)
        image = read_stream_dir(source, keys.for_account(jsa.name) if keys else None, name)
        rd = RaftDir(os.path.join(aside, group), group, keys)
        index, term, replay, deleted, tail = stream_log_after(rd, image.last_seq)
        _add_unapplied(image, replay, deleted)
        gdir = os.path.join(building, group)
        st = restore_image(jsa, cfg, image, directory=os.path.join(gdir, "copy"))
        try:
            data = replsnapshot.take(st, _consumer_rows(sa, image, st, peers))
            count = st.store.state()["messages"]
        finally:
            jsa.release_stream(name)
        entries = [_log_entry(t, msgs, delete) for _i, t, msgs, delete in tail]
        seed(os.path.join(gdir, "raft"), index, max(term, 1), peers, data, entries, rd.term)
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.error("  Could not convert nats-server's replica of stream '%s > %s': %s (this server copies "
                  "it from the others)", jsa.name, name, e)
        return False
    finally:
        for w in image.warnings if image is not None else ():
            log.warning("  Stream '%s > %s': %s", jsa.name, name, w)
    log.info("  Converted nats-server's replica of stream '%s > %s' (group %s): %s messages, %d log entries "
             "after them in %.3fs", jsa.name, name, group, "{:,}".format(count), len(entries),
             time.monotonic() - t0)
    return True


def _add_unapplied(image, extra, deleted):
    """The image with what its group's log committed after what its store holds: messages
    `extra`, the sequences `deleted` gone."""
    if not extra and not deleted:
        return
    records = image.records

    def with_extra():
        for r in records():
            if r[0] not in deleted:
                yield r
        yield from extra
    image.records = with_extra
    if extra:
        image.last_seq, image.last_ts = extra[-1][0], extra[-1][1]


def _log_entry(term, msgs, delete):
    """A nats-server entry not known committed as natsd's: its messages (one K_BATCH entry,
    at its first message's time), its message delete (a stream operation), or a no-op."""
    if msgs:
        return Entry(term, NORMAL, encode_batch([(m[2], b"", m[3], m[4], None) for m in msgs], msgs[0][1]))
    if delete is not None:
        return Entry(term, NORMAL, bytes([K_OP]) + json.dumps({"op": "msg_delete", "req": delete}).encode())
    return Entry(term, NOOP, b"")


def _consumer_rows(sa, image, st, peers):
    """The stream's consumer table as natsd's snapshot carries it: every consumer the meta
    group assigned, with the state its files here hold."""
    local = {doc["name"]: doc for doc in image.consumers}
    rows = {}
    for name, ca in sorted(sa["consumers"].items()):
        cfg = cc.decode_config(ca["config"])
        if cfg.get("direct"):
            continue                    # a mirror's or source's: not replicated
        doc = local.get(name)
        row = {"created": ca["created"] or (doc or {}).get("created_ns") or 0, "config": cc.to_json(cfg),
               "state": (doc or {}).get("state") or None}
        count = replica_count(cfg, st, len(peers))
        ran_on = list(ca["group"].get("peers") or ())
        if count > 1:
            row["group"] = ca["group"].get("name")
            row["peers"] = ran_on[:count] if len(ran_on) > 1 else peers[:count]
        elif len(ran_on) == 1 and ran_on[0] in peers:
            # nats-server ran it on one server, whose files alone hold its position: it keeps
            # a group of that server (natsd's own one-replica consumers ride in the stream's)
            row["group"], row["peers"] = ca["group"].get("name"), ran_on
        rows[name] = row
    return rows


def _sync_tree(top):
    for d, _dirs, files in os.walk(top, topdown=False):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(d)


def _keep_originals(engine, aside):
    """Step 3: nats-server's files of the replicated streams and its Raft groups move to
    `nats-server-original/`."""
    kept = os.path.join(os.path.dirname(engine.store_dir), nsfs_convert.KEPT, "jetstream")
    keys = engine.nats_server_keys()
    for account in sorted(engine.jsas):
        jsa = engine.jsas[account]
        for name in nsfs_convert.pending(jsa.dir) if jsa.dir else ():
            source = jsa.stream_dir(name)
            if not os.path.isdir(source) or \
                    nsfs_convert.replicas(source, keys.for_account(account) if keys else None) < 2:
                continue
            _move(source, os.path.join(kept, account, "streams", name))
    _move(aside, os.path.join(kept, engine.server.accounts.system.name, "_js_"))


def _move(source, target):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.exists(target):
        target += ".%d" % time.time_ns()
    os.rename(source, target)
    fsync_dir(os.path.dirname(source))
    log.info("  nats-server's %s is kept in %s", os.path.basename(source), target)
