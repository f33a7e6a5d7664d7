"""nats-server's Raft entries as natsd/jetstream/nsfs/raftdir.py reads them, from bytes laid out
as nats-server 2.15's raft.go and jetstream_cluster.go lay them out (append entries, stream
messages plain and S2-compressed, meta assignments plain and compressed): which messages a
store lacks, which entries stay log entries, what is refused. The end-to-end cases (real
nats-server clusters, natsd started on their directories) are
tests/cluster/test_nats_server_cluster_store.py."""
import json
import struct
import types

import pytest

from natsd._core.s2 import compress_block
from natsd.jetstream.nsfs.codec import FormatError
from natsd.jetstream.nsfs.raftdir import (
    OP_ASSIGN_COMPRESSED_CONSUMER, OP_ASSIGN_STREAM, OP_COMPRESSED_STREAM_MSG, OP_REMOVE_STREAM,
    OP_STREAM_MSG, decode_append_entry, meta_assignments, stream_log_after)

PURGE_OP = 5
DELETE_OP = 6


def append_entry(term, commit, items, leader=b"NUmM6cRx"):
    """raft.go's appendEntry.encode (pterm and pindex are not read back here)."""
    out = leader + struct.pack("<QQQQH", term, commit, 0, 0, len(items))
    for etype, data in items:
        out += struct.pack("<I", 1 + len(data)) + bytes([etype]) + data
    return out


def stream_msg(lseq, ts, subject, msg, hdr=b"", reply=b""):
    """jetstream_cluster.go's encodeStreamMsg body (after the op byte), flags 0."""
    return (struct.pack("<QqH", lseq, ts, len(subject)) + subject + struct.pack("<H", len(reply)) + reply
            + struct.pack("<H", len(hdr)) + hdr + struct.pack("<I", len(msg)) + msg + b"\x00")


def group(entries, commit, snap=(0, 0)):
    """What RaftDir holds: [(index, term, commit, items)] after a snapshot at `snap`."""
    return types.SimpleNamespace(path="/g", snap_index=snap[0], snap_term=snap[1], commit=commit,
                                 snap_data=b"", entries=entries,
                                 normal_entries=lambda committed_only=True: (
                                     (i, d) for i, _t, _c, items in entries if not committed_only or i <= commit
                                     for t, d in items if t == 0))


def msg_entry(index, term, lseq, payload):
    return (index, term, 0, [(0, bytes([OP_STREAM_MSG]) + stream_msg(lseq, 1000 + lseq, b"s.%d" % lseq, payload))])


def test_an_append_entry_decodes_as_nats_server_encodes_it():
    raw = append_entry(3, 41, [(0, b"\x04abc"), (5, b"peer1234")])
    term, commit, items = decode_append_entry(raw, "x")
    assert (term, commit, items) == (3, 41, [(0, b"\x04abc"), (5, b"peer1234")])
    with pytest.raises(FormatError):
        decode_append_entry(raw[:-3], "x")


def test_what_the_store_lacks_is_replayed_and_what_is_not_known_committed_stays_in_the_log():
    entries = [msg_entry(6, 2, 4, b"five"),         # applied: the store ends at 6
               msg_entry(7, 2, 5, b"six"),
               msg_entry(8, 2, 6, b"seven"),        # committed, not written: replayed
               msg_entry(9, 3, 7, b"eight"),        # not known committed: a log entry
               (10, 3, 0, [(5, b"NUmM6cRx")])]      # a leader transfer: a no-op entry
    index, term, replay, deleted, tail = stream_log_after(group(entries, commit=8, snap=(5, 2)), 6)
    assert (index, term) == (8, 2)
    assert replay == [(7, 1006, b"s.6", None, b"seven")] and deleted == set()
    assert tail == [(9, 3, [(8, 1007, b"s.7", None, b"eight")], None), (10, 3, [], None)]


def delete_entry(index, term, seq, no_erase=False):
    body = json.dumps({"client": {"acc": "$G"}, "stream": "S", "seq": seq, "no_erase": no_erase,
                       "subject": "$JS.API.STREAM.MSG.DELETE.S", "reply": "_INBOX.x"}).encode()
    return (index, term, 0, [(0, bytes([DELETE_OP]) + body)])


