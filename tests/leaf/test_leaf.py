"""Leaf node end-to-end tests on the seed-000 configs: natsd hub + natsd leaf, nats-server hub +
natsd leaf, natsd hub + nats-server leaf. Pub/sub and request/reply across the link, queue
groups (each message once), overlapping wildcards (no duplicates), interest removal, reconnect
after a hub restart, the system account link ($SYS.REQ.SERVER.PING.IDZ answered by both),
wrong credentials, a client on the leaf port, monitoring."""
import asyncio
import json

import nats
import pytest

from tests.support.leafnodes import COMBO_IDS, COMBOS, on_linked_pair
from tests.support.servers import http_json
from tests.support.waiting import poll, run, until

pytestmark = pytest.mark.timeout(60) if hasattr(pytest.mark, "timeout") else []


async def collect(nc, subject, queue=""):
    got = []

    async def cb(m):
        got.append(m)
    sub = await nc.subscribe(subject, queue=queue, cb=cb)
    return sub, got


@on_linked_pair
async def test_pubsub_both_directions(p, hub, leaf):
    _, on_hub = await collect(hub, "to.hub")
    _, on_leaf = await collect(leaf, "to.leaf")
    await p.crossed(hub=["to.hub"], leaf=["to.leaf"])
    for i in range(10):
        await leaf.publish("to.hub", b"h%d" % i)
        await hub.publish("to.leaf", b"l%d" % i, headers={"X-N": str(i)})
    await leaf.flush()
    await hub.flush()
    assert await until(lambda: len(on_hub) == 10 and len(on_leaf) == 10)
    assert [m.data for m in on_hub] == [b"h%d" % i for i in range(10)]
    assert [m.headers["X-N"] for m in on_leaf] == [str(i) for i in range(10)]


@on_linked_pair
async def test_request_reply_across(p, hub, leaf):
    async def on_leaf(m):
        await m.respond(b"leaf:" + m.data)

    async def on_hub(m):
        await m.respond(b"hub:" + m.data)
    await leaf.subscribe("svc.leaf", cb=on_leaf)
    await hub.subscribe("svc.hub", cb=on_hub)
    await p.crossed(hub=["svc.hub"], leaf=["svc.leaf"])
    assert (await hub.request("svc.leaf", b"1", timeout=3)).data == b"leaf:1"
    assert (await leaf.request("svc.hub", b"2", timeout=3)).data == b"hub:2"


@on_linked_pair
async def test_queue_group_each_message_once(p, hub, leaf):
    _, g1 = await collect(hub, "work", queue="q")
    _, g2 = await collect(hub, "work", queue="q")
    _, g3 = await collect(leaf, "work", queue="q")
    _, plain = await collect(hub, "work")          # plain interest next to the group
    await p.crossed(hub=["work"], leaf=["work"])
    n = 60
    for i in range(n):
        await (hub if i % 2 else leaf).publish("work", str(i).encode())
    await hub.flush()
    await leaf.flush()
    assert await until(lambda: len(g1) + len(g2) + len(g3) >= n and len(plain) >= n)
    await asyncio.sleep(0.3)                        # nothing more arrives (no duplicates)
    got = sorted(int(m.data) for m in g1 + g2 + g3)
    assert got == list(range(n)), "queue group members got %d messages" % len(got)
    assert sorted(int(m.data) for m in plain) == list(range(n))


@on_linked_pair
async def test_overlapping_wildcards_no_duplicates(p, hub, leaf):
    _, a = await collect(leaf, "foo.*")
    _, b = await collect(leaf, "foo.>")
    _, c = await collect(leaf, "foo.bar")
    _, d = await collect(hub, ">")
    await p.crossed(hub=[">"], leaf=["foo.*", "foo.>", "foo.bar"])
    await hub.publish("foo.bar", b"x")
    await hub.flush()
    assert await until(lambda: len(a) == len(b) == len(c) == 1)
    await asyncio.sleep(0.3)                        # nothing more arrives (no duplicates)
    assert (len(a), len(b), len(c)) == (1, 1, 1)
    # and the other way: a leaf publish reaches the hub's `>` subscriber once
    d.clear()
    await leaf.publish("foo.baz", b"y")
    await leaf.flush()
    assert await until(lambda: len([m for m in d if m.subject == "foo.baz"]) >= 1)
    await asyncio.sleep(0.3)
    assert len([m for m in d if m.subject == "foo.baz"]) == 1


