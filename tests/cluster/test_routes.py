"""Clusters over routes: natsd servers and nats-server in one full mesh, clients spread over
all of them. Every scenario runs on all-natsd, all-nats-server and mixed clusters and must give
the same deliveries (the all-nats-server run is the reference)."""
import asyncio
import signal
import socket
import time

import nats
import pytest

from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.servers import nats_server_cmd

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")

PAIRINGS = [("natsd", "natsd", "natsd"), ("nats-server", "nats-server", "nats-server"),
            ("nats-server", "natsd", "natsd"), ("natsd", "nats-server", "nats-server")]
IDS = ["natsd", "nats-server", "ref-seed+natsd", "natsd-seed+ref"]


@pytest.fixture
def cluster(tmp_path):
    """Factory: cluster(kinds, **member options) -> three meshed members (A is the seed)."""
    started = []

    def make(kinds, **kw):
        a = start_member(kinds[0], tmp_path, "A", **kw)
        started.append(a)
        for name, kind in zip("BC", kinds[1:]):
            started.append(start_member(kind, tmp_path, name, routes=[a.route_url], **kw))
        wait_mesh(started)
        return started
    yield make
    for m in started:
        m.proc.kill()


async def _connect(member, **kw):
    return await nats.connect(member.url, allow_reconnect=False, **kw)


async def traffic(members):
    """Fan-out from every server, a queue group spread over the cluster, request/reply
    across a route. Returns what each subscriber saw (comparable between clusters)."""
    conns = [await _connect(m) for m in members]
    seen = {m.name: [] for m in members}
    queue = {m.name: 0 for m in members}
    for m, nc in zip(members, conns):
        async def plain(msg, name=m.name):
            seen[name].append((msg.subject, msg.reply, msg.data, dict(msg.headers or {})))

        async def grouped(msg, name=m.name):
            queue[name] += 1
        await nc.subscribe("fan.>", cb=plain)
        await nc.subscribe("work", queue="workers", cb=grouped)
        await nc.flush()

    async def respond(msg):
        await msg.respond(b"re:" + msg.data)
    await conns[2].subscribe("svc.echo", cb=respond)
    await conns[2].flush()
    wait_interest(members[:2], "fan.>")
    wait_interest(members[:2], "svc.echo")
    for m, nc in zip(members, conns):
        await nc.publish("fan." + m.name, m.name.encode(), reply="r." + m.name,
                         headers={"From": m.name})
        await nc.flush()
    for i in range(300):
        await conns[0].publish("work", b"%d" % i)
    await conns[0].flush()
    answer = await conns[1].request("svc.echo", b"ping", timeout=5)

    def complete():
        return all(len(v) == len(members) for v in seen.values()) and sum(queue.values()) >= 300
    deadline = time.monotonic() + 10
    while not complete() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)                # anything extra (a duplicate) would show up now
    for nc in conns:
        await nc.close()
    return {"fan": {k: sorted(v) for k, v in seen.items()}, "queue_total": sum(queue.values()),
            "queue_members_used": sum(1 for v in queue.values() if v), "reply": answer.data}


EXPECTED_FAN = sorted(("fan." + n, "r." + n, n.encode(), {"From": n}) for n in "ABC")


@need_ref
@pytest.mark.parametrize("kinds", PAIRINGS, ids=IDS)
def test_mesh_and_traffic(cluster, kinds):
    members = cluster(kinds)
    got = asyncio.run(traffic(members))
    # every subscriber gets every server's message once, subject/reply/headers intact
    assert got["fan"] == {n: EXPECTED_FAN for n in "ABC"}
    # a queue group spread over three servers: each message to exactly one member, and the
    # remote members take their share
    assert got["queue_total"] == 300
    assert got["queue_members_used"] == 3
    assert got["reply"] == b"re:ping"


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd"), ("nats-server", "nats-server"),
                                   ("natsd", "nats-server"), ("nats-server", "natsd")],
                         ids=["natsd", "nats-server", "natsd-seed+ref", "ref-seed+natsd"])
def test_pooled_and_pinned_routes(tmp_path, kinds):
    """Between two servers: pool_size routes plus one per pinned account ($SYS by default and
    those in cluster{accounts}), on both sides, as nats-server opens them."""
    extra = "accounts { X: { users: [{user: x, password: x}] } }"
    a = start_member(kinds[0], tmp_path, "A", extra=extra, cluster_extra="accounts: [X]")
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url], extra=extra,
                     cluster_extra="accounts: [X]")
    try:
        wait_mesh([a, b])

        def shape(m):
            routes = m.get("/routez")["routes"]
            return (len(routes), sorted(r.get("account", "") for r in routes))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (shape(a)[0] < 5 or shape(b)[0] < 5):
            time.sleep(0.05)
        assert shape(a) == shape(b) == (5, ["", "", "", "$SYS", "X"])
        assert a.get("/varz")["routes"] == 5
    finally:
        a.proc.kill()
        b.proc.kill()


