"""`$JS.API.ACCOUNT.PURGE.<account>` (natsd/jetstream/engine/accountpurge.py), against
nats-server: on one server the system account's request deletes every stream of the account and
its directory in the store; other accounts are not answered; a name with a path separator is
refused. On a three-server cluster the meta leader answers once and the account's replicated and
one-replica streams go from every server."""
import asyncio
import os

import nats
import nats.errors

CONF = """jetstream: {store_dir: "%s"}
system_account: SYS
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { jetstream: enabled, users: [{user: a, password: a}] }
  B: { jetstream: enabled, users: [{user: b, password: b}] }
}
"""


async def scenario(url, store):
    a = await nats.connect(url, user="a", password="a")
    b = await nats.connect(url, user="b", password="b")
    sysc = await nats.connect(url, user="sys", password="sys")
    out = {}
    for name in ("S1", "S2"):
        await a.jetstream().add_stream(name=name, subjects=[name.lower()])
        await a.jetstream().publish(name.lower(), b"x")
    await a.jetstream().add_consumer("S1", durable_name="C")
    await b.jetstream().add_stream(name="KEEP", subjects=["keep"])

    async def ask(nc, subject):
        try:
            return (await nc.request(subject, b"", timeout=1)).data.decode()
        except nats.errors.TimeoutError:
            return None
    out["from A"] = await ask(a, "$JS.API.ACCOUNT.PURGE.A")
    out["purge"] = await ask(sysc, "$JS.API.ACCOUNT.PURGE.A")
    out["again"] = await ask(sysc, "$JS.API.ACCOUNT.PURGE.A")
    out["unknown"] = await ask(sysc, "$JS.API.ACCOUNT.PURGE.NOPE")
    out["separator"] = await ask(sysc, "$JS.API.ACCOUNT.PURGE.x\\y")
    info = await a.jetstream().account_info()
    out["left in A"] = (info.streams, info.consumers, info.storage)
    out["store"] = sorted(os.listdir(os.path.join(store, "jetstream")))
    out["B kept"] = (await b.jetstream().stream_info("KEEP")).config.name
    await a.jetstream().add_stream(name="S1", subjects=["s1"])     # the account goes on
    out["again created"] = (await a.jetstream().publish("s1", b"y")).seq
    for nc in (a, b, sysc):
        await nc.close()
    return out


def test_account_purge_as_nats_server(natsd, reference, tmp_path):
    results = []
    for name, start in (("natsd", natsd), ("ref", reference)):
        store = str(tmp_path / name / "store")
        os.makedirs(store)
        conf = tmp_path / name / "js.conf"
        conf.write_text(CONF % store)
        results.append(asyncio.run(scenario(start("-c", str(conf)).url, store)))
    ours, theirs = results
    assert ours == theirs
    assert theirs["from A"] is None
    assert theirs["purge"] == '{"type":"io.nats.jetstream.api.v1.account_purge_response","initiated":true}'
    assert theirs["left in A"] == (0, 0, 0) and theirs["store"] == ["B"]
    assert '"err_code":10051' in theirs["separator"]


ACCOUNTS = """system_account: SYS
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { jetstream: enabled, users: [{user: a, password: a}] }
  B: { jetstream: enabled, users: [{user: b, password: b}] }
}
"""


async def cluster_scenario(kind, members):
    """On a three-server cluster: account A's R3 and R1 streams (created through different
    servers), B's R3 stream; the purge is asked on one server and answered once."""
    url = members[1].url
    a = await nats.connect(members[0].url, user="a", password="a")
    b = await nats.connect(members[2].url, user="b", password="b")
    sysc = await nats.connect(url, user="sys", password="sys")
    out = {}
    await a.jetstream().add_stream(name="R3", subjects=["r3"], num_replicas=3)
    await a.jetstream().add_stream(name="ONE", subjects=["one"], num_replicas=1)
    await a.jetstream().publish("r3", b"x")
    await a.jetstream().publish("one", b"y")
    await b.jetstream().add_stream(name="KEEP", subjects=["keep"], num_replicas=3)
    replies = []
    inbox = sysc.new_inbox()
    async def answered(m):
        replies.append(m.data.decode())
    await sysc.subscribe(inbox, cb=answered)
    await sysc.publish("$JS.API.ACCOUNT.PURGE.A", b"", reply=inbox)
    await sysc.flush()

    async def gone():
        info = await a.jetstream().account_info()
        return info.streams == 0 and len(replies) >= 1
    from tests.support.waiting import until
    if not await until(gone, 15, ignore=Exception):
        info = await a.jetstream().account_info()
        names = (await a.request("$JS.API.STREAM.NAMES", b"{}", timeout=3)).data.decode()
        raise AssertionError("%s after the purge: %d streams (%s), answers %r" % (kind, info.streams, names, replies))
    await asyncio.sleep(0.3)                # any second answer would have come by now
    out["answers"] = replies
    out["names"] = (await a.request("$JS.API.STREAM.NAMES", b"{}", timeout=3)).data.decode()
    out["B kept"] = (await b.jetstream().stream_info("KEEP")).config.name
    for nc in (a, b, sysc):
        await nc.close()
    return out


def test_account_purge_on_a_cluster_as_nats_server(tmp_path):
    from tests.support.cluster import clusters_of_each_kind
    results = {}
    for kind, members in clusters_of_each_kind(tmp_path, extra=lambda name: ACCOUNTS):
        results[kind] = asyncio.run(asyncio.wait_for(cluster_scenario(kind, members), 60))
    assert results["natsd"] == results["nats-server"], results
    assert results["natsd"]["answers"] == ['{"type":"io.nats.jetstream.api.v1.account_purge_response","initiated":true}']
