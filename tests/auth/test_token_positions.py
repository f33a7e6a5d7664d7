"""Exports with an account token position, and the operator's import/export/wildcard limits,
natsd against nats-server. An export `feed.*.data` with `account_token_position: 2` lets an
account import only `feed.<its own name or key>.data` (checked before any activation token);
in account JWTs, more imports or exports than the operator's limits allow, or a wildcard export
where wildcards are not allowed, make the account invalid (nats-io/jwt's validation). Config
files: the same imports authorized or refused with nats-server's errors."""
import asyncio
import re
import subprocess

import nats
import pytest

from tests.support.jwtmint import Mint, creds
from tests.support.servers import nats_server_cmd, natsd_cmd

POSITION_EXPORTS = [
    {"name": "feed", "subject": "feed.*.data", "type": "stream", "account_token_position": 2},
    {"name": "ask", "subject": "ask.*", "type": "service", "account_token_position": 2},
    {"name": "tok", "subject": "tok.*.x", "type": "stream", "account_token_position": 2, "token_req": True}]


def _world(tmp_path):
    m = Mint(seed=97)
    op, _ = m.operator("OP")
    sys_acc, sys_jwt = m.account(op, "SYS")
    op_jwt = m.token(op, op.public, "operator", {"system_account": sys_acc.public}, name="OP")
    exp, exp_jwt = m.account(op, "EXP", exports=POSITION_EXPORTS)
    imp, other = m.key("account"), m.key("account")
    imports = [{"subject": "feed.%s.data" % imp.public, "account": exp.public, "type": "stream"},
               {"subject": "feed.%s.data" % other.public, "account": exp.public, "type": "stream"},
               {"subject": "tok.%s.x" % imp.public, "account": exp.public, "type": "stream"},
               {"subject": "ask.%s" % imp.public, "account": exp.public, "type": "service"},
               {"subject": "ask.%s" % other.public, "account": exp.public, "type": "service",
                "local_subject": "ask.other"}]
    limits = {"subs": -1, "data": -1, "payload": -1, "conn": -1, "leaf": -1}
    imp_jwt = m.token(op, imp.public, "account", {
        "limits": dict(limits, imports=-1, exports=-1, wildcards=True), "imports": imports,
        "default_permissions": {"pub": {}, "sub": {}}}, name="IMP")
    jwts = {sys_acc: sys_jwt, exp: exp_jwt, imp: imp_jwt}
    one_import = [{"subject": "feed.x.data", "account": exp.public, "type": "stream"}]
    accounts = {
        "imports over limit": dict(limits=dict(limits, imports=0, exports=-1), imports=one_import),
        "imports limit left out": dict(limits=dict(limits, exports=-1), imports=one_import),
        "exports over limit": dict(limits=dict(limits, imports=-1, exports=1),
                                   exports=[{"subject": "a", "type": "stream"}, {"subject": "b", "type": "stream"}]),
        "wildcard not allowed": dict(limits=dict(limits, imports=-1, exports=5),
                                     exports=[{"subject": "a.*", "type": "stream"}]),
        "wildcards unchecked without an export limit": dict(limits=dict(limits, imports=-1, exports=-1),
                                                            exports=[{"subject": "a.*", "type": "stream"}]),
        "literal where wildcards are not allowed": dict(limits=dict(limits, imports=-1, exports=5),
                                                       exports=[{"subject": "a.b", "type": "stream"}]),
        "position on a literal": dict(limits=dict(limits, imports=-1, exports=-1, wildcards=True),
                                      exports=[{"subject": "a.b", "type": "stream", "account_token_position": 2}]),
        "position past the end": dict(limits=dict(limits, imports=-1, exports=-1, wildcards=True),
                                      exports=[{"subject": "a.*", "type": "stream", "account_token_position": 3}]),
    }
    paths = {}
    for name, nats_claims in accounts.items():
        key = m.key("account")
        jwts[key] = m.token(op, key.public, "account", dict(nats_claims, default_permissions={"pub": {}, "sub": {}}),
                            name=name)
        paths[name] = key
    for name, key in (("exp", exp), ("imp", imp), *paths.items()):
        u, tok = m.user(key, "u")
        (tmp_path / (name + ".creds")).write_text(creds(tok, u))
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\n"
                    % (op_jwt, "".join("  %s: %s\n" % (k.public, j) for k, j in jwts.items())))
    return str(conf), imp.public, other.public, sorted(accounts)


async def _received(sub):
    out = []
    while True:
        try:
            msg = await sub.next_msg(timeout=0.5)
        except nats.errors.TimeoutError:
            return sorted(out)
        out.append(msg.subject)


