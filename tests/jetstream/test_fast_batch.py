"""Fast batch publish (`allow_batched`: the batch in the reply subject,
`<prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI`), natsd against the reference nats-server: the same
flow-control acks, gap reports, per-message errors and PubAcks, byte for byte and in order, and
the same stored messages, for commits with and without an end marker, gaps in `fail` and `ok`
mode, pings, refused and duplicate messages, two batches sharing the ack budget, and every
malformed reply subject."""
import asyncio
import json

from tests.support.jetstream import same_on_both, stream_contents

# op codes: 0 start, 1 append, 2 commit, 3 commit with end-of-batch marker, 4 ping
QUIET = 0.3


def msg(bid, seq, op, flow=2, gap="fail", subject="f.x", headers=None, data=None):
    reply = "_INBOX.fb.%s.%s.%s.%s.%s.$FI" % (bid, flow, gap, seq, op)
    return (subject, reply, headers, data if data is not None else ("%s-%s" % (bid, seq)).encode())


def batch(bid, n, flow=2, gap="fail", last_op=2, **kw):
    out = []
    for i in range(1, n + 1):
        op = 0 if i == 1 else (last_op if i == n else 1)
        out.append(msg(bid, i, op, flow, gap, **kw))
    return out


SCENARIOS = [
    ("commit", batch("b1", 5)),
    ("eob", batch("b2", 4, last_op=3)),
    ("flow 1000 and default", batch("b3", 6, flow=1000) + batch("b4", 12, flow=0)),
    ("flow 3 skips ahead", batch("b5", 11, flow=3)),
    ("gap fails", [msg("b6", 1, 0), msg("b6", 2, 1), msg("b6", 4, 1), msg("b6", 5, 2)]),
    ("gap ok", [msg("b7", 1, 0, gap="ok"), msg("b7", 2, 1, gap="ok"), msg("b7", 5, 1, gap="ok"),
                msg("b7", 6, 2, gap="ok")]),
    ("backwards", [msg("b8", 1, 0), msg("b8", 2, 1), msg("b8", 2, 1), msg("b8", 3, 2)]),
    ("pings", [msg("b9", 1, 0), msg("b9", 2, 1), msg("b9", 2, 4), msg("b9", 3, 1), msg("b9", 6, 4),
               msg("b9", 4, 2)]),
    ("ping gap ok", [msg("c1", 1, 0, gap="ok"), msg("c1", 3, 4, gap="ok"), msg("c1", 4, 1, gap="ok"),
                     msg("c1", 5, 2, gap="ok")]),
    ("refused mid batch", [msg("c2", 1, 0), msg("c2", 2, 1),
                           msg("c2", 3, 1, headers={"Nats-Expected-Last-Sequence": "1"}),
                           msg("c2", 4, 2)]),
    ("refused, gap ok", [msg("c3", 1, 0, gap="ok"),
                         msg("c3", 2, 1, gap="ok", headers={"Nats-Expected-Last-Sequence": "1"}),
                         msg("c3", 3, 2, gap="ok")]),
    ("refused first", [msg("c4", 1, 2, headers={"Nats-Expected-Last-Sequence": "1"})]),
    ("duplicates", [msg("c5", 1, 0, headers={"Nats-Msg-Id": "m1"}),
                    msg("c5", 2, 1, headers={"Nats-Msg-Id": "m1"}),
                    msg("c5", 3, 1), msg("c5", 4, 2, headers={"Nats-Msg-Id": "m1"})]),
    ("duplicate first commit", [msg("c6", 1, 2, headers={"Nats-Msg-Id": "m1"})]),
    ("too big", [msg("c7", 1, 0), msg("c7", 2, 2, data=b"x" * 2000)]),
    ("api level", [msg("c8", 1, 0, headers={"Nats-Required-Api-Level": "1", "a": "b"}),
                   msg("c8", 2, 2, headers={"Nats-Required-Api-Level": "1"}),
                   msg("c9", 1, 0, headers={"Nats-Required-Api-Level": "99"})]),
    ("two at once", [m for pair in zip(batch("d1", 8, flow=100), batch("d2", 8, flow=100))
                     for m in pair]),
    ("bad patterns", [msg("e1", 1, 7), msg("e1", 0, 0), msg("e1", 2, 0), msg("e1", 1, 1),
                      msg("e1", 1, 3), msg("e1", 1, 0, gap="maybe"), msg("i" * 65, 1, 0),
                      msg("e2", 2, 1), ("f.x", "_INBOX.$FI", None, b"short"),
                      ("f.x", "a.b.$FI", None, b"short")]),
    ("not allowed", [msg("g1", 1, 0, subject="plain.x"), msg("g1", 2, 2, subject="plain.x")]),
]


async def scenario(nc, js):
    out = []
    for name, extra in (("F", {"allow_batched": True, "max_msg_size": 1024}), ("PLAIN", {})):
        await nc.request("$JS.API.STREAM.CREATE." + name, json.dumps(
            dict(name=name, subjects=[name.lower()[0] + (".>" if name == "F" else "lain.>")],
                 **extra)).encode(), timeout=2)
    got = []

    async def on_reply(m):
        got.append((m.subject, m.data.decode()))
    await nc.subscribe("_INBOX.fb.>", cb=on_reply)
    await nc.subscribe("a.b.$FI", cb=on_reply)
    await nc.subscribe("_INBOX.$FI", cb=on_reply)
    for name, msgs in SCENARIOS:
        got.clear()
        for subject, reply, headers, data in msgs:
            await nc.publish(subject, data, reply=reply, headers=headers)
        await nc.flush()
        # done once nothing came for QUIET seconds (a loaded machine can pause a server
        # longer than 50 ms between two replies of one scenario: CI79)
        deadline = asyncio.get_running_loop().time() + 0.2
        n = -1
        while n != len(got) or asyncio.get_running_loop().time() < deadline:
            n = len(got)
            await asyncio.sleep(QUIET)
        out.append((name, list(got)))
    out.append(("stored", await stream_contents(nc, "F")))
    return out


def test_fast_batches_match(natsd, reference, tmp_path):
    ours = same_on_both(scenario, natsd, reference, tmp_path)
    by_name = dict(ours[:-1])
    # the reference agrees, and the scenarios did what they say
    assert by_name["commit"][-1][1] == '{"stream":"F","seq":5,"batch":"b1","count":5}'
    assert any('"type":"gap"' in r for _, r in by_name["gap ok"])
    assert all('"err_code":10206' in r for _, r in by_name["bad patterns"][:6])
    assert '"err_code":10205' in by_name["not allowed"][0][1]
