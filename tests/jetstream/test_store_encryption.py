"""FileStore encryption at rest (natsd/_core/log.pyx with a natsd/jetstream/engine/jscrypt.py key
context) and the last-sequence floor, below the server.

- nothing of a message (subject, header, payload) is found in any file of an encrypted store,
  with and without lz4, after a clean close (index snapshot) and after a crash; the same test
  on a plaintext store finds it (so the grep can fail);
- an encrypted store reads back exactly what a plaintext store given the same operations does
  (erase, remove, truncate, compaction, reopen from the snapshot and from a scan);
- a plaintext store opened with a key is encrypted; a store under an old key is re-keyed;
- an encrypted block without its key, or under another key, stops the open with StoreError and
  no file changes;
- the high-water mark: a tail lost after a clean close or a crash never lowers last_seq, and a
  store from before the mark (zero in the header) still opens as before.
"""
import glob
import hashlib
import logging
import os
import struct

import pytest

from natsd.jetstream.engine import jscrypt
from natsd.jetstream.engine.store import FileStore, StoreError
from tests.support.jetstream import records_end

SUBJ = b"orders.topsecret.subject"
PAYLOAD = b"PLAINTEXT-PAYLOAD-0123456789"
HDRV = b"NATS/1.0\r\nX-Hidden: HEADERVALUE\r\n\r\n"
NEEDLES = (SUBJ, PAYLOAD, b"HEADERVALUE")


def crypt_for(tmp_path, key="s3cr3t", cipher="chacha", prev="", name="S", create=True,
              batched=None):
    """batched: a list that collects the log's flush callbacks (the server's call_soon): records
    then wait in a pending frame until the test runs them (or a sync, FRAME_MAX, ...)."""
    d = tmp_path / "stream"
    d.mkdir(exist_ok=True)
    sk = jscrypt.ServerKey(key, cipher, prev)
    if batched is not None:
        sk.call_soon = batched.append
    return jscrypt.open_stream(sk, "$G", name, str(d), create=create)


def run_soon(q):
    while q:
        q.pop(0)()


def found(path, needles=NEEDLES):
    hits = []
    for f in glob.glob(os.path.join(str(path), "**", "*"), recursive=True):
        if os.path.isfile(f):
            data = open(f, "rb").read()
            hits += [(os.path.basename(f), n) for n in needles if n in data]
    return hits


def digest(path):
    out = {}
    for f in sorted(glob.glob(os.path.join(str(path), "**", "*"), recursive=True)):
        if os.path.isfile(f):
            out[f] = hashlib.sha256(open(f, "rb").read()).hexdigest()
    return out


def fill(s, n=120):
    for i in range(n):
        s.store_msg(SUBJ if i % 2 else b"other.%d" % (i % 7), HDRV if i % 3 == 0 else None,
                    PAYLOAD + b"-%d" % i, ts=1000 + i)


def contents(s):
    out = []
    m = s.load_next(0)
    while m is not None:
        out.append((m.seq, m.subject, m.hdr, m.msg, m.ts))
        m = s.load_next(m.seq + 1)
    return out, s.state()


