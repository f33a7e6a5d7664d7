"""Exports and imports end to end with nats-py, each scenario on natsd AND on nats-server
(`any_server`), so both must behave the same.

Covers: public and private stream exports, import of a subset of an export, `prefix` and `to`
renames (wildcards kept token for token), service imports with `to:` wildcard renames (the
seed-000 `JS.acc@hub.API.CONSUMER.CREATE.*` form), request/reply across accounts for each
response_type (singleton: second response dropped; stream and chunked: several responses),
response mapping expiry (`response_threshold`), no responders across an import and
`allow_responses` permissions on the exporter's responder.
"""
import asyncio

import nats
import pytest
from nats.errors import NoRespondersError

from tests.support.waiting import run

CONF = """
accounts {
  EXP: {
    users: [
      {user: exp, password: exp}
      {user: resp, password: resp,
       permissions: {publish: {deny: ">"}, subscribe: {allow: "svc.>"}, allow_responses: true}}
    ]
    exports: [
      {stream: "pub.>"}
      {stream: "priv.>", accounts: [IMP]}
      {stream: "pfx.>"}
      {stream: "ren.>"}
      {service: "svc.single.>"}
      {service: "svc.stream.>", response_type: stream}
      {service: "svc.chunk.>", response_type: chunked}
      {service: "svc.short.>", response_type: stream, response_threshold: "300ms"}
      {service: "$JS.hub.API.CONSUMER.CREATE.*", response_type: stream}
      {service: "nobody.home"}
    ]
  }
  IMP: {
    users: [{user: imp, password: imp}]
    imports: [
      {stream: {account: EXP, subject: "pub.>"}}
      {stream: {account: EXP, subject: "priv.a"}}
      {stream: {account: EXP, subject: "pfx.>"}, prefix: "from_exp"}
      {stream: {account: EXP, subject: "ren.*.x"}, to: "renamed.*.y"}
      {service: {account: EXP, subject: "svc.single.>"}}
      {service: {account: EXP, subject: "svc.stream.>"}}
      {service: {account: EXP, subject: "svc.chunk.>"}}
      {service: {account: EXP, subject: "svc.short.>"}}
      {service: {account: EXP, subject: "$JS.hub.API.CONSUMER.CREATE.*"},
       to: "JS.acc@hub.API.CONSUMER.CREATE.*"}
      {service: {account: EXP, subject: "nobody.home"}}
    ]
  }
  OTHER: {
    users: [{user: other, password: other}]
  }
}
"""


@pytest.fixture
def srv(any_server, tmp_path):
    path = tmp_path / "accounts.conf"
    path.write_text(CONF)
    return any_server("-c", str(path))


async def connect(srv, user):
    return await nats.connect(srv.url.replace("nats://", "nats://%s:%s@" % (user, user)),
                              allow_reconnect=False, max_reconnect_attempts=0)


class Collector:
    """Use `cb=collector.cb` (nats-py wants a coroutine function)."""

    def __init__(self):
        self.msgs = []

    async def cb(self, m):
        self.msgs.append(m)

    def subjects(self):
        return sorted(m.subject for m in self.msgs)

    def payloads(self):
        return [m.data for m in self.msgs]


async def settle(*conns):
    for c in conns:
        await c.flush()
    await asyncio.sleep(0.15)


def test_stream_imports(srv):
    async def main():
        exp, imp, other = [await connect(srv, u) for u in ("exp", "imp", "other")]
        got_imp, got_other = Collector(), Collector()
        await imp.subscribe(">", cb=got_imp.cb)
        await other.subscribe(">", cb=got_other.cb)
        await settle(imp, other)
        for subj in ("pub.a", "pub.b.c", "priv.a", "priv.b", "pfx.one.two", "ren.k.x", "ren.k.z",
                     "other.subject"):
            await exp.publish(subj, subj.encode())
        await settle(exp)
        assert got_imp.subjects() == sorted([
            "pub.a", "pub.b.c",                 # public export, same subject
            "priv.a",                           # private export, only the imported subset
            "from_exp.pfx.one.two",             # prefix
            "renamed.k.y",                      # `to` rename keeps the wildcard token
        ])
        renamed = [m for m in got_imp.msgs if m.subject == "renamed.k.y"][0]
        assert renamed.data == b"ren.k.x"
        assert got_other.msgs == []             # OTHER imports nothing
        for c in (exp, imp, other):
            await c.close()
    run(main())


