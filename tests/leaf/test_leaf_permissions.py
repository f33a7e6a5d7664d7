"""A leaf node that logs in as a user gets that user's permissions, in both directions
(nats-server: the hub reverses them for the link and announces them in INFO import/export).

The escape scenario runs in the three pairings (natsd/natsd, nats-server hub with natsd leaf,
natsd hub with nats-server leaf); the wire-level violations (a raw leaf breaking its
permissions) run against natsd's and nats-server's hub and must get the same -ERR.
"""
import asyncio
import json

import nats
import pytest

from tests.support.leafnodes import COMBO_IDS, COMBOS, carries
from tests.support.rawclient import RawClient
from tests.support.servers import ENV, http_json
from tests.support.waiting import poll, until
from tools.serverproc import free_port

HUB = """
server_name: hub
port: %(port)d
leafnodes { port: %(leaf)d }
accounts {
  A: {
    users: [
      {user: a, password: a, permissions: {publish: "a.>", subscribe: "a.>"}}
      {user: rsp, password: rsp,
       permissions: {publish: {deny: ">"}, subscribe: "svc.>", allow_responses: true}}
      {user: other, password: other}
    ]
  }
}
"""

LEAF = """
server_name: leaf
port: %(port)d
leafnodes { remotes: [ { urls: ["nats-leaf://%(user)s:%(user)s@127.0.0.1:%(leaf)d"], account: L } ] }
accounts { L: { users: [{user: l, password: l}] } }
"""


def start(kind, starters, tmp_path, name, text, **fmt):
    port = free_port()
    path = tmp_path / (name + ".conf")
    path.write_text(text % dict(fmt, port=port))
    return starters[kind]("-c", str(path), "-p", str(port), "-m", str(free_port()),
                          cwd=str(tmp_path), env=ENV)


def linked(*servers):
    for srv in servers:
        assert poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == 1, 10), srv.log


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_user_permissions_hold(starters, tmp_path, hub_kind, leaf_kind):
    leaf_port = free_port()
    hub = start(hub_kind, starters, tmp_path, "hub", HUB, leaf=leaf_port)
    leaf = start(leaf_kind, starters, tmp_path, "leaf", LEAF, leaf=leaf_port, user="a")
    linked(hub, leaf)

    async def scenario():
        other = await nats.connect("nats://other:other@127.0.0.1:%d" % hub.port)
        lc = await nats.connect("nats://l:l@127.0.0.1:%d" % leaf.port)
        got = {"secret": [], "a": [], "hub_b": [], "hub_a": []}

        def collect(key):
            async def cb(m):
                got[key].append(m.subject)
            return cb
        await lc.subscribe("secret.>", cb=collect("secret"))
        await lc.subscribe("a.>", cb=collect("a"))
        await other.subscribe("b.>", cb=collect("hub_b"))
        await other.subscribe("a.>", cb=collect("hub_a"))
        # what may cross has crossed: the leaf's a.> to the hub, the hub's a.> to the leaf (the
        # hub keeps secret.> and b.> to itself: the leaf user may not use them)
        assert await until(lambda: carries(hub, "a.>") and carries(leaf, "a.>"), 10)
        # hub -> leaf: only what the leaf user may subscribe to
        await other.publish("secret.x", b"no")
        await other.publish("a.1", b"yes")
        # leaf -> hub: only what the leaf user may publish
        await lc.publish("b.forged", b"no")
        await lc.publish("a.2", b"yes")
        await other.flush()
        await lc.flush()
        await until(lambda: got["a"] and got["hub_a"])
        await asyncio.sleep(0.3)                    # nothing forbidden arrives after them
        await other.close()
        await lc.close()
        return got
    got = asyncio.run(scenario())
    assert got["secret"] == [], got
    assert got["hub_b"] == [], got
    assert "a.1" in got["a"] and "a.2" in got["hub_a"], got


@pytest.fixture
def hub(any_server, tmp_path):
    leaf = free_port()
    conf = tmp_path / "hub.conf"
    conf.write_text(HUB % {"port": free_port(), "leaf": leaf})
    srv = any_server("-c", str(conf), "-m", str(free_port()))
    srv.leaf_port = leaf
    return srv


def raw_leaf(srv, user="a"):
    c = RawClient(srv.leaf_port)
    c.send(b'CONNECT ' + json.dumps({"name": "raw", "user": user, "pass": user, "headers": True,
                                     "version": "2.15.1"}).encode() + b"\r\n")
    info = c.read_until(b'"connect_info":true', 5)
    info += c.read_until(b"\r\n", 5)
    return c, info


def test_hub_announces_leaf_permissions(hub):
    """The INFO after CONNECT carries the user's permissions for the leaf to enforce too,
    JSON-encoded as Go encodes it ('>' as \u003e)."""
    c, data = raw_leaf(hub, "rsp")
    assert b'"import":{"allow":["svc.\\u003e"]},"export":{"deny":["\\u003e"]},"info_on_connect":true' in data, data
    c.close()


