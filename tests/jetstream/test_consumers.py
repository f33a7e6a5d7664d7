"""Consumers through nats-py against natsd: pull fetch (batch, timeout, no_wait), push subscribe,
durable vs ephemeral, deliver policies, ack policies, redelivery (ack_wait, backoff), nak with
delay, term, in_progress, max_deliver + advisory, max_ack_pending, filter subjects, info
numbers, ordered consumers, KV watch/keys/history, restart recovery of durable state."""
import asyncio
import json

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from tests.support.jetstream import api, connect, initial_values, on_js_server
from tests.support.waiting import run, until


async def fill(js, n=0, subjects=("o.>",), name="O", **kw):
    """Stream `name` (on o.> by default) with n messages m0, m1, ... on o.0, o.1, o.2 in turn."""
    await js.add_stream(name=name, subjects=list(subjects), **kw)
    for i in range(n):
        await js.publish("o.%d" % (i % 3), b"m%d" % i)


async def setup(server, n=0, **kw):
    nc = await connect(server)
    js = nc.jetstream()
    await fill(js, n, **kw)
    return nc, js


@on_js_server
async def test_pull_fetch_batch_timeout_no_wait(nc, js):
    await fill(js, 5)
    sub = await js.pull_subscribe("o.>", durable="d")
    msgs = await sub.fetch(3, timeout=1)
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    md = msgs[0].metadata
    assert md.sequence.stream == 1 and md.sequence.consumer == 1 and md.num_delivered == 1
    assert md.num_pending == 4 and md.stream == "O" and md.consumer == "d"
    assert msgs[2].metadata.num_pending == 2
    for m in msgs:
        await m.ack()
    msgs = await sub.fetch(10, timeout=0.5)           # only 2 left: returns what is there
    assert [m.data for m in msgs] == [b"m3", b"m4"]
    for m in msgs:
        await m.ack_sync()
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.3)
    # raw no_wait: 404 No Messages
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.O.d", b'{"batch":1,"no_wait":true}', reply=inbox)
    m = await s.next_msg(1)
    assert m.headers["Status"] == "404" and m.headers["Description"] == "No Messages"
    ci = await js.consumer_info("O", "d")
    assert ci.num_pending == 0 and ci.num_ack_pending == 0
    assert ci.delivered.consumer_seq == 5 and ci.delivered.stream_seq == 5
    assert ci.ack_floor.consumer_seq == 5 and ci.ack_floor.stream_seq == 5


@on_js_server
async def test_pull_waiting_request_gets_new_message_and_expires(nc, js):
    await fill(js)
    await js.add_consumer("O", ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT))
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.O.w",
                     json.dumps({"batch": 2, "expires": 400_000_000}).encode(), reply=inbox)

    async def waiting():
        return (await js.consumer_info("O", "w")).num_waiting == 1
    await until(waiting, 0.35)                      # well before the request expires
    ci = await js.consumer_info("O", "w")
    assert ci.num_waiting == 1
    await js.publish("o.x", b"late")
    m = await s.next_msg(1)
    assert m.data == b"late" and m.subject == "o.x"
    m = await s.next_msg(1)
    assert m.headers["Status"] == "408" and m.headers["Description"] == "Request Timeout"
    assert m.headers["Nats-Pending-Messages"] == "1" and m.headers["Nats-Pending-Bytes"] == "0"


