"""Operator (JWT) mode with the MEMORY resolver, natsd against nats-server: the same operator,
account and user JWTs (tests/support/jwtmint.py) loaded into both, the same nats-py clients with .creds
files, the same outcomes: connects, permission violations, expired, wrongly signed, revoked and
unknown-account users, users of an account's signing key, the account's connection limit, and
a user disconnected when its JWT expires. Plus what the config loader accepts and refuses."""
import asyncio
import time

import nats
import pytest

from natsd.conf import ConfigError, load_string
from natsd.conf.unsupported import start_error
from tests.support.jwtmint import Mint, creds
from tests.support.waiting import until


def build(tmp_path):
    m = Mint(seed=11)
    op, op_jwt = m.operator("OP")
    acc, acc_jwt = m.account(op, "ACC", limits={"conn": 2})
    sk = m.key("account")
    scoped_key, tag_key = m.key("account"), m.key("account")
    acc2 = m.key("account")
    now = int(time.time())
    revoked_user = m.key("user")
    acc2_jwt = m.token(op, acc2.public, "account", {
        "limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                   "wildcards": True, "conn": -1, "leaf": -1},
        "signing_keys": [sk.public,
                         {"kind": "user_scope", "key": scoped_key.public, "role": "team",
                          "template": {"pub": {"allow": ["{{account-name()}}.{{name()}}.>", "_INBOX.>"]},
                                       "sub": {"allow": [">"]}, "subs": 5}},
                         {"kind": "user_scope", "key": tag_key.public, "role": "tags",
                          "template": {"pub": {"allow": ["tags.{{tag(team)}}.>", "_INBOX.>"],
                                               "deny": ["tags.{{tag(banned)}}.>"]}}}],
        "revocations": {revoked_user.public: now + 3600},
        "default_permissions": {"pub": {"deny": ["secret.>"]}, "sub": {}}}, name="ACC2")
    stranger_acc = m.key("account")
    users = {}

    def user(name, account, **kw):
        u, tok = m.user(account, name, **kw)
        path = tmp_path / (name + ".creds")
        path.write_text(creds(tok, u))
        users[name] = str(path)
        return u, tok
    user("alice", acc, pub={"allow": ["a.>", "_INBOX.>"]}, sub={"allow": [">"]})
    user("carol", acc)
    user("old", acc, registered={"exp": now - 5})
    user("signed", acc2, signer=sk)
    user("defaults", acc2)
    user("stranger", stranger_acc)
    # source networks and connect time windows (UTC clock times around now)
    user("cidr_ok", acc2, src=["10.0.0.0/8", "127.0.0.0/8"])
    user("cidr_bad", acc2, src=["10.0.0.0/8"])
    user("cidr_text", acc2, src="192.168.0.0/16,127.0.0.1/32")
    clock = lambda t: time.strftime("%H:%M:%S", time.gmtime(t))
    user("times_ok", acc2, times=[{"start": clock(now - 3600), "end": clock(now + 3600)}],
         times_location="UTC")
    user("times_bad", acc2, times=[{"start": clock(now + 7200), "end": clock(now + 10800)}],
         times_location="UTC")
    user("bad_zone", acc2, times=[{"start": "00:00:00", "end": "23:59:59"}], times_location="Nowhere/Zone")
    user("limited", acc2, subs=1, payload=8)

    def scoped(name, key, **nats):
        """A user of a scoped signing key: nats-server wants no permissions or limits in it."""
        u = m.key("user")
        tok = m.token(key, u.public, "user", {"issuer_account": acc2.public, **nats}, name=name)
        (tmp_path / (name + ".creds")).write_text(creds(tok, u))
        users[name] = str(tmp_path / (name + ".creds"))
    scoped("scoped", scoped_key)
    scoped("scoped_perms", scoped_key, pub={"allow": [">"]})
    scoped("tagged", tag_key, tags=["team:red", "team:blue", "banned:blue"])
    scoped("untagged", tag_key)
    strict = m.key("account")
    strict_jwt = m.token(op, strict.public, "account", {
        "limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                   "wildcards": True, "conn": -1, "leaf": -1, "disallow_bearer": True},
        "default_permissions": {"pub": {}, "sub": {}}}, name="STRICT")
    tokens = {"bearer": m.user(acc, "bearer", bearer_token=True)[1], "unsigned": m.user(acc, "unsigned")[1],
              "bearer refused": m.user(strict, "bearer2", bearer_token=True)[1]}
    tok = m.token(acc2, revoked_user.public, "user", {"pub": {}, "sub": {}, "subs": -1, "data": -1,
                                                    "payload": -1}, name="revoked", iat=now - 60)
    (tmp_path / "revoked.creds").write_text(creds(tok, revoked_user))
    users["revoked"] = str(tmp_path / "revoked.creds")
    good = users["carol"]
    wrong = m.key("user")
    text = open(good).read()
    seed = text.split("-----BEGIN USER NKEY SEED-----\n")[1].split("\n")[0]
    (tmp_path / "wrongseed.creds").write_text(text.replace(seed, wrong.seed.decode()))
    users["wrongseed"] = str(tmp_path / "wrongseed.creds")
    conf = tmp_path / "operator.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n  %s: %s\n}\n"
                    % (op_jwt, acc.public, acc_jwt, acc2.public, acc2_jwt, strict.public, strict_jwt))

    def soon():
        """A user whose JWT expires two seconds from now."""
        return user("soon", acc, registered={"exp": int(time.time()) + 2}) and users["soon"]

    def window_closing():
        """A user whose connect window ends two seconds from now."""
        t = int(time.time())
        return user("closing", acc, times=[{"start": clock(t - 60), "end": clock(t + 2)}],
                    times_location="UTC") and users["closing"]
    return str(conf), users, (soon, window_closing), tokens


