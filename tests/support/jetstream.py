"""JetStream through nats-py, for the end-to-end tests on natsd and the reference: a client
connection (connect), a scenario given a connection and its JetStream context, on any server
(with_jetstream) or as a test of the js_server fixture (on_js_server), an API request and its decoded reply (api), the same
scenario on a fresh server of each kind compared entry by entry (same_on_both, or as a test:
compared_on_both), where a log
block's records end (records_end), what a stream holds read through the API
(stream_contents), what a KV watcher sees first (initial_values), the headers of a batch
publish (bh), a scenario on both sides of a kill -9
and restart (across_a_kill), and a natsd that cannot write a file
past a size, filled until its store refuses (start_size_limited, publish_until_refused,
check_acked_kept), and a call asked again while nobody answers it (until_answered)."""
import asyncio
import base64
import json
import sys
import time

import nats

from tests.support.servers import start_server
from tests.support.waiting import named_after, run


async def api(nc, subject, body=b"", timeout=3, headers=None):
    """A JetStream API request; returns the decoded JSON reply."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    m = await nc.request(subject, body, timeout=timeout, headers=headers)
    return json.loads(m.data)


async def until_answered(call, timeout=10.0):
    """`await call()`, again while nobody answers it (no responders, which nats-py's publish
    reports as NoStreamResponseError, or a pull request's 503:
    nothing took it, so nothing was stored or delivered): on a cluster, nats-server answers a
    create before the new stream's or consumer's interest has crossed the routes to every
    server."""
    import nats.js.errors
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except (nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError,
                nats.js.errors.NoStreamResponseError):     # nats-py's js.publish on no responders
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def connect(server):
    return await nats.connect(server.url, reconnect_time_wait=0.1, max_reconnect_attempts=2)


def with_jetstream(server, scenario):
    """scenario(nc, js) run with a connection to `server` and its JetStream context, closed
    afterwards -> what it returns."""
    async def connected():
        nc = await connect(server)
        try:
            return await scenario(nc, nc.jetstream())
        finally:
            await nc.close()
    return run(connected())


def on_js_server(scenario):
    """`@on_js_server async def test_x(nc, js)`: a test of the js_server fixture (natsd with
    JetStream; nats-server with NATSD_TEST_REFERENCE=1) that runs the scenario with a
    connection to it and its JetStream context, closed afterwards."""
    @named_after(scenario)
    def test(js_server):
        with_jetstream(js_server, scenario)
    return test


def same_on_both(scenario, natsd, reference, tmp_path):
    """Run an async `scenario(nc, js) -> [observations]` (with_jetstream) against a fresh natsd
    and a fresh nats-server (JetStream on, own store dirs) and assert the transcripts are equal,
    entry by entry (the first difference is reported). Returns natsd's transcript."""
    ours = with_jetstream(natsd("-js", "-sd", str(tmp_path / "natsd")), scenario)
    theirs = with_jetstream(reference("-js", "-sd", str(tmp_path / "ref")), scenario)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, "entry %d differs: natsd %r, nats-server %r" % (i, a, b)
    assert len(ours) == len(theirs)
    return ours


def compared_on_both(scenario):
    """`@compared_on_both async def test_x(nc, js) -> [observations]`: a test that runs the
    scenario on a fresh natsd and a fresh nats-server and compares them (same_on_both)."""
    @named_after(scenario)
    def test(natsd, reference, tmp_path):
        same_on_both(scenario, natsd, reference, tmp_path)
    return test


async def stream_contents(nc, stream):
    """What `stream` holds, read through the API: (messages, last sequence, [(sequence,
    subject, header bytes, data bytes)] of every message from the first to the last)."""
    st = (await api(nc, "$JS.API.STREAM.INFO." + stream, timeout=2))["state"]
    msgs = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        m = (await api(nc, "$JS.API.STREAM.MSG.GET." + stream, {"seq": seq}, timeout=2)).get("message")
        if m:
            msgs.append((m["seq"], m["subject"], base64.b64decode(m.get("hdrs", "")),
                         base64.b64decode(m.get("data", ""))))
    return st["messages"], st["last_seq"], msgs


def bh(batch_id, seq, commit=None, **extra):
    """The headers of message `seq` of batch `batch_id` (Nats-Batch-Commit: `commit`)."""
    h = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)}
    if commit is not None:
        h["Nats-Batch-Commit"] = commit
    h.update(extra)
    return h


def across_a_kill(natsd, store, before, after):
    """before(nc, js) on a natsd with JetStream stored in `store`; kill -9 of it; after(nc, js)
    on a natsd restarted on the same store and port (with_jetstream, both)."""
    srv = natsd("-js", "-sd", store)
    with_jetstream(srv, before)
    srv.kill()
    with_jetstream(natsd("-js", "-sd", store, "-p", str(srv.port)), after)


async def initial_values(watcher):
    """(key, value) of every entry a KV watcher delivers before its end-of-initial-values
    marker (None)."""
    seen = []
    async for e in watcher:
        if e is None:
            return seen
        seen.append((e.key, e.value))
    return seen


def records_end(path):
    """Where a log block's records end: a plaintext block that was not closed cleanly has
    zeros after them (natsd/_core/log.pyx, "Zero ahead"), which a test cutting into the
    records must not count."""
    with open(path, "rb") as f:
        return len(f.read().rstrip(b"\0"))


SIZE_LIMITED = """
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
sys.argv = ["natsd"] + sys.argv[1:]
runpy.run_module("natsd", run_name="__main__")
"""


def start_size_limited(*args, limit=64 * 1024):
    """natsd whose process cannot write a file past `limit` bytes (RLIMIT_FSIZE, SIGXFSZ
    ignored: running as root makes an unwritable directory useless) -> a ready ServerProcess,
    the caller's to stop."""
    return start_server([sys.executable, "-c", SIZE_LIMITED.format(limit=limit)], *args)


async def publish_until_refused(nc, acked, errors, subject="big", count=200):
    """Requests of 2 KB to `subject` until three are refused (or `count` are made): the acked
    ones into acked {i: stream sequence}, the refusals' errors into errors."""
    for i in range(count):
        r = json.loads((await nc.request(subject, b"%06d" % i + b"x" * 2000, timeout=3)).data)
        if "error" in r:
            errors.append(r["error"])
        else:
            acked[i] = r["seq"]
        if len(errors) >= 3:
            return


async def check_acked_kept(js, stream, acked):
    """Every message publish_until_refused had acked is in `stream`, and nothing else."""
    for i, seq in acked.items():
        assert (await js.get_msg(stream, seq)).data.startswith(b"%06d" % i), (i, seq)
    si = await js.stream_info(stream)
    assert si.state.messages == len(acked) and si.state.last_seq == max(acked.values())
