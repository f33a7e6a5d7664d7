"""A message no consumer wants, published to an interest-retention stream, is answered and
counted in the stream's sequence but not stored (nats-server's SkipMsgNoInterest): the state
after it (first/last sequence, last_ts, dedupe of its Nats-Msg-Id, the sequence after a
restart) is the same on both servers. A consumer's filter decides who wants what."""
import json
import time
from datetime import datetime

from tests.support.jetstream import connect
from tests.support.rawclient import RawClient
from tests.support.waiting import run

STATE_KEYS = ("messages", "bytes", "first_seq", "last_seq", "num_deleted", "num_subjects",
              "consumer_count")
COARSE = 1_000_000_000      # nats-server stamps a skip with its coarse access time


def go_ns(stamp):
    """An RFC 3339 time as nats-server writes it -> ns since the epoch (0 for Go's zero time)."""
    if stamp.startswith("0001-01-01"):
        return 0
    whole, _, frac = stamp.rstrip("Z").partition(".")
    secs = datetime.fromisoformat(whole + "+00:00").timestamp()
    return int(secs) * 1_000_000_000 + int((frac or "0").ljust(9, "0")[:9])


async def api(nc, subject, body=""):
    m = await nc.request(subject, json.dumps(body).encode() if body != "" else b"", timeout=5)
    return json.loads(m.data)


async def pub(nc, subject, payload=b"x", msg_id=None):
    m = await nc.request(subject, payload, timeout=5,
                         headers={"Nats-Msg-Id": msg_id} if msg_id else None)
    return json.loads(m.data)


async def state(nc):
    st = (await api(nc, "$JS.API.STREAM.INFO.I"))["state"]
    return {k: st.get(k) for k in STATE_KEYS}, go_ns(st["first_ts"]), go_ns(st["last_ts"])


async def before_restart(srv):
    nc = await connect(srv)
    await api(nc, "$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"],
                                                "retention": "interest"})
    t0 = time.time_ns()
    acks = [await pub(nc, "i.a"), await pub(nc, "i.a", msg_id="m1"), await pub(nc, "i.b"),
            await pub(nc, "i.a", msg_id="m1")]             # a duplicate of the second
    empty, first_ts, last_ts = await state(nc)
    assert first_ts == 0 and t0 - COARSE <= last_ts <= time.time_ns()
    await api(nc, "$JS.API.CONSUMER.CREATE.I.C", {"stream_name": "I", "config": {
        "durable_name": "C", "filter_subject": "i.b", "ack_policy": "explicit"}})
    t1 = time.time_ns()
    acks += [await pub(nc, "i.a"), await pub(nc, "i.b", b"wanted"), await pub(nc, "i.a")]
    kept, first_ts, last_ts = await state(nc)
    assert t1 <= first_ts <= time.time_ns() and t1 - COARSE <= last_ts <= time.time_ns()
    await nc.close()
    return acks, empty, kept, last_ts


async def after_restart(srv):
    nc = await connect(srv)
    st, _, last_ts = await state(nc)
    acks = [await pub(nc, "i.a", msg_id="m2"), await pub(nc, "i.a", msg_id="m2")]
    sub = await nc.subscribe("fetch.C")            # (a delivery keeps its own subject)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.I.C", b'{"batch":1,"expires":2000000000}',
                     reply="fetch.C")
    fetched = await sub.next_msg(5)
    await nc.close()
    return st, last_ts, acks, fetched.data, fetched.reply


def scenario(server_factory, store):
    srv = server_factory("-js", "-sd", store)
    acks, empty, kept, last_ts = run(before_restart)(srv)
    srv.stop()
    srv = server_factory("-js", "-sd", store)
    st, last_ts_after, acks2, data, reply = run(after_restart)(srv)
    assert last_ts_after == last_ts, "the last skip's time survives a restart"
    assert data == b"wanted" and ".I.C.1.5.1." in reply, reply
    return acks, empty, kept, st, acks2