async def attempt(url, path, publish=None):
    """-> (connected, errors seen, got own message) for one client."""
    errors = []

    async def on_error(e):
        errors.append(str(e).lower())
    try:
        nc = await nats.connect(url, user_credentials=path, allow_reconnect=False,
                                error_cb=on_error, connect_timeout=3)
    except Exception as e:
        return False, sorted(set(errors + [type(e).__name__])), False
    got = False
    if publish:
        sub = await nc.subscribe(publish)
        await nc.publish(publish, b"x")
        try:
            await sub.next_msg(timeout=1)
            got = True
        except nats.errors.TimeoutError:
            pass
        await nc.flush()
        await asyncio.sleep(0.05)
    await nc.close()
    return True, sorted(set(errors)), got


async def without_signature(url, token):
    """A CONNECT with the JWT and an empty signature (what a bearer token needs)."""
    try:
        nc = await nats.connect(url, user_jwt_cb=lambda: token.encode(), signature_cb=lambda nonce: b"",
                                allow_reconnect=False, connect_timeout=3)
    except Exception as e:
        return type(e).__name__
    await nc.close()
    return "connected"


async def scenario(url, users, soon, tokens):
    out = {name: await without_signature(url, tok) for name, tok in tokens.items()}
    for name, subject in [("alice", "a.x"), ("alice", "b.x"), ("carol", "any"), ("old", None),
                          ("wrongseed", None), ("revoked", None), ("signed", "s.x"),
                          ("defaults", "secret.x"), ("defaults", "open.x"), ("stranger", None),
                          ("cidr_ok", None), ("cidr_bad", None), ("cidr_text", None), ("times_ok", None),
                          ("times_bad", None), ("bad_zone", None), ("scoped", "ACC2.scoped.x"),
                          ("scoped", "other.x"), ("scoped_perms", None), ("tagged", "tags.red.x"),
                          ("tagged", "tags.blue.x"), ("untagged", "tags.red.x")]:
        out[name + ":" + str(subject)] = await attempt(url, users[name], subject)
    # the account allows two connections
    held = [await nats.connect(url, user_credentials=users["carol"], allow_reconnect=False)
            for _ in range(2)]
    out["third"] = await attempt(url, users["carol"])
    for nc in held:
        await nc.close()
    out["limits"] = await limited(url, users["limited"])
    # a user whose JWT expires, or whose connect window ends, while connected is cut off
    for name, make in zip(("expired while connected", "window ended while connected"), soon):
        errors, closed = [], asyncio.get_running_loop().create_future()

        async def on_error(e):
            errors.append(str(e).lower())

        async def on_closed():
            if not closed.done():
                closed.set_result(None)
        nc = await nats.connect(url, user_credentials=make(), allow_reconnect=False,
                                error_cb=on_error, closed_cb=on_closed)
        await asyncio.wait_for(closed, 10)
        out[name] = str(nc.last_error).lower()
    return out


async def limited(url, path):
    """A user JWT with subs 1 and payload 8: a second SUB is refused, a 9-byte message closes
    the connection (each on its own connection: nats-py closes on the first -ERR)."""
    out = []
    for second in (b"SUB two 2\r\n", b"PUB one 9\r\n123456789\r\n"):
        nc = await nats.connect(url, user_credentials=path, allow_reconnect=False,
                                error_cb=_ignore)
        await nc.subscribe("one")
        await nc.publish("one", b"12345678")
        await nc.flush()
        await nc._send_command(second)          # past nats-py's own checks
        await nc._flush_pending()
        await until(lambda: nc.is_closed, 5)
        out.append(str(nc.last_error).lower())
        await nc.close()
    return out


async def _ignore(e):
    pass