@on_linked_pair
async def test_interest_removal_stops_flow(p, hub, leaf):
    def hub_sees(subject):
        leafs = http_json(p.hub.http_port, "/leafz?subs=1")["leafs"]
        return any(subject in (lf.get("subscriptions_list") or []) for lf in leafs)
    s1, got1 = await collect(leaf, "gone")
    s2, got2 = await collect(leaf, "gone")
    assert await until(lambda: hub_sees("gone"))
    await s1.unsubscribe()
    await leaf.flush()
    await asyncio.sleep(0.3)                        # an LS- (wrong: one is left) would be here
    assert hub_sees("gone"), "one subscriber is left: the interest must stay"
    await s2.unsubscribe()
    await leaf.flush()
    assert await until(lambda: not hub_sees("gone")), "LS- never reached the hub"
    await hub.publish("gone", b"late")
    await hub.flush()
    await asyncio.sleep(0.3)
    assert not got1 and not got2


@pytest.mark.parametrize("hub_kind", ["natsd", "nats-server"])
def test_reconnect_after_hub_restart(pair, hub_kind):
    p = pair(hub_kind, "natsd")

    async def main():
        leaf = await nats.connect(p.url(p.leaf))
        _, got = await collect(leaf, "after.restart")
        await leaf.flush()
        p.hub.kill()
        assert poll(lambda: http_json(p.leaf.http_port, "/varz")["leafnodes"] == 0, 10)
        p.start_hub(hub_kind)
        p.wait_linked(timeout=15)
        hub = await nats.connect(p.url(p.hub))
        await p.crossed(leaf=["after.restart"])      # interest was re-sent after the reconnect
        await hub.publish("after.restart", b"x")
        await hub.flush()
        assert await until(lambda: got)
        await hub.close()
        await leaf.close()
    run(main())


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_system_account_ping_answered_by_both(pair, hub_kind, leaf_kind):
    p = pair(hub_kind, leaf_kind)

    async def main():
        for srv in (p.hub, p.leaf):
            nc = await nats.connect(p.url(srv, "admin"))
            inbox = nc.new_inbox()
            _, got = await collect(nc, inbox)
            await p.crossed(**{"hub" if srv is p.hub else "leaf": [inbox]})
            await nc.publish("$SYS.REQ.SERVER.PING.IDZ", b"", reply=inbox)
            await nc.flush()
            assert await until(lambda: len(got) >= 2)
            await asyncio.sleep(0.3)
            names = sorted(json.loads(m.data)["name"] for m in got)
            assert names == ["hub-server", "leaf-server"]
            await nc.close()
    run(main())


def test_leaf_reports_server_name_as_cluster(pair):
    p = pair("natsd", "natsd")

    async def main():
        nc = await nats.connect(p.url(p.hub, "admin"))
        inbox = nc.new_inbox()
        _, got = await collect(nc, inbox)
        await p.crossed(hub=[inbox])
        await nc.publish("$SYS.REQ.SERVER.PING.STATSZ", b"", reply=inbox)
        assert await until(lambda: len(got) >= 2)
        servers = {json.loads(m.data)["server"]["name"]: json.loads(m.data)["server"] for m in got}
        assert servers["leaf-server"].get("cluster") == "leaf-server"
        assert not servers["hub-server"].get("cluster")
        await nc.close()
    run(main())


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_wrong_credentials(pair, hub_kind, leaf_kind):
    p = pair(hub_kind, leaf_kind, link=False)
    p.hub.kill()
    p.leaf.kill()
    p.write(acc_pass="wrong")
    p.start_hub(hub_kind)
    p.start_leaf(leaf_kind)
    p.leaf.wait_log(r"Leafnode Error 'Authorization Violation'", 10)
    p.hub.wait_log(r'authentication error - User "acc"', 10)
    # it keeps retrying, and the SYS link (right credentials) is up
    poll(lambda: sum("authentication error" in line for line in p.hub.lines) >= 2, 10)
    assert sum("authentication error" in line for line in p.hub.lines) >= 2
    assert poll(lambda: http_json(p.hub.http_port, "/varz")["leafnodes"] == 1, 5)


def test_client_on_leaf_port_gets_error(pair):
    p = pair("natsd", "natsd")

    async def main():
        errors = []

        async def err_cb(e):
            errors.append(e)
        with pytest.raises(Exception) as exc:
            await nats.connect("nats://acc:acc@127.0.0.1:%d" % p.leaf_port, error_cb=err_cb,
                               allow_reconnect=False, connect_timeout=2)
        text = str(exc.value) + " ".join(str(e) for e in errors)
        assert "attempted to connect to leaf node port" in text
    run(main())
    p.hub.wait_log("attempted to connect to leaf node port")


def test_monitoring(pair):
    p = pair("natsd", "natsd")
    leafz = http_json(p.hub.http_port, "/leafz")
    assert leafz["leafnodes"] == 2
    assert sorted(lf["account"] for lf in leafz["leafs"]) == ["ACC", "SYS"]
    assert all(lf["name"] == "leaf-server" for lf in leafz["leafs"])
    varz = http_json(p.hub.http_port, "/varz")
    assert varz["leafnodes"] == 2
    assert varz["leaf"]["port"] == p.leaf_port
    assert varz["connections"] == 0
    lvarz = http_json(p.leaf.http_port, "/varz")
    assert lvarz["leafnodes"] == 2
    assert len(lvarz["leaf"]["remotes"]) == 2
    assert all("admin:admin" not in json.dumps(r) for r in lvarz["leaf"]["remotes"])
    lleafz = http_json(p.leaf.http_port, "/leafz")
    assert all(lf["name"] == "hub-server" and lf["is_spoke"] for lf in lleafz["leafs"])


