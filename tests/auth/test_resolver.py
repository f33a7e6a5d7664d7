"""Account resolvers of operator mode, natsd against nats-server with the same JWTs
(tests/support/jwtmint.py) and the same nats-py clients.

The FULL directory resolver: an account unknown until its JWT is pushed through
`$SYS.REQ.CLAIMS.UPDATE`, refused updates (garbage, wrong subject), an untrusted account stored
but unusable, CLAIMS.LOOKUP / LIST / PACK, live updates reaching connected clients (a lower
connection limit closes the newest connection, a revocation disconnects the user), deletes
(operator-signed requests; refused ones), and the directory found again after a restart.
The MEMORY resolver: an update for an account nobody uses is skipped, one for a live account
is applied. And the resolver config errors nats-server gives.
"""
import asyncio
import json
import os
import subprocess
import time

import nats
import pytest

from natsd.conf import ConfigError, load_string
from tests.support.jwtmint import Mint, creds
from tests.support.servers import nats_server_cmd

LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
          "conn": -1, "leaf": -1}


class World:
    """One operator with a system account, account ACC with user u, an untrusted account."""

    def __init__(self, tmp_path):
        self.m = m = Mint(seed=23)
        self.tmp = tmp_path
        self.op, _ = m.operator("OP")
        self.sys = m.key("account")
        self.sys_jwt = self.account_jwt(self.sys, "SYS")
        self.op_jwt = m.token(self.op, self.op.public, "operator", {"system_account": self.sys.public},
                              name="OP")
        self.acc = m.key("account")
        self.acc_jwt = self.account_jwt(self.acc, "ACC")
        other, _ = m.operator("OTHER")
        self.foreign, self.foreign_jwt = m.account(other, "FOREIGN")
        self.signer = m.key("account")
        su, stok = m.user(self.acc, "signed", signer=self.signer)
        self.signed_creds = str(tmp_path / "signed.creds")
        (tmp_path / "signed.creds").write_text(creds(stok, su))
        self.sys_creds = self.user(self.sys, "sysuser")
        self.u_creds = self.user(self.acc, "u")
        self.f_creds = self.user(self.foreign, "f")

    def account_jwt(self, key, name, iat=None, **nats):
        claims = {"limits": dict(LIMITS, **nats.pop("limits", {})),
                  "default_permissions": {"pub": {}, "sub": {}}, **nats}
        reg = {"iat": iat} if iat else {}
        return self.m.token(self.op, key.public, "account", claims, name=name, **reg)

    def user(self, account, name):
        u, tok = self.m.user(account, name)
        path = self.tmp / (name + ".creds")
        path.write_text(creds(tok, u))
        self.__dict__[name + "_key"] = u
        return str(path)

    def conf(self, name, resolver):
        path = self.tmp / (name + ".conf")
        path.write_text("operator: %s\nsystem_account: %s\nresolver: %s\nresolver_preload: {\n  %s: %s\n}\n"
                        % (self.op_jwt, self.sys.public, resolver, self.sys.public, self.sys_jwt))
        return str(path)


def _answer(msg):
    """A CLAIMS.* answer without its server envelope."""
    body = json.loads(msg.data)
    assert body.pop("server")["id"]
    return body


async def _connect(url, path):
    async def on_error(e):
        pass
    try:
        return await nats.connect(url, user_credentials=path, allow_reconnect=False, connect_timeout=3,
                                  error_cb=on_error)
    except Exception as e:
        return str(e).lower() or type(e).__name__


async def _connect_close(url, path):
    nc = await _connect(url, path)
    if isinstance(nc, str):
        return nc
    await nc.close()
    return "connected"


async def _connect_once_room(url, path, timeout=5.0):
    """Connect as soon as the account has room again: a client's close reaches the server a
    moment after the client is done with it, and the account counts that connection until then."""
    deadline = time.monotonic() + timeout
    while True:
        nc = await _connect(url, path)
        if not (isinstance(nc, str) and "maximum account active connections" in nc) or time.monotonic() > deadline:
            return nc
        await asyncio.sleep(0.02)


