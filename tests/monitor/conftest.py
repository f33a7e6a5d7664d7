"""Fixtures for the monitoring tests: natsd and nats-server started with the same flags and
driven by the same nats-py workload, whose connections stay open for the module."""
import asyncio
import json
import os
import threading

import pytest

from tests.support.servers import get_json, http_get, nats_server_cmd, natsd_cmd, start_server
from tests.support.waiting import poll

HERE = os.path.dirname(os.path.abspath(__file__))


class Loop:
    """An asyncio loop in a thread, so nats-py connections outlive a single test."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout=20):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class Workload:
    """alpha (3 subs, receives 8 msgs), beta (1 sub, publishes 7), charlie (2 subs, publishes 1),
    gamma (connects and leaves: a closed connection). Connected in that order."""

    def __init__(self, server, user=None):
        self.server = server
        self.user = user or {}
        self.loop = Loop()
        self.conns = {}
        self.loop.run(self._run())

    async def _connect(self, name):
        import nats
        creds = self.user.get(name)
        url = "nats://%s127.0.0.1:%d" % ("%s:%s@" % creds if creds else "", self.server.port)
        return await nats.connect(url, name=name, allow_reconnect=False)

    async def _run(self):
        async def cb(msg):
            pass
        a = self.conns["alpha"] = await self._connect("alpha")
        await a.subscribe("foo.*", cb=cb)
        await a.subscribe("bar", queue="q", cb=cb)
        await a.subscribe("baz", cb=cb)
        await a.flush()
        b = self.conns["beta"] = await self._connect("beta")
        await b.subscribe("foo.x", cb=cb)
        await b.flush()
        c = self.conns["charlie"] = await self._connect("charlie")
        await c.subscribe("c.1", cb=cb)
        await c.subscribe("c.2", cb=cb)
        await c.flush()
        for _ in range(5):
            await b.publish("foo.y", b"hello")
        for _ in range(2):
            await b.publish("bar", b"hello")
        await b.flush()
        await c.publish("foo.x", b"hello")
        await c.flush()
        g = await self._connect("gamma")
        await g.flush()
        await g.close()
        await asyncio.sleep(0.2)
        for conn in (a, b, c):
            await conn.flush()

    def close(self):
        async def _close():
            for conn in self.conns.values():
                try:
                    await conn.close()
                except Exception:
                    pass
        try:
            self.loop.run(_close(), timeout=10)
        finally:
            self.loop.stop()


class Pair:
    def __init__(self, natsd, ref, nw, rw):
        self.natsd, self.ref = natsd, ref
        self.natsd_work, self.ref_work = nw, rw

    def both(self, path):
        return get_json(self.natsd.http_port, path), get_json(self.ref.http_port, path)


def _start_pair(args, users=None):
    ref_cmd = nats_server_cmd()
    if ref_cmd is None:
        pytest.skip("nats-server is not installed")
    started, works = [], []
    try:
        n = start_server(natsd_cmd(), *args)
        started.append(n)
        r = start_server(ref_cmd, *args)
        started.append(r)
        assert n.http_port and r.http_port, "monitoring port not logged"
        nw = Workload(n, users)
        works.append(nw)
        rw = Workload(r, users)
        works.append(rw)
        for srv in (n, r):           # the closed connection is recorded on both
            assert poll(lambda: get_json(srv.http_port, "/connz?state=closed")["total"] >= 1)
        return Pair(n, r, nw, rw), started, works
    except BaseException:
        for w in works:
            w.close()
        for p in started:
            p.kill()
        raise


def _pair_fixture(args, users=None):
    pair, started, works = _start_pair(args, users)
    try:
        yield pair
    finally:
        for w in works:
            w.close()
        for p in started:
            p.kill()


@pytest.fixture(scope="module")
def pair():
    """natsd and nats-server, no auth, random client and monitoring ports (`-m -1`)."""
    yield from _pair_fixture(["-m", "-1"])


ACCOUNTS_CONF = os.path.join(HERE, "accounts.conf")
ACCOUNT_USERS = {"alpha": ("a", "a"), "beta": ("b", "b"), "charlie": ("a2", "a2"),
                 "gamma": ("a", "a")}


@pytest.fixture(scope="module")
def acc_pair():
    """Both servers with accounts A and B (exports, imports, mappings) and user auth."""
    yield from _pair_fixture(["-m", "-1", "-c", ACCOUNTS_CONF], ACCOUNT_USERS)


# ---- a JetStream server with a system account: every endpoint and $SYS service ----

FULL_CONF = """
jetstream { store_dir: "%s" }
leafnodes { listen: "127.0.0.1:-1" }
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { users: [{user: a, password: a}, {user: a2, password: a2}], jetstream: enabled }
}
system_account: SYS
"""


SPOKE_CONF = """
leafnodes { remotes: [{url: "nats-leaf://a:a@127.0.0.1:%d"}] }
"""


class FullWorkload:
    """In account A: `app` (subs foo.*, bar in queue q; stream S on s.>, 3 messages, pull
    consumer C with one message fetched and not acked), `gone` (connected and closed), and a
    leaf node (a nats-server whose client subscribes to leaf.>). In SYS: `sys` (subs dbg.x, dbg.q
    in queue g), the connection that sends the $SYS requests."""

    def __init__(self, server):
        self.server = server
        self.loop = Loop()
        self.conns = {}
        self.idz = None
        self.loop.run(self._run())

    async def _connect(self, user, name):
        import nats
        url = "nats://%s:%s@127.0.0.1:%d" % (user, user, self.server.port)
        return await nats.connect(url, name=name, allow_reconnect=False)

    async def _run(self):
        async def cb(msg):
            pass
        a = self.conns["app"] = await self._connect("a", "app")
        await a.subscribe("foo.*", cb=cb)
        await a.subscribe("bar", queue="q", cb=cb)
        js = a.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(3):
            await js.publish("s.%d" % i, b"hello")
        psub = await js.pull_subscribe("s.>", durable="C")
        await psub.fetch(1)
        await a.publish("foo.x", b"x")
        await a.flush()
        g = await self._connect("a2", "gone")
        await g.flush()
        await g.close()
        s = self.conns["sys"] = await self._connect("sys", "sys")
        await s.subscribe("dbg.x", cb=cb)
        await s.subscribe("dbg.q", queue="g", cb=cb)
        self.idz = json.loads((await s.request("$SYS.REQ.SERVER.PING.IDZ", b"", timeout=2)).data)

    def request(self, subject, body=b""):
        """The decoded reply to a $SYS request from the system user ({id} = the server id)."""
        async def go():
            m = await self.conns["sys"].request(subject.replace("{id}", self.idz["id"]), body,
                                                timeout=2)
            return json.loads(m.data)
        return self.loop.run(go())

    def close(self):
        Workload.close(self)


class SpokeClient:
    """A client of the leaf node server: its subscription makes the leaf connection carry
    interest."""

    def __init__(self, server):
        self.loop = Loop()
        self.conns = {}

        async def run():
            import nats
            nc = self.conns["spoke"] = await nats.connect(server.url, allow_reconnect=False)
            await nc.subscribe("leaf.>")
            await nc.flush()
        self.loop.run(run())

    def close(self):
        Workload.close(self)


class FullPair(Pair):
    def raw(self, path):
        return http_get(self.natsd.http_port, path), http_get(self.ref.http_port, path)

    def sys_both(self, subject, body=b""):
        return self.natsd_work.request(subject, body), self.ref_work.request(subject, body)


@pytest.fixture(scope="module")
def full_pair(tmp_path_factory):
    """natsd and nats-server with JetStream (stream S, consumer C), accounts A and SYS."""
    ref_cmd = nats_server_cmd()
    if ref_cmd is None:
        pytest.skip("nats-server is not installed")
    started, works, hubs = [], [], []
    try:
        for cmd in (natsd_cmd(), ref_cmd):
            d = tmp_path_factory.mktemp("full")
            conf = d / "full.conf"
            conf.write_text(FULL_CONF % (d / "js"))
            hub = start_server(cmd, "-c", str(conf), "-m", "-1")
            started.append(hub)
            hubs.append(hub)
            leaf_port = int(hub.wait_log(r"Listening for leafnode connections on \S+:(\d+)")
                            .group(1))
            spoke_conf = d / "spoke.conf"
            spoke_conf.write_text(SPOKE_CONF % leaf_port)
            spoke = start_server(ref_cmd, "-c", str(spoke_conf))
            started.append(spoke)
            works.append(SpokeClient(spoke))
        for hub in hubs:
            assert poll(lambda: any(lf["subscriptions"] for lf in
                                    get_json(hub.http_port, "/leafz")["leafs"])), hub.log
            works.append(FullWorkload(hub))
        for srv in hubs:
            assert poll(lambda: get_json(srv.http_port, "/connz?state=closed")["total"] >= 1)
        yield FullPair(hubs[0], hubs[1], works[-2], works[-1])
    finally:
        for w in works:
            w.close()
        for p in started:
            p.kill()