def test_message_deletes_after_the_snapshot_are_the_same_applied_or_not():
    entries = [msg_entry(6, 2, 5, b"six"),          # replayed, then deleted below
               delete_entry(7, 2, 3),               # maybe applied already: gone either way
               delete_entry(8, 2, 6),
               delete_entry(9, 2, 4, no_erase=True)]    # not known committed: a log entry
    index, term, replay, deleted, tail = stream_log_after(group(entries, commit=8, snap=(5, 2)), 5)
    assert (index, term) == (8, 2) and replay == [] and deleted == {3, 6}
    assert tail == [(9, 2, [], {"seq": 4, "no_erase": True})]


def test_a_compressed_message_reads_as_a_plain_one():
    body = stream_msg(2, 77, b"big", b"x" * 5000, hdr=b"NATS/1.0\r\nA: b\r\n\r\n")
    entry = (3, 1, 0, [(0, bytes([OP_COMPRESSED_STREAM_MSG]) + compress_block(body))])
    _index, _term, replay, _deleted, tail = stream_log_after(group([entry], commit=3), 2)
    assert replay == [(3, 77, b"big", b"NATS/1.0\r\nA: b\r\n\r\n", b"x" * 5000)] and tail == []


def test_an_operation_after_the_snapshot_or_a_gap_is_refused():
    purge = (4, 1, 0, [(0, bytes([PURGE_OP]) + b"{}")])
    with pytest.raises(FormatError, match="an operation"):
        stream_log_after(group([purge], commit=4), 3)
    with pytest.raises(FormatError, match="follows sequence 9, the store ends at 7"):
        stream_log_after(group([msg_entry(4, 1, 9, b"x")], commit=4), 7)


def test_meta_assignments_from_the_snapshot_and_the_committed_entries():
    def stream(name, peers):
        return {"client": {"acc": "$G"}, "created": "2026-12-07T10:00:00.5Z",
                "stream": {"name": name, "subjects": [name.lower()], "num_replicas": len(peers)},
                "group": {"name": "S-R%dF-%s" % (len(peers), name), "peers": peers}}
    snapshot = [dict(stream("A", ["p1", "p2", "p3"]), Consumers=[
        {"client": {"acc": "$G"}, "created": "2026-12-07T10:00:01Z", "name": "D", "stream": "A",
         "consumer": {"durable_name": "D"}, "group": {"name": "C-R3F-D", "peers": ["p1", "p2", "p3"]}}])]
    consumer = {"client": {"acc": "$G"}, "created": "2026-12-07T10:00:02Z", "name": "E", "stream": "A",
                "consumer": {"durable_name": "E"}, "group": {"name": "C-R3F-E", "peers": ["p1", "p2", "p3"]}}
    entries = [(8, 1, 0, [(0, bytes([OP_ASSIGN_STREAM]) + json.dumps(stream("B", ["p1", "p2", "p3"])).encode())]),
               (9, 1, 0, [(0, bytes([OP_ASSIGN_COMPRESSED_CONSUMER]) + compress_block(json.dumps(consumer).encode()))]),
               (10, 1, 0, [(0, bytes([OP_REMOVE_STREAM]) + json.dumps(stream("B", [])).encode())]),
               (11, 1, 0, [(0, bytes([OP_ASSIGN_STREAM]) + json.dumps(stream("C", ["p1"])).encode())])]
    rd = group(entries, commit=10, snap=(7, 1))
    rd.snap_data = compress_block(json.dumps(snapshot).encode())
    got = meta_assignments(rd)
    assert sorted(got) == [("$G", "A")]        # B removed; C's entry not known committed
    a = got[("$G", "A")]
    assert a["group"] == {"name": "S-R3F-A", "peers": ["p1", "p2", "p3"]}
    assert a["created"] == 1796637600500000000
    assert sorted(a["consumers"]) == ["D", "E"] and a["consumers"]["E"]["group"]["name"] == "C-R3F-E"
