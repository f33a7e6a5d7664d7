"""`$JS.API.ACCOUNT.PURGE.<account>` on a server without a cluster
(natsd/jetstream/engine/accountpurge.py), against nats-server: the system account's request
deletes every stream of the account and its directory in the store; other accounts are not
answered; a name with a path separator is refused."""
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
