"""End to end with the nats-py client against natsd."""
import asyncio

import nats
import nats.errors
import pytest

from tests.support.waiting import run, until


async def connect(server, **kw):
    kw.setdefault("allow_reconnect", False)
    return await nats.connect(server.url, **kw)


@pytest.fixture
def server(natsd):
    return natsd()


@run
async def test_pub_sub_basic(server):
    nc = await connect(server)
    sub = await nc.subscribe("greet.joe")
    await nc.publish("greet.joe", b"hello")
    msg = await sub.next_msg(timeout=5)
    assert (msg.subject, msg.data, msg.reply) == ("greet.joe", b"hello", "")
    await nc.close()


@run
async def test_wildcards(server):
    nc = await connect(server)
    star = await nc.subscribe("time.*.east")
    full = await nc.subscribe("time.us.>")
    mixed = await nc.subscribe("*.*.east.>")
    tap = await nc.subscribe(">")
    for s in ["time.us.east", "time.us.east.atlanta", "time.eu.east", "time.us", "time.New*.east"]:
        await nc.publish(s, s.encode())
    await nc.flush()

    async def drain(sub, n):
        return sorted([(await sub.next_msg(timeout=5)).subject for _ in range(n)])

    assert await drain(star, 3) == ["time.New*.east", "time.eu.east", "time.us.east"]
    assert await drain(full, 2) == ["time.us.east", "time.us.east.atlanta"]
    assert await drain(mixed, 1) == ["time.us.east.atlanta"]
    assert len(await drain(tap, 5)) == 5
    for s in (star, full, mixed, tap):
        with pytest.raises(nats.errors.TimeoutError):
            await s.next_msg(timeout=0.05)
    await nc.close()


@run
async def test_queue_groups(server):
    pub = await connect(server)
    members = [await connect(server) for _ in range(3)]
    got = {"a": [], "b": [], "plain": []}
    subs = []
    def collector(key, i=None):
        async def cb(m):
            got[key].append(m.data if i is None else (i, m.data))
        return cb
    for i, nc in enumerate(members):
        subs.append(await nc.subscribe("work", queue="a", cb=collector("a", i)))
        subs.append(await nc.subscribe("work", queue="b", cb=collector("b", i)))
    plain = await connect(server)
    await plain.subscribe("work", cb=collector("plain"))
    for nc in members + [plain]:
        await nc.flush()
    n = 300
    for i in range(n):
        await pub.publish("work", b"%d" % i)
    await pub.flush()
    assert await until(lambda: len(got["a"]) >= n and len(got["b"]) >= n and len(got["plain"]) >= n)
    for group in ("a", "b"):
        datas = sorted(int(d) for _, d in got[group])
        assert datas == list(range(n)), "each message to exactly one member of %s" % group
        spread = {i for i, _ in got[group]}
        assert spread == {0, 1, 2}, "messages spread over the members"
    assert sorted(int(d) for d in got["plain"]) == list(range(n))
    for nc in members + [plain, pub]:
        await nc.close()


@run
async def test_request_reply(server):
    nc = await connect(server)
    resp = await connect(server)

    async def handler(msg):
        await msg.respond(b"re:" + msg.data)
    await resp.subscribe("svc.echo", cb=handler)
    await resp.flush()
    for i in range(20):
        reply = await nc.request("svc.echo", b"q%d" % i, timeout=5)
        assert reply.data == b"re:q%d" % i
    await nc.close()
    await resp.close()


@run
async def test_headers_round_trip(server):
    nc = await connect(server)
    sub = await nc.subscribe("h")
    await nc.publish("h", b"body", headers={"X-One": "1", "Trace": "abc"})
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"body"
    assert msg.headers == {"X-One": "1", "Trace": "abc"}
    await nc.close()


@run
async def test_headers_repeated_keys_raw_delivery(server):
    """nats-py folds repeated keys; check the server relays all of them in order via a raw subscriber."""
    from tests.support.rawclient import RawClient
    raw = RawClient(server.port).connect()
    raw.send(b"SUB h 1\r\n")
    raw.sync()
    nc = await connect(server)
    hdr = b"NATS/1.0\r\nK: 1\r\nK: 2\r\nk: 3\r\n\r\n"
    # nats-py's publish takes a dict; build a HPUB by hand through its transport
    nc._transport.write(b"HPUB h %d %d\r\n" % (len(hdr), len(hdr) + 2) + hdr + b"ok\r\n")
    await nc.flush()
    assert raw.sync() == b"HMSG h 1 %d %d\r\n" % (len(hdr), len(hdr) + 2) + hdr + b"ok\r\n"
    raw.close()
    await nc.close()


@run
async def test_no_responders(server):
    nc = await connect(server)
    with pytest.raises(nats.errors.NoRespondersError):
        await nc.request("nobody.home", b"?", timeout=5)
    await nc.close()