@on_js_server
async def test_pull_request_limits(nc, js):
    await fill(js, 1)
    await api(nc, "$JS.API.CONSUMER.CREATE.O.lim", {"stream_name": "O", "config": {
        "durable_name": "lim", "ack_policy": "explicit", "max_batch": 5,
        "max_expires": 10_000_000_000, "max_bytes": 1000, "max_waiting": 1}})
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)

    async def nxt(body):
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.O.lim", body.encode(), reply=inbox)
        return await s.next_msg(1)
    m = await nxt('{"batch":10}')
    assert (m.headers["Status"], m.headers["Description"]) == ("409", "Exceeded MaxRequestBatch of 5")
    m = await nxt('{"batch":1,"expires":20000000000}')
    assert m.headers["Description"] == "Exceeded MaxRequestExpires of 10s"
    m = await nxt('{"batch":1,"max_bytes":5000}')
    assert m.headers["Description"] == "Exceeded MaxRequestMaxBytes of 1000"
    m = await nxt('{"batch":1,"max_bytes":10,"no_wait":true}')
    assert m.headers["Status"] == "409" and m.headers["Description"] == "Message Size Exceeds MaxBytes"
    m = await nxt('{bad')
    assert m.headers["Status"] == "400"
    await nxt('{"batch":1}')                               # consumes the one message
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.O.lim", b'{"batch":1,"expires":2000000000}',
                     reply=inbox)
    m = await nxt('{"batch":1,"expires":2000000000}')
    assert m.headers["Status"] == "409" and m.headers["Description"] == "Exceeded MaxWaiting"


@on_js_server
async def test_push_subscribe_durable_and_ephemeral(nc, js):
    await fill(js, 3)
    got = []
    done = asyncio.Event()

    async def cb(m):
        got.append(m.data)
        await m.ack()
        if len(got) == 3:
            done.set()
    sub = await js.subscribe("o.>", durable="pd", cb=cb)
    await asyncio.wait_for(done.wait(), 3)
    assert got == [b"m0", b"m1", b"m2"]
    ci = await js.consumer_info("O", "pd")
    assert ci.push_bound and ci.config.deliver_subject

    async def acked():                              # the acks went out without waiting
        ci = await js.consumer_info("O", "pd")
        return ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 3
    await until(acked)
    ci = await js.consumer_info("O", "pd")
    assert ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 3
    await sub.unsubscribe()
    # ephemeral push with a callback
    got2 = []
    sub2 = await js.subscribe("o.1", cb=lambda m: got2.append(m.data) or asyncio.sleep(0))
    assert await until(lambda: got2 == [b"m1"])
    names = await api(nc, "$JS.API.CONSUMER.NAMES.O")
    assert names["total"] == 2 and "pd" in names["consumers"]


@on_js_server
async def test_ephemeral_inactivity_cleanup(nc, js):
    await fill(js, 1)
    r = await api(nc, "$JS.API.CONSUMER.CREATE.O", {"stream_name": "O", "config": {
        "ack_policy": "explicit", "inactive_threshold": 300_000_000}})
    name = r["name"]
    assert r["config"]["inactive_threshold"] == 300_000_000 and "durable_name" not in r["config"]
    adv = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.O.%s" % name)
    m = await adv.next_msg(4)
    assert json.loads(m.data)["type"] == "io.nats.jetstream.advisory.v1.consumer_action"
    r = await api(nc, "$JS.API.CONSUMER.INFO.O.%s" % name)
    assert r["error"]["err_code"] == 10014
    # default for ephemerals is 5s
    r = await api(nc, "$JS.API.CONSUMER.CREATE.O", {"stream_name": "O", "config": {}})
    assert r["config"]["inactive_threshold"] == 5_000_000_000


@run
async def test_deliver_policies(js_server):
    nc, js = await setup(js_server, 6)                 # subjects o.0 o.1 o.2 o.0 o.1 o.2

    async def first(**kw):
        sub = await js.pull_subscribe("o.>", **kw)
        msgs = await sub.fetch(1, timeout=1)
        return msgs[0].metadata.sequence.stream
    assert await first(durable="all") == 1
    assert await first(durable="last", config=ConsumerConfig(deliver_policy=DeliverPolicy.LAST)) == 6
    assert await first(durable="seq", config=ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4)) == 4
    info = await js.stream_info("O")
    sub = await js.pull_subscribe("o.>", durable="new",
                                  config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW))
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.3)
    await js.publish("o.9", b"new")
    msgs = await sub.fetch(1, timeout=1)
    assert msgs[0].data == b"new"
    # last per subject: the last of o.0, o.1, o.2 = 4, 5, 6
    sub = await js.pull_subscribe("o.*", durable="lps",
                                  config=ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT))
    msgs = await sub.fetch(3, timeout=1)
    assert [m.metadata.sequence.stream for m in msgs] == [4, 5, 6]
    assert msgs[-1].metadata.num_pending == 1             # o.9 still to come
    # by start time: everything after the stream's 6th message's time
    r = await api(nc, "$JS.API.STREAM.MSG.GET.O", {"seq": 5})
    sub = await js.pull_subscribe("o.>", durable="time", config=ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=r["message"]["time"]))
    msgs = await sub.fetch(1, timeout=1)
    assert msgs[0].metadata.sequence.stream == 5
    await nc.close()