@pytest.mark.parametrize("cipher", ["chacha", "aes"])
@pytest.mark.parametrize("comp", ["none", "lz4", "s2"])
def test_nothing_plain_on_disk(tmp_path, cipher, comp):
    c = crypt_for(tmp_path, cipher=cipher)
    d = tmp_path / "enc"
    s = FileStore(d, block_size=2048, compression=comp, crypt=c)
    fill(s)
    s.sync()
    assert found(d) == []                   # while open (active block, sealed blocks)
    s.close()
    assert os.path.exists(d / "index.snap")
    assert found(d) == []                   # with the index snapshot
    assert found(tmp_path / "stream") == []

    p = tmp_path / "plain"
    s = FileStore(p, block_size=2048, compression=comp)
    fill(s)
    s.close()
    hits = {n for _, n in found(p)}
    if comp == "none":
        assert hits == set(NEEDLES)
    else:
        # lz4 turns repeats into back-references in sealed blocks, but the active block and
        # the index snapshot's subject table still hold them in plaintext
        assert SUBJ in hits


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("cipher", ["chacha", "aes"])
@pytest.mark.parametrize("comp", ["none", "lz4", "s2"])
def test_same_contents_as_plaintext(tmp_path, cipher, comp, batched):
    """batched: the records wait in a pending frame (nobody runs the flush callbacks), so
    reads, erases and truncation meet records that are not written yet."""
    c = crypt_for(tmp_path, cipher=cipher, batched=[] if batched else None)
    stores = {"plain": FileStore(tmp_path / "p", block_size=2048, compression=comp),
              "enc": FileStore(tmp_path / "e", block_size=2048, compression=comp, crypt=c)}
    for s in stores.values():
        fill(s, 150)
        s.remove(5, erase=True)             # in a sealed (maybe compressed) block
        s.remove(149, erase=True)           # in the active block
        s.remove(60)
        s.purge(subject=b"other.3")
        s.compact(10)
    assert contents(stores["plain"]) == contents(stores["enc"])
    assert stores["enc"].load(149) is None and stores["enc"].load(148).msg == PAYLOAD + b"-147"
    # reopen from the snapshot, then after a crash (scan), then truncate
    for s in stores.values():
        s.close()
    stores = {k: FileStore(tmp_path / k[0], block_size=2048, compression=comp,
                           crypt=c if k == "enc" else None) for k in stores}
    assert contents(stores["plain"]) == contents(stores["enc"])
    for s in stores.values():
        s.log.abandon()
    stores = {k: FileStore(tmp_path / k[0], block_size=2048, compression=comp,
                           crypt=c if k == "enc" else None) for k in stores}
    assert contents(stores["plain"]) == contents(stores["enc"])
    for s in stores.values():
        s.truncate(100)
        s.store_msg(b"after", None, b"truncate", ts=5000)
    assert contents(stores["plain"]) == contents(stores["enc"])
    for s in stores.values():
        s.close()
    stores = {k: FileStore(tmp_path / k[0], block_size=2048, compression=comp,
                           crypt=c if k == "enc" else None) for k in stores}
    assert contents(stores["plain"]) == contents(stores["enc"])
    assert contents(stores["enc"])[1]["last_seq"] == 101
    assert found(tmp_path / "e") == []
    for s in stores.values():
        s.close()


def test_batched_reads_decrypt(tmp_path):
    """The pull consumer's batched path (batch_rec through jetstream/fastdeliver.pyx) over encrypted blocks."""
    from natsd._core import log as clog
    c = crypt_for(tmp_path)
    s = FileStore(tmp_path / "e", block_size=2048, compression="lz4", crypt=c)
    fill(s, 100)
    lg = s.log
    assert isinstance(lg, clog.Log)
    # next_seq + read cover the same records batch_rec serves; check every one decrypts
    seq = lg.next_seq(1, None)
    n = 0
    while seq:
        r = lg.read(seq)
        assert r is not None and r[2].startswith(PAYLOAD)
        n += 1
        seq = lg.next_seq(seq + 1, None)
    assert n == 100
    s.close()


@pytest.mark.parametrize("comp", ["none", "lz4", "s2"])
def test_plaintext_store_gets_encrypted(tmp_path, comp):
    p = tmp_path / "s"
    s = FileStore(p, block_size=2048, compression=comp)
    fill(s)
    before = contents(s)
    s.close()
    assert found(p)
    c = crypt_for(tmp_path)
    s = FileStore(p, block_size=2048, compression=comp, crypt=c)
    assert contents(s) == before
    s.store_msg(SUBJ, None, PAYLOAD)
    s.close()
    assert found(p) == []
    s = FileStore(p, block_size=2048, compression=comp, crypt=c)
    assert contents(s)[1]["messages"] == 121
    s.close()


@pytest.mark.parametrize("comp", ["none", "lz4", "s2"])
def test_rekeyed_store(tmp_path, comp):
    c1 = crypt_for(tmp_path, key="old")
    s = FileStore(tmp_path / "s", block_size=2048, compression=comp, crypt=c1)
    fill(s)
    before = contents(s)
    s.close()
    c2 = crypt_for(tmp_path, key="new", prev="old", create=False)
    assert c2.status == "converting" and len(c2.keys) == 2 and c2.kid != c1.kid
    s = FileStore(tmp_path / "s", block_size=2048, compression=comp, crypt=c2)
    assert contents(s) == before
    s.close()
    c2.commit()
    for f in glob.glob(str(tmp_path / "s" / "*.blk")):
        assert struct.unpack("<H", open(f, "rb").read(8)[6:8])[0] == c2.kid
    c3 = crypt_for(tmp_path, key="new", create=False)
    assert c3.status == "" and c3.kid == c2.kid
    s = FileStore(tmp_path / "s", block_size=2048, compression=comp, crypt=c3)
    assert contents(s) == before
    s.close()
    with pytest.raises(jscrypt.EncryptionError, match="unable to recover keys"):
        crypt_for(tmp_path, key="old", create=False)