@run
async def test_auto_unsubscribe(server):
    nc = await connect(server)
    sub = await nc.subscribe("auto")
    await sub.unsubscribe(limit=3)
    sub2 = await nc.subscribe("auto", max_msgs=2)
    for i in range(6):
        await nc.publish("auto", b"%d" % i)
    await nc.flush()
    got = [(await sub.next_msg(timeout=5)).data for _ in range(3)]
    assert got == [b"0", b"1", b"2"]
    got2 = [(await sub2.next_msg(timeout=5)).data for _ in range(2)]
    assert got2 == [b"0", b"1"]
    # nats-py's max_msgs is client-side only; UNSUB <sid> <max> made the server drop `sub`
    await sub2.unsubscribe()
    await nc.flush()
    other = await connect(server)
    with pytest.raises(nats.errors.NoRespondersError):
        await other.request("auto", b"", timeout=5)
    await nc.close()
    await other.close()


@run
async def test_drain_delivers_pending_then_closes(server):
    nc = await connect(server)
    pub = await connect(server)
    got = []

    async def cb(msg):
        await asyncio.sleep(0)
        got.append(msg.data)
    await nc.subscribe("d", cb=cb)
    await nc.flush()
    for i in range(100):
        await pub.publish("d", b"%d" % i)
    await pub.flush()
    await until(lambda: len(got) > 0)
    await nc.drain()
    assert got == [b"%d" % i for i in range(100)]
    assert nc.is_closed
    await pub.close()


@run
async def test_flush_round_trip(server):
    nc = await connect(server)
    for _ in range(10):
        await nc.flush(timeout=5)
    await nc.close()


@run
async def test_no_echo(server):
    nc = await connect(server, no_echo=True)
    other = await connect(server)
    sub = await nc.subscribe("echo")
    await nc.flush()
    await nc.publish("echo", b"mine")
    await nc.flush()
    await other.publish("echo", b"theirs")
    await other.flush()
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"theirs"
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.1)
    await nc.close()
    await other.close()


@run
async def test_verbose_and_pedantic_clients_work(server):
    nc = await connect(server, verbose=True, pedantic=True)
    sub = await nc.subscribe("vp")
    await nc.publish("vp", b"x")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"x"
    await nc.flush()
    assert nc.is_connected
    await nc.close()


@run
async def test_large_payload_near_max(server):
    nc = await connect(server)
    assert nc.max_payload == 1048576
    sub = await nc.subscribe("big")
    payload = bytes(range(256)) * (nc.max_payload // 256 - 1) + b"x" * 200
    assert len(payload) <= nc.max_payload
    await nc.publish("big", payload)
    msg = await sub.next_msg(timeout=10)
    assert msg.data == payload
    with pytest.raises(nats.errors.MaxPayloadError):
        await nc.publish("big", b"x" * (nc.max_payload + 1))
    await nc.close()


@run
async def test_ten_thousand_in_order(server):
    nc = await connect(server)
    pub = await connect(server)
    got = []
    done = asyncio.Event()

    async def cb(msg):
        got.append(msg.data)
        if len(got) == 10000:
            done.set()
    await nc.subscribe("seq", cb=cb, pending_msgs_limit=20000)
    await nc.flush()
    for i in range(10000):
        await pub.publish("seq", b"%d" % i)
    await pub.flush()
    await asyncio.wait_for(done.wait(), 30)
    assert got == [b"%d" % i for i in range(10000)]
    await nc.close()
    await pub.close()


@run
async def test_fan_out_many_subscribers(server):
    conns = [await connect(server) for _ in range(5)]
    subs = []
    for nc in conns:
        for _ in range(10):
            subs.append(await nc.subscribe("fan"))
        await nc.flush()
    pub = await connect(server)
    for i in range(10):
        await pub.publish("fan", b"%d" % i)
    await pub.flush()
    for sub in subs:
        assert [(await sub.next_msg(timeout=5)).data for _ in range(10)] == [b"%d" % i for i in range(10)]
    for nc in conns + [pub]:
        await nc.close()


from tools.serverproc import free_port  # noqa: E402


@run
async def test_reconnect_after_restart(natsd):
    port = free_port()
    srv = natsd("-p", str(port))
    reconnected = asyncio.Event()

    async def on_reconnect():
        reconnected.set()
    nc = await nats.connect(srv.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1,
                            reconnected_cb=on_reconnect)
    sub = await nc.subscribe("again")
    await nc.flush()
    assert srv.stop() == 0
    natsd("-p", str(port))
    await asyncio.wait_for(reconnected.wait(), 20)
    await nc.flush(timeout=5)
    other = await nats.connect("nats://127.0.0.1:%d" % port)
    await other.publish("again", b"back")
    await other.flush()
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"back"
    await other.close()
    await nc.close()
