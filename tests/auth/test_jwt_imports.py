"""Exports, imports and mappings in account JWTs, natsd against nats-server with the same
tokens and nats-py clients: public stream and service exports imported under local subjects,
a private export imported with an activation token, a revoked token's import left out, an
account made invalid by a token issued to another account, subject mappings, and an account update that drops an import while
clients are connected."""
import asyncio
import time

import nats

from tests.support.jwtmint import Mint, creds

LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
          "conn": -1, "leaf": -1}


class World:
    def __init__(self, tmp_path):
        self.m = m = Mint(seed=53)
        self.tmp = tmp_path
        self.op, _ = m.operator("OP")
        self.sys = m.key("account")
        self.exp = m.key("account")
        self.imp = m.key("account")
        self.other = m.key("account")
        self.maps = m.key("account")
        now = int(time.time())
        act = lambda subject, kind, to: m.token(self.exp, to, "activation", {"subject": subject, "kind": kind})
        self.exp_jwt = self.account(self.exp, "EXP", exports=[
            {"name": "news", "subject": "news.>", "type": "stream"},
            {"name": "help", "subject": "help.>", "type": "service"},
            {"name": "private", "subject": "private.>", "type": "stream", "token_req": True},
            {"name": "secret", "subject": "secret.>", "type": "stream", "token_req": True},
            {"name": "psvc", "subject": "psvc", "type": "service", "token_req": True,
             "revocations": {self.imp.public: now + 3600}}])
        self.imports = [
            {"name": "news", "subject": "news.>", "account": self.exp.public, "local_subject": "imported.news.>",
             "type": "stream"},
            {"name": "help", "subject": "help.>", "account": self.exp.public, "local_subject": "ask.>",
             "type": "service"},
            {"name": "private", "subject": "private.>", "account": self.exp.public, "type": "stream",
             "token": act("private.>", "stream", self.imp.public)},
            {"name": "psvc", "subject": "psvc", "account": self.exp.public, "type": "service",
             "token": act("psvc", "service", self.imp.public)}]
        self.imp_jwt = self.account(self.imp, "IMP", imports=self.imports)
        self.imp_jwt_without_news = self.account(self.imp, "IMP", imports=self.imports[1:], iat=now + 1)
        # an import whose activation token names another account makes the account invalid
        self.bad = m.key("account")
        self.bad_jwt = self.account(self.bad, "BAD", imports=[
            {"name": "secret", "subject": "secret.>", "account": self.exp.public, "type": "stream",
             "token": act("secret.>", "stream", self.other.public)}])
        self.maps_jwt = self.account(self.maps, "MAPS", mappings={
            "in.x": [{"subject": "out.x"}], "wild.*": [{"subject": "out.$1.w", "weight": 100}]})
        self.sys_jwt = self.account(self.sys, "SYS")
        self.op_jwt = m.token(self.op, self.op.public, "operator", {"system_account": self.sys.public}, name="OP")
        self.creds = {name: self.user(acc, name) for name, acc in
                      (("sys", self.sys), ("exp", self.exp), ("imp", self.imp), ("maps", self.maps),
                       ("bad", self.bad))}

    def account(self, key, name, iat=None, **nats):
        claims = {"limits": dict(LIMITS), "default_permissions": {"pub": {}, "sub": {}}, **nats}
        return self.m.token(self.op, key.public, "account", claims, name=name, **({"iat": iat} if iat else {}))

    def user(self, account, name):
        u, tok = self.m.user(account, name)
        path = self.tmp / (name + ".creds")
        path.write_text(creds(tok, u))
        return str(path)

    def conf(self):
        path = self.tmp / "op.conf"
        pre = "".join("  %s: %s\n" % (k.public, j) for k, j in ((self.sys, self.sys_jwt), (self.exp, self.exp_jwt),
                                                                (self.imp, self.imp_jwt), (self.maps, self.maps_jwt),
                                                                (self.bad, self.bad_jwt)))
        path.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\n" % (self.op_jwt, pre))
        return str(path)


async def _got(sub, timeout=0.5):
    """What arrives until `timeout` passes without a message."""
    out = []
    while True:
        try:
            msg = await sub.next_msg(timeout=timeout)
        except nats.errors.TimeoutError:
            return out
        if not msg.subject.startswith("_INBOX."):       # the requests' own random inboxes
            out.append((msg.subject, msg.data.decode()))