async def _closed(nc, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not nc.is_closed and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return nc.is_closed


async def full_scenario(url, w):
    out = {"unknown account": await _connect(url, w.u_creds)}
    sc = await _connect(url, w.sys_creds)
    assert not isinstance(sc, str), sc

    async def req(subject, payload):
        return _answer(await sc.request(subject, payload.encode(), timeout=3))
    out["push"] = await req("$SYS.REQ.CLAIMS.UPDATE", w.acc_jwt)
    out["garbage"] = await req("$SYS.REQ.CLAIMS.UPDATE", "garbage")
    out["wrong subject"] = await req("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.sys.public, w.acc_jwt)
    out["untrusted push"] = await req("$SYS.REQ.CLAIMS.UPDATE", w.foreign_jwt)
    out["untrusted user"] = await _connect(url, w.f_creds)
    out["list"] = sorted((await req("$SYS.REQ.CLAIMS.LIST", ""))["data"])
    look = await sc.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % w.acc.public, b"", timeout=3)
    out["lookup"] = look.data.decode() == w.acc_jwt
    missing = w.m.key("account").public
    out["lookup missing"] = (await sc.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % missing, b"",
                                              timeout=3)).data
    out["pack"] = await pack(sc, b"")
    out["pack, same hash"] = await pack(sc, await store_hash(sc))

    # live limits: two clients, then at most one connection
    first = await _connect(url, w.u_creds)
    second = await _connect(url, w.u_creds)
    lower = w.account_jwt(w.acc, "ACC", limits={"conn": 1}, iat=int(time.time()) + 1)
    out["limit update"] = await req("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public, lower)
    out["newest closed"] = await _closed(second)
    out["oldest kept"] = first.is_connected
    out["limit errors"] = [str(first.last_error), str(second.last_error)]
    out["third"] = await _connect(url, w.u_creds)

    # a revocation disconnects the user
    await first.close()
    user = await _connect_once_room(url, w.u_creds)
    assert not isinstance(user, str), user
    revoke = w.account_jwt(w.acc, "ACC", iat=int(time.time()) + 2,
                           revocations={w.u_key.public: int(time.time()) + 60})
    out["revoke"] = await req("$SYS.REQ.CLAIMS.UPDATE", revoke)
    out["revoked closed"] = await _closed(user)
    out["revoked error"] = str(user.last_error)
    out["revoked reconnect"] = await _connect(url, w.u_creds)

    # deletes: refused, then done
    unrevoked = w.account_jwt(w.acc, "ACC", iat=int(time.time()) + 3)
    out["unrevoke"] = await req("$SYS.REQ.CLAIMS.UPDATE", unrevoked)
    user = await _connect(url, w.u_creds)
    by_account = w.m.token(w.acc, w.acc.public, "generic", {"accounts": [w.acc.public]})
    out["delete by account"] = await req("$SYS.REQ.CLAIMS.DELETE", by_account)
    sys_del = w.m.token(w.op, w.op.public, "generic", {"accounts": [w.sys.public]})
    out["delete system"] = await req("$SYS.REQ.CLAIMS.DELETE", sys_del)
    bad = w.m.token(w.op, w.op.public, "generic", {"accounts": ["nope"]})
    out["delete malformed"] = await req("$SYS.REQ.CLAIMS.DELETE", bad)
    good = w.m.token(w.op, w.op.public, "generic", {"accounts": [w.acc.public]})
    out["delete"] = await req("$SYS.REQ.CLAIMS.DELETE", good)
    out["deleted user closed"] = await _closed(user)
    out["deleted user error"] = str(user.last_error)
    out["after delete"] = await _connect(url, w.u_creds)
    out["list after delete"] = sorted((await req("$SYS.REQ.CLAIMS.LIST", ""))["data"])
    await sc.close()
    return out


async def store_hash(sc):
    """The hash of the store, from a server's answer to our all-zero one: XOR of SHA-256s."""
    import hashlib
    lines = await pack(sc, b"")
    h = bytearray(32)
    for line in lines:
        for i, b in enumerate(hashlib.sha256(line.split("|", 1)[1].encode()).digest()):
            h[i] ^= b
    return bytes(h)


async def pack(sc, their_hash):
    """Every message answering a CLAIMS.PACK, up to the empty one that ends it."""
    inbox = sc.new_inbox()
    sub = await sc.subscribe(inbox)
    await sc.publish("$SYS.REQ.CLAIMS.PACK", their_hash, reply=inbox)
    out = []
    while True:
        msg = await sub.next_msg(timeout=3)
        if not msg.data:
            break
        out.append(msg.data.decode())
    await sub.unsubscribe()
    return sorted(out)


def _run_full(start, w, name):
    jwt_dir = w.tmp / (name + "-jwt")
    jwt_dir.mkdir()
    conf = w.conf(name, "{ type: full, dir: '%s', allow_delete: true, timeout: '200ms' }" % jwt_dir)
    srv = start("-c", conf)
    out = asyncio.run(full_scenario(srv.url, w))
    out["files"] = sorted(os.listdir(jwt_dir))
    srv.stop()
    # the directory is what a restart finds again: the system account's user still logs in
    srv = start("-c", conf)
    out["after restart"] = asyncio.run(_connect_close(srv.url, w.sys_creds))
    srv.kill()
    return out


def test_full_resolver_matches_nats_server(natsd, reference, tmp_path):
    w = World(tmp_path)
    theirs = _run_full(reference, w, "ref")
    ours = _run_full(natsd, w, "natsd")
    assert ours == theirs
    # what nats-server does, spelled out
    assert theirs["push"] == {"data": {"account": w.acc.public, "code": 200, "message": "jwt updated"}}
    assert theirs["newest closed"] and theirs["oldest kept"]
    assert theirs["revoked closed"] and theirs["deleted user closed"]
    assert "revoked" in theirs["revoked error"] and "maximum account" in theirs["limit errors"][1]
    assert theirs["files"] == sorted([w.sys.public + ".jwt", w.foreign.public + ".jwt",
                                      w.acc.public + ".jwt.deleted"])


async def memory_scenario(url, w):
    sc = await _connect(url, w.sys_creds)

    async def update(token):
        return _answer(await sc.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public,
                                        token.encode(), timeout=3))
    out = {"not live": await update(w.account_jwt(w.acc, "ACC", iat=int(time.time()) + 1))}
    first = await _connect(url, w.u_creds)
    second = await _connect(url, w.u_creds)
    out["live"] = await update(w.account_jwt(w.acc, "ACC", limits={"conn": 1}, iat=int(time.time()) + 2))
    out["newest closed"] = await _closed(second)
    out["oldest kept"] = first.is_connected
    out["empty"] = await update("")
    await first.close()
    # a user of a signing key the account's new JWT no longer lists is disconnected
    out["with signer"] = await update(w.account_jwt(w.acc, "ACC", iat=int(time.time()) + 3,
                                                    signing_keys=[w.signer.public]))
    signed = await _connect(url, w.signed_creds)
    out["signed user connected"] = not isinstance(signed, str)
    out["without signer"] = await update(w.account_jwt(w.acc, "ACC", iat=int(time.time()) + 4))
    out["signed user closed"] = await _closed(signed)
    await sc.close()
    return out


