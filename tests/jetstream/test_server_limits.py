"""The config's JetStream server limits (`jetstream { limits { max_ack_pending,
max_request_batch, duplicate_window, batch { max_msgs, max_inflight_per_stream, timeout } } }`),
natsd against the reference: the same defaults they impose on new consumers and streams, the
same refusals past them (10121, 10125, 10052 naming the server limit), and atomic batches cut at
the configured size and abandoned after the configured timeout."""
import asyncio
import json

import nats

from tests.support.jetstream import bh

CONF = """
listen: 127.0.0.1:-1
jetstream {
  store_dir: "%s"
  limits {
    max_ack_pending: 100
    max_request_batch: 10
    duplicate_window: "30s"
    batch { max_msgs: 3, max_inflight_per_stream: 2, timeout: "300ms" }
  }
}
"""

CONSUMERS = [
    {"durable_name": "d1", "ack_policy": "explicit"},                       # defaults applied
    {"durable_name": "d2", "ack_policy": "explicit", "max_ack_pending": 101},
    {"durable_name": "d3", "ack_policy": "explicit", "max_batch": 11},
    {"durable_name": "d4", "ack_policy": "explicit", "max_batch": 10, "max_ack_pending": 100},
    {"durable_name": "d5", "ack_policy": "explicit", "deliver_subject": "push.d5"},
]

STREAMS = [
    {"name": "S1", "subjects": ["s1"]},                                       # window defaults to 30s
    {"name": "S2", "subjects": ["s2"], "duplicate_window": 31_000_000_000},  # past the limit
    {"name": "S3", "subjects": ["s3"], "duplicate_window": 30_000_000_000},
]

CFG_KEYS = ("max_ack_pending", "max_batch", "duplicate_window")


def _shape(reply):
    if "error" in reply:
        return reply["error"]
    cfg = reply["config"]
    return {k: cfg.get(k) for k in CFG_KEYS}


async def scenario(url):
    nc = await nats.connect(url)
    out = []

    async def api(subject, body):
        m = await nc.request(subject, json.dumps(body).encode(), timeout=2)
        return json.loads(m.data)
    for cfg in STREAMS:
        out.append(_shape(await api("$JS.API.STREAM.CREATE." + cfg["name"], cfg)))
    await api("$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"], "allow_atomic": True})
    for cfg in CONSUMERS:
        out.append(_shape(await api("$JS.API.CONSUMER.CREATE.S1." + cfg["durable_name"],
                                    {"stream_name": "S1", "config": cfg})))
    adv = []

    async def on_adv(m):
        adv.append(json.loads(m.data)["reason"])
    await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>", cb=on_adv)

    async def pub(subject, headers):
        try:
            m = await nc.request(subject, b"x", timeout=2, headers=headers)
            return json.loads(m.data) if m.data else "empty"
        except nats.errors.TimeoutError:
            return "timeout"
    # three messages fit; a fourth makes the batch too large
    out.append([await pub("a.1", bh("ok", 1)), await pub("a.2", bh("ok", 2)),
                await pub("a.3", bh("ok", 3, "1"))])
    out.append([await pub("a.%d" % i, bh("big", i, "1" if i == 4 else None)) for i in (1, 2, 3, 4)])
    # two batches may be open on the stream, a third is refused
    out.append([await pub("a.5", bh("o1", 1)), await pub("a.6", bh("o2", 1)),
                await pub("a.7", bh("o3", 1))])
    # after the configured 300ms both open batches are abandoned
    deadline = asyncio.get_running_loop().time() + 5
    while len(adv) < 3 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    out.append(sorted(adv))
    out.append((await pub("a.8", bh("o1", 2, "1"))))
    info = await api("$JS.API.STREAM.INFO.A", {})
    out.append(info["state"]["messages"])
    await nc.close()
    return out


def test_server_limits_match_the_reference(natsd, reference, tmp_path):
    transcripts = []
    for name, start in (("natsd", natsd), ("ref", reference)):
        (tmp_path / name).mkdir()
        conf = tmp_path / (name + ".conf")
        conf.write_text(CONF % (tmp_path / name))
        transcripts.append(asyncio.run(scenario(start("-c", str(conf)).url)))
    ours, theirs = transcripts
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, "entry %d differs: %r != %r" % (i, a, b)
    assert len(ours) == len(theirs)
    # and the limits did bite
    assert ours[0] == {"max_ack_pending": None, "max_batch": None, "duplicate_window": 30_000_000_000}
    assert ours[1]["err_code"] == 10052 and "server limit of 30s" in ours[1]["description"]
    assert ours[3] == {"max_ack_pending": 100, "max_batch": 10, "duplicate_window": None}
    assert ours[4]["err_code"] == 10121 and ours[5]["err_code"] == 10125
    assert ours[-1] == 3
