"""Seed 000 ("JetStream on Leaf Nodes") as an end-to-end walkthrough, every step with nats-py, on
the seed's configs (only ports changed; written to tmp_path; relative store dirs and
`include ./accounts.conf` resolved from there), for natsd hub + natsd leaf, nats-server hub +
natsd leaf and natsd hub + nats-server leaf:

1. the JetStream summary ($SYS.REQ.SERVER.PING.JSZ via the SYS user) lists domains hub and leaf;
2. stream `test` in each domain stores the hub publish "hello world" (1 message, 45 B);
3. the cross-domain mirror `backup-test-leaf` and source `aggregate-test-leaf` (external api
   `$JS.leaf.API`) copy it: 45 B, and 22 + len(subject) + 4 + len(hdr) + len(payload) + 8 with
   the 6-field `Nats-Stream-Source: test:mSx7q4yJ 1 > > test <identity>` header;
4. with the extended accounts.conf (both servers restarted): the IMPORT_MIRROR mirror through
   `JS.acc@hub.API` with the seed's delivery prefix copies the aggregate byte-for-byte; the
   durable pull consumer `dur` is fetched from the leaf by IMPORT_CLIENT through
   `JS.acc@hub.API`, the message carries its `Nats-Stream-Source` header, the ack moves the ack
   floor, and "hello world 2" follows;
5. after restarting both servers everything is still there and copying continues;
6. link failure: the hub is killed, the leaf keeps storing, the hub comes back and the mirror and
   source catch up with nothing lost or duplicated.
"""
import asyncio
import json
import re

import nats
import pytest
from nats.js.api import ConsumerConfig, ExternalStream, StreamConfig, StreamSource

from natsd.ids import get_hash
from tests.support.leafnodes import COMBOS, COMBO_IDS
from tests.support.waiting import run, until

pytestmark = pytest.mark.timeout(240) if hasattr(pytest.mark, "timeout") else []

# 000:389-430, verbatim
EXTENDED_ACCOUNTS_CONF = """accounts {
    SYS: {
        users: [{user: admin, password: admin}]
    },
    ACC: {
        users: [{user: acc, password: acc}],
        jetstream: enabled
        exports: [
            # minimum export needed to allow source/mirror to create a consumer on the fly
            {service: "$JS.hub.API.CONSUMER.CREATE.*", response_type: "stream"}
            # minimum export needed for push consumer. This includes source and mirror!
            {stream: "deliver.acc.hub.>"}
            # minimum export needed for durable pull consumer `dur` in stream `aggregate-test-leaf`. (clients only - source and mirror do not use this)
            {service: "$JS.hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur", response_type: "stream"}
            # minimum export needed to ack messages for durable consumer `dur` in stream `aggregate-test-leaf`. (clients only - source and mirror do not use this)
            {service: "$JS.ACK.aggregate-test-leaf.dur.>"}
            # minimum export needed for flow control of source/mirror
            {service: "$JS.FC.aggregate-test-leaf.dur.>"}
        ]
    }
    IMPORT_MIRROR: {
        users: [{user: import_mirror, password: import_mirror}],
        jetstream: enabled
        imports: [
            {service: {account: ACC, subject: "$JS.hub.API.CONSUMER.CREATE.*"}, to: "JS.acc@hub.API.CONSUMER.CREATE.*" }
            {service: {account: ACC, subject: "$JS.FC.aggregate-test-leaf.dur.>"}}
            {stream: {account: ACC, subject: deliver.acc.hub.import_mirror.>}}
        ]
    }
    # As of now, cross account, only pull consumer are supported.
    IMPORT_CLIENT: {
        users: [{user: import_client, password: import_client}],
        jetstream: enabled
        imports: [
            {service: {account: ACC, subject: "$JS.hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur"}, to: "JS.acc@hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur" }
            {service: {account: ACC, subject: "$JS.ACK.aggregate-test-leaf.dur.>"}}
        ]
    }
}
system_account: SYS
"""