async def scenario(url, w):
    exp = await nats.connect(url, user_credentials=w.creds["exp"])
    imp = await nats.connect(url, user_credentials=w.creds["imp"])
    out = {}
    try:
        await (await nats.connect(url, user_credentials=w.creds["bad"], allow_reconnect=False)).close()
        out["bad token account"] = "connected"
    except Exception as e:
        out["bad token account"] = str(e).lower()
    streams = await imp.subscribe(">")

    async def helper(msg):
        await exp.publish(msg.reply, b"answer to " + msg.subject.encode())
    await exp.subscribe("help.>", cb=helper)
    await exp.subscribe("psvc", cb=helper)
    await exp.flush()
    await imp.flush()
    for subject in ("news.a", "private.b", "other.d"):
        await exp.publish(subject, subject.encode())
    await exp.flush()
    out["streams"] = sorted(await _got(streams))
    for subject in ("ask.q", "psvc", "help.q"):
        try:
            out["request " + subject] = (await imp.request(subject, b"?", timeout=1)).data.decode()
        except Exception as e:
            out["request " + subject] = type(e).__name__
    m = await nats.connect(url, user_credentials=w.creds["maps"])
    sub = await m.subscribe("out.>")
    await m.publish("in.x", b"1")
    await m.publish("wild.y", b"2")
    await m.publish("in.a.b", b"3")
    await m.flush()
    out["mapped"] = sorted(await _got(sub))
    # the importer's account loses its news import: connected subscribers stop receiving
    sc = await nats.connect(url, user_credentials=w.creds["sys"])
    reply = await sc.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.imp.public, w.imp_jwt_without_news.encode(),
                             timeout=3)
    out["update"] = reply.data.decode().split('"data":')[-1]
    for subject in ("news.e", "private.f"):
        await exp.publish(subject, subject.encode())
    await exp.flush()
    out["streams after update"] = sorted(await _got(streams))
    for nc in (exp, imp, m, sc):
        await nc.close()
    return out


def test_jwt_exports_imports_and_mappings_match_nats_server(natsd, reference, tmp_path):
    w = World(tmp_path)
    conf = w.conf()
    theirs = asyncio.run(scenario(reference("-c", conf).url, w))
    ours = asyncio.run(scenario(natsd("-c", conf).url, w))
    assert ours == theirs
    assert theirs["streams"] == [("imported.news.a", "news.a"), ("private.b", "private.b")]
    assert "authorization violation" in theirs["bad token account"]
    assert theirs["request ask.q"] == "answer to help.q" and theirs["request psvc"] != "answer to psvc"
    assert ("private.f", "private.f") in theirs["streams after update"]
    assert not any(subject.startswith("imported.") for subject, _ in theirs["streams after update"])


async def expiring_scenario(url, w, expires):
    exp = await nats.connect(url, user_credentials=w.creds["exp"])
    imp = await nats.connect(url, user_credentials=w.creds["late"])
    sub = await imp.subscribe("private.>")
    await imp.flush()
    # "before" shows the import works while its token is valid: published again until it
    # arrives (nats-server under the full suite once took over 0.5 s, CI78, and once never
    # delivered a single one within 3 s, CI85); the copies are counted as one
    before = []
    for _ in range(10):
        await exp.publish("private.before", b"1")
        await exp.flush()
        before = await _got(sub, timeout=0.3)
        if before or time.time() > expires - 2:
            break
    out = {"before": sorted(set(before))}
    await asyncio.sleep(max(0.0, expires + 1.6 - time.time()))
    await exp.publish("private.after", b"2")
    await exp.flush()
    out["after"] = [m for m in await _got(sub) if m[0] != "private.before"]  # late copies
    await exp.close()
    await imp.close()
    return out


def test_expiring_activation_token_matches_nats_server(natsd, reference, tmp_path):
    w = World(tmp_path)
    late = w.m.key("account")
    w.creds["late"] = w.user(late, "late")
    conf = w.conf()
    head = open(conf).read().rsplit("}\n", 1)[0]        # the preload block, open for one more
    seen = []
    for start in (reference, natsd):
        # minted right before its server starts: whole seconds (a JWT's exp), at least 6 s
        # ahead, so a loaded machine still publishes "before" in time (3 s was not always
        # enough for nats-server under the full suite: CI65)
        expires = int(time.time()) + 7
        token = w.m.token(w.exp, late.public, "activation", {"subject": "private.>", "kind": "stream"},
                          exp=expires)
        late_jwt = w.account(late, "LATE", imports=[{"name": "private", "subject": "private.>",
                                                     "account": w.exp.public, "type": "stream",
                                                     "token": token}])
        open(conf, "w").write(head + "  %s: %s\n}\n" % (late.public, late_jwt))
        srv = start("-c", conf)
        seen.append(asyncio.run(expiring_scenario(srv.url, w, expires)))
    theirs, ours = seen
    assert ours == theirs
    assert theirs == {"before": [("private.before", "1")], "after": []}
