"""JetStream encryption at rest, end to end: `jetstream { key, cipher, prev_encryption_key }`.

- with a key nothing of a message (subject, header, payload) nor of a consumer's state is found
  in any file under the store directory, while running and after a clean stop; without a key
  the same grep finds them (so the grep can fail); both ciphers;
- a restart with the same key serves everything back (messages, consumer positions);
- a wrong key or no key: nats-server's warning ("Error decrypting our stream metafile: unable to
  recover keys" / "encryption not enabled", here followed by the stream's name), the server
  starts without that stream, and no file of the store changes; the right key brings it back;
- key rotation: the new key with `prev_encryption_key` re-keys the stream ("Converting to
  <cipher> for stream ...", as nats-server logs it), after which the new key alone opens it and
  the old one does not; changing the cipher converts the same way;
- a plaintext store gets encrypted when a key is added ("Encrypting stream ...", as
  nats-server);
- kill -9 while publishing to an encrypted stream loses no acknowledged message.

nats-server behaves the same in each of these (checked with nats-server 2.15.1 by hand: wrong
key -> the warning, server up, stream missing), except that after converting a plaintext store
it still has the subjects in plaintext in msgs/index.db; natsd leaves nothing.
"""
import asyncio
import glob
import hashlib
import json
import os
import random

import pytest

from tests.jetstream.test_crash_server import publish_until_killed, read_back
from tests.support.jetstream import api, check_acked_kept, connect, publish_until_refused, start_size_limited, with_jetstream
from tests.support.waiting import run

SUBJ = "secret.topsecretsubject"
PAYLOAD = b"PLAINTEXT-PAYLOAD-%d"
HEADER = "HEADERVALUE"
NEEDLES = (b"topsecretsubject", b"PLAINTEXT-PAYLOAD", HEADER.encode())


