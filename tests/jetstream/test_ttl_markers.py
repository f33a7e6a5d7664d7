"""Message expiry with subject delete markers, natsd against the reference nats-server: max_age
spares a message whose Nats-TTL is "never"; the last message of a subject that expires (by
max_age or by its own TTL) is replaced by a `Nats-Marker-Reason: MaxAge` marker carrying
`Nats-TTL` and `Nats-Rollup: sub`; markers that expire leave no marker behind."""
import asyncio
import json

from tests.support.jetstream import api, same_on_both, stream_contents
from tests.support.waiting import until


async def scenario(nc, js):
    out = []

    async def contents():
        n, last, msgs = await stream_contents(nc, "K")
        return n, last, sorted((subject, hdrs, data) for _, subject, hdrs, data in msgs)

    r = await api(nc, "$JS.API.STREAM.CREATE.K", {
        "name": "K", "subjects": ["k.>"], "allow_msg_ttl": True, "max_age": 1_000_000_000,
        "subject_delete_marker_ttl": 2_000_000_000}, timeout=2)
    out.append(sorted((k, v) for k, v in r["config"].items() if k != "created"))
    for subject, headers in (("k.a", None), ("k.b", {"Nats-TTL": "1s"}), ("k.c", {"Nats-TTL": "never"}),
                             ("k.d", None), ("k.d", None)):
        out.append(json.loads((await nc.request(subject, b"v", timeout=2, headers=headers)).data))
    # markers placed after about 1 s, gone by max_age after about 2 s

    async def once(ready):
        got = await contents()
        return got if ready(got) else None
    out.append(await until(lambda: once(lambda got: got[1] >= 8), 10) or await contents())
    await until(lambda: once(lambda got: got[0] == 1), 10)
    await asyncio.sleep(0.3)                        # nothing more happens
    out.append(await contents())
    return out


def test_expiry_and_markers_match(natsd, reference, tmp_path):
    ours = same_on_both(scenario, natsd, reference, tmp_path)
    # the markers replaced the expired subjects; the "never" message outlived max_age
    subjects = [m[0] for m in ours[-2][2]]
    assert subjects == ["k.a", "k.b", "k.c", "k.d"] and ours[-1][2] == [
        ("k.c", b"NATS/1.0\r\nNats-TTL: never\r\n\r\n", b"v")]