@on_js_server
async def test_ack_policies_none_and_all(nc, js):
    await fill(js, 5)
    sub = await js.pull_subscribe("o.>", durable="none", config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    await sub.fetch(3, timeout=1)
    ci = await js.consumer_info("O", "none")
    assert ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 3 and ci.num_pending == 2
    sub = await js.pull_subscribe("o.>", durable="all", config=ConsumerConfig(ack_policy=AckPolicy.ALL))
    msgs = await sub.fetch(4, timeout=1)
    ci = await js.consumer_info("O", "all")
    assert ci.num_ack_pending == 4
    await msgs[2].ack_sync()
    ci = await js.consumer_info("O", "all")
    assert ci.num_ack_pending == 1 and ci.ack_floor.stream_seq == 3 and ci.ack_floor.consumer_seq == 3


@on_js_server
async def test_redelivery_after_ack_wait_and_counts(nc, js):
    await fill(js, 2)
    sub = await js.pull_subscribe("o.>", durable="rd", config=ConsumerConfig(ack_wait=0.3))
    msgs = await sub.fetch(2, timeout=1)
    await msgs[1].ack()
    await asyncio.sleep(0.45)
    again = await sub.fetch(1, timeout=1)
    assert again[0].data == b"m0" and again[0].metadata.num_delivered == 2
    assert again[0].metadata.sequence.consumer == 3
    ci = await js.consumer_info("O", "rd")
    assert ci.num_redelivered == 1 and ci.num_ack_pending == 1
    assert ci.delivered.consumer_seq == 3 and ci.delivered.stream_seq == 2
    await again[0].ack_sync()
    ci = await js.consumer_info("O", "rd")
    assert ci.num_redelivered == 0 and ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 2


@on_js_server
async def test_nak_with_delay_term_in_progress(nc, js):
    await fill(js, 3)
    naks = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.O.nk")
    terms = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.O.nk")
    sub = await js.pull_subscribe("o.>", durable="nk", config=ConsumerConfig(ack_wait=0.5))
    m1, m2, m3 = await sub.fetch(3, timeout=1)
    await m1.nak()                                        # immediate
    again = await sub.fetch(1, timeout=1)
    assert again[0].data == b"m0" and again[0].metadata.num_delivered == 2
    adv = json.loads((await naks.next_msg(1)).data)
    assert adv["type"] == "io.nats.jetstream.advisory.v1.nak" and adv["stream_seq"] == 1
    await again[0].nak(delay=0.4)
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.2)
    later = await sub.fetch(1, timeout=1)
    assert later[0].data == b"m0" and later[0].metadata.num_delivered == 3
    await later[0].ack()
    await m2.term()
    adv = json.loads((await terms.next_msg(1)).data)
    assert adv["type"] == "io.nats.jetstream.advisory.v1.terminated" and adv["stream_seq"] == 2
    for _ in range(3):                                     # in progress keeps it from redelivery
        await asyncio.sleep(0.25)
        await m3.in_progress()
    ci = await js.consumer_info("O", "nk")
    assert ci.num_ack_pending == 1 and ci.num_redelivered == 0
    await m3.ack_sync()
    ci = await js.consumer_info("O", "nk")
    assert ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 3