def test_messages_nobody_wants_are_skipped_as_on_nats_server(natsd, reference, tmp_path):
    theirs = scenario(reference, str(tmp_path / "b"))
    mine = scenario(natsd, str(tmp_path / "a"))
    assert mine == theirs
    acks, empty, kept, st, acks2 = mine
    assert [a["seq"] for a in acks] == [1, 2, 3, 2, 4, 5, 6] and acks[3].get("duplicate")
    assert empty["messages"] == 0 and empty["first_seq"] == 4 and empty["last_seq"] == 3
    assert (kept["messages"], kept["first_seq"], kept["last_seq"]) == (1, 5, 6)
    assert st == kept
    assert [a["seq"] for a in acks2] == [7, 7] and acks2[1].get("duplicate")


def test_skips_survive_a_kill9(natsd, tmp_path):
    """natsd's log records each skip with its time: after a kill -9 (no index snapshot) the
    stream's last sequence and time are read back from those records."""
    store = str(tmp_path / "s")

    async def skip_three(srv):
        nc = await connect(srv)
        await api(nc, "$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"],
                                                    "retention": "interest"})
        acks = [await pub(nc, "i.%d" % n) for n in range(3)]
        st = await state(nc)
        await nc.close()
        return acks, st

    async def next_seq(srv):
        nc = await connect(srv)
        st = await state(nc)
        ack = await pub(nc, "i.x")
        await nc.close()
        return st, ack

    srv = natsd("-js", "-sd", store)
    acks, before = run(skip_three)(srv)
    assert [a["seq"] for a in acks] == [1, 2, 3]
    srv.kill()
    srv = natsd("-js", "-sd", store)
    after, ack = run(next_seq)(srv)
    assert after == before and before[0]["last_seq"] == 3 and before[2] > 0
    assert ack["seq"] == 4


def hpub(subject, rep, hdr, payload):
    if not hdr:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, rep, len(payload), payload)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, rep, len(hdr), len(hdr) + len(payload),
                                             hdr, payload)


BURST = [  # (subject, header block): what one write brings an interest stream nobody consumes
    (b"i.a", None), (b"i.a", b"NATS/1.0\r\nX: 1\r\n\r\n"), (b"i.b", None),
    (b"i.a", b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n"), (b"i.a", None),
    (b"i.a", b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n"),
    (b"i.a", b"NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n"), (b"i.c", None),
    (b"i.a", None, b"x" * 200),                     # over the stream's max_msg_size
    (b"i.d", None), (b"i.d", None),
]


def test_a_burst_of_unwanted_messages_is_answered_in_order_as_on_nats_server(natsd, reference,
                                                                            tmp_path):
    """Many messages in one read: natsd skips the plain ones together and the others one by one
    (a Nats-Msg-Id and its duplicate, an expected sequence, one too big), in publish order."""
    def play(srv):
        c = RawClient(srv.port)
        c.connect({"headers": True})
        c.request(b"$JS.API.STREAM.CREATE.I", json.dumps(
            {"name": "I", "subjects": ["i.>"], "retention": "interest",
             "max_msg_size": 100}).encode())
        c.send(b"SUB _R.> 1\r\n")
        c.replies = {}
        frames = [hpub(m[0], b"_R.b%d" % k, m[1], m[2] if len(m) > 2 else b"p%d" % k)
                  for k, m in enumerate(BURST)]
        c.send(b"".join(frames))
        c.read_replies(10, until=b"_R.b%d" % (len(BURST) - 1))
        answers = [c.replies.get(b"_R.b%d" % k) for k in range(len(BURST))]
        info = json.loads(c.request(b"$JS.API.STREAM.INFO.I", b""))["state"]
        c.close()
        return answers, {k: info.get(k) for k in STATE_KEYS}

    srv = natsd("-js", "-sd", str(tmp_path / "a"))
    mine = play(srv)
    ref = reference("-js", "-sd", str(tmp_path / "b"))
    theirs = play(ref)
    assert mine == theirs
    assert mine[1]["last_seq"] == 8 and mine[1]["messages"] == 0
