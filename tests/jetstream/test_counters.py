"""Counter streams (allow_msg_counter, `Nats-Incr`) and the refusals of headers a stream has not
enabled (counters, schedules, atomic batches), natsd against the reference nats-server: the same
publishes, the same PubAcks and error codes, the same stored messages and headers. A source
aggregating two counter streams is checked too, and a counter survives a restart."""
import asyncio
import json

from tests.support.jetstream import across_a_kill, api, compared_on_both

BIG = 10 ** 30


async def pub(nc, subject, payload=b"", headers=None):
    m = await nc.request(subject, payload, timeout=2, headers=headers)
    return json.loads(m.data)


async def stored(nc, stream, seq):
    r = json.loads((await nc.request("$JS.API.STREAM.MSG.GET." + stream,
                                     json.dumps({"seq": seq}).encode(), timeout=2)).data)
    if "message" not in r:
        return r
    import base64
    msg = r["message"]
    return (msg["subject"], base64.b64decode(msg.get("data", "")),
            base64.b64decode(msg.get("hdrs", "")) if msg.get("hdrs") else b"")


@compared_on_both
async def test_counters_match(nc, js):
    out = []
    api = lambda s, b: nc.request(s, json.dumps(b).encode(), timeout=2)   # noqa: E731
    await api("$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True})
    await api("$JS.API.STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"], "allow_msg_counter": True})
    await api("$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]})
    cases = [
        ("c.a", b"", {"Nats-Incr": "5"}), ("c.a", b"", {"Nats-Incr": "+2"}),
        ("c.a", b"", {"Nats-Incr": "-10"}), ("c.b", b"", {"Nats-Incr": str(BIG)}),
        ("c.b", b"", {"Nats-Incr": str(BIG)}), ("c.a", b"x", {"Nats-Incr": "1"}),
        ("c.a", b"", {"Nats-Incr": "1.5"}), ("c.a", b"", {"Nats-Incr": "1_000"}),
        ("c.a", b"", {"Nats-Incr": " 1"}), ("c.a", b"", {"Nats-Incr": "1", "Nats-Rollup": "sub"}),
        ("c.a", b"", {"Nats-Incr": "1", "Nats-Expected-Last-Sequence": "3"}),
        ("c.a", b"", {"Nats-Incr": "1", "Nats-Msg-Id": "m1"}),
        ("c.a", b"", {"Nats-Incr": "1", "Nats-Msg-Id": "m1"}),
        ("d.x", b"", {"Nats-Incr": "7"}), ("d.y", b"", {"Nats-Incr": "1"}),
        ("p.a", b"", {"Nats-Incr": "1"}), ("p.a", b"", {"Nats-Incr": "x"}),
        ("p.a", b"s", {"Nats-Schedule": "@at 2030-01-01T00:00:00Z", "Nats-Schedule-Target": "p.t"}),
        ("p.a", b"b", {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "1"}),
    ]
    for subject, payload, headers in cases:
        out.append((subject, headers, await pub(nc, subject, payload, headers)))
    # plain increments (natsd's short path remembers each subject's value): after the last one
    # is deleted, and after the subject is purged, they count on from what the stream holds
    for n in ("1", "2", "3"):
        out.append(("c.z", n, await pub(nc, "c.z", b"", {"Nats-Incr": n})))
    deleted = json.loads((await api("$JS.API.STREAM.MSG.DELETE.C", {"seq": out[-1][2]["seq"]})).data)
    out.append(("c.z", "10", deleted, await pub(nc, "c.z", b"", {"Nats-Incr": "10"})))
    purged = json.loads((await api("$JS.API.STREAM.PURGE.C", {"filter": "c.z"})).data)
    out.append(("c.z", "4", purged, await pub(nc, "c.z", b"", {"Nats-Incr": "4"})))
    assert [r[-1].get("val") for r in out[-5:]] == ["1", "3", "6", "13", "4"]
    # a counter stream with limits: increments are stored while under them, the oldest
    # messages go once they are reached, and the values carry on
    await api("$JS.API.STREAM.CREATE.L", {"name": "L", "subjects": ["l.>"], "allow_msg_counter": True,
                                          "max_msgs": 3, "max_bytes": 4096})
    for subject, n in (("l.a", "1"), ("l.a", "2"), ("l.b", "5"), ("l.a", "3"), ("l.b", "1"), ("l.a", "4")):
        out.append((subject, n, await pub(nc, subject, b"", {"Nats-Incr": n})))
    assert [r[-1].get("val") for r in out[-6:]] == ["1", "3", "5", "6", "6", "10"]
    state = json.loads((await nc.request("$JS.API.STREAM.INFO.L", b"", timeout=2)).data)["state"]
    out.append(("L", {k: v for k, v in state.items() if not k.endswith("_ts")}))
    # a source aggregating both counter streams
    await api("$JS.API.STREAM.CREATE.AGG", {"name": "AGG", "allow_msg_counter": True, "sources": [
        {"name": "C", "subject_transforms": [{"src": "c.a", "dest": "total"}]},
        {"name": "D", "subject_transforms": [{"src": "d.x", "dest": "total"}]}]})
    async def held(stream, subject):
        r = json.loads((await nc.request("$JS.API.STREAM.INFO." + stream, json.dumps(
            {"subjects_filter": subject}).encode(), timeout=2)).data)
        return (r["state"].get("subjects") or {}).get(subject, 0)

    async def agg_reaches(n):
        # every sourced message is in (a count reached early would read the value too soon)
        for _ in range(400):
            st = json.loads((await nc.request("$JS.API.STREAM.INFO.AGG", b"", timeout=2)).data)["state"]
            if st["messages"] >= n:
                return st
            await asyncio.sleep(0.05)
        return st
    sourced = await held("C", "c.a") + await held("D", "d.x")
    await agg_reaches(sourced)
    await pub(nc, "d.x", b"", {"Nats-Incr": "3"})
    st = await agg_reaches(sourced + 1)
    last = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.AGG",
                                        json.dumps({"last_by_subj": "total"}).encode(), timeout=2)).data)
    import base64
    out.append(("agg", base64.b64decode(last["message"]["data"]), st["messages"]))
    for seq in range(1, 7):
        subj, data, hdrs = await stored(nc, "C", seq) if seq <= 5 else ("-", b"", b"")
        out.append(("C", seq, subj, data, hdrs))
    return out


def test_counter_survives_restart(natsd, tmp_path):
    async def first(nc, js):
        await api(nc, "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True})
        assert (await pub(nc, "c.a", b"", {"Nats-Incr": "40"}))["val"] == "40"

    async def second(nc, js):
        assert (await pub(nc, "c.a", b"", {"Nats-Incr": "2"}))["val"] == "42"
    across_a_kill(natsd, str(tmp_path / "d"), first, second)