@on_js_server
async def test_max_deliver_advisory_and_backoff(nc, js):
    await fill(js, 1)
    adv = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.O.md")
    sub = await js.pull_subscribe("o.>", durable="md", config=ConsumerConfig(
        max_deliver=2, backoff=[0.1, 0.2]))
    ci = await js.consumer_info("O", "md")
    assert ci.config.ack_wait == 0.1
    seen = []
    for _ in range(2):
        msgs = await sub.fetch(1, timeout=1)
        seen.append(msgs[0].metadata.num_delivered)
    assert seen == [1, 2]
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.4)
    # natsd sends it when the ack wait runs out; nats-server at the next pull at the latest
    a = json.loads((await adv.next_msg(3)).data)
    assert a["type"] == "io.nats.jetstream.advisory.v1.max_deliver"
    assert a["stream_seq"] == 1 and a["deliveries"] == 2
    ci = await js.consumer_info("O", "md")
    assert ci.num_ack_pending == 0


@on_js_server
async def test_max_ack_pending(nc, js):
    await fill(js, 5)
    sub = await js.pull_subscribe("o.>", durable="map", config=ConsumerConfig(max_ack_pending=2))
    msgs = await sub.fetch(5, timeout=0.5)
    assert len(msgs) == 2
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.3)
    await msgs[0].ack()
    more = await sub.fetch(5, timeout=0.5)
    assert [m.data for m in more] == [b"m2"]
    ci = await js.consumer_info("O", "map")
    assert ci.num_ack_pending == 2 and ci.num_pending == 2


@on_js_server
async def test_filter_subjects(nc, js):
    await fill(js, 6)
    sub = await js.pull_subscribe("o.1", durable="f1")
    msgs = await sub.fetch(5, timeout=0.5)
    assert [m.data for m in msgs] == [b"m1", b"m4"]
    await js.add_consumer("O", ConsumerConfig(durable_name="f2", filter_subjects=["o.0", "o.2"]))
    sub = await js.pull_subscribe_bind("f2", stream="O")
    msgs = await sub.fetch(10, timeout=0.5)
    assert [m.data for m in msgs] == [b"m0", b"m2", b"m3", b"m5"]
    ci = await js.consumer_info("O", "f2")
    assert ci.config.filter_subjects == ["o.0", "o.2"] and ci.num_pending == 0


@on_js_server
async def test_consumer_info_numbers_and_api(nc, js):
    await fill(js, 4)
    r = await api(nc, "$JS.API.CONSUMER.CREATE.O.inf", {"stream_name": "O", "config": {
        "durable_name": "inf", "ack_policy": "explicit"}})
    assert r["type"] == "io.nats.jetstream.api.v1.consumer_create_response"
    assert r["num_pending"] == 4 and r["delivered"] == {"consumer_seq": 0, "stream_seq": 0}
    assert r["config"]["max_ack_pending"] == 1000 and r["config"]["ack_wait"] == 30_000_000_000
    assert r["config"]["max_waiting"] == 512 and r["config"]["max_deliver"] == -1
    # idempotent create, update of an editable field, forbidden update
    r2 = await api(nc, "$JS.API.CONSUMER.CREATE.O.inf", {"stream_name": "O", "config": {
        "durable_name": "inf", "ack_policy": "explicit"}, "action": "create"})
    assert r2["name"] == "inf" and r2["created"] == r["created"]
    r3 = await api(nc, "$JS.API.CONSUMER.CREATE.O.inf", {"stream_name": "O", "config": {
        "durable_name": "inf", "ack_policy": "explicit", "description": "d"}})
    assert r3["config"]["description"] == "d"
    r4 = await api(nc, "$JS.API.CONSUMER.CREATE.O.inf", {"stream_name": "O", "config": {
        "durable_name": "inf", "ack_policy": "all"}})
    assert r4["error"] == {"code": 500, "err_code": 10012, "description": "ack policy can not be updated"}
    lst = await api(nc, "$JS.API.CONSUMER.LIST.O")
    assert lst["total"] == 1 and lst["limit"] == 256 and lst["consumers"][0]["name"] == "inf"
    d = await api(nc, "$JS.API.CONSUMER.DELETE.O.inf")
    assert d == {"type": "io.nats.jetstream.api.v1.consumer_delete_response", "success": True}


