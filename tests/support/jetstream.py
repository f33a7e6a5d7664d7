"""JetStream through nats-py, for the end-to-end tests on natsd and the reference: a client
connection (connect), a test that runs on the js_server fixture with a connection and its
JetStream context (on_js_server), an API request and its decoded reply (api), the same
scenario on a fresh server of each kind compared entry by entry (same_on_both), and where a
log block's records end (records_end)."""
import asyncio
import json

import nats

from tests.support.waiting import run


async def api(nc, subject, body=b"", timeout=3, headers=None):
    """A JetStream API request; returns the decoded JSON reply."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    m = await nc.request(subject, body, timeout=timeout, headers=headers)
    return json.loads(m.data)


async def connect(server):
    return await nats.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=2)


def on_js_server(scenario):
    """`@on_js_server async def test_x(nc, js)`: a test of the js_server fixture (natsd with
    JetStream; nats-server with NATSD_TEST_REFERENCE=1) that runs the scenario with a
    connection to it and its JetStream context, closed afterwards."""
    def test(js_server):
        async def connected():
            nc = await connect(js_server)
            try:
                await scenario(nc, nc.jetstream())
            finally:
                await nc.close()
        run(connected())
    test.__name__, test.__qualname__ = scenario.__name__, scenario.__qualname__
    test.__doc__, test.__module__ = scenario.__doc__, scenario.__module__
    return test


def same_on_both(scenario, natsd, reference, tmp_path):
    """Run an async `scenario(url) -> [observations]` against a fresh natsd and a fresh
    nats-server (JetStream on, own store dirs) and assert the transcripts are equal, entry by
    entry (the first difference is reported). Returns natsd's transcript."""
    ours = asyncio.run(scenario(natsd("-js", "-sd", str(tmp_path / "natsd")).url))
    theirs = asyncio.run(scenario(reference("-js", "-sd", str(tmp_path / "ref")).url))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, "entry %d differs" % i
    assert len(ours) == len(theirs)
    return ours


def records_end(path):
    """Where a log block's records end: a plaintext block that was not closed cleanly has
    zeros after them (natsd/_core/log.pyx, "Zero ahead"), which a test cutting into the
    records must not count."""
    with open(path, "rb") as f:
        return len(f.read().rstrip(b"\0"))
