"""A stream's ingest queue limits (jetstream `max_buffered_msgs` / `max_buffered_size`), on
natsd and nats-server alike: a burst beyond them is partly dropped; every dropped message with
a reply is answered `429 Too Many Requests` with JSStreamTooManyRequests, every other one is
stored and acknowledged, and the drop is logged."""
import json
import re

import pytest

from tests.support.rawclient import RawClient

N = 2000
ERR_429 = (b'{"error":{"code":429,"err_code":10167,"description":"too many requests"},'
           b'"stream":"S","seq":0}')


FRAME = re.compile(rb"(?:MSG|HMSG) (\S+) 1 (?:(\d+) )?(\d+)\r\n")


def read_msg(c, timeout=20):
    """The next MSG/HMSG on sid 1 -> (subject, header bytes, payload)."""
    head = FRAME.search(c.read_until(FRAME, timeout))
    hlen, total = int(head.group(2) or 0), int(head.group(3))
    data = c.read_until(re.compile(rb"\A[\s\S]{%d}\r\n" % total), timeout)
    return head.group(1), data[:hlen], data[hlen:total]


@pytest.mark.parametrize("limit", ["max_buffered_msgs: 5", "max_buffered_size: 300"])
def test_a_burst_beyond_the_ingest_queue_is_answered_429(any_server, tmp_path, limit):
    conf = tmp_path / "js.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp_path}/js", {limit} }}\n')
    srv = any_server("-c", str(conf))
    with RawClient(srv.port).connect() as c:
        cfg = b'{"name":"S","subjects":["s.>"],"storage":"memory"}'
        c.send(b"SUB _INBOX.> 1\r\nPUB $JS.API.STREAM.CREATE.S _INBOX.create %d\r\n%s\r\n" % (len(cfg), cfg))
        assert json.loads(read_msg(c)[2])["did_create"]
        burst = b"".join(b"PUB s.%d _INBOX.a.%d 16\r\n0123456789abcdef\r\n" % (i, i) for i in range(N))
        c.send(burst)
        answers = {}
        while len(answers) < N:
            subject, hdr, payload = read_msg(c)
            answers[int(subject.rsplit(b".", 1)[1])] = (hdr, payload)
        acked = {s for s, (h, b) in answers.items() if h == b"" and json.loads(b).get("seq")}
        refused = {s for s, (h, b) in answers.items() if h == b"NATS/1.0 429 Too Many Requests\r\n\r\n"}
        assert all(answers[s][1] == ERR_429 for s in refused)
        assert acked | refused == set(range(N)) and refused, (len(acked), len(refused))
        c.send(b"PUB $JS.API.STREAM.INFO.S _INBOX.info 0\r\n\r\n")
        assert json.loads(read_msg(c)[2])["state"]["messages"] == len(acked)
    srv.wait_log(r"\[WRN\] Dropping messages due to excessive stream ingest rate on '\$G' > 'S': "
                 r"IPQ (len|size) limit reached")
