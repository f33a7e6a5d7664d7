"""JetStream deliveries to a client on another server of the cluster: the consumer's server
frames them for the route (natsd/jetstream/engine/fastdeliver.pyx, router.frame_remote: `RMSG <acc>
<target> <ack reply>@<stored subject>`, HMSG with headers), and the client's server hands them
on as MSG/HMSG under the stored subject. What the client reads, byte for byte but the
timestamp in the ack reply, is compared with a nats-server cluster: a pull consumer's batch
and a push consumer's run, with and without headers."""
import asyncio
import json
import re
import time

import pytest

from tests.support.cluster import js_cluster, wait_interest

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")

STREAM = {"name": "D", "subjects": ["d.>"], "placement": {"tags": ["here"]}}
FRAME = re.compile(rb"(MSG|HMSG) (\S+) (\S+) (\S+) (?:(\d+) )?(\d+)\r\n")


async def next_line(reader):
    """The next protocol line that is not an INFO (servers send them as the cluster changes)."""
    while True:
        line = await asyncio.wait_for(reader.readline(), 10)
        if not line.startswith(b"INFO "):
            return line


async def raw_client(url):
    host, port = url.rsplit("/", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    await reader.readline()                                     # INFO
    writer.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
                 b'"protocol":1}\r\nPING\r\n')
    assert await next_line(reader) == b"PONG\r\n"
    return reader, writer


async def read_frames(reader, n, timeout=10):
    """n MSG/HMSG frames -> (op, subject, sid, reply with its timestamp token masked, headers,
    payload); PINGs skipped."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        line = await asyncio.wait_for(next_line(reader), max(0.1, deadline - time.monotonic()))
        if line == b"PING\r\n":
            continue
        m = FRAME.match(line)
        assert m, line
        op, subj, sid, reply, hlen, total = m.groups()
        body = await reader.readexactly(int(total) + 2)
        h = int(hlen) if hlen else 0
        tokens = reply.split(b".")
        if reply.startswith(b"$JS.ACK.") and len(tokens) >= 9:
            tokens[-2] = b"TS"
        out.append((op, subj, sid, b".".join(tokens), body[:h], body[h:-2]))
    return out


async def request(url, subject, body):
    import nats
    nc = await nats.connect(url)
    try:
        return json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=5)).data)
    finally:
        await nc.close()


async def publish_some(url):
    import nats
    nc = await nats.connect(url)
    js = nc.jetstream()
    for i in range(6):
        await js.publish("d.%d" % (i % 3), b"m%d" % i, headers={"H-Kind": "x%d" % i} if i % 2 else None)
    await nc.close()


def scenario(members):
    a, b = members[0], members[1]

    async def run():
        import nats
        for _ in range(50):                                     # until the meta leader answers
            try:
                r = await request(a.url, "$JS.API.STREAM.CREATE.D", STREAM)
            except nats.errors.TimeoutError:
                continue
            if "error" not in r:
                break
            await asyncio.sleep(0.2)
        assert r["config"]["name"] == "D" and r["cluster"]["leader"] == "A", r
        await publish_some(a.url)
        reader, writer = await raw_client(b.url)
        writer.write(b"SUB inbox.pull 1\r\nSUB deliver.push 2\r\nPING\r\n")
        assert await next_line(reader) == b"PONG\r\n"
        await asyncio.get_running_loop().run_in_executor(None, wait_interest, [a], "deliver.push")
        await asyncio.get_running_loop().run_in_executor(None, wait_interest, [a], "inbox.pull")
        r = await request(a.url, "$JS.API.CONSUMER.CREATE.D.PULL",
                          {"stream_name": "D", "config": {"durable_name": "PULL", "ack_policy": "explicit"}})
        assert "error" not in r, r
        # the consumer's pull subject reaches B over the route after the create's answer reached
        # the client (on either server): a pull request published before that finds no interest
        await asyncio.get_running_loop().run_in_executor(
            None, wait_interest, [b], "$JS.API.CONSUMER.MSG.NEXT.D.PULL")
        writer.write(b'PUB $JS.API.CONSUMER.MSG.NEXT.D.PULL inbox.pull 11\r\n{"batch":4}\r\n')
        pulled = await read_frames(reader, 4)
        r = await request(a.url, "$JS.API.CONSUMER.CREATE.D.PUSH",
                          {"stream_name": "D", "config": {"durable_name": "PUSH", "ack_policy": "explicit",
                                                          "deliver_subject": "deliver.push"}})
        assert "error" not in r, r
        pushed = await read_frames(reader, 6)
        writer.close()
        return pulled, pushed
    return asyncio.run(run())


@need_ref
def test_deliveries_across_a_route_match_nats_server(tmp_path):
    seen = {}
    for kind in ("nats-server", "natsd"):
        tags = lambda name: 'server_tags: ["here"]' if name == "A" else ""
        with js_cluster(kind, tmp_path / kind, names="AB", extra=tags) as members:
            try:
                seen[kind] = scenario(members)
            except (AssertionError, asyncio.TimeoutError) as e:
                raise AssertionError("%s: %r" % (kind, e)) from e
    assert seen["natsd"] == seen["nats-server"]
    pulled, pushed = seen["natsd"]
    assert [f[1] for f in pulled] == [b"d.0", b"d.1", b"d.2", b"d.0"]
    assert pulled[0] == (b"MSG", b"d.0", b"1", b"$JS.ACK.D.PULL.1.1.1.TS.5", b"", b"m0")
    assert pulled[1][0] == b"HMSG" and pulled[1][4] == b"NATS/1.0\r\nH-Kind: x1\r\n\r\n"
    assert [f[2] for f in pushed] == [b"2"] * 6 and [f[5] for f in pushed] == [b"m%d" % i for i in range(6)]
