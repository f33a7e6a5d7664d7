"""A nats-server Raft group's directory (`<store_dir>/jetstream/$SYS/_js_/<group>/`) as data: the
members (`peers.idx`), the term (`tav.idx`), the last snapshot (`snapshots/snap.<term>.<index>`,
its HighwayHash checked under the SHA-256 of the group's name) and the log entries after it
(the WAL is a nats-server file store in `msgs/`, one append entry per message, its sequence
the entry's index). Also the meta group's state built from them: the stream and consumer
assignments nats-server's meta layer had committed.

Layouts as nats-server 2.15's raft.go and jetstream_cluster.go write them:
- an append entry: leader id (8), term, commit, previous term, previous index (u64 LE each),
  the entry count (u16), then per entry its length (u32, the type byte included), its type
  and its data;
- a snapshot file: last term, last index (u64), the peer state's length (u32), the peer state,
  the state machine's data, the 8-byte hash of everything before it;
- a peer state: cluster size and peer count (u32 each), 8 bytes per peer, an extension (u16);
- `commit.idx` (2.15): the commit index (u64) and its hash, as the snapshot's;
- the meta snapshot's data: S2 block of the JSON array of stream assignments (consumers inside).
"""
import hashlib
import json
import os
import re
import struct

from natsd._core.highway import highway64
from natsd._core.s2 import decompress_block
from natsd.jetstream.engine.consumerconfig import parse_time
from natsd.jetstream.nsfs.codec import FormatError
from natsd.jetstream.nsfs.reader import read_stream_dir

ENTRY_NORMAL = 0
_AE_HEAD = struct.Struct("<8sQQQQH")    # leader, term, commit, pterm, pindex, entries
_SNAP_HEAD = struct.Struct("<QQI")      # last term, last index, len(peer state)
_SNAP_NAME = re.compile(r"^snap\.(\d+)\.(\d+)$")

# nats-server's entry ops (jetstream_cluster.go's entryOp) that natsd reads
OP_ASSIGN_STREAM, OP_ASSIGN_CONSUMER, OP_REMOVE_STREAM, OP_REMOVE_CONSUMER = 0, 1, 2, 3
OP_STREAM_MSG = 4
OP_DELETE_MSG = 6
OP_ASSIGN_COMPRESSED_CONSUMER = 9
OP_UPDATE_STREAM = 11
OP_COMPRESSED_STREAM_MSG = 14


def is_raft_dir(path):
    """Whether `path` is a Raft group directory nats-server wrote (not natsd's)."""
    return os.path.isfile(os.path.join(path, "tav.idx")) or os.path.isfile(os.path.join(path, "peers.idx"))


def decode_peer_state(buf, where):
    if len(buf) < 8:
        raise FormatError("%s: peer state too short" % where)
    size, count = struct.unpack_from("<II", buf)
    if len(buf) < 8 + 8 * count:
        raise FormatError("%s: peer state names %d peers, holds fewer" % (where, count))
    return size, [buf[8 + 8 * i:16 + 8 * i].decode() for i in range(count)]


def decode_append_entry(buf, where):
    """(term, commit, [(type, data)]) of one WAL record."""
    if len(buf) < _AE_HEAD.size:
        raise FormatError("%s: append entry too short" % where)
    _leader, term, commit, _pterm, _pindex, n = _AE_HEAD.unpack_from(buf)
    i, out = _AE_HEAD.size, []
    for _ in range(n):
        if i + 4 > len(buf):
            raise FormatError("%s: append entry cut short" % where)
        (ln,) = struct.unpack_from("<I", buf, i)
        i += 4
        if ln == 0 or i + ln > len(buf):
            raise FormatError("%s: append entry cut short" % where)
        out.append((buf[i], bytes(buf[i + 1:i + ln])))
        i += ln
    return term, commit, out