def test_encrypted_store_without_key_or_other_key_untouched(tmp_path):
    c = crypt_for(tmp_path)
    s = FileStore(tmp_path / "s", block_size=2048, compression="lz4", crypt=c)
    fill(s)
    s.close()
    os.unlink(tmp_path / "s" / "index.snap")
    before = digest(tmp_path / "s")
    with pytest.raises(StoreError, match="no JetStream encryption key"):
        FileStore(tmp_path / "s", block_size=2048, compression="lz4")
    assert digest(tmp_path / "s") == before
    other = crypt_for(tmp_path, name="T")          # another data key (another stream)
    with pytest.raises(StoreError, match="unknown key"):
        FileStore(tmp_path / "s", block_size=2048, compression="lz4", crypt=other)
    assert digest(tmp_path / "s") == before
    # the same key id but another key (only a forged key file can do that): not a torn tail
    forged = jscrypt.DataKey(c.kid, c.cipher, os.urandom(32))
    other.keys = {c.kid: forged}
    other.current = forged
    for comp in ("none", "lz4"):
        with pytest.raises(StoreError, match="does not decrypt"):
            FileStore(tmp_path / "s", block_size=2048, compression=comp, crypt=other)
        assert digest(tmp_path / "s") == before
    s = FileStore(tmp_path / "s", block_size=2048, compression="lz4", crypt=c)
    assert s.state()["messages"] == 120
    s.close()


def test_torn_encrypted_tail_is_cut(tmp_path):
    """A crash in the middle of an append (a short last record) is cut as in plaintext."""
    c = crypt_for(tmp_path)
    s = FileStore(tmp_path / "s", block_size=1 << 20, crypt=c)
    fill(s, 10)
    s.sync()
    s.log.abandon()
    blk = tmp_path / "s" / "1.blk"
    os.truncate(blk, os.path.getsize(blk) - 5)
    s = FileStore(tmp_path / "s", block_size=1 << 20, crypt=c)
    st = s.state()
    assert st["messages"] == 9 and st["last_seq"] == 10       # the seq is not reused either
    assert s.store_msg(b"x", None, b"y")[0] == 11
    s.close()


# ---------------------------------------------------------------- the last-sequence floor