def test_account_isolation(srv):
    """The same subject in three accounts never crosses without an import."""
    async def main():
        conns = {u: await connect(srv, u) for u in ("exp", "imp", "other")}
        got = {u: Collector() for u in conns}
        for u, c in conns.items():
            await c.subscribe("iso.>", cb=got[u].cb)
        await settle(*conns.values())
        for u, c in conns.items():
            await c.publish("iso." + u, u.encode())
        await settle(*conns.values())
        for u in conns:
            assert got[u].subjects() == ["iso." + u], u
        # and not through stream imports in the reverse direction: IMP -> EXP
        got_exp = Collector()
        await conns["exp"].subscribe("pub.>", cb=got_exp.cb)
        await settle(conns["exp"])
        await conns["imp"].publish("pub.reverse", b"x")
        await settle(conns["imp"])
        assert got_exp.msgs == []
        for c in conns.values():
            await c.close()
    run(main())


def _responder(nc, count, delay=0.0):
    async def cb(m):
        for i in range(count):
            if delay:
                await asyncio.sleep(delay)
            await nc.publish(m.reply, b"%s-%d" % (m.subject.encode(), i))
    return cb


async def _collect_responses(imp, subject, wait=0.4):
    inbox = imp.new_inbox()
    got = Collector()
    await imp.subscribe(inbox, cb=got.cb)
    await imp.publish(subject, b"req", reply=inbox)
    await imp.flush()
    await asyncio.sleep(wait)
    return got


@pytest.mark.parametrize("kind,expected", [("single", 1), ("stream", 3), ("chunk", 3)])
def test_service_response_types(srv, kind, expected):
    async def main():
        exp, imp = await connect(srv, "exp"), await connect(srv, "imp")
        await exp.subscribe("svc.%s.>" % kind, cb=_responder(exp, 3))
        await settle(exp)
        got = await _collect_responses(imp, "svc.%s.x" % kind)
        assert got.payloads() == [b"svc.%s.x-%d" % (kind.encode(), i) for i in range(expected)]
        # a plain request/response works too
        r = await imp.request("svc.%s.y" % kind, b"q", timeout=2)
        assert r.data == b"svc.%s.y-0" % kind.encode()
        await exp.close()
        await imp.close()
    run(main())


def test_service_import_wildcard_to_rename(srv):
    """Seed 000: `JS.acc@hub.API.CONSUMER.CREATE.*` in IMP -> `$JS.hub.API.CONSUMER.CREATE.*`."""
    async def main():
        exp, imp = await connect(srv, "exp"), await connect(srv, "imp")
        seen = []

        async def cb(m):
            seen.append(m.subject)
            await exp.publish(m.reply, b"created " + m.subject.encode())
        await exp.subscribe("$JS.hub.API.CONSUMER.CREATE.*", cb=cb)
        await settle(exp)
        r = await imp.request("JS.acc@hub.API.CONSUMER.CREATE.foo", b"{}", timeout=2)
        assert r.data == b"created $JS.hub.API.CONSUMER.CREATE.foo"
        assert seen == ["$JS.hub.API.CONSUMER.CREATE.foo"]
        # the reply the exporter saw is not the requester's inbox (rewritten, _R_ style)
        with pytest.raises(NoRespondersError):
            await imp.request("JS.acc@hub.API.CONSUMER.DELETE.foo", b"{}", timeout=1)
        await exp.close()
        await imp.close()
    run(main())