def conf(tmp_path, sd, key=None, cipher=None, prev=None):
    lines = ["jetstream {", "  store_dir: %s" % json.dumps(sd)]
    if key:
        lines.append("  key: %s" % json.dumps(key))
    if cipher:
        lines.append("  cipher: %s" % cipher)
    if prev:
        lines.append("  prev_encryption_key: %s" % json.dumps(prev))
    lines.append("}")
    path = str(tmp_path / ("js-%d.conf" % random.randrange(1 << 30)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def grep(sd, needles=NEEDLES):
    hits = []
    for f in glob.glob(os.path.join(sd, "**", "*"), recursive=True):
        if os.path.isfile(f):
            data = open(f, "rb").read()
            hits += [(f[len(sd):], n) for n in needles if n in data]
    return hits


def digest(sd):
    return {f: hashlib.sha256(open(f, "rb").read()).hexdigest()
            for f in sorted(glob.glob(os.path.join(sd, "**", "*"), recursive=True)) if os.path.isfile(f)}


def stream_dir(sd):
    return os.path.join(sd, "jetstream", "$G", "streams", "S")


async def populate(srv, n=30, storage="file"):
    nc = await connect(srv)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["secret.>"], storage=storage)
    for i in range(n):
        await js.publish(SUBJ, PAYLOAD % i, headers={"X-Secret": HEADER} if i % 2 else None)
    sub = await js.pull_subscribe("secret.>", durable="DUR")
    for m in await sub.fetch(5, timeout=2):
        await m.ack()
    await nc.flush()
    await asyncio.sleep(0.3)            # the consumer state file is written at most every 100 ms
    await nc.close()


async def check_back(srv, n=30):
    nc = await connect(srv)
    js = nc.jetstream()
    si = await js.stream_info("S")
    assert si.state.messages == n and si.state.last_seq == n
    for i in range(n):
        m = await js.get_msg("S", i + 1)
        assert m.subject == SUBJ and m.data == PAYLOAD % i
        if i % 2:
            assert m.headers["X-Secret"] == HEADER
    ci = await js.consumer_info("S", "DUR")
    assert ci.ack_floor.stream_seq == 5 and ci.delivered.stream_seq == 5
    await nc.close()


async def stream_missing(srv):
    nc = await connect(srv)
    r = await api(nc, "$JS.API.STREAM.INFO.S")
    await nc.close()
    return r.get("error", {}).get("err_code") == 10059


@pytest.mark.parametrize("cipher", ["chachapoly", "aes", None])
def test_nothing_in_plaintext_on_disk(natsd, tmp_path, cipher):
    sd = str(tmp_path / "store")
    key = None if cipher is None else "s3cr3t-key"
    srv = natsd("-c", conf(tmp_path, sd, key, cipher))
    if key:
        srv.wait_log(r"Encryption:\s+%s" % ("AES-GCM" if cipher == "aes" else "ChaCha20-Poly1305"))
    run(populate)(srv)
    running = grep(sd)
    assert srv.stop() == 0
    stopped = grep(sd)
    if key:
        assert running == [] and stopped == []
        # the stream's and the consumer's config (subjects, filter) are sealed as well, and
        # every small file of the stream is in the sealed format
        assert grep(sd, (b"secret.>", b'"DUR"', b"ack_policy")) == []
        for f in ("meta.json", "consumers/DUR/meta.json", "consumers/DUR/state.json"):
            with open(os.path.join(stream_dir(sd), f), "rb") as fh:
                assert fh.read(4) == b"NENC", f
        assert os.path.exists(os.path.join(stream_dir(sd), "meta.key"))
    else:
        # the grep does find what is there: payload, header and subject in the block, the
        # consumer's meta.json has its filter subject
        assert {n for _, n in running} == set(NEEDLES)
        assert {n for _, n in stopped} == set(NEEDLES)
    srv = natsd("-c", conf(tmp_path, sd, key, cipher))
    run(check_back)(srv)


def test_memory_stream_meta_encrypted(natsd, tmp_path):
    """A memory stream keeps only its meta and consumer files on disk: sealed too."""
    sd = str(tmp_path / "store")
    srv = natsd("-c", conf(tmp_path, sd, "k"))
    run(populate)(srv, storage="memory")
    assert grep(sd, (b"secret.>", b"DUR\"")) == []
    assert srv.stop() == 0
    assert grep(sd, (b"secret.>",)) == []
    srv = natsd("-c", conf(tmp_path, sd, "k"))

    @run
    async def back():
        nc = await connect(srv)
        si = await nc.jetstream().stream_info("S")
        assert si.config.subjects == ["secret.>"] and si.state.messages == 0
        await nc.close()
    back()


def test_wrong_key_or_no_key(natsd, tmp_path):
    sd = str(tmp_path / "store")
    srv = natsd("-c", conf(tmp_path, sd, "right-key"))
    run(populate)(srv)
    assert srv.stop() == 0
    before = digest(sd)
    for key, why in (("wrong-key", "unable to recover keys"), (None, "encryption not enabled")):
        srv = natsd("-c", conf(tmp_path, sd, key))
        m = srv.wait_log(r"\[WRN\]   Error decrypting our stream metafile: (.*)")
        assert m.group(1).startswith(why) and "'$G > S'" in m.group(1), m.group(0)
        assert run(stream_missing)(srv)
        assert srv.stop() == 0
        assert digest(sd) == before, "a failed decryption changed the store"
    srv = natsd("-c", conf(tmp_path, sd, "right-key"))
    run(check_back)(srv)


@pytest.mark.parametrize("ciphers", [("chacha", "chacha"), ("chacha", "aes"), ("aes", "chachapoly")])
def test_key_rotation(natsd, tmp_path, ciphers):
    sd = str(tmp_path / "store")
    c1, c2 = ciphers
    srv = natsd("-c", conf(tmp_path, sd, "old-key", c1))
    run(populate)(srv)
    assert srv.stop() == 0
    kf = os.path.join(stream_dir(sd), "meta.key")
    old_kf = open(kf, "rb").read()
    name = "AES-GCM" if c2 == "aes" else "ChaCha20-Poly1305"
    srv = natsd("-c", conf(tmp_path, sd, "new-key", c2, prev="old-key"))
    srv.wait_log(r"\[INF\]   Converting to %s for stream '\$G > S'" % name)
    run(check_back)(srv)
    assert grep(sd) == []
    assert srv.stop() == 0
    assert open(kf, "rb").read() != old_kf
    assert not os.path.exists(kf + ".new")
    srv = natsd("-c", conf(tmp_path, sd, "new-key", c2))        # the new key alone
    run(check_back)(srv)
    assert not any("Converting" in line for line in srv.lines)
    assert srv.stop() == 0
    before = digest(sd)
    srv = natsd("-c", conf(tmp_path, sd, "old-key", c1))        # the old one no longer works
    srv.wait_log(r"Error decrypting our stream metafile: unable to recover keys")
    assert run(stream_missing)(srv)
    assert srv.stop() == 0
    assert digest(sd) == before


def test_same_key_other_cipher_converts(natsd, tmp_path):
    sd = str(tmp_path / "store")
    srv = natsd("-c", conf(tmp_path, sd, "k", "chacha"))
    run(populate)(srv)
    assert srv.stop() == 0
    srv = natsd("-c", conf(tmp_path, sd, "k", "aes"))
    srv.wait_log(r"Converting to AES-GCM for stream '\$G > S'")
    run(check_back)(srv)


def test_plaintext_store_gets_encrypted(natsd, tmp_path):
    sd = str(tmp_path / "store")
    srv = natsd("-c", conf(tmp_path, sd))
    run(populate)(srv)
    assert srv.stop() == 0
    assert grep(sd)
    srv = natsd("-c", conf(tmp_path, sd, "added-key"))
    srv.wait_log(r"\[INF\]   Encrypting stream '\$G > S'")
    assert grep(sd) == []
    run(check_back)(srv)
    assert srv.stop() == 0
    assert grep(sd) == []
    srv = natsd("-c", conf(tmp_path, sd, "added-key"))
    run(check_back)(srv)
    assert not any("Encrypting stream" in line for line in srv.lines)


@pytest.mark.parametrize("run_no", range(4))
def test_kill9_while_publishing_encrypted(natsd, tmp_path, run_no):
    """test_crash_server's scenario with a key (ChaCha20-Poly1305 and AES-GCM in turn)."""
    rnd = random.Random(run_no * 104729 + 3)
    sd = str(tmp_path / "store")
    cfg = conf(tmp_path, sd, "crash-key", "aes" if run_no % 2 else "chacha")
    srv = natsd("-c", cfg)
    acked, sent = run(publish_until_killed)(srv, rnd.uniform(0.4, 0.9))
    srv.proc.wait(10)
    assert len(acked) >= 100, "only %d messages acknowledged before the kill" % len(acked)
    assert grep(sd, (b"payload-",)) == []
    srv2 = natsd("-c", cfg)
    si, stored = run(read_back)(srv2)
    assert len(stored) == si.state.messages
    for i, seq in acked.items():
        assert stored.get(seq) == b"payload-%d" % i, \
            "acked message %d (seq %d) missing or wrong after kill -9" % (i, seq)
    top = max(acked.values())
    assert not [s for s in range(1, top + 1) if s not in stored]


def test_key_from_environment_variable(natsd, tmp_path):
    """`key: $VAR` takes the key from the environment (nats-server's config variables)."""
    sd = str(tmp_path / "store")
    path = str(tmp_path / "env.conf")
    with open(path, "w") as f:
        f.write("jetstream { store_dir: %s, key: $NATSD_TEST_JS_KEY }\n" % json.dumps(sd))
    env = dict(os.environ, NATSD_TEST_JS_KEY="from-the-environment")
    srv = natsd("-c", path, env=env)
    run(populate)(srv)
    assert srv.stop() == 0
    assert grep(sd) == []
    srv = natsd("-c", conf(tmp_path, sd, "from-the-environment"))       # the same key, literal
    run(check_back)(srv)


@pytest.mark.parametrize("server", ["natsd", "nats-server"])
def test_unknown_cipher_refused(tmp_path, server):
    import subprocess
    import sys
    from tests.support.servers import nats_server_cmd
    path = tmp_path / "bad.conf"
    path.write_text('jetstream { key: "k", cipher: foo }\n')
    cmd = [sys.executable, "-m", "natsd"] if server == "natsd" else nats_server_cmd()
    if cmd is None:
        pytest.skip("nats-server is not installed")
    r = subprocess.run(cmd + ["-c", "bad.conf", "-t"], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0
    assert 'bad.conf:1:22: Unknown cipher type: "foo"' in r.stdout + r.stderr


def test_write_failure_encrypted(natsd, tmp_path):
    """test_disk_errors' RLIMIT_FSIZE scenario on an encrypted stream: a frame that cannot be
    written gets error PubAcks (10077, the block's path) for everything waiting on it; every
    acknowledged message is there after a restart, and its last sequence is the last acked."""
    sd = str(tmp_path / "store")
    cfg = conf(tmp_path, sd, "disk-key")
    srv = start_size_limited("-c", cfg)
    acked, errors = {}, []
    try:
        async def go(nc, js):
            await js.add_stream(name="BIG", subjects=["big"])
            await publish_until_refused(nc, acked, errors)
        with_jetstream(srv, go)
        assert acked and errors, (acked, errors)
        assert errors[0]["err_code"] == 10077 and ".blk" in errors[0]["description"]
    finally:
        srv.stop()
    srv2 = natsd("-c", cfg)

    @run
    async def verify():
        nc = await connect(srv2)
        await check_acked_kept(nc.jetstream(), "BIG", acked)
        await nc.close()
    verify()