@on_js_server
async def test_pause_resume(nc, js):
    await fill(js, 1)
    await js.add_consumer("O", ConsumerConfig(durable_name="pz"))
    r = await api(nc, "$JS.API.CONSUMER.PAUSE.O.pz", {"pause_until": "2099-01-01T00:00:00Z"})
    assert r["paused"] is True and r["pause_remaining"] > 0
    sub = await js.pull_subscribe_bind("pz", stream="O")
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.3)
    info = await api(nc, "$JS.API.CONSUMER.INFO.O.pz")
    assert info["paused"] is True and info["config"]["pause_until"] == "2099-01-01T00:00:00Z"
    r = await api(nc, "$JS.API.CONSUMER.PAUSE.O.pz")
    assert r == {"type": "io.nats.jetstream.api.v1.consumer_pause_response", "paused": False,
                 "pause_until": "0001-01-01T00:00:00Z"}
    msgs = await sub.fetch(1, timeout=1)
    assert msgs[0].data == b"m0"


@on_js_server
async def test_push_flow_control_heartbeat_and_headers_only(nc, js):
    await fill(js, 2)
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)
    await api(nc, "$JS.API.CONSUMER.CREATE.O.fc", {"stream_name": "O", "config": {
        "name": "fc", "deliver_subject": inbox, "ack_policy": "none", "flow_control": True,
        "idle_heartbeat": 200_000_000, "headers_only": True}})
    m1 = await s.next_msg(1)
    assert m1.data == b"" and m1.headers["Nats-Msg-Size"] == "2" and m1.subject == "o.0"
    await s.next_msg(1)
    hb = await s.next_msg(1)
    assert hb.headers["Status"] == "100" and hb.headers["Description"] == "Idle Heartbeat"
    assert hb.headers["Nats-Last-Consumer"] == "2" and hb.headers["Nats-Last-Stream"] == "2"


@on_js_server
async def test_ordered_consumer(nc, js):
    await fill(js, 20)
    sub = await js.subscribe("o.>", ordered_consumer=True)
    data = []
    for _ in range(20):
        m = await sub.next_msg(2)
        data.append(m.data)
    assert data == [b"m%d" % i for i in range(20)]
    ci = await sub.consumer_info()
    assert ci.config.ack_policy == AckPolicy.NONE and ci.config.max_deliver == 1
    assert ci.config.mem_storage and ci.config.flow_control


@on_js_server
async def test_kv_watch_keys_history(nc, js):
    kv = await js.create_key_value(bucket="cfg", history=5)
    for key, value in (("a", b"1"), ("b", b"2"), ("a", b"3")):
        await kv.put(key, value)
    assert sorted(await kv.keys()) == ["a", "b"]
    assert [e.value for e in await kv.history("a")] == [b"1", b"3"]
    w = await kv.watchall()
    assert sorted(await initial_values(w)) == [("a", b"3"), ("b", b"2")]
    await kv.put("c", b"4")
    e = await asyncio.wait_for(w.updates(), 2)
    assert e.key == "c" and e.value == b"4"
    await kv.delete("b")
    e = await asyncio.wait_for(w.updates(), 2)
    assert e.key == "b" and e.operation == "DEL"
    await w.stop()


