"""Acknowledged sequence numbers are never handed out again, even when the tail of a stream's
store is lost while the server is down (the last block file truncated).

natsd keeps the last sequence in the header of the active block (written before every
fdatasync, so before every PubAck) and in the index snapshot of a clean stop; on restart the
missing tail is logged, the state says it honestly (first/last sequence as before, the lost
messages counted as deleted) and the next publish gets a sequence above every acknowledged one.

Compared with nats-server 2.15.1 (checked by hand with the same steps, 20 messages, the last
block cut to half its size):
- clean stop + truncate: nats-server also keeps last_seq 20 (its index.db remembers it and it
  writes a tombstone) and reports first 1, last 20, 10 messages; the next publish gets 21. The
  first test runs against both servers.
- kill -9 + truncate: nats-server's index.db is not current, it recovers last_seq 10 and hands
  out 11 again (0 and 1 again when the block is cut to nothing); natsd keeps 20 and gives 21.
- Differences: natsd cannot tell a lost tail when the last block file is gone entirely after a
  kill -9 (its header is the record); then the previous block's mark is the floor. The number
  of messages left depends on each server's record sizes.
"""
import glob
import os
import random

import pytest

from tests.jetstream.test_crash_server import publish_until_killed
from tests.support.jetstream import connect, records_end, with_jetstream
from tests.support.waiting import run


def last_block(sd, name):
    blocks = glob.glob(os.path.join(sd, "jetstream", "$G", "streams", name, "msgs", "*.blk"))
    return max(blocks, key=lambda p: int(os.path.basename(p).split(".")[0]))


async def publish(srv, n, start=0, create=True):
    nc = await connect(srv)
    js = nc.jetstream()
    if create:
        await js.add_stream(name="S", subjects=["s.>"])
    seqs = [(await js.publish("s.%d" % (i % 3), b"msg-%d" % i)).seq for i in range(start, start + n)]
    await nc.close()
    return seqs


async def state_and_msgs(srv, name="S"):
    nc = await connect(srv)
    js = nc.jetstream()
    si = await js.stream_info(name)
    msgs = {}
    for seq in range(si.state.first_seq, si.state.last_seq + 1):
        try:
            m = await js.get_msg(name, seq)
        except Exception:
            continue
        msgs[seq] = m.data
    await nc.close()
    return si.state, msgs


def test_clean_stop_truncated_last_block(any_server, tmp_path):
    sd = str(tmp_path / "store")
    srv = any_server("-js", "-sd", sd)
    seqs = run(publish)(srv, 20)
    assert seqs == list(range(1, 21))
    srv.stop()
    blk = last_block(sd, "S")
    os.truncate(blk, os.path.getsize(blk) // 2)
    srv = any_server("-js", "-sd", sd)
    st, msgs = run(state_and_msgs)(srv)
    assert st.first_seq == 1 and st.last_seq == 20
    assert 0 < st.messages < 20 and len(msgs) == st.messages
    assert all(data == b"msg-%d" % (seq - 1) for seq, data in msgs.items())
    assert sorted(msgs) == list(range(1, st.messages + 1))      # the tail is what is gone
    new = run(publish)(srv, 1, 100, create=False)
    assert new == [21]


@pytest.mark.parametrize("cut", ["half", "header"])
def test_kill9_truncated_last_block(natsd, tmp_path, cut):
    sd = str(tmp_path / "store")
    srv = natsd("-js", "-sd", sd)
    assert run(publish)(srv, 50) == list(range(1, 51))
    srv.kill()
    blk = last_block(sd, "S")
    os.truncate(blk, records_end(blk) // 2 if cut == "half" else 16)
    srv = natsd("-js", "-sd", sd)
    m = srv.wait_log(r"\[WRN\]   Stream '\$G > S' lost sequences (\d+)\.\.(\d+) at the tail")
    st, msgs = run(state_and_msgs)(srv)
    assert st.first_seq == (1 if cut == "half" else 51) and st.last_seq == 50
    assert int(m.group(1)) == st.messages + 1 and int(m.group(2)) == 50
    assert st.messages == len(msgs) and (st.messages > 0) == (cut == "half")
    assert run(publish)(srv, 1, 100, create=False) == [51]
    srv.stop()
    srv = natsd("-js", "-sd", sd)            # the SKIP record made it permanent
    st, _ = run(state_and_msgs)(srv)
    assert st.last_seq == 51
    assert not any("lost sequences" in line for line in srv.lines)


@pytest.mark.parametrize("run_no", range(3))
def test_kill9_while_publishing_then_truncate(natsd, tmp_path, run_no):
    """kill -9 at a random moment of an async publish, then the last block loses its second
    half: no sequence at or below the highest acknowledged one is handed out again."""
    rnd = random.Random(run_no * 31337 + 5)
    sd = str(tmp_path / "store")
    srv = natsd("-js", "-sd", sd)
    acked, _ = run(publish_until_killed)(srv, rnd.uniform(0.3, 0.7))
    srv.proc.wait(10)
    assert len(acked) >= 100
    top = max(acked.values())
    blk = last_block(sd, "CRASH")
    os.truncate(blk, max(16, records_end(blk) // 2))
    srv = natsd("-js", "-sd", sd)

    async def check(nc, js):
        si = await js.stream_info("CRASH")
        assert si.state.last_seq >= top
        ack = await js.publish("crash.new", b"after")
        assert ack.seq > top
    with_jetstream(srv, check)
