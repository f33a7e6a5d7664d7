"""Consumer persistence: `<stream dir>/consumers/<name>/meta.json` and `state.json`.

Owns the on-disk format of a durable consumer:

meta.json  {"name": str, "created": RFC 3339, "created_ns": int, "config": ConsumerConfig JSON}
state.json {"delivered": {"consumer_seq", "stream_seq"},   last delivered (next-1)
            "ack_floor": {"consumer_seq", "stream_seq"},
            "pending": {"<sseq>": [dseq, ts_ns], ...},       delivered, not yet acked (in memory:
                                                             natsd/jetstream/engine/pending.pyx)
            "redelivered": {"<sseq>": delivery_count, ...},
            "last_per_subject": [seqs...], "lps_resume": seq  (only while replaying last-per-subject)}

Files are written to `<file>.tmp` then renamed, so a crash leaves the old or the new version.
The consumer coalesces writes (one per loop iteration, see Consumer.schedule_save). A new
consumer's directory and first files are made on a worker thread when new files are slow
(new_files, create_files; Consumer.write_new_files), everything else on the loop.

With a JetStream key both files are sealed with the stream's data key (natsd/jetstream/engine/jscrypt.py
finds it from the stream directory above the consumer's); plaintext files from before the key
are still read (and sealed at the stream's recovery).
"""
import io
import json
import logging
import os
import shutil
import time

from natsd.gofmt import go_time
from natsd.jetstream.engine.pending import Pending
from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import jscrypt

log = logging.getLogger("natsd")


def read_json(path):
    try:
        return json.loads(jscrypt.read_file(path) or b"null")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, jscrypt.EncryptionError) as e:
        log.warning("JetStream could not read %s: %s", path, e)
        return None


def _sealed(path, data):
    """data as the file at `path` holds it: sealed with the stream's key when it has one."""
    crypt = jscrypt.for_path(path)
    return data if crypt is None else crypt.seal_file(path, data)