def test_operator_mode_matches_nats_server(natsd, reference, tmp_path):
    conf, users, soon, tokens = build(tmp_path)
    theirs = asyncio.run(scenario(reference("-c", conf).url, users, soon, tokens))
    ours = asyncio.run(scenario(natsd("-c", conf).url, users, soon, tokens))
    assert ours == theirs
    assert theirs["carol:any"] == (True, [], True)
    assert theirs["old:None"][0] is False and theirs["signed:s.x"][0] is True
    assert theirs["bearer"] == "connected" and theirs["unsigned"] != "connected"
    assert theirs["bearer refused"] != "connected"
    assert [theirs[u + ":None"][0] for u in ("cidr_ok", "cidr_bad", "cidr_text", "times_ok", "times_bad",
                                             "bad_zone")] == [True, False, True, True, False, False]
    assert [theirs[k][0] for k in ("scoped:ACC2.scoped.x", "scoped_perms:None", "untagged:tags.red.x")] == [
        True, False, False]
    assert theirs["scoped:ACC2.scoped.x"][2] and not theirs["scoped:other.x"][2]
    assert theirs["tagged:tags.red.x"][2] and not theirs["tagged:tags.blue.x"][2]
    assert theirs["limits"] == ["nats: maximum subscriptions exceeded", "nats: maximum payload violation"]
    assert theirs["window ended while connected"] == theirs["expired while connected"] == \
        "nats: user authentication expired"


def _conf(tmp_path, text):
    p = tmp_path / "c.conf"
    p.write_text(text)
    return str(p)


def test_operator_config_loading(tmp_path):
    m = Mint(seed=5)
    op, op_jwt = m.operator("OP", signing_keys=[m.key("operator").public])
    acc, acc_jwt = m.account(op, "ACC")
    other_op, _ = m.operator("OTHER")
    foreign, foreign_jwt = m.account(other_op, "FOREIGN")
    decorated = tmp_path / "op.jwt"
    decorated.write_text("-----BEGIN NATS OPERATOR JWT-----\n%s\n------END NATS OPERATOR JWT------\n" % op_jwt)
    o = load_string("operator: %s\nresolver: MEMORY\nresolver_preload: {%s: %s, %s: %s}\n"
                    % (decorated, acc.public, acc_jwt, foreign.public, foreign_jwt))
    assert o.operator_mode and o.trusted_keys[0] == op.public and len(o.trusted_keys) == 2
    assert sorted(o.resolver_preload) == sorted([acc.public, foreign.public])   # verified at lookup
    assert o.unsupported == [] and start_error(o) is None
    with pytest.raises(ConfigError) as e:
        load_string("operator: %s\nresolver: MEMORY\nresolver_preload: {%s: nope}\n" % (op_jwt, acc.public))
    assert str(e.value).endswith("invalid account JWT")
    with pytest.raises(ConfigError, match="error parsing operator JWT"):
        load_string("operator: eyJnot.a.jwt\nresolver: MEMORY\n")
    o = load_string("operator: %s\n" % op_jwt)
    assert start_error(o) == "operators require an account resolver to be configured"
    o = load_string("operator: %s\nresolver: MEMORY\naccounts: {A: {}}\n" % op_jwt)
    assert start_error(o) == "operators do not allow Accounts to be configured directly"
    o = load_string("operator: %s\nresolver: URL(http://localhost:9090/jwt/v1/accounts/)\n"
                    "resolver_preload: {%s: %s}\n" % (op_jwt, acc.public, acc_jwt))
    assert o.unsupported == [] and start_error(o) == (
        "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR")
    exporting, exp_jwt = m.account(op, "EXP", exports=[{"subject": "x.>", "type": "service",
                                                         "service_latency": {"sampling": 50, "results": "lat"}}])
    o = load_string("operator: %s\nresolver: MEMORY\nresolver_preload: {%s: %s}\n"
                    % (op_jwt, exporting.public, exp_jwt))
    assert o.unsupported == []              # latency is tracked (refused only with routes or leafs)
    tracing, trace_jwt = m.account(op, "TRACE", trace={"dest": "trace.x"})
    o = load_string("operator: %s\nresolver: MEMORY\nresolver_preload: {%s: %s}\n"
                    % (op_jwt, tracing.public, trace_jwt))
    assert o.unsupported == []              # traced (tests/core/test_msgtrace.py)


def test_no_system_account_unless_named(any_server, tmp_path):
    """Operator mode without `system_account`: $SYS exists but is not the system account (no
    $SYS services, no events), on natsd as on nats-server; named, it is."""
    from tests.support.servers import http_json
    m = Mint(seed=41)
    op, op_jwt = m.operator("OP")
    sys_acc, sys_jwt = m.account(op, "SYS")
    seen = {}
    for named in (False, True):
        conf = tmp_path / ("named.conf" if named else "plain.conf")
        conf.write_text("operator: %s\n%sresolver: MEMORY\nresolver_preload: {%s: %s}\n"
                        % (op_jwt, "system_account: %s\n" % sys_acc.public if named else "",
                           sys_acc.public, sys_jwt))
        srv = any_server("-c", str(conf), "-m", "-1")
        seen[named] = (http_json(srv.http_port, "/varz").get("system_account"),
                       http_json(srv.http_port, "/accountz").get("system_account"))
        srv.kill()
    assert seen == {False: (None, None), True: (sys_acc.public, sys_acc.public)}
