"""flush() of nats-py, as the test kit runs it (tests/support/natspy.py): the PING it sends
reaches the server after the commands made before it, so that its PONG says they were
processed. A server of a few lines records the order of what the client sends."""
import asyncio
import json

import nats

from tests.support.waiting import run


async def recording_server(lines):
    """A NATS server that sends INFO, answers PING with PONG and records every line."""
    async def client(reader, writer):
        writer.write(b"INFO " + json.dumps({"server_id": "rec", "version": "2.15.0", "proto": 1,
                                            "headers": True, "max_payload": 1048576}).encode() + b"\r\n")
        await writer.drain()
        while line := await reader.readline():
            lines.append(line.rstrip(b"\r\n"))
            if line.startswith(b"PING"):
                writer.write(b"PONG\r\n")
                await writer.drain()
        writer.close()
    return await asyncio.start_server(client, "127.0.0.1", 0)


@run
async def test_flush_follows_the_subscriptions_before_it():
    lines = []
    server = await recording_server(lines)
    nc = await nats.connect("nats://127.0.0.1:%d" % server.sockets[0].getsockname()[1],
                            allow_reconnect=False)
    await nc.subscribe("a")
    await nc.subscribe("b")
    await nc.flush()
    await nc.close()
    server.close()
    flush_ping = len(lines) - 1 - lines[::-1].index(b"PING")
    assert lines.index(b"SUB b  2") < flush_ping, lines