def test_singleton_reply_rewritten_and_not_reusable(srv):
    async def main():
        exp, imp = await connect(srv, "exp"), await connect(srv, "imp")
        replies = []

        async def cb(m):
            replies.append(m.reply)
            await exp.publish(m.reply, b"one")
        await exp.subscribe("svc.single.>", cb=cb)
        await settle(exp)
        inbox = imp.new_inbox()
        got = Collector()
        await imp.subscribe(inbox, cb=got.cb)
        await imp.publish("svc.single.q", b"", reply=inbox)
        await settle(imp)
        await asyncio.sleep(0.2)
        assert got.payloads() == [b"one"]
        assert replies and replies[0] != inbox and not replies[0].startswith("_INBOX.")
        await exp.publish(replies[0], b"late")          # mapping is gone after one response
        await settle(exp)
        assert got.payloads() == [b"one"]
        await exp.close()
        await imp.close()
    run(main())


def test_response_threshold_expiry(srv):
    """`response_threshold: 300ms`: a stream response long after the request is dropped."""
    async def main():
        exp, imp = await connect(srv, "exp"), await connect(srv, "imp")
        pending = []

        async def cb(m):
            await exp.publish(m.reply, b"early")
            pending.append(m.reply)
        await exp.subscribe("svc.short.>", cb=cb)
        await settle(exp)
        got = await _collect_responses(imp, "svc.short.x", wait=0.2)
        assert got.payloads() == [b"early"]
        await asyncio.sleep(2.5)                        # well past the threshold
        await exp.publish(pending[0], b"late")
        await settle(exp)
        await asyncio.sleep(0.2)
        assert got.payloads() == [b"early"]
        await exp.close()
        await imp.close()
    run(main())


def test_no_responders_across_import(srv):
    async def main():
        imp = await connect(srv, "imp")
        with pytest.raises(NoRespondersError):
            await imp.request("nobody.home", b"", timeout=2)
        await imp.close()
    run(main())


def test_allow_responses_across_import(srv):
    """The responder may publish only to the reply of a request it received, once."""
    async def main():
        errors = []

        async def on_err(e):
            errors.append(str(e))
        resp = await nats.connect(srv.url.replace("nats://", "nats://resp:resp@"),
                                  error_cb=on_err, allow_reconnect=False)
        imp = await connect(srv, "imp")

        async def cb(m):
            await resp.publish(m.reply, b"first")
            await resp.publish(m.reply, b"second")      # over the allow_responses max of 1
        await resp.subscribe("svc.stream.>", cb=cb)
        await settle(resp)
        got = await _collect_responses(imp, "svc.stream.r", wait=0.5)
        assert got.payloads() == [b"first"]
        await resp.publish("svc.stream.direct", b"x")   # plain publishes stay denied
        await settle(resp)
        await asyncio.sleep(0.2)
        assert any("permissions violation for publish" in e.lower() for e in errors), errors
        assert not resp.is_closed
        await resp.close()
        await imp.close()
    run(main())


SELF_IMPORT_CONF = """
accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {service: "foo"}, {stream: "s"} ]
       imports: [ {service: {account: A, subject: foo}}, {stream: {account: A, subject: s}} ] }
}
"""


def test_self_import_does_not_loop(any_server, tmp_path):
    """nats-server accepts self-imports and delivers each message twice (once directly,
    once through the import); natsd used to re-import its own republish forever."""
    path = tmp_path / "self.conf"
    path.write_text(SELF_IMPORT_CONF)
    srv = any_server("-c", str(path))

    async def main():
        nc = await connect(srv, "a")
        got = Collector()
        await nc.subscribe(">", cb=got.cb)
        await nc.flush()
        await nc.publish("s", b"x")
        await nc.publish("foo", b"y")
        await settle(nc)
        await asyncio.sleep(0.3)
        assert got.subjects() == ["foo", "foo", "s", "s"]
        await nc.close()
    run(main())
