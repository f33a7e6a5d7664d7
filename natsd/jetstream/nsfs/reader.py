"""A nats-server stream directory (`meta.inf`, `msgs/*.blk`, `msgs/index.db`, `obs/*`) as a
`StreamImage` (image.py): its config, its first and last sequence, its live messages in order,
and its consumers with their positions.

Which messages are live follows nats-server's recovery: with an `index.db` that is still current
(its checksum holds, its last block and that block's last checksum are the ones on disk) each
block's first and last sequence and its deleted set come from it; otherwise the blocks alone
decide (erased records and tombstoned sequences are gone). Without a current index a record that
fails its checks ends its block there, as nats-server truncates a torn write; with one, a record
whose checksum fails is lost alone (nats-server answers "no message found" for it). Losses are
reported in `warnings`.
"""
import json
import os
import struct

from cryptography.exceptions import InvalidTag

from natsd._core.highway import highway64
from natsd.jetstream.engine.consumerconfig import parse_time
from natsd.jetstream.nsfs import codec as C
from natsd.jetstream.nsfs.blockscan import records as parse_block
from natsd.jetstream.nsfs import crypt
from natsd.jetstream.nsfs.image import StreamImage

INDEX_MAGIC = 11
INDEX_VERSIONS = range(1, 5)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _block_records(stream, index, path, trusted_index, key=None):
    buf = _read(path)
    if key is not None:
        buf = key.xor(buf)
    return parse_block(C.decompress_block(buf), C.block_key(stream, index), trusted_index)


def read_meta(directory, consumer_of=None, keys=None, context=None):
    """(document, key) of `meta.inf`, its `meta.sum` checked; the key is the AssetKey of an
    encrypted stream or consumer (`meta.key` beside it, opened with `keys` for `context`), else
    None. FormatError naming the file when it is not nats-server's or no key opens it."""
    meta = os.path.join(directory, "meta.inf")
    raw = _read(meta)
    key = None
    if os.path.exists(os.path.join(directory, "meta.key")):
        if keys is None:
            raise C.FormatError("%s: encrypted (meta.key beside it) and natsd has no JetStream "
                                "key configured" % meta)
        try:
            key = crypt.open_key(keys, os.path.join(directory, "meta.key"), context)
            plain = key.open(raw)
        except (crypt.NoKeyFits, InvalidTag, ValueError) as e:
            raise C.FormatError("%s: cannot be decrypted: %s" % (meta, e or "wrong key"))
    else:
        plain = raw
    try:
        doc = json.loads(plain)
    except ValueError as e:
        raise C.FormatError("%s: not JSON (%s)" % (meta, e))
    if not isinstance(doc, dict) or not (consumer_of or doc.get("name")):
        raise C.FormatError("%s: no %s configuration" % (meta, "consumer" if consumer_of else "stream"))
    stream = consumer_of or doc["name"]
    sum_key = C.meta_key(stream, doc.get("Name") if consumer_of else None)
    try:
        want = _read(os.path.join(directory, "meta.sum")).strip()
    except FileNotFoundError:
        want = None
    if want is not None and want != C.meta_sum(sum_key, raw):
        raise C.FormatError("%s: does not match its meta.sum" % meta)
    return doc, key


def _created(doc):
    try:
        return parse_time(doc.pop("Created"))
    except (KeyError, TypeError, ValueError):
        return 0


