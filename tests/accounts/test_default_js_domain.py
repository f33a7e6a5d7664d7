"""`default_js_domain: { <account>: <domain> }`, run against nats-server 2.15.1 and natsd:

- the start-up checks nats-server makes of it (an account that does not exist, one with
  JetStream, the system account, a domain that makes no subject, the wrong types), with the
  same text and exit status;
- an account given a domain has its `$JS.API.…`, `$KV.>` and `$OBJ.>` requests sent to
  `$JS.<domain>.API.…`, and nothing else of its traffic changes;
- the case it is for: a leaf server without JetStream whose account reaches the hub's
  JetStream, by its domain or (domain "") through the default one, with clients that know
  nothing of domains (nats-py's plain `jetstream()` context), and the warning both log.
"""
import asyncio
import subprocess

import nats
import pytest

from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll
from tools.serverproc import free_port

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

KINDS = ["natsd", "nats-server"]
WARNING = "[WRN] The option `default_js_domain` is a temporary backwards compatibility measure and will be removed"


def _cmd(kind):
    return list(natsd_cmd() if kind == "natsd" else nats_server_cmd())


BAD = {
    "no such account": "default_js_domain: { NOPE: hub }\n",
    "account with JetStream": "accounts { A { jetstream: enabled } }\ndefault_js_domain: { A: hub }\n",
    "domain not a subject": 'accounts { A {}, B {} }\ndefault_js_domain: { A: "hub", B: "bad domain" }\n',
    "system account": "accounts { A {}, S {} }\nsystem_account: S\ndefault_js_domain: { A: hub, S: x }\n",
    "not a map": "default_js_domain: hub\n",
    "not a string": "accounts { A {} }\ndefault_js_domain: { A: 1 }\n",
    "operator mode, not a key": None,       # made below: needs an operator JWT
}


def _operator_conf():
    from tests.support.jwtmint import Mint
    _, op = Mint().operator()
    return "operator: %s\nresolver: MEMORY\ndefault_js_domain: { A: hub }\n" % op


@pytest.mark.parametrize("case", list(BAD))
def test_refused_configs_as_on_nats_server(tmp_path, case):
    text = BAD[case] if BAD[case] is not None else _operator_conf()
    conf = tmp_path / "c.conf"
    conf.write_text("port: -1\n" + text)
    out = {}
    for kind in KINDS:
        r = subprocess.run(_cmd(kind) + ["-c", "c.conf"], cwd=tmp_path, capture_output=True, text=True, timeout=20)
        out[kind] = (r.returncode, r.stderr.replace("natsd:", "nats-server:"))
    assert out["natsd"] == out["nats-server"], case
    assert out["natsd"][0] == 1 and ("default_js_domain" in out["natsd"][1] or ":3:1: " in out["natsd"][1]), out


ACCOUNTS = """accounts {
  A: { users: [{user: a, password: a}] }
  B: { users: [{user: b, password: b}] }
  C: { users: [{user: c, password: c}] }
}
default_js_domain: { A: hub, B: "" }
"""
PROBES = ["$JS.API.INFO", "$JS.API.STREAM.INFO.S", "$JS.API.CONSUMER.INFO.S.C", "$JS.API.DIRECT.GET.S",
          "$JS.API.META.LEADER.STEPDOWN", "$JS.API.SERVER.REMOVE", "$JS.API.ACCOUNT.PURGE.A",
          "$KV.b.k", "$OBJ.o.c", "$JS.API.STREAM", "$JS.API.OTHER.x", "$JS.FC.S.x", "$KVX.b", "foo.bar"]


def _start(kind, tmp_path, name, text):
    conf = tmp_path / ("%s.conf" % name)
    conf.write_text(text)
    proc = ServerProcess(_cmd(kind) + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1", "-m", str(free_port())],
                         cwd=str(tmp_path))
    proc.wait_ready()
    return proc


async def _deliveries(url, user):
    """What a subscriber to everything in the account receives for each probe published (up
    to a marker published after it)."""
    nc = await nats.connect(url, user=user, password=user)
    sub = await nc.subscribe(">")
    await nc.flush()
    out = {}
    for p in PROBES:
        await nc.publish(p, b"x")
        await nc.publish("end.marker", b"")
        got = []
        while (m := await sub.next_msg(timeout=5)).subject != "end.marker":
            got.append(m.subject)
        out[p] = got
    await nc.close()
    return out


def test_an_accounts_requests_go_to_its_domain(tmp_path):
    """Account A (domain hub): each JetStream, KV and object-store subject arrives as
    `$JS.hub.API.…`; B (domain "") and C (none) are untouched; the same on both servers."""
    got = {}
    for kind in KINDS:
        srv = _start(kind, tmp_path, kind, "port: -1\n" + ACCOUNTS)
        try:
            got[kind] = {u: asyncio.run(_deliveries(srv.url, u)) for u in ("a", "b", "c")}
            assert WARNING in srv.log, kind
        finally:
            srv.kill()
    assert got["natsd"] == got["nats-server"]
    a = got["natsd"]["a"]
    assert a["$JS.API.STREAM.INFO.S"] == ["$JS.hub.API.STREAM.INFO.S"] and a["$KV.b.k"] == ["$JS.hub.API.$KV.b.k"]
    assert a["foo.bar"] == ["foo.bar"] and a["$JS.API.OTHER.x"] == ["$JS.API.OTHER.x"]
    assert got["natsd"]["b"] == got["natsd"]["c"] == {p: [p] for p in PROBES}


