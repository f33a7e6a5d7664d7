"""Priority groups (overflow, pinned_client, prioritized), CONSUMER.UNPIN and CONSUMER.RESET,
natsd against the reference nats-server: the same script against both, comparing every reply,
status, delivered message (subject, data, headers with the pin id masked), advisory and consumer
info (timestamps masked)."""
import asyncio
import json
import re

import nats

from tests.support.jetstream import compared_on_both

from natsd.ids import get_hash

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
API = "$JS.API."


def mask(obj, key=None, pins=None):
    if isinstance(obj, dict):
        return {k: mask(v, k, pins) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask(v, None, pins) for v in obj]
    if isinstance(obj, str) and TS.match(obj):
        return "<zero-time>" if obj.startswith("0001") else "<time>"
    if key in ("id", "pinned_id", "pinned_client_id", "Nats-Pin-Id") and isinstance(obj, str) and obj:
        if pins is not None:
            pins.setdefault(obj, "<pin%d>" % len(pins))
            return pins[obj]
        return "<id>"
    if key == "_nats.ver":
        return "<ver>"
    return obj


class Script:
    """One connection; every observation is appended to `out` (masked)."""

    def __init__(self, nc):
        self.nc = nc
        self.out = []
        self.pins = {}
        self.replies = []               # ack subjects of the delivered messages, in order

    def note(self, *what):
        self.out.append(mask(list(what), pins=self.pins))

    async def api(self, subject, body=b"", headers=None, record=True):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        try:
            m = await self.nc.request(API + subject, body, timeout=2, headers=headers)
        except nats.errors.TimeoutError:
            if record:
                self.note(subject, "timeout")
            return None
        d = json.loads(m.data)
        if record:
            self.note(subject, d)
        return d

    async def pull(self, stream, consumer, body, want, wait=1.0):
        """Send one pull request; collect up to `want` messages or statuses for `wait` s."""
        inbox = self.nc.new_inbox()
        got = []
        sub = await self.nc.subscribe(inbox)
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        await self.nc.publish(API + "CONSUMER.MSG.NEXT.%s.%s" % (stream, consumer), body, reply=inbox)
        deadline = asyncio.get_running_loop().time() + wait
        while len(got) < want:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                m = await sub.next_msg(timeout=left)
            except nats.errors.TimeoutError:
                break
            hdrs = dict(m.headers or {})
            if not hdrs.get("Status"):
                self.replies.append(m.reply)
            got.append((m.subject if not hdrs.get("Status") else "", m.data.decode(),
                        sorted(hdrs.items())))
        self.last_pin = dict(got[-1][2]).get("Nats-Pin-Id") if got else None
        await sub.unsubscribe()
        self.note("pull", stream, consumer, [(subj, data, [(k, mask(v, k, pins=self.pins)) for k, v in h])
                                             for subj, data, h in got])
        return got


async def advisories(nc, subject, sink):
    async def cb(m):
        sink.append(json.loads(m.data))
    return await nc.subscribe(subject, cb=cb)