# ---- JetStream domains (seed 000) ----

async def gather(nc, subject, payload=b"", wait=0.6):
    inbox = nc.new_inbox()
    _, got = await collect(nc, inbox)
    await nc.flush()
    await nc.publish(subject, payload, reply=inbox)
    await nc.flush()
    await asyncio.sleep(wait)
    return [json.loads(m.data) for m in got]


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_jetstream_domains(pair, hub_kind, leaf_kind):
    p = pair(hub_kind, leaf_kind, js=True)
    p.leaf.wait_log(r'JetStream using domains: local "leaf", remote "hub"')
    p.hub.wait_log(r'JetStream using domains: local "hub", remote "leaf"')

    async def main():
        hub = await nats.connect(p.url(p.hub))
        leaf = await nats.connect(p.url(p.leaf))
        await p.crossed(hub=["$JS.hub.API.INFO"], leaf=["$JS.leaf.API.INFO"])
        # $JS.API.* does not cross: each side's clients get their local JetStream only
        for nc, domain in ((hub, "hub"), (leaf, "leaf")):
            replies = await gather(nc, "$JS.API.INFO")
            assert [r.get("domain") for r in replies] == [domain]
        # $JS.<domain>.API.* reaches the right JetStream, once
        for nc in (hub, leaf):
            for domain in ("hub", "leaf"):
                replies = await gather(nc, "$JS.%s.API.INFO" % domain)
                assert [r.get("domain") for r in replies] == [domain], (nc, domain, replies)
        await hub.close()
        await leaf.close()
        # the system account link: one JSZ ping is answered by both servers
        sysc = await nats.connect(p.url(p.hub, "admin"))
        replies = await gather(sysc, "$SYS.REQ.SERVER.PING.JSZ", b"{}")
        names = sorted(r["server"]["name"] for r in replies)
        assert names == ["hub-server", "leaf-server"]
        by_name = {r["server"]["name"]: r["server"] for r in replies}
        assert by_name["leaf-server"].get("domain") == "leaf"
        assert by_name["hub-server"].get("domain") == "hub"
        assert by_name["leaf-server"].get("cluster") == "leaf-server"
        await sysc.close()
    run(main())


@on_linked_pair(js=True)
async def test_kv_put_through_a_domain(p, hub, leaf):
    """A KV put from the leaf to a bucket in the hub's domain, the way nats.go sends it with a
    domain: `$JS.hub.API.$KV.<bucket>.<key>`, mapped to `$KV.<bucket>.<key>` by the hub; the
    PubAck names the hub's domain."""
    await p.crossed(hub=["$JS.hub.API.$KV.b.color"])
    r = json.loads((await hub.request("$JS.API.STREAM.CREATE.KV_b", json.dumps(
        {"name": "KV_b", "subjects": ["$KV.b.>"], "allow_rollup_hdrs": True,
         "max_msgs_per_subject": 1, "allow_direct": True}).encode(), timeout=5)).data)
    assert "error" not in r, r
    ack = json.loads((await leaf.request("$JS.hub.API.$KV.b.color", b"blue", timeout=5)).data)
    assert ack == {"stream": "KV_b", "domain": "hub", "seq": 1}
    m = await hub.request("$JS.API.DIRECT.GET.KV_b.$KV.b.color", b"", timeout=5)
    assert m.data == b"blue"


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_streams_in_both_domains_store_a_hub_publish(pair, hub_kind, leaf_kind):
    """000:165-245: stream `test` in domain hub and in domain leaf, created from the hub; one
    publish on the hub is stored by both (regular message flow is not restricted)."""
    p = pair(hub_kind, leaf_kind, js=True)

    async def main():
        hub = await nats.connect(p.url(p.hub))
        await p.crossed(leaf=["$JS.leaf.API.INFO"])
        js_hub = hub.jetstream()
        js_leaf = hub.jetstream(domain="leaf")
        await js_hub.add_stream(name="test", subjects=["test"])
        await js_leaf.add_stream(name="test", subjects=["test"])
        await p.crossed(leaf=["test"])             # the leaf's stream interest crosses (LS+ test)
        await hub.publish("test", b"hello world")     # `nats pub`: both streams ack, no js publish
        await hub.flush()
        for js in (js_hub, js_leaf):
            async def stored():
                return (await js.stream_info("test")).state.messages == 1
            await until(stored, 2.5)
            info = await js.stream_info("test")
            assert info.state.messages == 1
            assert info.state.bytes == 45
        await hub.close()
    run(main())