def test_memory_resolver_updates_match_nats_server(natsd, reference, tmp_path):
    w = World(tmp_path)
    path = tmp_path / "mem.conf"
    path.write_text("operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n"
                    % (w.op_jwt, w.sys.public, w.sys.public, w.sys_jwt, w.acc.public, w.acc_jwt))
    theirs = asyncio.run(memory_scenario(reference("-c", str(path)).url, w))
    ours = asyncio.run(memory_scenario(natsd("-c", str(path)).url, w))
    assert ours == theirs
    assert theirs["not live"]["data"]["message"] == "jwt update skipped"
    assert theirs["live"]["data"]["message"] == "jwt updated" and theirs["newest closed"]
    assert theirs["signed user connected"] and theirs["signed user closed"]


RESOLVER_ERRORS = {
    "cache with allow_delete": ("{ type: cache, dir: '%(dir)s', allow_delete: true }",
                                "CACHE does not accept allow_delete"),
    "cache with interval": ("{ type: cache, dir: '%(dir)s', interval: '2m' }", "CACHE does not accept sync"),
    "full with ttl": ("{ type: full, dir: '%(dir)s', ttl: '2m' }", "FULL does not accept ttl"),
    "hard_delete alone": ("{ type: full, dir: '%(dir)s', hard_delete: true }",
                          "hard_delete has no effect without delete"),
    "no dir": ("{ type: full }", "dir has no value and needs to point to a directory"),
    "dir is a file": ("{ type: full, dir: '%(file)s' }", "dir needs to point to an accessible directory"),
    "unknown type": ("{ type: other, dir: '%(dir)s' }", "error parsing account resolver, should be MEM or "),
    "not a resolver": ("NOPE", "error parsing account resolver, should be MEM or "),
}


@pytest.mark.parametrize("case", sorted(RESOLVER_ERRORS))
def test_resolver_config_errors_match_nats_server(tmp_path, case):
    text, message = RESOLVER_ERRORS[case]
    w = World(tmp_path)
    (tmp_path / "afile").write_text("x")
    resolver = text % {"dir": tmp_path, "file": tmp_path / "afile"}
    conf = "operator: %s\nresolver: %s\n" % (w.op_jwt, resolver)
    with pytest.raises(ConfigError) as e:
        load_string(conf)
    assert message in str(e.value)
    cmd = nats_server_cmd()
    if cmd is not None:
        path = tmp_path / "bad.conf"
        path.write_text(conf)
        res = subprocess.run(cmd + ["-t", "-c", str(path)], capture_output=True, text=True, timeout=30)
        assert res.returncode != 0 and message in res.stderr + res.stdout


