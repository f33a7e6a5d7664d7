"""Leaf node links for the tests: the seed-000 `accounts.conf`/`hub.conf`/`leaf.conf` written
to a directory with free ports (with JetStream domains or TLS links if asked), a Pair that
starts the hub and the leaf, each either natsd or the reference nats-server, and waits until
both leaf connections (SYS and ACC) are up, and tells when a subscription's interest has
crossed the link (its /leafz); COMBOS, the kinds on either side the leaf tests run, and
on_linked_pair, a test on each of them with a client on either side. tests/leaf/conftest.py
makes the `pair` fixture of it."""
import nats
import pytest

from tests.support.servers import ENV, http_json
from tests.support.waiting import named_after, poll, run, until
from tools.serverproc import free_port

ACCOUNTS_CONF = """accounts {
    SYS: {
        users: [{user: admin, password: admin}]
    },
    ACC: {
        users: [{user: acc, password: acc}],
        jetstream: enabled
    }
}
system_account: SYS
"""

HUB_CONF = """port: %(port)d
server_name: hub-server
%(js)sleafnodes {
    port: %(leaf_port)d
%(tls)s}
include ./accounts.conf
"""

HUB_JS = """jetstream {
    store_dir="./store_server"
    domain=hub
}
"""

LEAF_CONF = """port: %(port)d
server_name: leaf-server
%(js)sleafnodes {
    remotes = [
        {
            urls: ["nats-leaf://admin:%(sys_pass)s@%(leaf_host)s:%(leaf_port)d"]
            account: "SYS"
%(tls)s        },
        {
            urls: ["nats-leaf://acc:%(acc_pass)s@%(leaf_host)s:%(leaf_port)d"]
            account: "ACC"
%(tls)s        }
    ]
}
include ./accounts.conf
"""

LEAF_JS = """jetstream {
    store_dir="./store_leaf"
    domain=leaf
}
"""



# the kinds of hub and leaf the leaf tests run on
COMBOS = [("natsd", "natsd"), ("nats-server", "natsd"), ("natsd", "nats-server")]
COMBO_IDS = ["natsd-hub+natsd-leaf", "ref-hub+natsd-leaf", "natsd-hub+ref-leaf"]


def js_available():
    try:
        import natsd.jetstream.engine.jetstream  # noqa: F401
    except Exception:
        return False
    return True


class Pair:
    def __init__(self, tmp_path, starters):
        self.dir = tmp_path
        self.starters = starters
        self.leaf_port = free_port()
        self.hub_client_port = free_port()
        self.leaf_client_port = free_port()
        self.hub = self.leaf = None
        (tmp_path / "accounts.conf").write_text(ACCOUNTS_CONF)

    def write(self, js=False, sys_pass="admin", acc_pass="acc", tls=False):
        """The seed's configs; with `tls` the leaf links use TLS (certificates made here, the
        remotes dial localhost so the hub's certificate name is checked)."""
        hub_tls = leaf_tls = ""
        if tls:
            from tests.support.certs import CA
            ca = CA(str(self.dir / "pki"))
            cert, key = ca.server_cert("hub")
            hub_tls = '    tls { cert_file: "%s", key_file: "%s" }\n' % (cert, key)
            leaf_tls = '            tls { ca_file: "%s" }\n' % ca.ca_file
        (self.dir / "hub.conf").write_text(HUB_CONF % {
            "port": self.hub_client_port, "leaf_port": self.leaf_port, "js": HUB_JS if js else "",
            "tls": hub_tls})
        (self.dir / "leaf.conf").write_text(LEAF_CONF % {
            "port": self.leaf_client_port, "leaf_port": self.leaf_port, "js": LEAF_JS if js else "",
            "sys_pass": sys_pass, "acc_pass": acc_pass, "tls": leaf_tls,
            "leaf_host": "localhost" if tls else "0.0.0.0"})

    def _start(self, kind, conf, port, extra):
        srv = self.starters[kind]("-c", conf, "-p", str(port), "-a", "127.0.0.1", "-m", str(free_port()),
                                  *extra, cwd=str(self.dir), env=ENV)
        srv.kind = kind
        return srv

    def start_hub(self, kind, *extra):
        self.hub = self._start(kind, "hub.conf", self.hub_client_port, extra)
        return self.hub

    def start_leaf(self, kind, *extra):
        self.leaf = self._start(kind, "leaf.conf", self.leaf_client_port, extra)
        return self.leaf

    def wait_linked(self, n=2, timeout=10):
        for srv in (self.hub, self.leaf):
            ok = poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == n, timeout)
            assert ok, "leafnodes never reached %d on %s:\n%s" % (n, srv.argv, srv.log)

    def url(self, srv, user="acc"):
        return "nats://%s:%s@127.0.0.1:%d" % (user, user, srv.port)

    async def crossed(self, hub=(), leaf=(), timeout=10):
        """Until the interest in the subjects `hub` (subscribed on the hub) reached the leaf,
        and in the subjects `leaf` (subscribed on the leaf) the hub."""
        def arrived():
            return all(carries(self.leaf, s) for s in hub) and all(carries(self.hub, s) for s in leaf)
        assert await until(arrived, timeout), "interest never crossed the link: %r %r" % (hub, leaf)


def carries(srv, subject):
    """Whether a leaf connection of `srv` (a ServerProcess) carries interest in `subject` from
    the other side (its /leafz?subs=1: the subject itself, or a wildcard that matches it)."""
    return any(subject == sub or subject_matches(sub, subject)
               for lf in http_json(srv.http_port, "/leafz?subs=1")["leafs"]
               for sub in lf.get("subscriptions_list") or [])


def across(hub, leaf, timeout=10):
    """A message each way between two linked servers, once their subscriptions' interest has
    crossed -> [what the leaf's client got, what the hub's client got] (what came in time)."""
    async def go():
        a = await nats.connect(hub.url)
        b = await nats.connect(leaf.url)
        sub_b = await b.subscribe("to.leaf")
        sub_a = await a.subscribe("to.hub")
        await until(lambda: carries(hub, "to.leaf") and carries(leaf, "to.hub"), timeout)
        await a.publish("to.leaf", b"down")
        await b.publish("to.hub", b"up")
        got = []
        try:
            for sub in (sub_b, sub_a):
                got.append((await sub.next_msg(timeout)).data)
        except nats.errors.TimeoutError:
            pass
        await a.close()
        await b.close()
        return got
    return run(go())


def subject_matches(pattern, subject):
    """Whether a subscription's subject (`*` and `>` wildcards) matches a subject."""
    pt, st = pattern.split("."), subject.split(".")
    for i, token in enumerate(pt):
        if token == ">":
            return len(st) > i
        if i >= len(st) or (token != "*" and token != st[i]):
            return False
    return len(pt) == len(st)


def on_linked_pair(scenario=None, js=False):
    """`@on_linked_pair async def test_x(p, hub, leaf)` (or `@on_linked_pair(js=True)`): a test
    for each pair of kinds in COMBOS, given the linked Pair and a client of account ACC on
    each side, closed afterwards."""
    if scenario is None:
        return lambda s: on_linked_pair(s, js)

    @pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
    @named_after(scenario)
    def test(pair, hub_kind, leaf_kind):
        p = pair(hub_kind, leaf_kind, js=js)

        async def connected():
            hub = await nats.connect(p.url(p.hub))
            leaf = await nats.connect(p.url(p.leaf))
            try:
                await scenario(p, hub, leaf)
            finally:
                await hub.close()
                await leaf.close()
        run(connected())
    return test