HELLO = b"hello world"
SOURCE_FMT = "test:mSx7q4yJ %d > > test %s"  # getHash("$JS.leaf.API") = mSx7q4yJ; the origin
#                                             stream's identity last (nats-server 2.15, API level 5)


def record_size(subject, payload, hdr=b""):
    """File-store record size as `nats stream report` shows it (SPEC §0)."""
    if hdr:
        return 22 + len(subject) + 4 + len(hdr) + len(payload) + 8
    return 22 + len(subject) + len(payload) + 8


def source_hdr(value):
    return b"NATS/1.0\r\nNats-Stream-Source: " + value.encode() + b"\r\n\r\n"


TEST_BYTES = record_size("test", HELLO)                                     # 45 (000:232)
AGG_BYTES = record_size("test", HELLO, source_hdr(SOURCE_FMT % (1, "x" * 8)))  # 116 (98 in 000:362,
#                                                                             old 2-field header)


ACK_RE = re.compile(r"^\$JS\.ACK\.[^.@]+\.[^.@]+\.\d+\.\d+\.\d+\.\d+\.\d+$")   # no '@' suffix


async def connect(p, srv, user):
    return await nats.connect(p.url(srv, user), max_reconnect_attempts=-1, reconnect_time_wait=0.2)


async def state(js, name):
    return (await js.stream_info(name)).state


async def wait_state(js, name, msgs, nbytes=None, timeout=30.0):
    async def ok():
        st = await state(js, name)
        return st.messages == msgs and (nbytes is None or st.bytes == nbytes)
    assert await until(ok, timeout, ignore=Exception), (name, await state(js, name))
    return await state(js, name)


async def jsz_domains(p):
    nc = await connect(p, p.hub, "admin")
    inbox = nc.new_inbox()
    got = []

    async def cb(m):
        got.append(json.loads(m.data))
    await nc.subscribe(inbox, cb=cb)
    await nc.flush()

    async def two():
        got.clear()
        await nc.publish("$SYS.REQ.SERVER.PING.JSZ", b"{}", reply=inbox)
        await nc.flush()
        await until(lambda: len(got) >= 2, 0.5)
        return len(got) == 2
    await until(two, 10, ignore=Exception)
    await nc.close()
    return {r["server"]["name"]: r for r in got}


def mirror_cfg(name, origin, api, deliver=""):
    return StreamConfig(name=name, mirror=StreamSource(name=origin, external=ExternalStream(api=api, deliver=deliver)))


def restart(p, which):
    srv = getattr(p, which)
    kind = srv.kind
    srv.stop()
    (p.start_hub if which == "hub" else p.start_leaf)(kind)


