"""PubAck bytes, natsd against the reference: `{"stream":..,"domain":..,"seq":..}` with the
domain before the sequence, and nats-server's `"duplicate": true` (with its space), for plain,
deduplicated, counter and atomic-batch publishes, with and without a JetStream domain."""
import asyncio
import json

import nats

from tests.support.jetstream import bh

CONF = """
listen: 127.0.0.1:-1
jetstream {
  store_dir: "%s"
  %s
}
"""


async def scenario(url):
    nc = await nats.connect(url)
    await nc.request("$JS.API.STREAM.CREATE.P", json.dumps(
        {"name": "P", "subjects": ["p.>"], "allow_atomic": True}).encode(), timeout=2)
    await nc.request("$JS.API.STREAM.CREATE.C", json.dumps(
        {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True}).encode(), timeout=2)
    out = []
    for subject, headers in (("p.1", None), ("p.1", {"Nats-Msg-Id": "x"}), ("p.1", {"Nats-Msg-Id": "x"}),
                             ("c.1", {"Nats-Incr": "5"}), ("p.2", bh("b", 1, "1"))):
        out.append((await nc.request(subject, b"1" if headers is None else b"", timeout=2,
                                     headers=headers)).data)
    await nc.close()
    return out


def test_puback_bytes_match(natsd, reference, tmp_path):
    for domain in ("", "domain: hub"):
        transcripts = []
        for name, start in (("natsd", natsd), ("ref", reference)):
            d = tmp_path / (name + domain[-3:])
            d.mkdir()
            conf = tmp_path / (name + domain[-3:] + ".conf")
            conf.write_text(CONF % (d, domain))
            transcripts.append(asyncio.run(scenario(start("-c", str(conf)).url)))
        assert transcripts[0] == transcripts[1]
    assert transcripts[0][2] == b'{"stream":"P","domain":"hub","seq":2,"duplicate": true}'