def read_stream_dir(directory, keys=None, name=None):
    """The StreamImage of a nats-server stream directory (of stream `name`, by default the
    directory's name); `keys` (crypt.StoreKeys for the account) open an encrypted one.
    FormatError when it cannot be read."""
    name = name or os.path.basename(os.path.normpath(directory))
    doc, stream_key = read_meta(directory, keys=keys, context=name)
    created = _created(doc)
    name = doc["name"]
    warnings = []
    mdir = os.path.join(directory, "msgs")
    blocks = _list_blocks(mdir)
    block_keys = _open_block_keys(keys, mdir, name, blocks) if stream_key is not None else {}

    def last_checksum(bi):
        """The last 8 bytes of block `bi` as written (decrypted; a compressed block keeps its
        last checksum uncompressed at its end), as nats-server's lastChecksum."""
        buf = _read(dict(blocks)[bi])
        if bi in block_keys:
            buf = block_keys[bi].xor(buf)
        return buf[-8:] if len(buf) >= 8 else bytes(8)
    index = _read_index(name, mdir, blocks, warnings, stream_key, last_checksum)

    if index is not None:           # nats-server trusts it: so do we, the blocks are read once
        (first_seq, last_seq, last_ts), per_block = index

        def live(bi, seq):
            b = per_block.get(bi)
            return b is not None and b[0] <= seq <= b[1] and seq not in b[2]
    else:
        tombstones, last_seq, last_ts = _scan_blocks(name, blocks, warnings, block_keys)
        first_seq = 0

        def live(bi, seq):
            return seq not in tombstones

    def records():
        for bi, path in blocks:
            for item in _block_records(name, bi, path, index is not None, block_keys.get(bi)):
                if item[0] == "bad":
                    if index is None:
                        break           # reported by the scan
                    warnings.append("%s: %s at offset %d, that message is lost" % (path, item[2], item[1]))
                    continue
                seq = item[0]
                if seq & (C.ERASED_BIT | C.TOMBSTONE_BIT) == 0 and live(bi, seq):
                    yield item

    if not first_seq:
        first_seq = next((r[0] for r in records()), last_seq + 1)
    return StreamImage(doc, created, first_seq, last_seq, last_ts, records,
                       read_consumers(directory, name, warnings, keys), warnings, directory)


def _list_blocks(mdir):
    """[(index, path)] of the message blocks, in order; FormatError for a file nats-server
    would not have written there."""
    blocks = []
    for entry in os.listdir(mdir) if os.path.isdir(mdir) else ():
        if entry.endswith(".blk") and entry[:-4].isdigit():
            blocks.append((int(entry[:-4]), os.path.join(mdir, entry)))
        elif (entry not in ("index.db", "thw.db", "sched.db", "sources.db") and not entry.endswith(".tmp")
              and not (entry.endswith(".key") and entry[:-4].isdigit())):
            raise C.FormatError("%s: a file nats-server does not write in msgs/" % os.path.join(mdir, entry))
    return sorted(blocks)


def _open_block_keys(keys, mdir, name, blocks):
    """{index: AssetKey} of an encrypted stream's blocks (`msgs/<n>.key`)."""
    out = {}
    for bi, _ in blocks:
        path = os.path.join(mdir, "%d.key" % bi)
        try:
            out[bi] = crypt.open_key(keys, path, "%s:%d" % (name, bi))
        except (OSError, crypt.NoKeyFits) as e:
            raise C.FormatError("%s: %s" % (path, e))
    return out


def _scan_blocks(name, blocks, warnings, block_keys):
    """Without a current index.db, what the blocks say about each other, as nats-server's
    rebuild reads them: (tombstoned sequences, last sequence, its time)."""
    tombstones = set()
    last_seq = last_ts = 0
    for bi, path in blocks:
        for item in _block_records(name, bi, path, False, block_keys.get(bi)):
            if item[0] == "bad":
                warnings.append("%s: %s at offset %d, the rest of the block is dropped"
                                % (path, item[2], item[1]))
                break
            raw_seq, ts = item[0], item[1]
            seq = raw_seq & C.SEQ_MASK
            if raw_seq & C.TOMBSTONE_BIT:
                tombstones.add(seq)
            if seq > last_seq or (seq == last_seq and not raw_seq & C.TOMBSTONE_BIT):
                last_seq, last_ts = seq, ts
    return tombstones, last_seq, last_ts


