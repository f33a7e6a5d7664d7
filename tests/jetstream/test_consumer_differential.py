"""Consumer API replies and pull statuses, natsd vs the reference nats-server: the same request
sequence against both, comparing JSON key sets, error codes/descriptions and status headers
(timestamps, generated names and ack-reply timestamps are masked)."""
import asyncio
import json
import re
import signal

import nats

from tests.support.rawclient import RawClient
from tests.support.waiting import poll

CREATE = "$JS.API.CONSUMER.CREATE.S"

# (subject, body) — each reply is compared after masking volatile values.
API_SCRIPT = [
    ("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}),
    (CREATE + ".d", {"stream_name": "S", "config": {"durable_name": "d"}}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "explicit",
                                                      "filter_subject": "s.a", "metadata": {"x": "y"}}}),
    (CREATE + ".p", {"stream_name": "S", "config": {"name": "p", "deliver_subject": "dp",
                                                      "flow_control": True, "ack_policy": "none",
                                                      "idle_heartbeat": 1_000_000_000}}),
    (CREATE, {"stream_name": "S", "config": {"deliver_subject": "x", "ack_policy": "explicit"}}),
    (CREATE, {"stream_name": "S"}),
    ("$JS.API.CONSUMER.INFO.S.e", ""),
    ("$JS.API.CONSUMER.INFO.S.e", "x"),
    ("$JS.API.CONSUMER.INFO.S.zz", ""),
    ("$JS.API.CONSUMER.INFO.X.e", ""),
    ("$JS.API.CONSUMER.NAMES.S", ""),
    ("$JS.API.CONSUMER.NAMES.S", {"offset": 10}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "explicit",
                                                      "filter_subject": "s.b"}, "action": "create"}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "explicit",
                                                      "filter_subject": "s.a", "metadata": {"x": "y"}},
                      "action": "create"}),
    (CREATE + ".f", {"stream_name": "S", "config": {"durable_name": "f"}, "action": "update"}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "all"}}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "explicit",
                                                      "deliver_policy": "new"}}),
    (CREATE + ".e", {"stream_name": "S", "config": {"durable_name": "e", "ack_policy": "explicit",
                                                      "filter_subject": "s.c", "description": "upd",
                                                      "max_ack_pending": 5}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "bogus": 1}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "deliver_subject": "x.*"}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "deliver_subject": "x",
                                                      "idle_heartbeat": 5_000_000}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "flow_control": True}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "idle_heartbeat": 1_000_000_000}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "deliver_subject": "x",
                                                      "flow_control": True}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "ack_policy": "explicit",
                                                      "backoff": [1_000_000_000, 2_000_000_000],
                                                      "max_deliver": 1}}),
    (CREATE + ".a", {"stream_name": "S", "config": {"durable_name": "a", "ack_policy": "explicit",
                                                      "backoff": [1_000_000_000, 2_000_000_000],
                                                      "max_deliver": 5, "ack_wait": 7}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "filter_subject": "s.a",
                                                      "filter_subjects": ["s.b"]}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "filter_subjects": ["s.>", "s.b"]}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "filter_subjects": [""]}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "name": "c"}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "rate_limit_bps": 100}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "deliver_policy": "by_start_sequence"}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "deliver_policy": "last_per_subject"}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "deliver_policy": "all",
                                                      "opt_start_seq": 3}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "deliver_policy": "bogus"}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "b", "sample_freq": "x%"}}),
    (CREATE + ".b", {"stream_name": "T", "config": {"durable_name": "b"}}),
    (CREATE + ".b", {"stream_name": "S", "config": {"durable_name": "c"}}),
    (CREATE + ".b.s.x", {"stream_name": "S", "config": {"durable_name": "b"}}),
    (CREATE + ".b.s.x", {"stream_name": "S", "config": {"durable_name": "b", "filter_subjects": ["s.x"]}}),
    (CREATE + ".g.s.x", {"stream_name": "S", "config": {"durable_name": "g", "filter_subject": "s.x"}}),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S.z", {"stream_name": "S", "config": {"durable_name": "y"}}),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S.z", {"stream_name": "S", "config": {}}),
    ("$JS.API.CONSUMER.DURABLE.CREATE.S.z", {"stream_name": "S", "config": {"durable_name": "z"}}),
    (CREATE, {"stream_name": "S", "config": {"durable_name": "y"}}),
    (CREATE, {"stream_name": "S", "config": {"name": "a.b"}}),
    (CREATE + ".n", {"stream_name": "S", "config": {"name": "n", "num_replicas": 3}}),
    (CREATE + ".n", {"stream_name": "S", "config": {"name": "n", "deliver_subject": "q", "max_waiting": 3}}),
    (CREATE + ".n", {"stream_name": "S", "config": {"name": "n", "deliver_subject": "q",
                                                      "max_ack_pending": 3}}),
    (CREATE + ".n", "{bad"),
    (CREATE + ".n", {"stream_name": "S", "config": {"name": "n"}, "action": "bogus"}),
    ("$JS.API.CONSUMER.PAUSE.S.e", {"pause_until": "2099-01-01T00:00:00Z"}),
    ("$JS.API.CONSUMER.PAUSE.S.e", ""),
    ("$JS.API.CONSUMER.PAUSE.S.nope", ""),
    ("$JS.API.CONSUMER.LIST.S", ""),
    ("$JS.API.CONSUMER.DELETE.S.d", ""),
    ("$JS.API.CONSUMER.DELETE.S.d", ""),
    ("$JS.API.STREAM.CREATE.W", {"name": "W", "subjects": ["w.>"], "retention": "workqueue"}),
    ("$JS.API.CONSUMER.CREATE.W.w1", {"stream_name": "W", "config": {"durable_name": "w1"}}),
    ("$JS.API.CONSUMER.CREATE.W.w1", {"stream_name": "W", "config": {"durable_name": "w1",
                                                                     "ack_policy": "explicit",
                                                                     "deliver_policy": "new"}}),
    ("$JS.API.CONSUMER.CREATE.W.w1", {"stream_name": "W", "config": {"durable_name": "w1",
                                                                     "ack_policy": "explicit"}}),
    ("$JS.API.CONSUMER.CREATE.W.w2", {"stream_name": "W", "config": {"durable_name": "w2",
                                                                     "ack_policy": "explicit"}}),
    ("$JS.API.CONSUMER.CREATE.W.w3", {"stream_name": "W", "config": {"durable_name": "w3",
                                                                     "ack_policy": "explicit",
                                                                     "filter_subject": "w.a"}}),
    ("$JS.API.STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "max_consumers": 1}),
    ("$JS.API.CONSUMER.CREATE.M.m1", {"stream_name": "M", "config": {"durable_name": "m1"}}),
    ("$JS.API.CONSUMER.CREATE.M.m2", {"stream_name": "M", "config": {"durable_name": "m2"}}),
    ("$JS.API.CONSUMER.CREATE.M.m1", {"stream_name": "M", "config": {"durable_name": "m1",
                                                                     "max_deliver": 3}}),
    ("$JS.API.CONSUMER.CREATE.M.m1", {"stream_name": "M", "config": {"durable_name": "m1",
                                                                     "deliver_subject": "m1.in"}}),
    ("$JS.API.STREAM.DELETE.M", ""),
    ("$JS.API.STREAM.UPDATE.W", {"name": "W", "subjects": ["w.>"], "retention": "workqueue",
                                 "sealed": True}),
    ("$JS.API.CONSUMER.CREATE.W.w4", {"stream_name": "W", "config": {"durable_name": "w4",
                                                                     "ack_policy": "explicit",
                                                                     "filter_subject": "w.b"}}),
    ("$JS.API.CONSUMER.INFO.M.m1", ""),
]