def _info(sock):
    """The next INFO line a raw client receives."""
    buf = b""
    while not buf.endswith(b"\r\n") or not buf.startswith(b"INFO"):
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError
        buf += chunk
        if b"\r\n" in buf and not buf.startswith(b"INFO"):
            buf = buf.split(b"\r\n", 1)[1]
    import json
    return json.loads(buf[5:buf.index(b"\r\n")])


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd"), ("nats-server", "nats-server"),
                                   ("natsd", "nats-server")], ids=["natsd", "nats-server", "mixed"])
def test_connect_urls_follow_the_cluster(tmp_path, kinds):
    """Clients learn the servers of the cluster from INFO connect_urls, updated as servers
    join and leave (asynchronous INFO to protocol-1 clients)."""
    a = start_member(kinds[0], tmp_path, "A")
    b = None
    s = socket.create_connection(("127.0.0.1", a.proc.port))
    s.settimeout(10)
    try:
        first = _info(s)
        assert first["cluster"] == "C1" and "connect_urls" not in first
        s.sendall(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
        assert _info(s)["connect_info"] is True     # after the first PONG, as to every client
        b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url])
        wait_mesh([a, b])
        joined = _info(s)
        assert sorted(joined["connect_urls"]) == sorted(["127.0.0.1:%d" % a.proc.port,
                                                         "127.0.0.1:%d" % b.proc.port])
        b.proc.kill()
        left = _info(s)
        assert left["connect_urls"] == ["127.0.0.1:%d" % a.proc.port]
    finally:
        s.close()
        a.proc.kill()
        if b is not None:
            b.proc.kill()


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd"), ("natsd", "nats-server"),
                                   ("nats-server", "natsd")], ids=["natsd", "natsd-ldm", "ref-ldm"])
def test_lame_duck_moves_clients_to_the_others(tmp_path, kinds):
    """A server in lame duck mode tells its routes (they drop its URLs) and its clients, who
    reconnect to another server they learned from connect_urls and carry on."""
    a = start_member(kinds[0], tmp_path, "A", extra="lame_duck_duration: 30s\nlame_duck_grace_period: 1s")
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url])
    try:
        wait_mesh([a, b])

        async def run():
            moved = asyncio.Event()
            got = []

            async def reconnected():
                moved.set()
            nc = await nats.connect(a.url, reconnected_cb=reconnected, reconnect_time_wait=0.1,
                                    max_reconnect_attempts=50)
            assert nc.servers and len(nc.servers) == 2      # B discovered from connect_urls

            async def on(msg):
                got.append(msg.data)
            await nc.subscribe("after.ldm", cb=on)
            await nc.flush()
            a.proc.signal(signal.SIGUSR2)
            await asyncio.wait_for(moved.wait(), 15)
            assert nc.connected_url.port == b.proc.port
            await nc.flush()
            other = await nats.connect(b.url)
            for _ in range(50):
                await other.publish("after.ldm", b"x")
                await other.flush()
                if got:
                    break
                await asyncio.sleep(0.05)
            await other.close()
            await nc.close()
            return got
        assert asyncio.run(run())
        a.proc.proc.wait(15)                # the lame duck server exits on its own
    finally:
        a.proc.kill()
        b.proc.kill()


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd", "natsd"), ("natsd", "nats-server", "natsd")],
                         ids=["natsd", "mixed"])