@on_js_server
async def test_workqueue_and_interest_retention(nc, js):
    await js.add_stream(name="WQ", subjects=["wq.>"], retention="workqueue")
    for i in range(3):
        await js.publish("wq.a", b"%d" % i)
    sub = await js.pull_subscribe("wq.>", durable="w")
    msgs = await sub.fetch(3, timeout=1)
    for m in msgs:
        await m.ack_sync()
    assert (await js.stream_info("WQ")).state.messages == 0
    r = await api(nc, "$JS.API.CONSUMER.CREATE.WQ.w2", {"stream_name": "WQ", "config": {
        "durable_name": "w2", "ack_policy": "explicit"}})
    assert r["error"]["err_code"] == 10099
    await js.add_stream(name="IN", subjects=["in.>"], retention="interest")
    s1 = await js.pull_subscribe("in.>", durable="i1")
    s2 = await js.pull_subscribe("in.>", durable="i2")
    await js.publish("in.x", b"x")
    (m,) = await s1.fetch(1, timeout=1)
    await m.ack_sync()
    assert (await js.stream_info("IN")).state.messages == 1
    (m,) = await s2.fetch(1, timeout=1)
    await m.ack_sync()

    async def removed():                            # the last interest acked: the message goes
        return (await js.stream_info("IN")).state.messages == 0
    await until(removed)
    assert (await js.stream_info("IN")).state.messages == 0


def test_restart_recovers_durable_state(natsd, tmp_path):
    async def phase1(srv):
        nc, js = await setup(srv, 5)
        sub = await js.pull_subscribe("o.>", durable="keep", config=ConsumerConfig(ack_wait=30))
        msgs = await sub.fetch(3, timeout=1)
        await msgs[0].ack_sync()
        await msgs[2].ack_sync()
        await js.pull_subscribe("o.>", durable="gone")
        await js.delete_consumer("O", "gone")
        ci = await js.consumer_info("O", "keep")
        await nc.close()
        return ci

    async def phase2(srv):
        nc = await connect(srv)
        js = nc.jetstream()
        ci = await js.consumer_info("O", "keep")
        names = await api(nc, "$JS.API.CONSUMER.NAMES.O")
        sub = await js.pull_subscribe_bind("keep", stream="O")
        msgs = await sub.fetch(2, timeout=1)
        await nc.close()
        return ci, names, msgs

    srv = natsd("-js", "-sd", str(tmp_path))
    before = asyncio.run(phase1(srv))
    srv.stop()
    srv2 = natsd("-js", "-sd", str(tmp_path))
    after, names, msgs = asyncio.run(phase2(srv2))
    assert names["consumers"] == ["keep"]
    assert after.delivered.consumer_seq == before.delivered.consumer_seq == 3
    assert after.delivered.stream_seq == 3 and after.num_ack_pending == 1
    assert after.ack_floor.stream_seq == 1 and after.num_pending == 2
    assert after.created == before.created
    assert [m.metadata.sequence.stream for m in msgs] == [4, 5]


@on_js_server
async def test_deliver_group_queue_subscribers(nc, js):
    await fill(js, 0)
    got = {1: [], 2: []}
    await js.subscribe("o.>", queue="workers", cb=lambda m: got[1].append(m.data) or m.ack())
    await js.subscribe("o.>", queue="workers", cb=lambda m: got[2].append(m.data) or m.ack())
    ci = await js.consumer_info("O", "workers")
    assert ci.config.deliver_group == "workers"
    for i in range(40):
        await js.publish("o.1", b"%d" % i)
    assert await until(lambda: len(got[1]) + len(got[2]) == 40)
    assert got[1] and got[2]
    assert sorted(got[1] + got[2], key=int) == [b"%d" % i for i in range(40)]


@on_js_server
async def test_ordered_consumer_flow_control_large(nc, js):
    await fill(js, 0)
    payload = b"x" * 4096
    for i in range(1200):                                   # ~5 MB: several flow control rounds
        await js.publish("o.big", payload)
    sub = await js.subscribe("o.big", ordered_consumer=True)
    n = 0
    for _ in range(1200):
        m = await sub.next_msg(3)
        n += 1
        assert m.metadata.sequence.stream == n
    ci = await sub.consumer_info()
    assert ci.num_pending == 0 and ci.delivered.stream_seq == 1200