@compared_on_both
async def test_priority_groups_and_reset_match(nc, js):
    s = Script(nc)
    adv = []
    await advisories(nc, "$JS.EVENT.ADVISORY.CONSUMER.PINNED.>", adv)
    await advisories(nc, "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.>", adv)
    await s.api("STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, record=False)
    for i in range(10):
        await nc.request("p.%d" % i, b"m%d" % i, timeout=2)

    # ---- CONSUMER.RESET ----
    await s.api("CONSUMER.CREATE.P.r", {"stream_name": "P", "config": {
        "durable_name": "r", "ack_policy": "explicit"}}, record=False)
    await s.pull("P", "r", {"batch": 3, "expires": 500_000_000}, 3)
    await nc.request(s.replies[0], b"+ACK", timeout=2)             # ack stream seq 1 only
    await s.api("CONSUMER.RESET.P.r")                    # back to the ack floor: 2
    await s.pull("P", "r", {"batch": 2, "expires": 500_000_000}, 2)
    await s.api("CONSUMER.RESET.P.r", {"seq": 8})
    await s.pull("P", "r", {"batch": 1, "expires": 500_000_000}, 1)
    await s.api("CONSUMER.RESET.P.r", b'{"seq": "x"}')
    await s.api("CONSUMER.RESET.P.r", {})
    await s.api("CONSUMER.RESET.P.nosuch")
    await s.api("CONSUMER.CREATE.P.rs", {"stream_name": "P", "config": {
        "durable_name": "rs", "ack_policy": "explicit", "deliver_policy": "by_start_sequence",
        "opt_start_seq": 5}}, record=False)
    await s.api("CONSUMER.RESET.P.rs", {"seq": 3})
    await s.api("CONSUMER.RESET.P.rs", {"seq": 6})
    await s.api("CONSUMER.CREATE.P.rn", {"stream_name": "P", "config": {
        "durable_name": "rn", "ack_policy": "explicit", "deliver_policy": "new"}}, record=False)
    await s.api("CONSUMER.RESET.P.rn", {"seq": 3})
    # the stream identity comes back in a header when asked for
    m = await nc.request(API + "CONSUMER.RESET.P.r", b"", timeout=2,
                         headers={"Nats-Stream-Identity": "x"})
    created = json.loads((await nc.request(API + "STREAM.INFO.P", b"", timeout=2)).data)["created"]
    s.note("identity", (m.headers or {}).get("Nats-Stream-Identity") == get_hash(created))

    # ---- pinned_client ----
    await s.api("CONSUMER.CREATE.P.pin", {"stream_name": "P", "config": {
        "durable_name": "pin", "ack_policy": "explicit", "priority_policy": "pinned_client",
        "priority_groups": ["A"], "priority_timeout": 800_000_000}})
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000}, 1)
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "B"}, 1)
    await s.pull("P", "pin", {"batch": 1, "group": "A", "min_pending": 1}, 1)
    await s.pull("P", "pin", {"batch": 1, "group": "A", "priority": 10}, 1)
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "A"}, 1)
    pin = s.last_pin
    await s.api("CONSUMER.INFO.P.pin")
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "A"}, 1)   # not pinned: 408
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "A", "id": "XYZ"}, 1)
    await s.pull("P", "pin", {"batch": 2, "expires": 300_000_000, "group": "A", "id": pin}, 2)
    await s.api("CONSUMER.UNPIN.P.pin", {"group": "B"})
    await s.api("CONSUMER.UNPIN.P.pin", {})
    await s.api("CONSUMER.UNPIN.P.pin", {"group": "A"})
    await s.api("CONSUMER.INFO.P.pin")
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "A", "id": pin}, 1)  # 423
    await s.pull("P", "pin", {"batch": 1, "expires": 300_000_000, "group": "A"}, 1)   # new pin
    await asyncio.sleep(1.6)                                # priority_timeout (0.8 s): unpinned
    await s.api("CONSUMER.INFO.P.pin")

    # ---- overflow ----
    await s.api("CONSUMER.CREATE.P.ov", {"stream_name": "P", "config": {
        "durable_name": "ov", "ack_policy": "explicit", "priority_policy": "overflow",
        "priority_groups": ["A"]}})
    await s.pull("P", "ov", {"batch": 1, "expires": 300_000_000, "group": "A", "min_pending": 50}, 1)
    await s.pull("P", "ov", {"batch": 1, "expires": 300_000_000, "group": "A", "min_pending": 5}, 1)
    await s.pull("P", "ov", {"batch": 1, "expires": 300_000_000, "group": "A", "min_ack_pending": 1}, 1)
    await s.pull("P", "ov", {"batch": 1, "expires": 300_000_000, "group": "A", "min_ack_pending": 9}, 1)
    await s.pull("P", "ov", {"batch": 1, "group": "A", "id": "x"}, 1)
    await s.pull("P", "ov", b"1", 1)                      # a plain request is served as usual

    # ---- prioritized ----
    await s.api("STREAM.CREATE.Q", {"name": "Q", "subjects": ["q.>"]}, record=False)
    await s.api("CONSUMER.CREATE.Q.pr", {"stream_name": "Q", "config": {
        "durable_name": "pr", "ack_policy": "explicit", "priority_policy": "prioritized",
        "priority_groups": ["A"]}})
    order = []
    subs = []
    for name, prio in (("low", 5), ("high", 1), ("mid", 3)):
        inbox = nc.new_inbox()

        async def cb(m, name=name):
            if not (m.headers or {}).get("Status"):
                order.append((name, m.data.decode()))
        subs.append(await nc.subscribe(inbox, cb=cb))
        await nc.publish(API + "CONSUMER.MSG.NEXT.Q.pr", json.dumps(
            {"batch": 2, "expires": 2_000_000_000, "group": "A", "priority": prio}).encode(), reply=inbox)
    await nc.flush()
    for i in range(6):
        await nc.request("q.x", b"q%d" % i, timeout=2)
    for _ in range(100):
        if len(order) == 6:
            break
        await asyncio.sleep(0.02)
    s.note("prioritized", order)

    await asyncio.sleep(0.2)
    s.note("advisories", sorted((a["type"], a.get("group"), a.get("reason"), a["stream"],
                                 a["consumer"], sorted(a)) for a in adv))
    return s.out
