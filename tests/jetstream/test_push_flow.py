"""Push consumers with flow control, natsd vs nats-server: the same stream delivered to a
durable push consumer (explicit acks, every message acked) and to an ordered-style consumer
(ack none, flow control, idle heartbeats), each recorded as the exact sequence of deliveries
(subject, payload, ack-reply tokens without the timestamp) and flow-control requests in their
place between deliveries. Large enough (4 MB) that flow control asks for replies several
times and the window grows as each is answered."""
import asyncio
import json
import random

import nats

from tests.support.waiting import run, until

N, SIZE = 4000, 1000


async def record(nc, inbox, create, ack, want):
    events = []
    done = asyncio.get_running_loop().create_future()
    delivered = 0

    async def cb(m):
        nonlocal delivered
        status = (m.headers or {}).get("Status")
        if status == "100":
            desc = m.headers.get("Description")
            if desc == "Idle Heartbeat":
                return
            events.append(("FC", desc, m.reply.split(".")[:3]))
            await nc.publish(m.reply, b"")
            return
        tokens = m.reply.split(".")
        # $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>: the generated name
        # of the ephemeral consumer and the timestamp differ by nature
        events.append(("MSG", m.subject, m.data[:8], tokens[2:3] + tokens[4:7] + tokens[8:]))
        delivered += 1
        if ack:
            await nc.publish(m.reply, b"+ACK")
        if delivered == want and not done.done():
            done.set_result(None)
    await nc.subscribe(inbox, cb=cb)
    r = json.loads((await nc.request(create[0], json.dumps(create[1]).encode(), timeout=5)).data)
    assert "error" not in r, r
    await asyncio.wait_for(done, 30)
    await nc.flush()
    return events


async def scenario(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="F", subjects=["f.*"])
    rnd = random.Random(7)
    for i in range(N):
        await nc.publish("f.%d" % (i % 5), b"%07d " % i + bytes(rnd.randrange(256) for _ in range(8))
                         + b"x" * (SIZE - 16))
    await nc.flush()

    async def stored():
        return (await js.stream_info("F")).state.messages == N
    assert await until(stored, timeout=20)
    out = []
    inbox = nc.new_inbox()
    out.append(await record(nc, inbox, ("$JS.API.CONSUMER.CREATE.F.d", {"stream_name": "F", "config": {
        "durable_name": "d", "deliver_subject": inbox, "ack_policy": "explicit",
        "flow_control": True, "idle_heartbeat": 5_000_000_000}}), ack=True, want=N))
    inbox2 = nc.new_inbox()
    out.append(await record(nc, inbox2, ("$JS.API.CONSUMER.CREATE.F", {"stream_name": "F", "config": {
        "deliver_subject": inbox2, "ack_policy": "none", "flow_control": True, "mem_storage": True,
        "idle_heartbeat": 5_000_000_000, "filter_subjects": ["f.1", "f.2", "f.3", "f.4"]}}),
        ack=False, want=N - N // 5))
    r = json.loads((await nc.request("$JS.API.CONSUMER.INFO.F.d", b"", timeout=5)).data)
    out.append({k: r[k] for k in ("num_pending", "num_redelivered")})
    await nc.close()
    return out


def test_push_flow_control_matches_reference(natsd, reference, tmp_path):
    ours = run(scenario)(natsd("-js", "-sd", str(tmp_path / "a")).url)
    theirs = run(scenario)(reference("-js", "-sd", str(tmp_path / "b")).url)
    for o, t in zip(ours[:2], theirs[:2]):
        assert sum(1 for e in o if e[0] == "FC") >= 2        # flow control did take part
        assert o == t
    assert ours[2] == theirs[2]


async def windowed(url):
    """A push consumer held by max_ack_pending, its client acking everything it got in
    bursts: natsd delivers again part-way through such a burst of acks (every EARLY_RUN acks,
    natsd/jetstream/engine/ackstate.py), nats-server as each ack lands. Either way each message once,
    in order, first deliveries only, and nothing left pending."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="W", subjects=["w"])
    total = 3000
    for i in range(total):
        await nc.publish("w", b"%d" % i)
    await nc.flush()

    async def stored():
        return (await js.stream_info("W")).state.messages == total
    assert await until(stored, timeout=20)
    seen = []
    done = asyncio.get_running_loop().create_future()

    async def cb(m):
        t = m.reply.split(".")
        seen.append((m.data, t[4], t[5], t[6], t[8]))      # payload, dc, sseq, dseq, pending
        await nc.publish(m.reply, b"+ACK")
        if len(seen) == total and not done.done():
            done.set_result(None)
    inbox = nc.new_inbox()
    await nc.subscribe(inbox, cb=cb)
    r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.W.d", json.dumps({
        "stream_name": "W", "config": {"durable_name": "d", "deliver_subject": inbox,
                                       "ack_policy": "explicit", "max_ack_pending": 40}}).encode(),
        timeout=5)).data)
    assert "error" not in r, r
    await asyncio.wait_for(done, 30)
    await nc.flush()

    async def settled():
        i = json.loads((await nc.request("$JS.API.CONSUMER.INFO.W.d", b"", timeout=5)).data)
        return i["num_ack_pending"] == 0 and i
    info = await until(settled, timeout=10)
    await nc.close()
    return seen, {k: info[k] for k in ("num_pending", "num_redelivered", "num_ack_pending")}, \
        (info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"])


def test_push_window_refilled_mid_burst_matches_reference(natsd, reference, tmp_path):
    ours = run(windowed)(natsd("-js", "-sd", str(tmp_path / "a")).url)
    theirs = run(windowed)(reference("-js", "-sd", str(tmp_path / "b")).url)
    seen = ours[0]
    assert [s[0] for s in seen] == [b"%d" % i for i in range(3000)]
    assert all(s[1] == "1" for s in seen)
    assert ours == theirs