async def step_basic(p):
    """000:95-373."""
    # JetStream summary: both domains (000:99-116)
    rep = await jsz_domains(p)
    assert sorted(rep) == ["hub-server", "leaf-server"]
    assert rep["hub-server"]["server"].get("domain") == "hub"
    assert rep["leaf-server"]["server"].get("domain") == "leaf"
    assert rep["leaf-server"]["server"].get("cluster") == "leaf-server"

    nc = await connect(p, p.hub, "acc")
    js = nc.jetstream()                       # connected to the hub: domain hub
    js_hub = nc.jetstream(domain="hub")
    js_leaf = nc.jetstream(domain="leaf")
    await js.add_stream(name="test", subjects=["test"])
    await js_leaf.add_stream(name="test", subjects=["test"])
    assert (await js_hub.stream_info("test")).config.subjects == ["test"]
    await p.crossed(leaf=["test"])            # the leaf stream's interest crosses (LS+ test)
    await nc.publish("test", HELLO)           # `nats pub test "hello world"`
    await nc.flush()
    for j in (js_hub, js_leaf):
        await wait_state(j, "test", 1, TEST_BYTES, 10)

    # cross-domain mirror and source created in hub from leaf's `test` (000:247-373)
    await js_hub.add_stream(mirror_cfg("backup-test-leaf", "test", "$JS.leaf.API"))
    await js_hub.add_stream(StreamConfig(name="aggregate-test-leaf", sources=[
        StreamSource(name="test", external=ExternalStream(api="$JS.leaf.API", deliver=""))]))
    await wait_state(js_hub, "backup-test-leaf", 1, TEST_BYTES)
    await wait_state(js_hub, "aggregate-test-leaf", 1, AGG_BYTES)
    m = await js_hub.get_msg("aggregate-test-leaf", 1)
    assert m.data == HELLO and m.subject == "test"
    # the identity is getHash of the origin stream's creation time
    created = json.loads((await nc.request("$JS.leaf.API.STREAM.INFO.test", b"", timeout=5)).data)["created"]
    p.ident = get_hash(created)
    assert m.headers == {"Nats-Stream-Source": SOURCE_FMT % (1, p.ident)}
    b = await js_hub.get_msg("backup-test-leaf", 1)
    o = await js_leaf.get_msg("test", 1)
    assert (b.subject, b.data, b.headers, b.seq) == (o.subject, o.data, o.headers, o.seq)
    # replication report: kind, api prefix, source stream, lag 0, no error (000:364-372)
    info = await nc.request("$JS.hub.API.STREAM.INFO.backup-test-leaf", b"", timeout=5)
    mi = json.loads(info.data)["mirror"]
    assert mi["name"] == "test" and mi["external"]["api"] == "$JS.leaf.API"
    assert mi["lag"] == 0 and mi["active"] >= 0 and "error" not in mi
    info = await nc.request("$JS.hub.API.STREAM.INFO.aggregate-test-leaf", b"", timeout=5)
    si = json.loads(info.data)["sources"]
    assert [s["name"] for s in si] == ["test"] and si[0]["lag"] == 0 and "error" not in si[0]
    # the internal mirror/source consumers are invisible on the origin
    assert (await js_leaf.stream_info("test")).state.consumer_count == 0
    await nc.close()


async def step_push_across_link(p):
    """A push consumer in the hub whose deliver subject a leaf client subscribes to: the leaf
    client sees the stored subject and the plain ack reply, and its ack crosses back."""
    hub = await connect(p, p.hub, "acc")
    js_hub = hub.jetstream(domain="hub")
    cl = await connect(p, p.leaf, "acc")
    got = asyncio.Queue()

    async def cb(m):
        await got.put(m)
    await cl.subscribe("push.to.leaf", cb=cb)
    await p.crossed(leaf=["push.to.leaf"])    # the LS+ crosses to the hub
    await js_hub.add_consumer("test", ConsumerConfig(
        durable_name="pusher", deliver_subject="push.to.leaf", ack_policy="explicit",
        deliver_policy="all"))
    m = await asyncio.wait_for(got.get(), 10)
    assert (m.subject, m.data, m.headers) == ("test", HELLO, None)
    assert ACK_RE.match(m.reply) and m.reply.startswith("$JS.ACK.test.pusher.1.1.1."), m.reply
    await m.ack()
    await cl.flush()

    async def acked():
        c = await js_hub.consumer_info("test", "pusher")
        return c.ack_floor.stream_seq == 1 and c.num_ack_pending == 0
    assert await until(acked, 10, ignore=Exception)
    await js_hub.delete_consumer("test", "pusher")
    for n in (hub, cl):
        await n.close()