class RaftDir:
    """What one node of a nats-server Raft group left on disk."""

    def __init__(self, path, group=None, keys=None):
        """keys: the crypt.StoreKeys of nats-server's `jetstream { key }` (None: plaintext); a
        group's files are sealed under its name where a stream's are under its account's."""
        self.path = path
        self.group = group or os.path.basename(os.path.normpath(path))
        self.cluster_size, self.peers = 0, []
        peers = os.path.join(path, "peers.idx")
        if os.path.exists(peers):
            with open(peers, "rb") as f:
                self.cluster_size, self.peers = decode_peer_state(f.read(), peers)
        self.term = 0
        tav = os.path.join(path, "tav.idx")
        if os.path.exists(tav):
            with open(tav, "rb") as f:
                raw = f.read()
            if len(raw) >= 8:
                self.term = struct.unpack_from("<Q", raw)[0]
        self.snap_term, self.snap_index, self.snap_data = 0, 0, b""
        self._read_snapshot()
        # [(index, term, commit, [(type, data)])] after the snapshot
        self.entries = []
        if os.path.isdir(os.path.join(path, "msgs")):
            image = read_stream_dir(path, keys.for_account(self.group) if keys else None, self.group)
            for seq, _ts, _subj, _hdr, data in image.records():
                if seq > self.snap_index:
                    where = "%s entry %d" % (os.path.join(path, "msgs"), seq)
                    self.entries.append((seq,) + decode_append_entry(data, where))
        self.commit = max([self.snap_index, self._read_commit()] + [c for _i, _t, c, _e in self.entries])

    def _read_commit(self):
        path = os.path.join(self.path, "commit.idx")
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return 0
        if len(raw) != 16 or highway64(hashlib.sha256(self.group.encode()).digest(), raw[:8]) != raw[8:]:
            raise FormatError("%s: not a commit index (or its checksum does not match)" % path)
        return struct.unpack_from("<Q", raw)[0]

    def _read_snapshot(self):
        sdir = os.path.join(self.path, "snapshots")
        names = [(int(m.group(2)), int(m.group(1)), n) for n in (os.listdir(sdir) if os.path.isdir(sdir) else ())
                 for m in [_SNAP_NAME.match(n)] if m]
        if not names:
            return
        index, term, name = max(names)
        path = os.path.join(sdir, name)
        with open(path, "rb") as f:
            buf = f.read()
        if len(buf) < _SNAP_HEAD.size + 8:
            raise FormatError("%s: snapshot too short" % path)
        key = hashlib.sha256(self.group.encode()).digest()
        if highway64(key, buf[:-8]) != buf[-8:]:
            raise FormatError("%s: snapshot checksum does not match" % path)
        self.snap_term, self.snap_index, lps = _SNAP_HEAD.unpack_from(buf)
        if (self.snap_term, self.snap_index) != (term, index):
            raise FormatError("%s: holds term %d index %d" % (path, self.snap_term, self.snap_index))
        self.snap_data = buf[_SNAP_HEAD.size + lps:-8]

    @property
    def committed(self):
        """(index, term) of the last entry this node has that it knows committed."""
        index, term = self.snap_index, self.snap_term
        for idx, eterm, _c, _items in self.entries:
            if idx > self.commit:
                break
            index, term = idx, eterm
        return index, term

    def uncommitted(self):
        """[(index, term, [(type, data)])] after `committed`: entries a new leader commits if it
        has them."""
        return [(idx, eterm, items) for idx, eterm, _c, items in self.entries if idx > self.commit]

    def normal_entries(self, committed_only=True):
        """(index, data) of the state machine's entries after the snapshot."""
        for index, _term, _commit, items in self.entries:
            if committed_only and index > self.commit:
                break
            for etype, data in items:
                if etype == ENTRY_NORMAL:
                    yield index, data


# ---- the meta group: assignments ----

def _ns(value):
    try:
        return parse_time(value)
    except (TypeError, ValueError):
        return 0


def _stream(doc):
    return {"account": (doc.get("client") or {}).get("acc") or "$G", "created": _ns(doc.get("created")),
            "config": doc.get("stream") or {}, "group": doc.get("group") or {}, "consumers": {}}


def _consumer(doc):
    return {"name": doc.get("name"), "stream": doc.get("stream"), "created": _ns(doc.get("created")),
            "config": doc.get("consumer") or {}, "group": doc.get("group") or {}}


def meta_assignments(rd):
    """{(account, stream): {account, created, config, group {name, peers}, consumers {name: {...}}}}
    as of the meta group's snapshot and its committed entries after it."""
    out = {}
    where = rd.path
    if rd.snap_data:
        try:
            docs = json.loads(decompress_block(bytes(rd.snap_data)))
        except ValueError as e:
            raise FormatError("%s: meta snapshot does not decode: %s" % (where, e))
        for doc in docs or ():
            sa = _stream(doc)
            for c in doc.get("Consumers") or ():
                ca = _consumer(c)
                ca["stream"] = ca["stream"] or sa["config"].get("name")
                sa["consumers"][ca["name"]] = ca
            out[(sa["account"], sa["config"].get("name"))] = sa
    for index, data in rd.normal_entries():
        if not data:
            continue
        op, body = data[0], data[1:]
        try:
            if op == OP_ASSIGN_COMPRESSED_CONSUMER:
                op, body = OP_ASSIGN_CONSUMER, decompress_block(bytes(body))
            if op not in (OP_ASSIGN_STREAM, OP_UPDATE_STREAM, OP_REMOVE_STREAM,
                          OP_ASSIGN_CONSUMER, OP_REMOVE_CONSUMER):
                continue
            doc = json.loads(body)
        except ValueError as e:
            raise FormatError("%s: meta entry %d does not decode: %s" % (where, index, e))
        if op in (OP_ASSIGN_STREAM, OP_UPDATE_STREAM, OP_REMOVE_STREAM):
            sa = _stream(doc)
            key = (sa["account"], sa["config"].get("name"))
            if op == OP_REMOVE_STREAM:
                out.pop(key, None)
            elif op == OP_UPDATE_STREAM and key in out:
                out[key].update(config=sa["config"], group=sa["group"] or out[key]["group"])
            else:
                out[key] = sa
        else:
            ca = _consumer(doc)
            sa = out.get(((doc.get("client") or {}).get("acc") or "$G", ca["stream"]))
            if sa is None:
                continue
            if op == OP_REMOVE_CONSUMER:
                sa["consumers"].pop(ca["name"], None)
            else:
                sa["consumers"][ca["name"]] = ca
    return out


