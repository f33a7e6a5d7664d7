"""Accounts end to end, on natsd AND nats-server (`any_server`): account limits with their exact
-ERR texts (raw protocol), top-level and account `mappings` (deterministic rules compared
subject for subject; weighted ones by outcome set), and the seed-000 cross-account
accounts.conf (the extended one with `JS.acc@hub.API` imports) loading and carrying core
traffic across its imports.
"""
import asyncio
import re
import socket
import time
from pathlib import Path

import nats
import pytest

from tests.support.servers import http_json
from tests.support.waiting import poll, until

SEEDS = Path("/work/shared/seeds")

LIMITS_CONF = """
accounts {
  LIM: {
    users: [{user: lim, password: lim}]
    limits: {max_connections: 2, max_subscriptions: 3, max_payload: 100, max_leafnodes: 1}
  }
  FREE: { users: [{user: free, password: free}] }
}
"""


class Raw:
    """A raw protocol client: CONNECT as a user, then read what the server says."""

    def __init__(self, port, user):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.read_until(b"\r\n")                    # INFO
        self.send('CONNECT {"verbose":false,"pedantic":false,"user":"%s","pass":"%s"}\r\nPING\r\n'
                  % (user, user))

    def send(self, text):
        self.sock.sendall(text.encode() if isinstance(text, str) else text)

    def read_until(self, token, timeout=3):
        deadline = time.monotonic() + timeout
        while token not in self.buf:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise AssertionError("never saw %r in %r" % (token, self.buf))
            if not data:
                raise AssertionError("closed before %r: %r" % (token, self.buf))
            self.buf += data
        i = self.buf.index(token) + len(token)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def closed(self, timeout=3):
        """True when the server closes the socket (after whatever it sent)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.buf += data
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


@pytest.fixture
def limits_server(any_server, tmp_path):
    p = tmp_path / "limits.conf"
    p.write_text(LIMITS_CONF)
    return any_server("-c", str(p), "-m", "-1")


def test_account_max_connections(limits_server):
    a, b = Raw(limits_server.port, "lim"), Raw(limits_server.port, "lim")
    for c in (a, b):
        assert c.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
    c = Raw(limits_server.port, "lim")
    got = c.read_until(b"\r\n")
    assert got == b"-ERR 'maximum account active connections exceeded'\r\n"
    assert c.closed()
    free = Raw(limits_server.port, "free")            # other accounts are not limited
    assert free.read_until(b"PONG\r\n")
    a.close()                                       # a slot frees up
    assert poll(lambda: http_json(limits_server.http_port, "/varz")["connections"] == 2)    # b and free
    d = Raw(limits_server.port, "lim")
    assert d.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
    for x in (b, c, d, free):
        x.close()


def test_account_max_subscriptions(limits_server):
    c = Raw(limits_server.port, "lim")
    c.read_until(b"PONG\r\n")
    c.send("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\nPING\r\n")
    out = c.read_until(b"PONG\r\n")
    assert out == b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n"
    c.send("PUB c 2\r\nhi\r\nPUB d 2\r\nhi\r\nPING\r\n")   # the connection stays usable
    out = c.read_until(b"PONG\r\n")
    assert out == b"MSG c 3 2\r\nhi\r\nPONG\r\n"
    c.close()


def test_account_max_payload(limits_server):
    c = Raw(limits_server.port, "lim")
    c.read_until(b"PONG\r\n")
    c.send("PUB ok 100\r\n" + "x" * 100 + "\r\nPING\r\n")
    assert c.read_until(b"PONG\r\n") == b"PONG\r\n"
    c.send("PUB big 101\r\n" + "x" * 101 + "\r\n")
    assert c.read_until(b"\r\n") == b"-ERR 'Maximum Payload Violation'\r\n"
    assert c.closed()
    free = Raw(limits_server.port, "free")
    free.read_until(b"PONG\r\n")
    free.send("PUB big 1000\r\n" + "x" * 1000 + "\r\nPING\r\n")
    assert free.read_until(b"PONG\r\n") == b"PONG\r\n"
    free.close()


MAPPINGS_CONF = """
mappings {
  "top.*.*": "top.{{wildcard(2)}}.{{wildcard(1)}}"
  "neworders.*": "neworders.{{wildcard(1)}}.{{partition(3,1)}}"
  "all": [{destination: all.v2, weight: 100%}]
  "half": [{destination: half.a, weight: 50%}, {destination: half.b, weight: 50%}]
}
accounts {
  M: {
    users: [{user: m, password: m}]
    mappings: {
      "split.*": "s.{{split(1,-)}}"
      "cut.*": "cut.{{SplitFromLeft(1,4)}}"
      orders.* "orders.central.{{wildcard(1)}}"
      "lossy": [{destination: lossy.kept, weight: 50%}]
      "drop": [{destination: drop, weight: 30%}]
    }
  }
  N: { users: [{user: n, password: n}] }
}
"""


async def _mapped(url, user, subjects):
    """Each subject published once (as `user`, or in the global account) -> [(the subject
    published, the subject it was delivered on)] to a `>` subscriber."""
    nc = await nats.connect(url.replace("nats://", "nats://%s:%s@" % (user, user)) if user else url)
    got = []

    async def cb(m):
        got.append((m.data.decode(), m.subject))
    await nc.subscribe(">", cb=cb)
    await nc.flush()
    for s in subjects:
        await nc.publish(s, s.encode())
    await nc.flush()
    await until(lambda: len(got) >= len(subjects), 5)
    await asyncio.sleep(0.3)                        # nothing more arrives
    await nc.close()
    return got


def test_mappings_through_live_server(natsd, reference, tmp_path):
    p = tmp_path / "map.conf"
    p.write_text(MAPPINGS_CONF)
    acc = ["split.a-b--c", "cut.1234567", "orders.x", "top.a.b", "all"]
    results = {}
    for name, factory in (("natsd", natsd), ("nats-server", reference)):
        srv = factory("-c", str(p))
        results[name] = (asyncio.run(_mapped(srv.url, "m", acc)), srv)
    expected_acc = sorted([("split.a-b--c", "s.a.b.c"), ("cut.1234567", "cut.1234.567"),
                           ("orders.x", "orders.central.x"),
                           ("top.a.b", "top.a.b"),          # top-level rules are $G only
                           ("all", "all")])
    assert sorted(results["natsd"][0]) == expected_acc
    assert sorted(results["nats-server"][0]) == expected_acc


def test_top_level_mappings_apply_to_global_account(any_server, tmp_path):
    p = tmp_path / "top.conf"
    p.write_text(MAPPINGS_CONF.split("accounts {")[0])
    srv = any_server("-c", str(p))
    subjects = ["top.a.b", "neworders.customerid1", "neworders.customerid2",
                "neworders.customerid3", "all", "other.x"] + ["half"] * 40
    got = asyncio.run(_mapped(srv.url, None, subjects))
    fixed = sorted(x for x in got if x[0] != "half")
    assert fixed == sorted([("top.a.b", "top.b.a"), ("neworders.customerid1", "neworders.customerid1.0"),
                            ("neworders.customerid2", "neworders.customerid2.2"),
                            ("neworders.customerid3", "neworders.customerid3.1"),
                            ("all", "all.v2"), ("other.x", "other.x")])
    halves = [s for d, s in got if d == "half"]
    assert len(halves) == 40 and set(halves) <= {"half.a", "half.b"} and len(set(halves)) == 2


def test_weighted_account_mapping_remainder(any_server, tmp_path):
    """Weights under 100%: the remainder keeps the original subject, unless the source is
    itself a destination, then the remainder is dropped (nats-server AddWeightedMappings)."""
    p = tmp_path / "lossy.conf"
    p.write_text("accounts {" + MAPPINGS_CONF.split("accounts {", 1)[1])
    srv = any_server("-c", str(p))
    got = asyncio.run(_mapped(srv.url, "m", ["lossy"] * 300 + ["drop"] * 300))
    lossy = [s for d, s in got if d == "lossy"]
    assert len(lossy) == 300 and set(lossy) == {"lossy", "lossy.kept"}
    assert 90 <= lossy.count("lossy.kept") <= 210
    dropped = [s for d, s in got if d == "drop"]
    assert set(dropped) == {"drop"} and 40 <= len(dropped) <= 140      # ~30% kept


def _seed_000_accounts_conf():
    text = next(SEEDS.glob("000_*.txt")).read_text()
    i = text.index("### Cross account & domain import")
    block = re.search(r"```text\n(accounts \{.*?\n)```", text[i:], re.S).group(1)
    assert "JS.acc@hub.API.CONSUMER.CREATE.*" in block
    return block


@pytest.fixture
def seed_server(any_server, tmp_path):
    p = tmp_path / "accounts.conf"
    p.write_text(_seed_000_accounts_conf())
    return any_server("-c", str(p))


def test_seed_000_accounts_conf_core_imports(seed_server):
    url = seed_server.url

    async def conn(u):
        return await nats.connect(url.replace("nats://", "nats://%s:%s@" % (u, u)))

    async def main():
        started = asyncio.get_running_loop().time()
        acc, mirror, client = await conn("acc"), await conn("import_mirror"), await conn("import_client")
        # stream import: deliver.acc.hub.import_mirror.> from ACC into IMPORT_MIRROR
        got = []

        async def on_deliver(m):
            got.append((m.subject, m.data))
        await mirror.subscribe("deliver.>", cb=on_deliver)
        await mirror.flush()
        # the import's interest may lag the subscription under load (nats-server too):
        # publish until the first message crosses, then check that only imported ones do
        while not got:
            await acc.publish("deliver.acc.hub.import_mirror.x", b"m1")
            await acc.flush()
            await until(lambda: got, timeout=0.5)
            assert asyncio.get_running_loop().time() < started + 10, "import never delivered"
        await until(lambda: False, timeout=0.1)         # stragglers of the retries
        del got[:]
        await acc.publish("deliver.acc.hub.other.x", b"not imported")
        await acc.publish("deliver.acc.hub.import_mirror.y", b"m2")
        await acc.flush()
        await until(lambda: len(got) >= 1)
        assert got == [("deliver.acc.hub.import_mirror.y", b"m2")]

        # service import with the `to:` rename and a stream response type
        async def on_create(m):
            await acc.publish(m.reply, b'{"subject":"%s"}' % m.subject.encode())
        await acc.subscribe("$JS.hub.API.CONSUMER.CREATE.*", cb=on_create)

        async def on_next(m):
            await acc.publish(m.reply, b"next " + m.subject.encode())

        await acc.subscribe("$JS.hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur", cb=on_next)
        acks = []

        async def on_ack(m):
            acks.append(m.subject)
        await acc.subscribe("$JS.ACK.aggregate-test-leaf.dur.>", cb=on_ack)
        await acc.flush()
        # (nats-server once answered "no responders" here: flush() had sent its PING ahead of
        # the SUBs, see tests/support/natspy.py)
        r = await mirror.request("JS.acc@hub.API.CONSUMER.CREATE.foo", b"{}", timeout=2)
        assert r.data == b'{"subject":"$JS.hub.API.CONSUMER.CREATE.foo"}'
        r = await client.request("JS.acc@hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur", b"", timeout=2)
        assert r.data == b"next $JS.hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur"
        await client.publish("$JS.ACK.aggregate-test-leaf.dur.1.2.3.4.5", b"+ACK")
        await client.flush()
        await until(lambda: acks)
        assert acks == ["$JS.ACK.aggregate-test-leaf.dur.1.2.3.4.5"]
        # IMPORT_CLIENT did not import CONSUMER.CREATE
        with pytest.raises(nats.errors.NoRespondersError):
            await client.request("JS.acc@hub.API.CONSUMER.CREATE.foo", b"{}", timeout=1)
        for c in (acc, mirror, client):
            await c.close()
    asyncio.run(main())