async def step_import(p):
    """000:375-640 with the extended accounts.conf."""
    imp = await connect(p, p.hub, "import_mirror")
    js_imp = imp.jetstream(domain="hub")
    await js_imp.add_stream(mirror_cfg(
        "aggregate-test-leaf-from-acc", "aggregate-test-leaf", "JS.acc@hub.API",
        "deliver.acc.hub.import_mirror.hub.aggregate-test-leaf-from-acc"))
    await wait_state(js_imp, "aggregate-test-leaf-from-acc", 1, AGG_BYTES)
    m = await js_imp.get_msg("aggregate-test-leaf-from-acc", 1)
    assert m.data == HELLO and m.headers == {"Nats-Stream-Source": SOURCE_FMT % (1, p.ident)}

    acc = await connect(p, p.hub, "acc")
    js_hub = acc.jetstream(domain="hub")
    ci = await js_hub.add_consumer("aggregate-test-leaf", ConsumerConfig(
        durable_name="dur", deliver_policy="all", ack_policy="explicit", replay_policy="instant"))
    assert ci.num_pending == 1 and ci.delivered.consumer_seq == 0
    # one visible consumer (dur) although IMPORT_MIRROR also copies the stream (000:562)
    assert (await js_hub.stream_info("aggregate-test-leaf")).state.consumer_count == 1

    # `nats consumer next aggregate-test-leaf dur --js-api-prefix JS.acc@hub.API` on the leaf
    cl = await connect(p, p.leaf, "import_client")
    js_cl = cl.jetstream(prefix="JS.acc@hub.API")
    psub = await js_cl.pull_subscribe_bind("dur", "aggregate-test-leaf")

    async def fetch1():
        return (await psub.fetch(1, timeout=2))[0]
    msg = await until(fetch1, 20, ignore=Exception)
    assert msg is not None, "no message through JS.acc@hub.API from the leaf"
    # as nats-server delivers it: the stored subject, the plain ack reply, the stored headers
    assert (msg.subject, msg.data, msg.headers) == (
        "test", HELLO, {"Nats-Stream-Source": SOURCE_FMT % (1, p.ident)})
    assert ACK_RE.match(msg.reply), msg.reply
    assert msg.reply.startswith("$JS.ACK.aggregate-test-leaf.dur.1.1.1.")
    md = msg.metadata
    assert (md.sequence.stream, md.sequence.consumer, md.num_delivered) == (1, 1, 1)
    await msg.ack()
    await cl.flush()

    async def acked():
        c = await js_hub.consumer_info("aggregate-test-leaf", "dur")
        return c.ack_floor.stream_seq == 1 and c.num_ack_pending == 0 and c.num_pending == 0
    assert await until(acked, 10, ignore=Exception)

    # "hello world 2" published on the hub reaches the leaf client (000:606-625)
    await acc.publish("test", b"hello world 2")
    await acc.flush()
    msg = await until(fetch1, 40, ignore=Exception)
    if msg is None:
        info = await acc.request("$JS.hub.API.STREAM.INFO.aggregate-test-leaf", b"", timeout=5)
        raise AssertionError("hello world 2 never arrived: %s" % info.data)
    assert (msg.subject, msg.data, msg.headers) == (
        "test", b"hello world 2", {"Nats-Stream-Source": SOURCE_FMT % (2, p.ident)})
    assert ACK_RE.match(msg.reply) and msg.reply.startswith("$JS.ACK.aggregate-test-leaf.dur.1.2.2."), msg.reply
    await msg.ack()
    await cl.flush()

    async def acked2():
        c = await js_hub.consumer_info("aggregate-test-leaf", "dur")
        return c.ack_floor.stream_seq == 2
    assert await until(acked2, 10, ignore=Exception)
    await wait_state(js_imp, "aggregate-test-leaf-from-acc", 2)
    for n in (imp, acc, cl):
        await n.close()