# ---- a stream group: the messages its log holds beyond the store ----

def decode_stream_msg(buf, where):
    """(lseq, ts, subject, reply, hdr or None, msg) of a streamMsgOp's body."""
    try:
        lseq, ts, sl = struct.unpack_from("<QqH", buf)
        i = 18
        subject = bytes(buf[i:i + sl])
        i += sl
        (rl,) = struct.unpack_from("<H", buf, i)
        reply = bytes(buf[i + 2:i + 2 + rl])
        i += 2 + rl
        (hl,) = struct.unpack_from("<H", buf, i)
        hdr = bytes(buf[i + 2:i + 2 + hl]) or None
        i += 2 + hl
        (ml,) = struct.unpack_from("<I", buf, i)
        i += 4
        if i + ml > len(buf) or len(subject) != sl:
            raise struct.error("cut short")
        return lseq, ts, subject, reply, hdr, bytes(buf[i:i + ml])
    except struct.error as e:
        raise FormatError("%s: stream message does not decode (%s)" % (where, e))


def stream_log_after(rd, last_seq):
    """How a stream group's log goes on from a store whose last sequence is `last_seq` ->
    (index, term, replay, deleted, tail):
    - the store holds what the entries up to `index` (of `term`) made once `replay`'s messages
      are added and the sequences in `deleted` removed: committed entries the store had not
      written yet (a `kill -9`; a delete is the same whether the store had it or not);
    - `tail` [(index, term, messages, delete)]: the entries after the last one known committed,
      which a new leader commits if it has them: they stay log entries (`messages` may be
      empty; `delete` is None or a message delete's {"seq", "no_erase"}).
    Messages are (seq, ts, subject, hdr or None, msg). FormatError for any other operation
    after the group's snapshot (natsd cannot tell whether the store has it), an entry of
    messages and a delete together, or a gap."""
    index, term = rd.snap_index, rd.snap_term
    replay, deleted, tail = [], set(), []
    for idx, eterm, _commit, items in rd.entries:
        where = "%s entry %d" % (os.path.join(rd.path, "msgs"), idx)
        msgs, deletes = [], []
        for etype, data in items:
            if etype != ENTRY_NORMAL or not data:
                continue
            op, body = data[0], data[1:]
            if op == OP_COMPRESSED_STREAM_MSG:
                op, body = OP_STREAM_MSG, decompress_block(bytes(body))
            if op == OP_DELETE_MSG:
                deletes.append(_decode_delete(body, where))
                continue
            if op != OP_STREAM_MSG:
                raise FormatError("%s: an operation (%d) after the group's last snapshot; start nats-server "
                                  "on this directory once and stop it cleanly, then natsd" % (where, op))
            lseq, ts, subject, _reply, hdr, msg = decode_stream_msg(body, where)
            if lseq < last_seq:
                continue                # applied before the store was last written
            if lseq != last_seq:
                raise FormatError("%s: follows sequence %d, the store ends at %d" % (where, lseq, last_seq))
            last_seq += 1
            msgs.append((last_seq, ts, subject, hdr, msg))
        if tail or idx > rd.commit:
            if deletes and (msgs or len(deletes) > 1):
                raise FormatError("%s: messages and deletes in one entry not known committed" % where)
            tail.append((idx, eterm, msgs, deletes[0] if deletes else None))
        else:
            replay += msgs
            deleted.update(d["seq"] for d in deletes)
            index, term = idx, eterm
    return index, term, [m for m in replay if m[0] not in deleted], deleted, tail


def _decode_delete(body, where):
    try:
        doc = json.loads(bytes(body))
        return {"seq": int(doc["seq"]), "no_erase": bool(doc.get("no_erase"))}
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError("%s: message delete does not decode (%s)" % (where, e))