def test_resolver_configs_load(tmp_path):
    w = World(tmp_path)
    o = load_string("operator: %s\nresolver: { type: cache, dir: '%s', limit: 10, ttl: '1h', timeout: '3s' }\n"
                    % (w.op_jwt, tmp_path))
    r = o.resolver
    assert (r.kind, r.limit, r.ttl, r.timeout, r.delete) == ("CACHE", 10, 3600.0, 3.0, "")
    o = load_string("operator: %s\nresolver: { type: full, dir: '%s', allow_delete: true, hard_delete: true,"
                    " interval: '2m' }\n" % (w.op_jwt, tmp_path))
    assert (o.resolver.kind, o.resolver.delete, o.resolver.interval) == ("FULL", "hard", 120.0)
    assert o.unsupported == []
    assert load_string("operator: %s\nresolver: mem\n" % w.op_jwt).resolver.kind == "MEMORY"
    o = load_string("operator: %s\nresolver: URL(http://127.0.0.1:9/jwt/v1/accounts/)\n" % w.op_jwt)
    assert (o.resolver.kind, o.resolver.url, o.unsupported) == ("URL", "http://127.0.0.1:9/jwt/v1/accounts/", [])


class _JwtServer:
    """An account server over HTTP: GET <prefix><key> answers the JWT or 404; records paths."""

    def __init__(self, jwts, base_ok=True, tls=None):
        import http.server
        import threading
        self.paths = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.paths.append(self.path)
                key = self.path.rsplit("/", 1)[-1]
                token = jwts.get(key)
                self.send_response(200 if token or (base_ok and not key) else 404)
                self.end_headers()
                if token:
                    self.wfile.write(token.encode())

            def log_message(self, *args):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:                 # (cert_file, key_file): HTTPS
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = "%s://127.0.0.1:%d/jwt/v1/accounts/" % (scheme, self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


async def url_scenario(url, w):
    out = {"user": await _connect_close(url, w.u_creds),
           "unknown account": await _connect_close(url, w.f_creds),
           "again": await _connect_close(url, w.u_creds)}
    return out


def test_url_resolver_matches_nats_server(natsd, reference, tmp_path):
    w = World(tmp_path)
    accounts = _JwtServer({w.sys.public: w.sys_jwt, w.acc.public: w.acc_jwt})
    try:
        conf = tmp_path / "url.conf"
        conf.write_text('operator: %s\nsystem_account: %s\nresolver: URL("%s")\n'
                        % (w.op_jwt, w.sys.public, accounts.url))
        seen = []
        for start in (reference, natsd):
            accounts.paths.clear()
            out = asyncio.run(url_scenario(start("-c", str(conf)).url, w))
            out["fetched"] = sorted(set(accounts.paths))
            seen.append(out)
    finally:
        accounts.close()
    theirs, ours = seen
    assert ours == theirs
    assert theirs["user"] == "connected" and theirs["unknown account"] != "connected"
    assert "/jwt/v1/accounts/" + w.acc.public in theirs["fetched"]


@pytest.mark.parametrize("with_ca", [True, False])
def test_https_url_resolver_with_resolver_tls(any_server, tmp_path, pki, with_ca):
    """`resolver_tls { ca_file }` lets the URL resolver trust an HTTPS account server signed
    by that CA; without it the server does not trust it and stops at start."""
    w = World(tmp_path)
    accounts = _JwtServer({w.sys.public: w.sys_jwt, w.acc.public: w.acc_jwt}, tls=pki["server"])
    try:
        conf = tmp_path / "url.conf"
        conf.write_text('operator: %s\nsystem_account: %s\nresolver: URL("%s")\n%s'
                        % (w.op_jwt, w.sys.public, accounts.url,
                           'resolver_tls { ca_file: "%s" }\n' % pki["ca"] if with_ca else ""))
        srv = any_server("-c", str(conf), wait=with_ca)
        if with_ca:
            out = asyncio.run(_connect_close(srv.url, w.u_creds))
            assert out == "connected"
        else:
            assert srv.proc.wait(30) == 1
            assert 'could not fetch <"%s">: ' % accounts.url in srv.log
    finally:
        accounts.close()


@pytest.mark.parametrize("key", ["account_resolver", "accounts_resolver"])
def test_resolver_aliases(any_server, tmp_path, key):
    """nats-server reads `account_resolver` and `accounts_resolver` as `resolver`."""
    w = World(tmp_path)
    conf = tmp_path / "alias.conf"
    conf.write_text("operator: %s\nsystem_account: %s\n%s: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n"
                    % (w.op_jwt, w.sys.public, key, w.sys.public, w.sys_jwt, w.acc.public, w.acc_jwt))
    srv = any_server("-c", str(conf))
    assert asyncio.run(_connect_close(srv.url, w.u_creds)) == "connected"


def test_unreachable_url_resolver_stops_the_server_as_nats_server(tmp_path):
    """nats-server asks the base URL at start; anything but 200 stops it with its text."""
    import subprocess
    import sys
    w = World(tmp_path)
    accounts = _JwtServer({}, base_ok=False)
    try:
        conf = tmp_path / "url.conf"
        conf.write_text('operator: %s\nresolver: URL("%s")\n' % (w.op_jwt, accounts.url))
        outs = []
        for cmd in ([sys.executable, "-m", "natsd"], nats_server_cmd()):
            if cmd is None:
                continue
            r = subprocess.run(cmd + ["-c", str(conf), "-p", "-1"], capture_output=True, text=True, timeout=30)
            outs.append((r.returncode, r.stderr.strip()))
    finally:
        accounts.close()
    assert outs[0] == (1, 'nats-server: could not fetch <"%s">: 404 Not Found' % accounts.url)
    assert all(o == outs[0] for o in outs)


def test_directory_merge_takes_newer_jwts_and_refuses_bad_lines(tmp_path):
    """What a CLAIMS.PACK answer does to a FULL directory (nats-server's DirJWTStore.Merge)."""
    from natsd.options import ResolverOpts
    from natsd.auth.jwt.resolver import DirResolver, ResolverError
    w = World(tmp_path)
    changed = []
    store = DirResolver(ResolverOpts(kind="FULL", dir=str(tmp_path / "jwt")), on_change=changed.append)
    older = w.m.token(w.op, w.acc.public, "account", {}, name="ACC", iat=int(time.time()) - 60)
    store.merge("%s|%s\n\n%s|%s" % (w.acc.public, w.acc_jwt, w.sys.public, w.sys_jwt))
    assert store.keys() == sorted([w.acc.public, w.sys.public]) and len(changed) == 2
    store.merge("%s|%s" % (w.acc.public, older))          # older than what is held: kept as is
    assert store.held(w.acc.public) == w.acc_jwt and len(changed) == 2
    with pytest.raises(ResolverError, match="didn't contain 2 entries"):
        store.merge("no separator")
    with pytest.raises(ResolverError, match="not a valid public account key"):
        store.merge("%s|%s" % (w.op.public, w.acc_jwt))


async def untrusted_scenario(url, w):
    nc = await nats.connect(url, user="sys", password="sys")
    out = {}
    for name, subject, token in (
            ("config account", "$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public, w.acc_jwt),
            ("older subject", "$SYS.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public, w.acc_jwt),
            ("not here", "$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.signer.public,
             w.account_jwt(w.signer, "SIGNER")),
            ("other subject", "$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.signer.public, w.acc_jwt),
            ("empty", "$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public, ""),
            ("not a jwt", "$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE" % w.acc.public, "nope")):
        out[name] = _answer(await nc.request(subject, token.encode(), timeout=3))
    await nc.close()
    return out


def test_claim_updates_without_an_operator_change_nothing_as_on_nats_server(natsd, reference, tmp_path):
    """No operator, no trusted JWT: an update of a config account named by the JWT's key is
    refused, any other skipped, malformed ones answered with what is wrong."""
    w = World(tmp_path)
    path = tmp_path / "plain.conf"
    path.write_text("system_account: SYS\naccounts {\n  SYS: { users: [{user: sys, password: sys}] }\n"
                    "  %s: { users: [{user: a, password: a}] }\n}\n" % w.acc.public)
    theirs = asyncio.run(untrusted_scenario(reference("-c", str(path)).url, w))
    ours = asyncio.run(untrusted_scenario(natsd("-c", str(path)).url, w))
    assert ours == theirs
    assert theirs["config account"]["error"]["description"] == \
        "jwt update resulted in error - account validation failed"
    assert theirs["not here"]["data"]["message"] == "jwt update skipped"
