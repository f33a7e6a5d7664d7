"""Pull requests as nats-server reads and answers them (issue 49.3): the body's rules (a
heartbeat at most half of `expires`, Go's JSON types), and the statuses a request hears in the
order nats-server sends them, including a one-shot (`no_wait`) request held at
max_ack_pending, which hears 404 No Messages at the consumer's next wake-up (its first
heartbeat), not heartbeats until it expires. Each scenario runs on natsd and on nats-server.
"""
import asyncio
import json

import nats.errors
import nats.js.errors

from tests.support.jetstream import api, compared_on_both


async def _statuses(nc, subject, body, until_status, timeout=3.0):
    """Publish one request with its own inbox; -> the statuses and payloads heard, in order,
    up to and including the first status in `until_status` (or what came before `timeout`)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, body, reply=inbox)
    heard = []
    try:
        while True:
            m = await sub.next_msg(timeout=timeout)
            status = (m.headers or {}).get("Status")
            if status:
                heard.append((status, (m.headers or {}).get("Description", "")))
                if status in until_status:
                    break
            else:
                heard.append(("msg", m.data.decode()))
    except nats.errors.TimeoutError:
        heard.append("timeout")
    await sub.unsubscribe()
    return heard


async def _events_consumer(js, **cfg):
    await js.add_stream(name="events", subjects=["events.>"])
    await js.add_consumer("events", durable_name="a", filter_subject="events.>", **cfg)


async def _until_no_waiting(js, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while (await js.consumer_info("events", "a")).num_waiting:
        assert asyncio.get_running_loop().time() < deadline, "a pull request never expired"
        await asyncio.sleep(0.05)


@compared_on_both
async def test_nats_py_fetch_heartbeats_after_earlier_fetches(nc, js):
    """nats.py's own test_fetch_heartbeats, step by step: fetch(4, timeout=2, heartbeat=0.1)
    after a fetch(20) that met max_ack_pending is served, not refused as 'heartbeat value too
    large'."""
    await _events_consumer(js, max_deliver=2, max_waiting=5, ack_wait=30, max_ack_pending=5)
    sub = await js.pull_subscribe_bind("a", stream="events")
    seen = []

    async def fetch(n, timeout, heartbeat):
        try:
            msgs = await sub.fetch(n, timeout=timeout, heartbeat=heartbeat)
        except nats.js.errors.APIError as e:
            seen.append(("api error", e.code, e.description))
            return
        except nats.errors.TimeoutError as e:
            seen.append(type(e).__name__)
            return
        seen.append([m.data.decode() for m in msgs])
        for m in msgs:
            await m.ack_sync()

    await fetch(1, 1, 0.1)
    # the timed-out pull request must be gone on the server too, or under load the first
    # published message goes to it and waits in the client's queue, and nats.py's next
    # no_wait probe (heartbeat, no expires) is refused on either server
    await _until_no_waiting(js)
    for i in range(15):
        await js.publish("events.%d" % i, b"i:%d" % i)
    await fetch(5, 5, 0.1)
    await fetch(1, 1, 0.1)
    await fetch(20, 2, 0.1)
    await fetch(4, 2, 0.1)
    seen.append((await js.consumer_info("events", "a")).num_pending)
    await fetch(4, 1, 0.1)
    await fetch(1, 1, 0.5)
    return seen


@compared_on_both
async def test_one_shot_request_held_at_max_ack_pending_hears_404(nc, js):
    await _events_consumer(js, max_ack_pending=2)
    for i in range(4):
        await js.publish("events.%d" % i, b"%d" % i)
    body = b'{"batch":5,"no_wait":true,"expires":1000000000,"idle_heartbeat":100000000}'
    return await _statuses(nc, "$JS.API.CONSUMER.MSG.NEXT.events.a", body, {"404", "408"})


@compared_on_both
async def test_request_bodies_refused_and_served(nc, js):
    """The heartbeat rule (2 x idle_heartbeat <= expires, and none without expires) and the
    other fields' checks, each against an empty consumer: what each body hears first."""
    await js.add_stream(name="events", subjects=["events.>"])
    config = {"durable_name": "a", "ack_policy": "explicit", "filter_subject": "events.>",
              "max_batch": 10, "max_expires": 2_000_000_000, "max_bytes": 100}
    created = await api(nc, "$JS.API.CONSUMER.CREATE.events.a",
                        json.dumps({"stream_name": "events", "config": config}).encode())
    assert "error" not in created, created
    bodies = [b'{"batch":1,"idle_heartbeat":100000000}',
              b'{"batch":1,"expires":200000000,"idle_heartbeat":100000000}',
              b'{"batch":1,"expires":199999999,"idle_heartbeat":100000000}',
              b'{"batch":1,"no_wait":true,"idle_heartbeat":1}',
              b'{"batch":1,"idle_heartbeat":-5}',
              b'{"batch":11}',
              b'{"batch":1,"expires":3000000000}',
              b'{"batch":1,"max_bytes":101,"expires":100000000}',
              b'{"batch":"1"}',
              b'{"batch":1.5}',
              b'{"batch":1,"no_wait":true}',
              b'2',
              b'x']
    heard = []
    for body in bodies:
        first = await _statuses(nc, "$JS.API.CONSUMER.MSG.NEXT.events.a", body,
                                {"400", "404", "408", "409"}, timeout=0.6)
        heard.append((body.decode(), first[0]))
    await asyncio.sleep(0)
    return heard


@compared_on_both
async def test_a_pull_request_nobody_serves_hears_no_responders(nc, js):
    """Each consumer subscribes its own MSG.NEXT subject: a request for a deleted consumer,
    a consumer never made or a stream that does not exist hears 503 no responders at once
    (nats-py and nats-jetstream's ordered consumers reset on it); a live consumer's serves."""
    await _events_consumer(js)
    await js.publish("events.1", b"one")
    body = b'{"batch":1,"expires":300000000}'

    async def pull(consumer):
        return await _statuses(nc, "$JS.API.CONSUMER.MSG.NEXT." + consumer, body,
                               {"404", "408", "503"}, timeout=2)
    heard = [await pull("events.a")]
    await js.delete_consumer("events", "a")
    for consumer in ("events.a", "events.nope", "NOPE.a"):
        heard.append(await pull(consumer))
    return heard