@pytest.mark.parametrize("enc", [False, True])
@pytest.mark.parametrize("stop", ["close", "crash"])
def test_lost_tail_keeps_last_seq(tmp_path, caplog, enc, stop):
    c = crypt_for(tmp_path) if enc else None
    s = FileStore(tmp_path / "s", block_size=1 << 20, crypt=c)
    fill(s, 50)
    s.sync()                                # what acknowledges them
    if stop == "close":
        s.close()
    else:
        s.log.abandon()
    blk = tmp_path / "s" / "1.blk"
    os.truncate(blk, records_end(blk) // 2)
    s = FileStore(tmp_path / "s", block_size=1 << 20, crypt=c)
    st = s.state()
    assert 0 < st["messages"] < 50
    assert st["first_seq"] == 1 and st["last_seq"] == 50
    assert st["num_deleted"] == 50 - st["messages"]
    assert s.lost_tail == (st["messages"] + 1, 50)
    assert "are lost" in caplog.text and "sequence 50 was stored before" in caplog.text
    assert s.store_msg(b"new", None, b"msg")[0] == 51
    s.close()
    s = FileStore(tmp_path / "s", block_size=1 << 20, crypt=c)
    assert s.state()["last_seq"] == 51 and s.lost_tail is None
    s.close()


def test_lost_block_after_close_keeps_last_seq(tmp_path):
    """The whole last block gone after a clean stop: the index snapshot's last sequence."""
    s = FileStore(tmp_path / "s", block_size=1024)
    fill(s, 60)
    s.close()
    blocks = sorted(glob.glob(str(tmp_path / "s" / "*.blk")), key=lambda p: int(os.path.basename(p)[:-4]))
    assert len(blocks) > 2
    os.unlink(blocks[-1])
    os.unlink(blocks[-2])
    s = FileStore(tmp_path / "s", block_size=1024)
    assert s.state()["last_seq"] == 60
    assert s.store_msg(b"new", None, b"msg")[0] == 61
    s.close()


def test_store_without_high_water_mark_opens(tmp_path):
    """Blocks written before the mark existed have zeros there: recovery as before."""
    s = FileStore(tmp_path / "s", block_size=1 << 20)
    fill(s, 20)
    s.close()
    os.unlink(tmp_path / "s" / "index.snap")
    with open(tmp_path / "s" / "1.blk", "r+b") as f:
        assert struct.unpack("<Q", f.read(16)[8:])[0] == 20
        f.seek(8)
        f.write(bytes(8))
    s = FileStore(tmp_path / "s", block_size=1 << 20)
    assert s.state()["last_seq"] == 20 and s.state()["messages"] == 20
    s.close()


def test_explicit_truncate_lowers_the_floor(tmp_path):
    s = FileStore(tmp_path / "s", block_size=1024)
    fill(s, 40)
    s.sync()
    s.truncate(15)
    s.sync()
    s.log.abandon()
    s = FileStore(tmp_path / "s", block_size=1024)
    assert s.state()["last_seq"] == 15 and s.lost_tail is None
    assert s.store_msg(b"a", None, b"b")[0] == 16
    s.close()


def test_frames_batch_a_loop_iteration(tmp_path):
    """With the loop's call_soon, the records appended in one iteration are written as one
    frame when the callback runs (or a sync, a rotation, FRAME_MAX, a tombstone comes first);
    until then they are served from memory; a crash before loses only those (never acked)."""
    from natsd._core import logfmt as cfmt
    q = []
    c = crypt_for(tmp_path, batched=q)
    d = tmp_path / "s"
    s = FileStore(d, block_size=1 << 20, crypt=c)
    blk = d / "1.blk"
    for i in range(50):
        s.store_msg(SUBJ, None, PAYLOAD + b"-%d" % i)
    assert os.path.getsize(blk) == 16 and len(q) == 1           # pending, one callback
    assert s.load(10).msg == PAYLOAD + b"-9"
    s.remove(3, erase=True)                                     # a tombstone flushes first
    size = os.path.getsize(blk)
    assert size > 16
    raw = open(blk, "rb").read()
    frames, end, _ = cfmt.parse_frames(raw, c.aead, 1)
    assert end == size and len(frames) == 2                     # the 50 messages, the tombstone
    for i in range(50, 80):
        s.store_msg(SUBJ, HDRV, PAYLOAD + b"-%d" % i)
    s.remove(60)                                                # in the written part
    s.remove(79, erase=True)                                    # in the pending frame (erased
    run_soon(q)                                                 # before it is written)
    assert os.path.getsize(blk) > size
    for i in range(80, 90):                                     # acked: a sync writes them
        s.store_msg(SUBJ, None, PAYLOAD + b"-%d" % i)
    acked = []
    s.sync_async(lambda fn, done: done(fn(), None), lambda: acked.append(True))
    assert acked == [True]
    for i in range(90, 95):                                     # never written: a crash
        s.store_msg(SUBJ, None, PAYLOAD + b"-%d" % i)
    before = contents(s)
    s.log.abandon()
    s = FileStore(d, block_size=1 << 20, crypt=c)
    after = contents(s)
    assert after[0] == [m for m in before[0] if m[0] <= 90]
    assert after[1]["last_seq"] == 90
    assert s.load(79) is None and s.load(3) is None and s.load(80).msg == PAYLOAD + b"-79"
    assert found(d) == []
    s.close()


# ---------------------------------------------------------------- differential model test

def _diff_ops():
    from hypothesis import strategies as st
    from tests.jetstream.test_store import FILT, SUBJ as MSUBJ
    return st.lists(st.one_of(
        st.tuples(st.just("store"), MSUBJ, st.booleans(), st.binary(max_size=60)),
        st.tuples(st.just("store"), MSUBJ, st.booleans(), st.binary(max_size=60)),
        st.tuples(st.just("remove"), st.integers(0, 60), st.booleans()),
        st.tuples(st.just("purge"), st.one_of(st.none(), FILT), st.integers(0, 60)),
        st.tuples(st.just("compact"), st.integers(0, 30)),
        st.tuples(st.just("truncate"), st.integers(0, 60)),
        st.tuples(st.just("flush")),
        st.tuples(st.just("reopen"), st.booleans()),
    ), max_size=60)


def _apply(s, op, ts):
    if op[0] == "store":
        return s.store_msg(op[1], HDRV if op[2] else None, op[3], ts=ts)
    if op[0] == "remove":
        return s.remove(op[1], erase=op[2])
    if op[0] == "purge":
        return s.purge(op[1], seq=op[2])
    if op[0] == "compact":
        return s.compact(op[1])
    if op[0] == "truncate":
        return s.truncate(op[1]) if op[1] else None


@pytest.mark.parametrize("comp,batched", [("none", False), ("none", True), ("lz4", True), ("s2", True)])
def test_differential_against_plaintext(tmp_path_factory, comp, batched):
    """Random operations (stores, removes with erase, purges, compaction, truncation, frame
    flushes, clean and crash reopens) on a plaintext and an encrypted store: the same state and
    messages after every step. A crash reopen of the encrypted store follows a sync (what an
    acknowledgement waits for), so the pending frame is on disk as the plaintext records are."""
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=_diff_ops())
    def check(ops):
        base = tmp_path_factory.mktemp("d")
        q = [] if batched else None
        c = crypt_for(base, batched=q)

        def reopen(kind):
            return FileStore(base / kind, block_size=700, compression=comp,
                             crypt=c if kind == "e" else None)
        stores = {"p": reopen("p"), "e": reopen("e")}
        ts = 0
        try:
            for op in ops:
                ts += 1
                if op[0] == "flush":
                    run_soon(q or [])
                elif op[0] == "reopen":
                    for k, s in stores.items():
                        if op[1]:
                            s.close()
                        else:
                            s.sync()
                            s.log.abandon()
                    run_soon(q or [])
                    stores = {k: reopen(k) for k in stores}
                else:
                    r = {k: _apply(s, op, ts) for k, s in stores.items()}
                    assert r["p"] == r["e"], op
                assert contents(stores["p"]) == contents(stores["e"]), op
        finally:
            # every example's files closed, failing or not: shrinking runs hundreds of them
            for s in stores.values():
                s.close()                       # a second close does nothing
        assert found(base / "e", (b"HEADERVALUE",)) == []
    check()