def _read_index(name, mdir, blocks, warnings, stream_key, last_checksum):
    """((first_seq, last_seq, last_ts), {block: (first, last, deleted set)}) from index.db,
    or None when there is none or it is not current (nats-server then rebuilds from blocks)."""
    path = os.path.join(mdir, "index.db")
    try:
        buf = _read(path)
    except FileNotFoundError:
        return None
    try:
        if len(buf) < 32 or highway64(C.meta_key(name), buf[:-8]) != buf[-8:]:
            raise C.FormatError("checksum does not match")
        buf = buf[:-8]
        if stream_key is not None:
            buf = stream_key.open(buf)
        if buf[0] != INDEX_MAGIC or buf[1] not in INDEX_VERSIONS:
            raise C.FormatError("magic and version mismatch")
        version = buf[1]
        i = 2
        vals = []
        for reader in (C.uvarint, C.uvarint, C.uvarint, C.varint, C.uvarint, C.varint):
            v, i = reader(buf, i)
            vals.append(v)
        _msgs, _bytes, first_seq, base_time, last_seq, last_time = vals
        subjects, i = C.uvarint(buf, i)
        for _ in range(subjects):
            n, i = C.uvarint(buf, i)
            i += n
            total, i = C.uvarint(buf, i)
            _, i = C.uvarint(buf, i)
            if total > 1 or version >= 4:
                _, i = C.uvarint(buf, i)
        nblocks, i = C.uvarint(buf, i)
        per_block = {}
        last_index = None
        for _ in range(nblocks):
            vals = []
            for reader in (C.uvarint, C.uvarint, C.uvarint, C.varint, C.uvarint, C.varint, C.uvarint):
                v, i = reader(buf, i)
                vals.append(v)
            bi, _nbytes, fseq, _fts, lseq, _lts, ndeleted = vals
            for _ in range((version >= 2) + (version >= 3)):     # ttls, schedules
                _, i = C.uvarint(buf, i)
            deleted = set()
            if ndeleted:
                deleted, i = C.decode_seqset(buf, i)
            per_block[bi] = (fseq, lseq, deleted)
            last_index = bi
        lbi, i = C.uvarint(buf, i)
        lchk = bytes(buf[i:i + 8])
    except (C.FormatError, IndexError, struct.error, InvalidTag) as e:
        warnings.append("%s: %s, the blocks alone decide" % (path, e or "cannot be decrypted"))
        return None
    on_disk = {bi for bi, _ in blocks}
    newest = max(on_disk) if on_disk else None
    if lbi != last_index or newest != lbi or not set(per_block) <= on_disk:
        warnings.append("%s: outdated (the blocks changed after it), the blocks alone decide" % path)
        return None
    if last_checksum(lbi) != lchk:
        warnings.append("%s: outdated (its last block has more records), the blocks alone decide" % path)
        return None
    return (first_seq, last_seq, last_time), per_block


def read_consumers(directory, stream, warnings, keys=None):
    """Consumer documents for natsd's restore from `obs/<name>/meta.inf` and `o.dat`."""
    out = []
    odir = os.path.join(directory, "obs")
    for name in sorted(os.listdir(odir)) if os.path.isdir(odir) else ():
        cdir = os.path.join(odir, name)
        try:
            doc, key = read_meta(cdir, consumer_of=stream, keys=keys, context="%s.%s" % (stream, name))
            created = _created(doc)
            cname = doc.pop("Name", None) or name
            try:
                raw = _read(os.path.join(cdir, "o.dat"))
                state = C.decode_consumer_state(key.open(raw) if key is not None else raw)
            except FileNotFoundError:
                state = None
        except (OSError, C.FormatError, InvalidTag) as e:
            warnings.append("consumer %r: %s (not carried over)" % (name, e or "cannot be decrypted"))
            continue
        out.append({"name": cname, "created_ns": created, "config": doc,
                    "state": natsd_consumer_state(state)})
    return out


def natsd_consumer_state(state):
    """nats-server's consumer state (decode_consumer_state) as natsd's state.json document."""
    if state is None:
        return {}
    (dc, ds), (afc, afs) = state["delivered"], state["ack_floor"]
    return {"delivered": {"consumer_seq": dc, "stream_seq": ds},
            "ack_floor": {"consumer_seq": afc, "stream_seq": afs},
            "pending": {str(s): [d, ts] for s, (d, ts) in sorted(state["pending"].items())},
            "redelivered": {str(s): n for s, n in sorted(state["redelivered"].items())}}
