"""Restart recovery and the durability contract: streams, messages, dedup state and config
survive a restart with the same store dir; after kill -9 during async publishing every
acknowledged message is present exactly once."""
import asyncio
import signal

import nats
import pytest
from nats.js.api import StorageType

from tests.support.jetstream import api, with_jetstream
from tests.support.waiting import run


@pytest.fixture
def sd(tmp_path):
    return str(tmp_path / "store")


def test_restart_recovers_streams(natsd, sd):
    srv = natsd("-js", "-sd", sd)

    async def before(nc, js):
        await js.add_stream(name="F", subjects=["f.*"], max_msgs_per_subject=3)
        await js.add_stream(name="MEM", subjects=["m"], storage=StorageType.MEMORY)
        for i in range(10):
            await js.publish("f.%d" % (i % 2), b"msg-%d" % i, headers={"Nats-Msg-Id": "id-%d" % i})
        await js.publish("m", b"volatile")
        await js.delete_msg("F", 10)
    with_jetstream(srv, before)
    assert srv.stop() == 0
    srv2 = natsd("-js", "-sd", sd)
    srv2.wait_log(r'JetStream state for account "\$G" recovered')
    assert any("Recovering JetStream state for account \"$G\"" in line for line in srv2.lines)

    async def after(nc, js):
        si = await js.stream_info("F")
        assert si.config.max_msgs_per_subject == 3
        assert si.state.messages == 5 and si.state.last_seq == 10 and si.state.first_seq == 5
        m = await js.get_msg("F", 9)
        assert m.data == b"msg-8" and m.subject == "f.0"
        ack = await js.publish("f.0", b"again", headers={"Nats-Msg-Id": "id-8"})
        assert ack.duplicate and ack.seq == 9
        ack = await js.publish("f.1", b"new")
        assert ack.seq == 11
        si = await js.stream_info("MEM")
        assert si.config.storage == StorageType.MEMORY and si.state.messages == 0
        names = await api(nc, "$JS.API.STREAM.NAMES")
        assert names["streams"] == ["F", "MEM"]
    with_jetstream(srv2, after)


def test_kill9_every_acked_message_present_once(natsd, sd):
    srv = natsd("-js", "-sd", sd)
    acked = {}

    @run
    async def publish_until_killed():
        nc = await nats.connect(srv.url, max_reconnect_attempts=0, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="DUR", subjects=["dur"])
        n = 0
        killed = False
        try:
            while n < 20000:
                batch = [js.publish("dur", b"m-%d" % i, headers={"Nats-Msg-Id": "m-%d" % i}, timeout=2)
                         for i in range(n, n + 200)]
                if n == 2000 and not killed:
                    srv.proc.send_signal(signal.SIGKILL)
                    killed = True
                res = await asyncio.gather(*batch, return_exceptions=True)
                for i, r in zip(range(n, n + 200), res):
                    if not isinstance(r, Exception):
                        acked[i] = r.seq
                n += 200
                if killed:
                    break
        finally:
            try:
                await nc.close()
            except Exception:
                pass
    publish_until_killed()
    srv.proc.wait(10)
    assert len(acked) >= 2000
    srv2 = natsd("-js", "-sd", sd)

    async def verify(nc, js):
        si = await js.stream_info("DUR")
        seen = {}
        for seq in range(si.state.first_seq, si.state.last_seq + 1):
            r = await api(nc, "$JS.API.STREAM.MSG.GET.DUR", {"seq": seq})
            if "error" in r:
                continue
            import base64
            data = base64.b64decode(r["message"]["data"]).decode()
            i = int(data.split("-")[1])
            assert i not in seen, "message %d stored twice" % i
            seen[i] = seq
        for i, seq in acked.items():
            assert seen.get(i) == seq, "acked message %d (seq %d) missing after kill -9" % (i, seq)
    with_jetstream(srv2, verify)