def test_rekeying_interrupted(tmp_path):
    """A crash in the middle of re-keying: meta.key (old key) and meta.key.new (new key) both
    there, files under either; the next start finishes it, whichever files were done."""
    c1 = crypt_for(tmp_path, key="old")
    s = FileStore(tmp_path / "s", block_size=2048, crypt=c1)
    fill(s)
    before = contents(s)
    s.close()
    sdir = tmp_path / "stream"
    # 1: crashed right after meta.key.new was written, no block converted yet
    c2 = crypt_for(tmp_path, key="new", prev="old", create=False)
    assert os.path.exists(sdir / "meta.key.new") and c2.status == "converting"
    c3 = crypt_for(tmp_path, key="new", prev="old", create=False)
    assert c3.kid == c2.kid and c3.status == "converting" and len(c3.keys) == 2
    # 2: crashed after the blocks were converted, before meta.key.new replaced meta.key
    s = FileStore(tmp_path / "s", block_size=2048, crypt=c3)
    assert contents(s) == before
    s.close()
    c4 = crypt_for(tmp_path, key="new", prev="old", create=False)
    assert c4.kid == c2.kid
    s = FileStore(tmp_path / "s", block_size=2048, crypt=c4)
    assert contents(s) == before
    s.close()
    c4.commit()
    assert not os.path.exists(sdir / "meta.key.new")
    c5 = crypt_for(tmp_path, key="new", create=False)             # prev no longer needed
    assert c5.status == "" and c5.kid == c2.kid
    s = FileStore(tmp_path / "s", block_size=2048, crypt=c5)
    assert contents(s) == before
    s.close()


@pytest.mark.parametrize("reopen", ["zeros", "plain", "encrypted"])
def test_zeros_ahead_read_as_the_end_in_every_mode(tmp_path, caplog, reopen):
    """A store that kept zeros ahead of its records (synced for every PubAck) and was killed
    opens with every record and no warning: again with zeros ahead, without them (a server
    that syncs on a timer now), or encrypted (its plaintext blocks are converted)."""
    d = tmp_path / "s"
    s = FileStore(d, block_size=1 << 20, zero_ahead=True)
    fill(s, 40)
    s.sync()
    want = contents(s)
    s.log.abandon()
    assert os.path.getsize(d / "1.blk") > records_end(d / "1.blk")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="natsd"):
        s = FileStore(d, block_size=1 << 20, zero_ahead=reopen == "zeros",
                      crypt=crypt_for(tmp_path) if reopen == "encrypted" else None)
    assert [r.getMessage() for r in caplog.records] == []
    assert contents(s) == want and s.state()["last_seq"] == 40 and s.lost_tail is None
    assert s.store_msg(SUBJ, None, b"after")[0] == 41
    s.close()
