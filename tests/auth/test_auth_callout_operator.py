"""Auth callout in operator mode, natsd against nats-server: account AUTH's JWT delegates its
users (`authorization { auth_users, allowed_accounts }`) to a service written here. Clients log
in with a bearer "sentinel" user of AUTH (their client name says who they are); the service answers with user JWTs
issued by APP (allowed), by AUTH itself, by an account that is not allowed, or with an error."""
import asyncio

import nats

from natsd.auth.jwt import claims
from tests.auth.test_auth_callout import error_after_publish, login_outcome
from tests.support.jwtmint import Mint, creds

LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
          "conn": -1, "leaf": -1}


def build(tmp_path, app_limits=None, extra=""):
    """-> (mint, config file, the accounts' keys, tmp_path); `app_limits` added to APP's limits
    (JetStream for MQTT), `extra` to the config."""
    m = Mint(seed=61)
    op, _ = m.operator("OP")
    sys_acc, auth, app, other = (m.key("account") for _ in range(4))
    svc_user = m.key("user")

    def account(key, name, limits=None, **nats):
        return m.token(op, key.public, "account", {"limits": dict(LIMITS, **(limits or {})),
                                                  "default_permissions": {"pub": {}, "sub": {}}, **nats}, name=name)
    jwts = {sys_acc.public: account(sys_acc, "SYS"), app.public: account(app, "APP", app_limits),
            other.public: account(other, "OTHER"),
            auth.public: account(auth, "AUTH", authorization={"auth_users": [svc_user.public],
                                                              "allowed_accounts": [app.public]})}
    op_jwt = m.token(op, op.public, "operator", {"system_account": sys_acc.public}, name="OP")
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\n%s\n"
                    % (op_jwt, "".join("  %s: %s\n" % kv for kv in jwts.items()), extra))
    svc_jwt = m.token(auth, svc_user.public, "user", {"pub": {}, "sub": {}, "subs": -1, "data": -1,
                                                       "payload": -1}, name="svc")
    (tmp_path / "svc.creds").write_text(creds(svc_jwt, svc_user))
    sentinel = m.key("user")
    sentinel_jwt = m.token(auth, sentinel.public, "user", {
        "pub": {"deny": [">"]}, "sub": {"deny": [">"]}, "subs": -1, "data": -1, "payload": -1,
        "bearer_token": True}, name="sentinel")
    (tmp_path / "sentinel.creds").write_text(creds(sentinel_jwt, sentinel))
    return m, str(conf), {"auth": auth, "app": app, "other": other}, tmp_path


def answer(m, keys, msg):
    req = claims.decode_kind(msg.data.decode(), "authorization_request")
    n = req.nats
    opts = n["connect_opts"]
    user = opts.get("name") or opts.get("user")         # an MQTT client has no name: its user name
    user_key, server = n["user_nkey"], n["server_id"]["id"]
    perms = {"pub": {"allow": ["app.>", "_INBOX.>"]}, "sub": {"allow": [">"]}, "subs": -1, "data": -1,
             "payload": -1}
    issuer = {"alice": keys["app"], "bob": keys["auth"], "eve": keys["other"]}.get(user)
    if issuer is None:
        body = {"error": "no such user %s" % user}
    else:
        body = {"jwt": m.token(issuer, user_key, "user", perms, name=user)}
    return m.token(keys["auth"], user_key, "authorization_response", body, aud=server).encode(), req


async def scenario(url, m, keys, tmp):
    svc = await nats.connect(url, user_credentials=str(tmp / "svc.creds"))
    requests = []

    async def handle(msg):
        out, req = answer(m, keys, msg)
        requests.append(req)
        await svc.publish(msg.reply, out)
    await svc.subscribe("$SYS.REQ.USER.AUTH", cb=handle)
    await svc.flush()
    out = {}
    for user in ("alice", "bob", "eve", "mallory"):
        out[user] = await login_outcome(url, user_credentials=str(tmp / "sentinel.creds"), name=user)
    out["requests"] = [(r.subject == keys["auth"].public, r.nats["connect_opts"].get("name"),
                        sorted(r.nats["connect_opts"])) for r in requests]
    out["service publishing requests"] = await error_after_publish(svc, "$SYS.REQ.USER.AUTH")
    await svc.close()
    return out


def test_operator_auth_callout_matches_nats_server(natsd, reference, tmp_path):
    m, conf, keys, tmp = build(tmp_path)
    theirs = asyncio.run(scenario(reference("-c", conf).url, m, keys, tmp))
    ours = asyncio.run(scenario(natsd("-c", conf).url, m, keys, tmp))
    assert ours == theirs
    assert theirs["alice"][0] == "connected" and theirs["bob"][0] == "connected"
    assert "authorization violation" in theirs["eve"] and "authorization violation" in theirs["mallory"]