def test_raw_leaf_allow_responses(hub):
    """A leaf user that may not publish may answer a request it received, once (max_msgs 1);
    the second answer is a violation."""
    c, _ = raw_leaf(hub, "rsp")
    c.send(b"LS+ svc.echo\r\nPING\r\n")
    c.read_until(b"PONG\r\n", 5)
    other = RawClient(hub.port).connect(user="other", **{"pass": "other"})
    other.send(b"SUB _INBOX.r1 1\r\nPUB svc.echo _INBOX.r1 2\r\nhi\r\n")
    other.sync()
    assert c.read_until(b"hi\r\n", 5).endswith(b"LMSG svc.echo _INBOX.r1 2\r\nhi\r\n")
    c.send(b"LMSG _INBOX.r1 4\r\npong\r\nPING\r\n")
    c.read_until(b"PONG\r\n", 5)
    assert other.read_until(b"pong\r\n", 5) == b"MSG _INBOX.r1 1 4\r\npong\r\n"
    c.send(b"LMSG _INBOX.r1 4\r\npong\r\n")
    out = c.read_until_eof(5)
    assert out.endswith(b"-ERR 'Permissions Violation for Publish to \"_INBOX.r1\"'\r\n"), out
    other.close()


def test_raw_leaf_subscribe_violation(hub):
    c, _ = raw_leaf(hub)
    c.send(b"LS+ secret.x\r\n")
    out = c.read_until_eof(5)
    assert out.endswith(b"-ERR 'Permissions Violation for Subscription to \"secret.x\"'\r\n"), out


def test_raw_leaf_publish_violation(hub):
    c, _ = raw_leaf(hub)
    c.send(b"LMSG b.forged 2\r\nno\r\n")
    out = c.read_until_eof(5)
    assert out.endswith(b"-ERR 'Permissions Violation for Publish to \"b.forged\"'\r\n"), out
    hub.wait_log(r'Publish Violation on "b.forged" - Check other side configuration', 5)


def test_raw_leaf_wildcard_interest_is_filtered(hub):
    """A wildcard LS+ broader than the permissions is accepted, but only allowed messages
    reach the leaf."""
    c, _ = raw_leaf(hub)
    c.send(b"LS+ >\r\nPING\r\n")
    c.read_until(b"PONG\r\n", 5)
    c.read_available(0.2)
    pub = RawClient(hub.port).connect(user="other", **{"pass": "other"})
    pub.send(b"PUB secret.x 2\r\nno\r\nPUB a.x 3\r\nyes\r\n")
    pub.sync()
    got = c.read_until(b"yes\r\n", 5)
    assert b"secret.x" not in got and b"LMSG a.x 3\r\nyes\r\n" in got, got
    c.close()
    pub.close()


def test_invalid_bytes_in_violation_text_escaped_as_go(hub):
    """The violation text quotes the subject as Go's %q: invalid UTF-8 as \\xNN."""
    c, _ = raw_leaf(hub)
    c.send(b"LMSG b.\xff 2\r\nno\r\n")
    out = c.read_until_eof(5)
    assert out.endswith(b"-ERR 'Permissions Violation for Publish to \"b.\\xff\"'\r\n"), out


@pytest.mark.parametrize("leaf_kind", ["natsd", "nats-server"])
def test_hub_reload_revokes_leaf_permissions(starters, tmp_path, leaf_kind):
    """natsd hub: a reload that narrows the leaf user's permissions takes effect on the link
    (natsd closes it; the leaf reconnects under the new permissions)."""
    import signal
    leaf_port = free_port()
    hub_port = free_port()
    wide = HUB.replace('{user: a, password: a, permissions: {publish: "a.>", subscribe: "a.>"}}',
                       '{user: a, password: a}')
    path = tmp_path / "hub.conf"
    path.write_text(wide % {"port": hub_port, "leaf": leaf_port})
    hub = starters["natsd"]("-c", str(path), "-p", str(hub_port), "-m", str(free_port()),
                            cwd=str(tmp_path), env=ENV)
    leaf = start(leaf_kind, starters, tmp_path, "leaf", LEAF, leaf=leaf_port, user="a")
    linked(hub, leaf)

    async def deliveries():
        other = await nats.connect("nats://other:other@127.0.0.1:%d" % hub.port)
        lc = await nats.connect("nats://l:l@127.0.0.1:%d" % leaf.port)
        got = []

        async def cb(m):
            got.append(m.subject)
        await lc.subscribe(">", cb=cb)
        await until(lambda: carries(hub, "a.x"), 10)    # the leaf's > (or what of it may cross)
        await other.publish("secret.x", b"1")
        await other.publish("a.x", b"2")
        await other.flush()
        await until(lambda: "a.x" in got)
        await other.close()
        await lc.close()
        return got
    assert asyncio.run(deliveries()) == ["secret.x", "a.x"]
    path.write_text(HUB % {"port": hub_port, "leaf": leaf_port})
    hub.signal(signal.SIGHUP)
    hub.wait_log("Reloaded server configuration", 10)
    hub.wait_log("Leafnode permissions changed by the configuration reload", 5)
    linked(hub, leaf)
    res = []
    assert poll(lambda: res.append(asyncio.run(deliveries())) or res[-1] == ["a.x"], 15), (res[-3:], leaf.log[-3000:])
