"""Operator mode on a cluster, natsd against nats-server (two members each, FULL resolvers with
their own directories): an account JWT pushed to one member reaches the other (the
CLAIMS.UPDATE subscription crosses the routes), users of that account on both members talk to
each other, and an account the second member learns of only through route interest is looked
up there; members that missed a JWT get it by the periodic CLAIMS.PACK sync."""
import asyncio
import contextlib

import nats
import pytest

from tests.support.cluster import start_member, wait_mesh
from tests.support.jwtmint import Mint, creds
from tests.support.servers import nats_server_cmd
from tests.support.waiting import until

LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
          "conn": -1, "leaf": -1}


def _world(tmp_path):
    m = Mint(seed=83)
    op, _ = m.operator("OP")
    sys_acc, acc = m.key("account"), m.key("account")
    jwt = lambda key, name: m.token(op, key.public, "account", {
        "limits": dict(LIMITS), "default_permissions": {"pub": {}, "sub": {}}}, name=name)
    op_jwt = m.token(op, op.public, "operator", {"system_account": sys_acc.public}, name="OP")
    paths = {}
    for name, key in (("sys", sys_acc), ("a", acc), ("b", acc)):
        u, tok = m.user(key, name)
        paths[name] = tmp_path / (name + ".creds")
        paths[name].write_text(creds(tok, u))
    return op_jwt, sys_acc, jwt(sys_acc, "SYS"), acc, jwt(acc, "ACC"), {k: str(v) for k, v in paths.items()}


def _member(kind, tmp_path, name, world, routes=(), interval="2m"):
    """A member in operator mode with a FULL resolver in its own directory."""
    op_jwt, sys_acc, sys_jwt = world[:3]
    extra = ("operator: %s\nsystem_account: %s\nresolver { type: full, dir: '%s', interval: \"%s\" }\n"
             "resolver_preload: { %s: %s }\n" % (op_jwt, sys_acc.public, tmp_path / (name + "-jwt"),
                                               interval, sys_acc.public, sys_jwt))
    return start_member(kind, tmp_path / kind, name, list(routes), extra=extra)


async def scenario(s1, s2, sys_acc, acc, acc_jwt, paths):
    out = {"pushed": await push(s1, acc_jwt, paths)}
    # the second member got it too: its user logs in and hears the first member's user
    b = await nats.connect(s2.url, user_credentials=paths["b"])
    sub = await b.subscribe("greet")
    await b.flush()
    a = await nats.connect(s1.url, user_credentials=paths["a"])
    await until(lambda: "greet" in s1.route_subjects(), 10)
    await a.publish("greet", b"hello")
    out["heard across"] = (await sub.next_msg(timeout=3)).data
    for nc in (a, b):
        await nc.close()
    return out


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_operator_cluster_shares_account_jwts(tmp_path, kind):
    if kind == "nats-server" and nats_server_cmd() is None:
        pytest.skip("nats-server is not installed")
    world = _world(tmp_path)
    op_jwt, sys_acc, sys_jwt, acc, acc_jwt, paths = world
    members = []
    try:
        for name in ("s1", "s2"):
            members.append(_member(kind, tmp_path, name, world, [m.route_url for m in members]))
        wait_mesh(members)
        out = asyncio.run(scenario(members[0], members[1], sys_acc, acc, acc_jwt, paths))
    finally:
        for mem in members:
            mem.proc.kill()
    assert out == {"pushed": True, "heard across": b"hello"}
    assert (tmp_path / "s2-jwt" / (acc.public + ".jwt")).exists()


async def push(member, acc_jwt, paths):
    """CLAIMS.UPDATE through `member`, as the system account's user: did it say updated?"""
    sc = await nats.connect(member.url, user_credentials=paths["sys"])
    reply = await sc.request("$SYS.REQ.CLAIMS.UPDATE", acc_jwt.encode(), timeout=3)
    await sc.close()
    return b'"jwt updated"' in reply.data


@contextlib.contextmanager
def _pushed_then_joined(kind, tmp_path, interval="2m"):
    """An account JWT pushed to s1, then s2 joining: yields (s2, account key, creds paths,
    whether the push was answered "jwt updated"); both members are killed after."""
    if kind == "nats-server" and nats_server_cmd() is None:
        pytest.skip("nats-server is not installed")
    world = _world(tmp_path)
    acc, acc_jwt, paths = world[3:]
    members = []
    try:
        members.append(_member(kind, tmp_path, "s1", world, interval=interval))
        pushed = asyncio.run(push(members[0], acc_jwt, paths))
        members.append(_member(kind, tmp_path, "s2", world, [members[0].route_url], interval=interval))
        wait_mesh(members)
        yield members[1], acc, acc_jwt, paths, pushed
    finally:
        for mem in members:
            mem.proc.kill()


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_member_without_the_jwt_asks_the_cluster(tmp_path, kind):
    """A member that was not there when the JWT was pushed finds it with CLAIMS.LOOKUP."""
    with _pushed_then_joined(kind, tmp_path) as (s2, acc, _, paths, pushed):
        async def login():
            nc = await nats.connect(s2.url, user_credentials=paths["b"], allow_reconnect=False)
            await nc.close()
            return "connected"
        out = {"pushed": pushed, "login": asyncio.run(login())}
    assert out == {"pushed": True, "login": "connected"}
    assert (tmp_path / "s2-jwt" / (acc.public + ".jwt")).exists()      # kept once fetched


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_members_sync_directories_by_pack(tmp_path, kind):
    """A JWT pushed while the second member was away reaches that member's directory with no
    login asking for it: every `interval` each FULL resolver asks CLAIMS.PACK with its hash and
    merges the answer."""
    with _pushed_then_joined(kind, tmp_path, interval="1s") as (_, acc, acc_jwt, _, pushed):
        synced = tmp_path / "s2-jwt" / (acc.public + ".jwt")
        asyncio.run(until(synced.exists, 20))
    assert pushed and synced.read_text() == acc_jwt