_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def mask(obj, key=None):
    if isinstance(obj, dict):
        return {k: mask(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        if key == "consumers" and all(isinstance(v, str) for v in obj):
            return sorted(mask(v, "name") for v in obj)
        if key == "consumers":
            return sorted((mask(v) for v in obj), key=lambda c: str(sorted(c.items())))
        return [mask(v) for v in obj]
    if isinstance(obj, str) and _TS.match(obj) and not obj.startswith("2099"):
        return "<time>"
    if key == "name" and isinstance(obj, str) and len(obj) == 8 and obj.isalnum():
        return "<generated>"
    if key in ("pause_remaining",):
        return "<dur>"
    if key == "_nats.ver":
        return "<ver>"
    return obj


async def run_script(url):
    nc = await nats.connect(url)
    out = []
    for subj, body in API_SCRIPT:
        data = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
        m = await nc.request(subj, data, timeout=3)
        out.append((subj, mask(json.loads(m.data))))
    await nc.close()
    return out


def test_consumer_api_replies_match(natsd, reference, tmp_path):
    ours = asyncio.run(run_script(natsd("-js", "-sd", str(tmp_path / "a")).url))
    theirs = asyncio.run(run_script(reference("-js", "-sd", str(tmp_path / "b")).url))
    for (subj, a), (_, b) in zip(ours, theirs):
        if subj.startswith("$JS.API.STREAM."):
            assert ("error" in a) == ("error" in b), subj
            continue
        if "error" in b:
            assert a.get("error") == b["error"], (subj, a, b)
        else:
            assert a == b, (subj, a, b)


PULL_SCRIPT = ["", "2", '{"batch":2,"no_wait":true}', '{"batch":2,"expires":200000000}',
               '{"batch":10}', '{"batch":2,"expires":100000000000}', '{"batch":2,"max_bytes":5000}',
               '{"batch":1,"no_wait":true,"expires":100000000}', '{bad', "ACK1", "NAK2",
               '{"batch":1,"no_wait":true}', "PUB2", '{"batch":3,"max_bytes":700,"no_wait":true}',
               '{"batch":1,"max_bytes":100,"no_wait":true}', '{"batch":5,"max_bytes":900}',
               # Go's decoding errors, heartbeat bounds, priority fields on a plain consumer
               '{"batch":1,"expires":"1s"}', '{"batch":1,"expires":1.5e9}', '{"batch":true}',
               '{"batch":1} x', '{"batch":1,"expires":199000000,"idle_heartbeat":100000000}',
               '{"batch":1,"expires":2000000000,"idle_heartbeat":100000000,"no_wait":true}',
               '{"batch":1,"group":"A","min_pending":1}', '{"batch":1,"id":"x"}',
               '{"batch":1,"priority":10}', '{"batch":1,"priority":"1"}',
               "INFO"]


async def run_pull(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="P", subjects=["p.>"])
    for i in range(3):
        await js.publish("p.a", b"hello%d" % i)
    await nc.request("$JS.API.CONSUMER.CREATE.P.c", json.dumps({"stream_name": "P", "config": {
        "durable_name": "c", "ack_policy": "explicit", "max_batch": 5,
        "max_expires": 10_000_000_000, "max_bytes": 1000}}).encode())
    inbox = nc.new_inbox()
    got, data = [], []

    async def cb(m):
        got.append(m)
        if not (m.headers and "Status" in m.headers):
            data.append(m)
    s = await nc.subscribe(inbox, cb=cb)
    out = []
    for step in PULL_SCRIPT:
        if step == "ACK1":
            r = await nc.request(data[0].reply, b"+ACK", timeout=1)
            out.append(("acksync", r.data))
            continue
        if step == "NAK2":
            await nc.publish(data[1].reply, b"-NAK")
            await asyncio.sleep(0.1)        # nats-server processes acks asynchronously
            continue
        if step == "PUB2":
            await js.publish("p.a", b"x" * 600)
            await js.publish("p.a", b"y" * 600)
            continue
        if step == "INFO":
            m = await nc.request("$JS.API.CONSUMER.INFO.P.c", b"")
            info = mask(json.loads(m.data))
            out.append(("info", {k: info[k] for k in ("delivered", "ack_floor", "num_ack_pending",
                                                      "num_redelivered", "num_waiting", "num_pending")}))
            continue
        got.clear()
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.P.c", step.encode(), reply=inbox)
        await asyncio.sleep(0.35)
        seen, heartbeats = [], False
        for m in got:
            if m.headers and m.headers.get("Status") == "100":
                # a waiting request's idle heartbeats run on their own clock: whether one
                # comes before or after this step's answer is timing, on both servers
                heartbeats = True
            elif m.headers and "Status" in m.headers:
                seen.append(("status", dict(m.headers)))
            else:
                toks = m.reply.split(".")
                toks[7] = "<ts>"
                seen.append((m.subject, ".".join(toks), len(m.data)))
        out.append((step, seen, heartbeats))
    await s.unsubscribe()
    await nc.close()
    return out


def test_pull_statuses_match(natsd, reference, tmp_path):
    ours = asyncio.run(run_pull(natsd("-js", "-sd", str(tmp_path / "a")).url))
    theirs = asyncio.run(run_pull(reference("-js", "-sd", str(tmp_path / "b")).url))
    for a, b in zip(ours, theirs):
        assert str(a) == str(b)


DELIVER_CASES = [
    ("all", {}), ("new", {"deliver_policy": "new"}), ("last", {"deliver_policy": "last"}),
    ("lastf", {"deliver_policy": "last", "filter_subject": "dp.1"}),
    ("lps", {"deliver_policy": "last_per_subject", "filter_subject": "dp.*"}),
    ("seq", {"deliver_policy": "by_start_sequence", "opt_start_seq": 4, "filter_subject": "dp.2"}),
    ("seq0", {"deliver_policy": "by_start_sequence", "opt_start_seq": 1}),
    ("seqbig", {"deliver_policy": "by_start_sequence", "opt_start_seq": 100}),
]


async def run_deliver_policies(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="DP", subjects=["dp.>"], max_msgs_per_subject=3)
    for i in range(9):
        await js.publish("dp.%d" % (i % 3), b"m%d" % i)
    await js.publish("dp.0", b"x")                      # drops seq 1 (per-subject limit)
    out = []
    for name, c in DELIVER_CASES:
        c = dict(c, durable_name=name, ack_policy="explicit")
        r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.DP." + name, json.dumps(
            {"stream_name": "DP", "config": c}).encode())).data)
        out.append((name, r.get("delivered"), r.get("ack_floor"), r.get("num_pending")))
        inbox = nc.new_inbox()
        s = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.DP." + name, b'{"batch":2,"no_wait":true}',
                         reply=inbox)
        for _ in range(3):
            try:
                m = await s.next_msg(0.3)
            except nats.errors.TimeoutError:
                break
            if m.headers and "Status" in m.headers:
                out.append(("status", m.headers["Status"]))
            else:
                toks = m.reply.split(".")
                toks[7] = "<ts>"
                out.append((m.subject, ".".join(toks)))
        r = json.loads((await nc.request("$JS.API.CONSUMER.INFO.DP." + name, b"")).data)
        out.append(({k: {kk: vv for kk, vv in r[k].items() if kk != "last_active"}
                     for k in ("delivered", "ack_floor")}, r["num_pending"], r["num_ack_pending"]))
    await nc.close()
    return out


