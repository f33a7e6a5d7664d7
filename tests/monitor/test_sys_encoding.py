"""`$SYS` answers compressed on request (`Accept-Encoding`, as the `nats` CLI sends it for its
server requests), natsd against nats-server: the same `Content-Encoding` header for each
request, a body that decodes to the answer, and no compression of errors or of the services
nats-server never compresses (STATSZ, IDZ)."""
import asyncio
import gzip
import json

import cramjam
import nats
import pytest

CONF = ('accounts { A { users: [{user: a, password: a}] }, SYS { users: [{user: s, password: s}] } }\n'
        'system_account: SYS\n')

# (subject, body, Accept-Encoding or None)
REQUESTS = [("$SYS.REQ.SERVER.PING.VARZ", {}, "snappy"), ("$SYS.REQ.SERVER.PING.VARZ", {}, "s2"),
            ("$SYS.REQ.SERVER.PING.CONNZ", {}, "gzip"), ("$SYS.REQ.SERVER.PING.SUBSZ", {}, "br"),
            ("$SYS.REQ.SERVER.PING.VARZ", {}, None), ("$SYS.REQ.ACCOUNT.A.CONNZ", {}, "snappy"),
            ("$SYS.REQ.ACCOUNT.A.INFO", {}, "gzip, snappy"),
            ("$SYS.REQ.SERVER.PING.CONNZ", {"sort": "bogus"}, "snappy"),        # an error
            ("$SYS.REQ.SERVER.PING.STATSZ", {}, "snappy"), ("$SYS.REQ.SERVER.PING.IDZ", {}, "snappy")]


def _decoded(msg):
    encoding = (msg.headers or {}).get("Content-Encoding")
    data = msg.data
    if encoding == "snappy":
        data = bytes(cramjam.snappy.decompress(data))
    elif encoding == "gzip":
        data = gzip.decompress(data)
    return encoding, json.loads(data)


async def _answers(url):
    nc = await nats.connect(url, user="s", password="s")
    a = await nats.connect(url, user="a", password="a")       # account A has a connection
    out = []
    for subject, body, accept in REQUESTS:
        headers = {"Accept-Encoding": accept} if accept else None
        msg = await nc.request(subject, json.dumps(body).encode(), timeout=5, headers=headers)
        out.append(_decoded(msg))
    await a.close()
    await nc.close()
    return out


@pytest.fixture
def both(natsd, reference, tmp_path):
    conf = tmp_path / "sys.conf"
    conf.write_text(CONF)
    return {kind: asyncio.run(_answers(start("-c", str(conf)).url))
            for kind, start in (("nats-server", reference), ("natsd", natsd))}


def test_encodings_match_nats_server(both):
    for (subject, body, accept), ref, mine in zip(REQUESTS, both["nats-server"], both["natsd"]):
        what = (subject, body, accept)
        assert mine[0] == ref[0], what                       # the Content-Encoding header
        assert sorted(mine[1]) == sorted(ref[1]), what       # server, data or error
        if "error" in ref[1]:
            assert mine[1]["error"] == ref[1]["error"], what
    encodings = [e for e, _ in both["natsd"]]
    assert encodings == ["snappy", "snappy", "gzip", "identity", None, "snappy", "snappy", None, None, None]
