"""Message schedules (allow_msg_schedules, Nats-Schedule), natsd against the reference
nats-server: the same publishes get the same PubAcks and errors; a one-shot `@at` in the past
fires at once and purges its schedule; an `@every 1s` schedule fires repeatedly with
`Nats-Scheduler` / `Nats-Schedule-Next`, TTL and source; a plain message on a schedule's subject
ends it; and a schedule survives a restart of natsd."""
import base64
import json
import time

from tests.support.jetstream import across_a_kill, api, compared_on_both
from tests.support.waiting import until


def at(seconds_from_now):
    return "@at " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def sched(pattern, target, **extra):
    h = {"Nats-Schedule": pattern, "Nats-Schedule-Target": target}
    h.update(extra)
    return h


PUBLISHES = [
    # refused: the pattern, the target, the source, TTL and rollup headers, the scheduler rules
    ("s.bad", sched("@every 100ms", "s.t")),
    ("s.bad", sched("@at tomorrow", "s.t")),
    ("s.bad", sched("* * * *", "s.t")),
    ("s.bad", sched("0 0 * * * *", "s.t", **{"Nats-Schedule-Time-Zone": "Mars/Olympus"})),
    ("s.bad", sched("@at 2030-01-01T00:00:00Z", "s.t", **{"Nats-Schedule-Time-Zone": "UTC"})),
    ("s.bad", sched("@every 1s", "s.bad")),
    ("s.bad", sched("@every 1s", "other.t")),
    ("s.bad", sched("@every 1s", "s.*")),
    ("s.bad", sched("@every 1s", "s.t", **{"Nats-Schedule-Source": "s.t"})),
    ("s.bad", sched("@every 1s", "s.t", **{"Nats-Schedule-TTL": "x"})),
    ("s.bad", sched("@every 1s", "s.t", **{"Nats-Schedule-Rollup": "all"})),
    ("s.bad", sched("@every 1s", "s.t", **{"Nats-Rollup": "all"})),
    ("s.bad", {"Nats-Scheduler": "s.x"}),
    ("s.bad", {"Nats-Schedule-Next": "soon", "Nats-Scheduler": "s.x"}),
    ("s.bad", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.plain"}),
    # accepted: cron forms, time zones, a far @at
    ("s.cron", sched("0 0 12 * * mon-fri", "s.t", **{"Nats-Schedule-Time-Zone": "Europe/Amsterdam"})),
    ("s.hourly", sched("@hourly", "s.t")),
    ("s.far", sched("@at 2099-01-01T00:00:00Z", "s.t")),
]


@compared_on_both
async def test_schedules_match(nc, js):
    out = []

    await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True,
                                         "allow_msg_ttl": True})
    await api(nc, "$JS.API.STREAM.CREATE.N", {"name": "N", "subjects": ["n.>"]})
    out.append(json.loads((await nc.request("n.x", b"p", timeout=2, headers=sched("@every 1s", "n.t"))).data))
    await nc.request("s.plain", b"plain", timeout=2)
    for subject, headers in PUBLISHES:
        r = json.loads((await nc.request(subject, b"x", timeout=2, headers=headers)).data)
        out.append((subject, sorted(headers.items()), r.get("error"), r.get("seq", 0) > 0))
    # a one-shot in the past fires now and purges itself
    await nc.request("s.once", b"once", timeout=2, headers=sched(at(-5), "s.fired"))
    # a repeating schedule with a TTL, and one that publishes its source's last message
    await nc.request("s.src", b"source-1", timeout=2)
    await nc.request("s.every", b"tick", timeout=2, headers=sched(
        "@every 1s", "s.ticks", **{"Nats-Schedule-TTL": "5m", "Nats-Msg-Id": "m1", "X-App": "kept"}))
    await nc.request("s.fromsrc", b"ignored", timeout=2, headers=sched(
        "@every 1s", "s.copied", **{"Nats-Schedule-Source": "s.src"}))

    async def counts():
        st = (await api(nc, "$JS.API.STREAM.INFO.S", {"subjects_filter": ">"}))["state"]
        return st.get("subjects", {})

    async def repeated():
        c = await counts()
        return c.get("s.ticks", 0) >= 2 and c.get("s.copied", 0) >= 2
    await until(repeated, 10)
    c = await counts()
    out.append(("repeating", c.get("s.ticks", 0) >= 2, c.get("s.copied", 0) >= 2))
    await nc.request("s.every", b"stop", timeout=2)           # a plain message ends it
    stopped_at = (await counts()).get("s.ticks", 0)
    await nc.request("s.src", b"source-2", timeout=2)

    async def copied_last():
        r = await api(nc, "$JS.API.STREAM.MSG.GET.S", {"last_by_subj": "s.copied"})
        return base64.b64decode(r["message"].get("data", ""))

    async def copied_source_2():
        return await copied_last() == b"source-2"
    await until(copied_source_2, 10)
    c = await counts()
    # a tick already on its way when the schedule ended may still land
    out.append(("stopped", c.get("s.ticks", 0) - stopped_at <= 1, await copied_last()))
    out.append(("counts", {k: c.get(k, 0) for k in ("s.once", "s.fired", "s.every", "s.src")}))
    for subject in ("s.fired", "s.ticks", "s.copied", "s.every"):
        r = await api(nc, "$JS.API.STREAM.MSG.GET.S", {"last_by_subj": subject})
        m = r["message"]
        hdrs = base64.b64decode(m.get("hdrs", "")).decode()
        lines = sorted(line.split(":")[0] + (": <time>" if line.startswith("Nats-Schedule-Next: 2")
                                             else ":" + line.split(":", 1)[1])
                       for line in hdrs.split("\r\n")[1:] if line)
        out.append((subject, base64.b64decode(m.get("data", "")), lines))
    return out


def test_schedule_survives_restart(natsd, tmp_path):
    async def before(nc, js):
        await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True})
        r = json.loads((await nc.request("s.later", b"later", timeout=2, headers=sched(at(2), "s.done"))).data)
        assert r["seq"] == 1

    async def after(nc, js):
        js = nc.jetstream()

        async def fired():
            return ((await js.stream_info("S", subjects_filter=">")).state.subjects or {}).get("s.done")
        await until(fired, 10)
        info = await js.stream_info("S", subjects_filter=">")
        assert info.state.subjects == {"s.done": 1}      # fired once, the schedule purged
        m = await js.get_last_msg("S", "s.done")
        assert m.data == b"later" and m.headers["Nats-Scheduler"] == "s.later"
        assert m.headers["Nats-Schedule-Next"] == "purge"
    across_a_kill(natsd, str(tmp_path / "d"), before, after)