@run
async def test_fetch_with_heartbeat_and_push_interest_loss(js_server):
    nc, js = await setup(js_server, 2)
    sub = await js.pull_subscribe("o.>", durable="hb")
    msgs = await sub.fetch(5, timeout=1.5, heartbeat=0.2)
    assert [m.data for m in msgs] == [b"m0", b"m1"]
    # an ephemeral push consumer goes away after its subscriber does (inactive_threshold)
    r = await api(nc, "$JS.API.CONSUMER.CREATE.O", {"stream_name": "O", "config": {
        "deliver_subject": "gone.inbox", "inactive_threshold": 300_000_000}})
    nc2 = await connect(js_server)
    s = await nc2.subscribe("gone.inbox")
    await nc2.flush()
    info = await api(nc, "$JS.API.CONSUMER.INFO.O.%s" % r["name"])
    assert "error" not in info
    await nc2.close()
    async def gone():
        i = await api(nc, "$JS.API.CONSUMER.INFO.O.%s" % r["name"])
        return i.get("error", {}).get("err_code") == 10014
    assert await until(gone, 4)
    await nc.close()


@on_js_server
async def test_replay_original_and_rate_limit(nc, js):
    await fill(js, 0)
    for i in range(3):
        await js.publish("o.r", b"%d" % i)
        await asyncio.sleep(0.25)
    loop = asyncio.get_running_loop()
    inbox = nc.new_inbox()
    s = await nc.subscribe(inbox)
    await api(nc, "$JS.API.CONSUMER.CREATE.O.rp", {"stream_name": "O", "config": {
        "name": "rp", "deliver_subject": inbox, "replay_policy": "original"}})
    times = []
    for _ in range(3):
        await s.next_msg(2)
        times.append(loop.time())
    assert times[1] - times[0] > 0.18 and times[2] - times[1] > 0.18
    # 8000 bps = 1000 bytes/s with a burst of max_msg_size (200): three ~130-byte messages
    # need about 0.2 s
    await js.add_stream(name="RL", subjects=["rl.>"], max_msg_size=200)
    inbox2 = nc.new_inbox()
    s2 = await nc.subscribe(inbox2)
    for i in range(3):
        await js.publish("rl.x", b"x" * 90)
    t0 = loop.time()
    await api(nc, "$JS.API.CONSUMER.CREATE.RL.rl", {"stream_name": "RL", "config": {
        "name": "rl", "deliver_subject": inbox2, "rate_limit_bps": 8000}})
    for _ in range(3):
        await s2.next_msg(2)
    assert loop.time() - t0 > 0.15


def test_domain_prefixed_pull_and_push(natsd, tmp_path):
    conf = tmp_path / "js.conf"
    conf.write_text('jetstream { domain: hub, store_dir: "%s" }\n' % (tmp_path / "data"))
    srv = natsd("-c", str(conf))

    async def go():
        nc = await connect(srv)
        js = nc.jetstream(domain="hub")
        await js.add_stream(name="D", subjects=["d.>"])
        await js.publish("d.1", b"one")
        sub = await js.pull_subscribe("d.>", durable="dd")
        msgs = await sub.fetch(1, timeout=1)
        await msgs[0].ack_sync()
        ci = await js.consumer_info("D", "dd")
        await nc.close()
        return msgs[0].data, ci.ack_floor.stream_seq
    assert asyncio.run(go()) == (b"one", 1)


@on_js_server
async def test_kv_empty_bucket_and_rapid_updates(nc, js):
    kv = await js.create_key_value(bucket="empty")
    with pytest.raises(nats.js.errors.NoKeysError):
        await kv.keys()
    w = await kv.watchall()
    assert await asyncio.wait_for(w.updates(), 2) is None         # initial values done marker
    for i in range(20):                                            # history 1: older revisions go
        await kv.put("k", b"%d" % i)
    last = None
    while True:
        e = await asyncio.wait_for(w.updates(), 2)
        last = e
        if e.value == b"19":
            break
    assert last.delta == 0
    w2 = await kv.watchall()
    e = await asyncio.wait_for(w2.updates(), 2)
    assert (e.key, e.value, e.delta) == ("k", b"19", 0)
    assert await asyncio.wait_for(w2.updates(), 2) is None