@pytest.mark.parametrize("seed", [1, 2])
def test_kill9_and_restart_rejoins(tmp_path, kinds, seed):
    """A server killed with -9 while traffic flows, restarted on its route port: the mesh
    forms again and traffic flows through it in both directions."""
    a = start_member(kinds[0], tmp_path, "A")
    b = start_member(kinds[1], tmp_path, "B", routes=[a.route_url])
    c = start_member(kinds[2], tmp_path, "C", routes=[a.route_url])
    members = [a, b, c]
    victim = members[seed]
    try:
        wait_mesh(members)

        async def flow(src, dst, subject, n=20):
            rx = await nats.connect(dst.url)
            tx = await nats.connect(src.url)
            got = []

            async def on(msg):
                got.append(msg.data)
            await rx.subscribe(subject, cb=on)
            await rx.flush()
            wait_interest([src], subject)
            for i in range(n):
                await tx.publish(subject, b"%d" % i)
            await tx.flush()
            deadline = time.monotonic() + 5
            while len(got) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await tx.close()
            await rx.close()
            return got
        other = members[3 - seed]
        assert len(asyncio.run(flow(victim, other, "before"))) == 20
        victim.proc.proc.send_signal(signal.SIGKILL)
        victim.proc.proc.wait(5)
        restarted = start_member(victim.kind, tmp_path, victim.name, routes=[a.route_url],
                                 route_port=victim.route_port)
        members[seed] = restarted
        wait_mesh(members)
        assert len(asyncio.run(flow(restarted, other, "after.out"))) == 20
        assert len(asyncio.run(flow(other, restarted, "after.in"))) == 20
    finally:
        for m in members + [victim]:
            m.proc.kill()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_seed_list_naming_every_server_including_itself(tmp_path, kind):
    """The usual deployment: every server gets the same route list, itself included."""
    from tools.serverproc import free_port
    ports = [free_port() for _ in range(3)]
    seeds = ["nats://127.0.0.1:%d" % p for p in ports]
    members = []
    try:
        for name, port in zip("ABC", ports):
            members.append(start_member(kind, tmp_path, name, routes=seeds, route_port=port))
        wait_mesh(members)
        time.sleep(0.5)
        for m in members:
            assert m.remote_names() == {"A", "B", "C"} - {m.name}
            assert not [ln for ln in m.proc.lines if "[ERR]" in ln and "attempt" not in ln], m.proc.log
    finally:
        for m in members:
            m.proc.kill()


def test_route_log_lines(tmp_path):
    """The lines operators and launchers read: the listener, each route, its close."""
    a = start_member("natsd", tmp_path, "A")
    b = start_member("natsd", tmp_path, "B", routes=[a.route_url])
    try:
        wait_mesh([a, b])
        a.proc.wait_log(r"\[INF\] Cluster name is C1")
        a.proc.wait_log(r"\[INF\] Listening for route connections on 0\.0\.0\.0:%d" % a.route_port)
        a.proc.wait_log(r"\[INF\] 127\.0\.0\.1:\d+ - rid:\d+ - Route connection created")
        b.proc.stop()
        a.proc.wait_log(r"\[INF\] 127\.0\.0\.1:\d+ - rid:\d+ - Router connection closed: .* - Remote: B")
    finally:
        a.proc.kill()
        b.proc.kill()


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd"), ("natsd", "nats-server"), ("nats-server", "natsd")],
                         ids=["natsd", "natsd-seed", "ref-seed"])
@pytest.mark.parametrize("seed", [7, 11])
def test_partition_and_heal(tmp_path, kinds, seed):
    """The route between two servers goes through a proxy that partitions it silently: both
    ends find out from their pings and drop it, nothing crosses meanwhile, and once the
    network heals the route comes back and traffic flows again, each message once."""
    import random
    from tests.support.tcpproxy import TcpProxy
    rnd = random.Random(seed)
    pings = "ping_interval: \"1s\"\n  ping_max: 2"
    a = start_member(kinds[0], tmp_path, "A", cluster_extra=pings)
    proxy = TcpProxy(a.route_port)
    b = start_member(kinds[1], tmp_path, "B", routes=["nats://127.0.0.1:%d" % proxy.port],
                     cluster_extra=pings + "\n  pool_size: %d" % rnd.choice([1, 3]))
    try:
        wait_mesh([a, b])

        async def send(n, expect):
            rx = await nats.connect(b.url)
            tx = await nats.connect(a.url)
            sub = await rx.subscribe("part.x")
            await rx.flush()
            if expect:
                wait_interest([a], "part.x")
            for i in range(n):
                await tx.publish("part.x", b"%d" % i)
            await tx.flush()
            got = []
            deadline = time.monotonic() + (5 if expect else 1)
            while time.monotonic() < deadline and len(got) <= n:
                try:
                    got.append((await sub.next_msg(0.2)).data)
                except nats.errors.TimeoutError:
                    if len(got) >= expect:
                        break
            await tx.close()
            await rx.close()
            return got
        n = rnd.randint(10, 40)
        assert len(asyncio.run(send(n, n))) == n
        proxy.cut()
        deadline = time.monotonic() + 15
        while a.get("/routez")["num_routes"] or b.get("/routez")["num_routes"]:
            assert time.monotonic() < deadline, "the partition was never noticed"
            time.sleep(0.1)
        assert asyncio.run(send(5, 0)) == []
        proxy.heal()
        wait_mesh([a, b], timeout=30)
        got = asyncio.run(send(n, n))
        assert sorted(got) == sorted(b"%d" % i for i in range(n))
    finally:
        proxy.close()
        a.proc.kill()
        b.proc.kill()
