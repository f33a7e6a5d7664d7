"""Message expiry with subject delete markers, natsd against the reference nats-server: max_age
spares a message whose Nats-TTL is "never"; the last message of a subject that expires (by
max_age or by its own TTL) is replaced by a `Nats-Marker-Reason: MaxAge` marker carrying
`Nats-TTL` and `Nats-Rollup: sub`; markers that expire leave no marker behind."""
import asyncio
import base64
import json

import nats

from tests.support.jetstream import same_on_both


async def scenario(url):
    nc = await nats.connect(url)
    out = []

    async def api(subject, body=b""):
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return json.loads((await nc.request(subject, body, timeout=2)).data)

    async def contents():
        st = (await api("$JS.API.STREAM.INFO.K"))["state"]
        msgs = []
        for seq in range(st["first_seq"], st["last_seq"] + 1):
            m = (await api("$JS.API.STREAM.MSG.GET.K", {"seq": seq})).get("message")
            if m:
                msgs.append((m["subject"], base64.b64decode(m.get("hdrs", "")), base64.b64decode(m.get("data", ""))))
        return st["messages"], st["last_seq"], sorted(msgs)

    r = await api("$JS.API.STREAM.CREATE.K", {
        "name": "K", "subjects": ["k.>"], "allow_msg_ttl": True, "max_age": 1_000_000_000,
        "subject_delete_marker_ttl": 2_000_000_000})
    out.append(sorted((k, v) for k, v in r["config"].items() if k != "created"))
    for subject, headers in (("k.a", None), ("k.b", {"Nats-TTL": "1s"}), ("k.c", {"Nats-TTL": "never"}),
                             ("k.d", None), ("k.d", None)):
        out.append(json.loads((await nc.request(subject, b"v", timeout=2, headers=headers)).data))
    # markers placed after about 1 s, gone by max_age after about 2 s
    for _ in range(100):
        got = await contents()
        if got[1] >= 8:
            break
        await asyncio.sleep(0.05)
    out.append(got)
    for _ in range(100):
        got = await contents()
        if got[0] == 1:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    out.append(await contents())
    await nc.close()
    return out


def test_expiry_and_markers_match(natsd, reference, tmp_path):
    ours = same_on_both(scenario, natsd, reference, tmp_path)
    # the markers replaced the expired subjects; the "never" message outlived max_age
    subjects = [m[0] for m in ours[-2][2]]
    assert subjects == ["k.a", "k.b", "k.c", "k.d"] and ours[-1][2] == [
        ("k.c", b"NATS/1.0\r\nNats-TTL: never\r\n\r\n", b"v")]