def test_an_operator_modes_account_gets_the_rules_when_registered(tmp_path):
    """Operator mode: the account (its JWT without JetStream) gets the rules when its first
    user logs in, and both servers log them; the same deliveries as nats-server."""
    from tests.support.jwtmint import Mint, creds
    mint = Mint(seed=7)
    op, op_jwt = mint.operator()
    sys_key, sys_jwt = mint.account(op, name="SYS")
    acc, acc_jwt = mint.account(op, name="A")
    user, user_jwt = mint.user(acc)
    (tmp_path / "u.creds").write_text(creds(user_jwt, user))
    conf = ("port: -1\noperator: %s\nsystem_account: %s\nresolver: MEMORY\n"
            "resolver_preload: { %s: %s, %s: %s }\ndefault_js_domain: { %s: hub }\n"
            % (op_jwt, sys_key.public, sys_key.public, sys_jwt, acc.public, acc_jwt, acc.public))

    async def probe(url):
        nc = await nats.connect(url, user_credentials=str(tmp_path / "u.creds"))
        sub = await nc.subscribe(">")
        await nc.flush()
        out = {}
        for p in ("$JS.API.INFO", "$KV.b.k", "foo.bar"):
            await nc.publish(p, b"x")
            out[p] = (await sub.next_msg(timeout=5)).subject
        await nc.close()
        return out
    got = {}
    for kind in KINDS:
        srv = _start(kind, tmp_path, kind, conf)
        try:
            got[kind] = asyncio.run(probe(srv.url))
            assert WARNING in srv.log
            assert poll(lambda: 'Adding default domain mapping "$KV.>" -> "$JS.hub.API.$KV.>" to account "%s"'
                        % acc.public in srv.log, 5), (kind, srv.log)
        finally:
            srv.kill()
    assert got["natsd"] == got["nats-server"] == {
        "$JS.API.INFO": "$JS.hub.API.INFO", "$KV.b.k": "$JS.hub.API.$KV.b.k", "foo.bar": "foo.bar"}


HUB = """server_name: hub
jetstream { store_dir: "%(dir)s/hub", %(domain)s }
leafnodes { port: %(leaf_port)d }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
LEAF = """server_name: leaf
leafnodes { remotes: [ { url: "nats-leaf://a:a@127.0.0.1:%(leaf_port)d", account: A } ] }
accounts {
  A: { users: [{user: a, password: a}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
%(default)s
"""


async def _use_hub_jetstream(url):
    """A stream, a publish and a KV put/get from the leaf with a domain-less context: what
    each step answered (the error's text when it failed)."""
    nc = await nats.connect(url, user="a", password="a")
    js = nc.jetstream(timeout=2)
    out = {}
    try:
        info = await js.add_stream(name="S", subjects=["s.>"])
        out["stream"] = info.config.name
        ack = await js.publish("s.1", b"one")
        out["ack"] = (ack.stream, ack.seq, ack.domain)
        kv = await js.create_key_value(bucket="b")
        await kv.put("k", b"v")
        out["kv"] = (await kv.get("k")).value
    except Exception as e:          # the outcome is compared, failures included
        out["error"] = type(e).__name__
    await nc.close()
    return out


def _leaf_scenario(hub_kind, leaf_kind, tmp_path, domain, default):
    tmp_path.mkdir()
    leaf_port = free_port()
    hub = _start(hub_kind, tmp_path, "hub", HUB % {"dir": tmp_path, "leaf_port": leaf_port,
                                                   "domain": 'domain: "%s"' % domain if domain else ""})
    leaf = None
    try:
        leaf = _start(leaf_kind, tmp_path, "leaf", LEAF % {
            "leaf_port": leaf_port, "default": "default_js_domain: { A: \"%s\" }" % default if default is not None else ""})
        assert poll(lambda: http_json(leaf.http_port, "/varz").get("leafnodes") == 1, 10), leaf.log
        return asyncio.run(_use_hub_jetstream(leaf.url)), leaf.log
    finally:
        for s in (leaf, hub):
            if s is not None:
                s.kill()


@pytest.mark.parametrize("domain,default", [("hub", "hub"), ("", ""), ("", None)],
                         ids=["domain hub", "default domain", "no default_js_domain"])
def test_a_leaf_without_jetstream_reaches_the_hubs(tmp_path, domain, default):
    """The leaf has no JetStream; its account A is given the hub's domain (or "", the hub
    having none). A client of the leaf that knows no domain creates a stream, publishes and
    uses a KV bucket in the hub's JetStream (the bucket's puts only through a domain). Without
    `default_js_domain` the leaf keeps the JetStream API off the link. natsd as the leaf and as
    both, against nats-server as both."""
    ref, ref_log = _leaf_scenario("nats-server", "nats-server", tmp_path / "ref", domain, default)
    for hub_kind in ("nats-server", "natsd"):
        got, log = _leaf_scenario(hub_kind, "natsd", tmp_path / hub_kind, domain, default)
        assert got == ref, (hub_kind, got, ref)
        assert (WARNING in log) == (WARNING in ref_log) == (default is not None)
    if default is None:
        assert "stream" not in ref and "error" in ref, ref
    else:
        assert ref["ack"] == ("S", 1, domain or None), ref
    # a KV put goes to `$KV.b.k`: with a domain it is mapped into the hub's API; without, the
    # hub keeps `$KV.>` interest off the link and the put finds no stream (nats-server's rule)
    assert ref.get("kv") == (b"v" if default == "hub" else None), ref