def test_deliver_policies_match(natsd, reference, tmp_path):
    ours = asyncio.run(run_deliver_policies(natsd("-js", "-sd", str(tmp_path / "a")).url))
    theirs = asyncio.run(run_deliver_policies(reference("-js", "-sd", str(tmp_path / "b")).url))
    assert ours == theirs


async def run_acks(url):
    """Push consumers: push_bound, AckSync answers (+ACK, double ack, never-delivered seq,
    +TERM, +WPI, -NAK), redelivery order, ack policies none and all."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    out = []

    def show(r):
        return (r.get("push_bound"), r["num_pending"], r["num_ack_pending"], r["num_redelivered"],
                {k: {kk: vv for kk, vv in r[k].items() if kk != "last_active"}
                 for k in ("delivered", "ack_floor")})

    async def ack(reply, body):
        try:
            return (await nc.request(reply, body, timeout=0.5)).data
        except nats.errors.TimeoutError:
            return "timeout"
        except nats.errors.NoRespondersError:
            return "no responders"

    async def info(name):
        return show(json.loads((await nc.request("$JS.API.CONSUMER.INFO.Q." + name, b"")).data))

    await js.add_stream(name="Q", subjects=["q.>"])
    for i in range(4):
        await js.publish("q.a", b"%d" % i)
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)
    r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.Q.pp", json.dumps({
        "stream_name": "Q", "config": {"durable_name": "pp", "deliver_subject": inbox,
                                       "ack_policy": "explicit", "ack_wait": 400_000_000}}).encode())).data)
    out.append(show(r))
    ms = [await s.next_msg(1) for _ in range(4)]
    out.append(await info("pp"))
    out.append(await ack(ms[1].reply, b"+ACK"))
    out.append(await ack(ms[1].reply, b"+ACK"))
    out.append(await ack(ms[1].reply.replace(".1.2.2.", ".1.9.9."), b"+ACK"))
    out.append(await ack(ms[2].reply, b"+TERM bad"))
    out.append(await ack(ms[3].reply, b"+WPI"))
    out.append(await ack(ms[3].reply, b"-NAK"))
    for _ in range(2):
        out.append((await s.next_msg(1)).reply.split(".")[4:7])
    await s.unsubscribe()
    await asyncio.sleep(0.2)
    out.append(await info("pp"))
    inbox2 = nc.new_inbox()
    s2 = await nc.subscribe(inbox2)
    await nc.request("$JS.API.CONSUMER.CREATE.Q.an", json.dumps({"stream_name": "Q", "config": {
        "durable_name": "an", "deliver_subject": inbox2, "ack_policy": "none"}}).encode())
    out.append(await ack((await s2.next_msg(1)).reply, b"+ACK"))
    inbox3 = nc.new_inbox()
    s3 = await nc.subscribe(inbox3)
    await nc.request("$JS.API.CONSUMER.CREATE.Q.aa", json.dumps({"stream_name": "Q", "config": {
        "durable_name": "aa", "deliver_subject": inbox3, "ack_policy": "all"}}).encode())
    ms = [await s3.next_msg(1) for _ in range(4)]
    out.append(await ack(ms[2].reply, b"+ACK"))
    out.append(await ack(ms[1].reply, b"+ACK"))
    out.append(await info("aa"))
    await nc.close()
    return out


def test_acks_match(natsd, reference, tmp_path):
    ours = asyncio.run(run_acks(natsd("-js", "-sd", str(tmp_path / "a")).url))
    theirs = asyncio.run(run_acks(reference("-js", "-sd", str(tmp_path / "b")).url))
    assert ours == theirs


async def request(url, subject):
    nc = await nats.connect(url)
    try:
        return json.loads((await nc.request(subject, b"", timeout=5)).data)
    finally:
        await nc.close()


WAIT_FRAME = re.compile(rb"HMSG _WAIT 1 (\d+) (\d+)\r\n")


def waiting_pull_hears(srv, then):
    """Stream R3, pull consumer `work`, a pull request waiting on it (on a raw socket: a client
    that reconnects could outlive its test); `then()` runs. -> the header blocks its inbox got
    within 3 s, or until the server closed the connection."""
    async def setup():
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="R3", subjects=["r3.>"])
        await js.add_consumer("R3", durable_name="work", ack_policy="explicit")
        await nc.close()

    asyncio.run(setup())
    with RawClient(srv.port) as c:
        c.connect()
        body = json.dumps({"batch": 1, "expires": 60_000_000_000}).encode()
        c.send(b"SUB _WAIT 1\r\nPUB $JS.API.CONSUMER.MSG.NEXT.R3.work _WAIT %d\r\n%s\r\n" % (len(body), body))
        c.sync()
        assert poll(lambda: asyncio.run(request(srv.url, "$JS.API.CONSUMER.INFO.R3.work"))["num_waiting"] == 1,
                    timeout=10)
        then()
        got = c.read_available(quiet=3.0, timeout=3.0)
    heard = []
    for m in WAIT_FRAME.finditer(got):
        hdr_len = int(m.group(1))
        heard.append(got[m.end():m.end() + hdr_len])
    return heard


def test_waiting_pull_requests_hear_of_a_delete_and_of_a_shutdown(natsd, reference, tmp_path):
    """A consumer tells its waiting pull requests `409 Consumer Deleted` when deleted and `409
    Server Shutdown` (with what each still wanted) when its server shuts down; after lame duck
    mode, which stopped JetStream first, they hear nothing (their clients reconnect and ask
    again). Byte for byte."""
    ldm = tmp_path / "ldm.conf"
    ldm.write_text("lame_duck_duration: 30s\nlame_duck_grace_period: 1s\n")
    seen = {}
    for kind, start in (("nats-server", reference), ("natsd", natsd)):
        heard = []
        for case, sig in (("deleted", None), ("shutdown", signal.SIGTERM), ("lame duck", signal.SIGUSR2)):
            srv = start("-js", "-sd", str(tmp_path / kind / case), "-c", str(ldm))

            def then():
                if sig is None:
                    assert asyncio.run(request(srv.url, "$JS.API.CONSUMER.DELETE.R3.work"))["success"]
                else:
                    srv.signal(sig)
            heard.append(waiting_pull_hears(srv, then))
        seen[kind] = heard
    assert seen["nats-server"] == [
        [b"NATS/1.0 409 Consumer Deleted\r\n\r\n"],
        [b"NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n"],
        []]
    assert seen["natsd"] == seen["nats-server"]