async def _flows(url, exp_opts, imp_opts, me, other, publish, requests):
    """EXP publishes `publish` and answers ask.*; IMP listens to everything and asks."""
    exp = await nats.connect(url, **exp_opts)
    imp = await nats.connect(url, **imp_opts)

    async def answer(msg):
        await exp.publish(msg.reply, msg.subject.encode())
    await exp.subscribe("ask.*", cb=answer)
    sub = await imp.subscribe(">")
    await exp.flush()
    await imp.flush()
    for subject in publish:
        await exp.publish(subject, b"x")
    await exp.flush()
    out = {"received": [s for s in await _received(sub) if not s.startswith("_INBOX.")]}
    for subject in requests:
        try:
            out[subject] = (await imp.request(subject, b"?", timeout=1)).data.decode()
        except Exception as e:
            out[subject] = type(e).__name__
    for nc in (exp, imp):
        await nc.close()
    return {k: (v.replace(me, "ME").replace(other, "OTHER") if isinstance(v, str) else
                [s.replace(me, "ME").replace(other, "OTHER") for s in v]) for k, v in out.items()}


async def jwt_scenario(url, tmp_path, me, other, names):
    out = {}
    for name in names:
        try:
            nc = await nats.connect(url, user_credentials=str(tmp_path / (name + ".creds")),
                                    allow_reconnect=False, connect_timeout=3)
            await nc.close()
            out[name] = "connected"
        except Exception as e:
            out[name] = str(e).lower()
    cred = lambda n: {"user_credentials": str(tmp_path / (n + ".creds"))}
    out.update(await _flows(url, cred("exp"), cred("imp"), me, other,
                            ["feed.%s.data" % me, "feed.%s.data" % other, "tok.%s.x" % me],
                            ["ask." + me, "ask.other"]))
    return out


def test_jwt_token_positions_and_limits_match_nats_server(natsd, reference, tmp_path):
    conf, me, other, names = _world(tmp_path)
    theirs = asyncio.run(jwt_scenario(reference("-c", conf).url, tmp_path, me, other, names))
    ours = asyncio.run(jwt_scenario(natsd("-c", conf).url, tmp_path, me, other, names))
    assert ours == theirs
    refused = "nats: 'authorization violation'"
    assert theirs == {
        "exports over limit": refused, "imports limit left out": refused, "imports over limit": refused,
        "literal where wildcards are not allowed": "connected", "position on a literal": refused,
        "position past the end": refused, "wildcard not allowed": refused,
        "wildcards unchecked without an export limit": "connected",
        "received": ["feed.ME.data", "tok.ME.x"], "ask." + me: "ask.ME",
        # refused import: the request reaches only the importer's own `>` subscriber
        "ask.other": "TimeoutError"}


CONFIG = """accounts {
  EXP: { users: [{user: exp, password: exp}],
         exports: [{stream: "feed.*.data", account_token_position: 2},
                   {service: "ask.*", account_token_position: 2}] }
  IMP: { users: [{user: imp, password: imp}],
         imports: [{stream: {account: EXP, subject: "feed.IMP.data"}},
                   {service: {account: EXP, subject: "ask.IMP"}}] }
}
"""


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_config_token_positions(natsd, reference, tmp_path, kind):
    if kind == "nats-server" and nats_server_cmd() is None:
        pytest.skip("nats-server is not installed")
    conf = tmp_path / "a.conf"
    conf.write_text(CONFIG)
    srv = (natsd if kind == "natsd" else reference)("-c", str(conf))
    out = asyncio.run(_flows(srv.url, {"user": "exp", "password": "exp"}, {"user": "imp", "password": "imp"},
                             "IMP", "OTHER", ["feed.IMP.data", "feed.OTHER.data"], ["ask.IMP"]))
    assert out == {"received": ["feed.ME.data"], "ask.IMP": "ask.ME"}


BAD_CONFIGS = {
    "import of another account's token": CONFIG.replace('subject: "feed.IMP.data"', 'subject: "feed.OTHER.data"'),
    "import of the wildcard itself": CONFIG.replace('subject: "ask.IMP"', 'subject: "ask.*"'),
    "position on a literal": 'accounts { A: { exports: [{stream: "foo.bar", account_token_position: 2}] } }\n',
    "position past the end": 'accounts { A: { exports: [{service: "foo.*", account_token_position: 3}] } }\n',
}


def _check_error(cmd, path):
    out = subprocess.run(cmd + ["-t", "-c", path], capture_output=True, text=True, timeout=30)
    # the error texts without their places (nats-server reports these at 1:0; natsd at the
    # import or export)
    return out.returncode, sorted({re.sub(r"^.*?\.conf:\d+:\d+: ", "", line)
                                   for line in (out.stdout + out.stderr).splitlines()
                                   if ".conf:" in line and "configuration file" not in line})


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_config_token_position_errors_match_nats_server(tmp_path, case):
    path = tmp_path / "bad.conf"
    path.write_text(BAD_CONFIGS[case])
    ours = _check_error(natsd_cmd(), str(path))
    if nats_server_cmd() is not None:
        assert ours == _check_error(nats_server_cmd(), str(path))
    assert ours[0] == 1