async def check_all(p, n_test, extended=True):
    """Every stream has n_test messages, byte counts by the formula, mirrors equal their origin."""
    nc = await connect(p, p.hub, "acc")
    js_hub = nc.jetstream(domain="hub")
    js_leaf = nc.jetstream(domain="leaf")
    # nats-server (as hub) may take a while to notice a restarted origin: 10 s stall checks,
    # 30 s create-request timeouts while the link is down
    leaf_st = await wait_state(js_leaf, "test", n_test)
    await wait_state(js_hub, "backup-test-leaf", n_test, leaf_st.bytes, 90)
    agg = await wait_state(js_hub, "aggregate-test-leaf", n_test, None, 90)
    seqs = []
    for seq in range(1, n_test + 1):
        m = await js_hub.get_msg("aggregate-test-leaf", seq)
        seqs.append(int(m.headers["Nats-Stream-Source"].split(" ")[1]))
    assert seqs == list(range(1, n_test + 1)), seqs       # nothing lost, nothing duplicated
    if extended:
        imp = await connect(p, p.hub, "import_mirror")
        js_imp = imp.jetstream(domain="hub")
        await wait_state(js_imp, "aggregate-test-leaf-from-acc", n_test, agg.bytes, 90)
        await imp.close()
    await nc.close()


# Over TLS in both mixed pairings. (A nats-server hub whose source request went out before
# the restarted leaf linked again waits out a 30 s request timeout and a 10 s stall check: its
# pairings stop early, see below.)
WALKS = [(h, lf, False) for h, lf in COMBOS] + [("nats-server", "natsd", True), ("natsd", "nats-server", True)]
WALK_IDS = COMBO_IDS + ["ref-hub+natsd-leaf-tls", "natsd-hub+ref-leaf-tls"]


@pytest.mark.parametrize("hub_kind,leaf_kind,tls", WALKS, ids=WALK_IDS)
def test_seed000_walkthrough(pair, hub_kind, leaf_kind, tls):
    """The walkthrough; the last two over TLS leaf links (mixed pairings). Pairings with a
    nats-server hub stop after the restart with the extended accounts, where it would wait
    out its own timers (below)."""
    p = pair(hub_kind, leaf_kind, js=True, tls=tls)
    run(step_basic(p))
    run(step_push_across_link(p))

    # the extended accounts.conf; "the servers have been restarted or reloaded" (000:440)
    (p.dir / "accounts.conf").write_text(EXTENDED_ACCOUNTS_CONF)
    restart(p, "hub")
    restart(p, "leaf")
    p.wait_linked(timeout=20)
    run(check_all(p, 1, extended=False))
    if hub_kind == "nats-server":
        # the links have been made and remade after a restart of both ends. What follows, on
        # a nats-server hub, begins with its source request sent before the leaf linked
        # again, waiting out its 30 s request timeout and 10 s stall check (measured: 40 s of
        # this pairing's 42 s); the natsd-hub pairings check the imports, the nats-server
        # leaf pairing checks them against natsd's hub
        return
    run(step_import(p))
    if tls:
        # the TLS links carried the imports; the later restarts are what the plain natsd-hub
        # pairing checks
        return

    # restart both: everything is still there, and copying goes on
    restart(p, "leaf")
    restart(p, "hub")
    p.wait_linked(timeout=20)
    run(check_all(p, 2))

    async def after_restart():
        nc = await connect(p, p.hub, "acc")
        js_hub = nc.jetstream(domain="hub")
        c = await js_hub.consumer_info("aggregate-test-leaf", "dur")
        assert c.ack_floor.stream_seq == 2 and c.num_pending == 0
        assert (await js_hub.stream_info("aggregate-test-leaf")).state.consumer_count == 1
        await p.crossed(leaf=["test"])        # the leaf stream's interest, again after the restart
        await nc.publish("test", b"hello world 3")
        await nc.flush()
        await nc.close()
    run(after_restart())
    run(check_all(p, 3))

    # link failure: kill the hub, publish on the leaf, bring the hub back
    p.hub.kill()

    async def publish_on_leaf():
        nc = await connect(p, p.leaf, "acc")
        js = nc.jetstream()                   # the leaf's own domain
        for i in range(5):
            ack = await js.publish("test", b"offline %d" % i)
            assert ack.domain == "leaf"
        await nc.close()
    run(publish_on_leaf())
    p.start_hub(p.hub.kind)
    p.wait_linked(timeout=20)
    run(check_all(p, 8))