def _put(path, data):
    """Write a file whole: `<file>.tmp`, then renamed over it."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _meta(directory, o):
    path = os.path.join(directory, "meta.json")
    return path, _sealed(path, json.dumps({
        "name": o.name,
        "created": go_time(o.created),
        "created_ns": o.created,
        "config": cc.to_json(o.cfg),
    }, separators=(",", ":")).encode())


def write_meta(directory, o):
    os.makedirs(directory, exist_ok=True)
    path, data = _meta(directory, o)
    try:
        _put(path, data)
    except OSError as e:
        log.error("JetStream could not write %s: %s", path, e)


def new_files(directory, o):
    """A new consumer's meta.json and first state.json as [(path, bytes)], made on the loop
    for create_files to write on a worker thread."""
    buf = io.BytesIO()
    write_state_to(buf, o)
    state = os.path.join(directory, "state.json")
    return [_meta(directory, o), (state, _sealed(state, buf.getvalue()))]


# How long a new consumer's files take to make (a moving average, seconds; a worker's update
# may be lost to another's, which only delays the average). Under NEW_FILES_INLINE_MAX they
# are made on the loop: handed to a worker thread, they cost the
# loop more in GIL hand-offs than they take (measured: 1,300 against 830 MQTT sessions a
# second on tmpfs); on a disk slower than that the worker threads make them side by side.
NEW_FILES_INLINE_MAX = 0.0005
_new_files_avg = 0.0


def new_files_quick():
    return _new_files_avg < NEW_FILES_INLINE_MAX


def set_new_files_inline_max(seconds):
    """The threshold above (the server's `new_files_us`, NATSD_NEW_FILES_US)."""
    global NEW_FILES_INLINE_MAX
    NEW_FILES_INLINE_MAX = seconds


def create_files(directory, files):
    """A new consumer's directory, made afresh (what a consumer of the name left is removed),
    and its first files (new_files). Runs on the loop or on a worker thread; raises OSError."""
    global _new_files_avg
    t0 = time.monotonic()
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    os.makedirs(directory)
    for path, data in files:
        _put(path, data)
    took = time.monotonic() - t0
    _new_files_avg = took if _new_files_avg == 0 else _new_files_avg * 0.875 + took * 0.125


def state_of(o):
    """The consumer's state.json as a dict (snapshots embed it)."""
    f = io.BytesIO()
    write_state_to(f, o)
    return json.loads(f.getvalue())


def write_state_to(f, o):
    """Write the consumer's state.json to the binary file f. The pending map is written by the
    Pending structure itself, in pieces: as a dict of 100,000 lists it cost ~20 MB of Python
    objects and tens of ms at every save, and the allocator kept the memory."""
    head = json.dumps({
        "delivered": {"consumer_seq": o.dseq - 1, "stream_seq": o.sseq - 1},
        "ack_floor": {"consumer_seq": o.adflr, "stream_seq": o.asflr},
    }, separators=(",", ":")).encode()
    tail = json.dumps(_state_rest(o), separators=(",", ":")).encode()
    f.write(head[:-1] + b',"pending":')
    o.pending.write_json(f)
    f.write(b"," + tail[1:])


def _state_rest(o):
    st = {"redelivered": {str(s): dc for s, dc in o.rdc.items()}}
    if o.lss:
        st["last_per_subject"] = list(o.lss)
        st["lps_resume"] = o.lss_resume
    if o.last_delivered_ns:
        st["last_delivered_ns"] = o.last_delivered_ns
    if o.last_ack_ns:
        st["last_ack_ns"] = o.last_ack_ns
    return st


def save_state(directory, o):
    """Write consumer o's state.json (tmp file + rename, as _put)."""
    path = os.path.join(directory, "state.json")
    tmp = path + ".tmp"
    crypt = jscrypt.for_path(path)
    try:
        try:
            f = open(tmp, "wb", buffering=256 * 1024)
        except FileNotFoundError:       # the directory is made at the first save, not each
            os.makedirs(directory, exist_ok=True)
            f = open(tmp, "wb", buffering=256 * 1024)
        with f:
            if crypt is None:
                write_state_to(f, o)
            else:                       # sealed whole, as every file of an encrypted stream
                buf = io.BytesIO()
                write_state_to(buf, o)
                f.write(crypt.seal_file(path, buf.getvalue()))
        os.replace(tmp, path)
    except OSError as e:
        log.error("JetStream could not write %s: %s", path, e)


def apply_state(o, st):
    """Restore a consumer's position from state.json (an empty dict = fresh start), and arm
    the redelivery of what it had pending."""
    restore_position(o, st)
    if st and o.pending:
        # Redeliver on the usual schedule, counted from now.
        o._arm_ptimer(min(o._deadline(s) for s in o.pending) / 1e9)


def restore_position(o, st):
    """A consumer's delivered and ack position from state.json, and nothing else: no timer
    (a view of a consumer that runs elsewhere uses only this)."""
    if not st:
        o._select_start()
        return
    d = st.get("delivered") or {}
    a = st.get("ack_floor") or {}
    o.dseq = int(d.get("consumer_seq", 0)) + 1
    o.sseq = int(d.get("stream_seq", 0)) + 1
    o.adflr = int(a.get("consumer_seq", 0))
    o.asflr = int(a.get("stream_seq", 0))
    o.pending = pending_from_json(st.get("pending"))
    o.rdc = {int(k): int(v) for k, v in (st.get("redelivered") or {}).items()}
    if st.get("last_per_subject"):
        o.lss = [int(x) for x in st["last_per_subject"]]
        o.lss_resume = int(st.get("lps_resume") or o.sseq)
    o.last_delivered_ns = st.get("last_delivered_ns")
    o.last_ack_ns = st.get("last_ack_ns")
    # Messages that left the stream while we were down.
    first = o.stream.store.first_seq
    if first and o.sseq < first:
        o.sseq = first
    if first:
        lagging = o.stream.config.get("retention", "limits") != "limits" and o.asflr < first - 1
        gone = [d for seq, d, _ in o.pending.items() if seq < first] if lagging else []
        for seq in o.pending.remove_below(first):
            o.rdc.pop(seq, None)
        if lagging:
            # an interest or work-queue stream only drops what every consumer acked: the acks
            # that went unrecorded (the state file lagged) move the floor, as nats-server's
            # consumer purge at the new first sequence does
            o.asflr = first - 1
            o.adflr = max([o.adflr] + gone)
            if not o.pending:
                o.adflr, o.asflr = o.dseq - 1, o.sseq - 1


_I64 = (1 << 63) - 1


def pending_from_json(obj):
    """state.json's {"<sseq>": [dseq, ts_ns], ...} (the format every natsd version wrote) ->
    a Pending (natsd/jetstream/engine/pending.pyx). Entries that could not come from a consumer (a
    sequence below 1, not a pair of integers) are skipped; a delivery sequence below 1 counts
    as 1 and timestamps are clamped to int64, so no entry that a consumer wrote is lost."""
    pend = Pending()
    rows = []
    for k, v in (obj or {}).items():
        try:
            seq, d, ts = int(k), int(v[0]), int(v[1])
        except (TypeError, ValueError, IndexError, KeyError):
            log.warning("JetStream consumer state: skipping pending entry %r: %r", k, v)
            continue
        if seq < 1 or seq > (1 << 64) - 1:
            log.warning("JetStream consumer state: skipping pending entry %r: %r", k, v)
            continue
        rows.append((seq, min(max(d, 1), (1 << 64) - 1), min(max(ts, -_I64 - 1), _I64)))
    rows.sort()
    for seq, d, ts in rows:             # ascending: appends, the structure's cheap case
        pend.add(seq, d, ts)
    return pend


def remove_dir(directory):
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("JetStream could not remove %s: %s", directory, e)
