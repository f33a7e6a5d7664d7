"""Fixtures for leaf node tests: the seed-000 `accounts.conf`/`hub.conf`/`leaf.conf` written to
tmp_path with free ports, and a `pair` factory that starts a hub and a leaf, each either natsd
or the reference nats-server, and waits until both leaf connections (SYS and ACC) are up."""
import json
import os
import urllib.request

import pytest

from tests.support.servers import ROOT, nats_server_cmd, start_server
from tests.support.waiting import poll

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


ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


from tools.serverproc import free_port  # noqa: E402,F401  (a port this run has not handed out)


def js_available():
    try:
        import natsd.jetstream.engine.jetstream  # noqa: F401
    except Exception:
        return False
    return True


def http_json(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return json.loads(r.read().decode())


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

    def start_hub(self, kind, *extra):
        self.hub = self.starters[kind]("-c", "hub.conf", "-p", str(self.hub_client_port),
                                       "-a", "127.0.0.1", "-m", str(free_port()), *extra,
                                       cwd=str(self.dir), env=ENV)
        self.hub.kind = kind
        return self.hub

    def start_leaf(self, kind, *extra):
        self.leaf = self.starters[kind]("-c", "leaf.conf", "-p", str(self.leaf_client_port),
                                        "-a", "127.0.0.1", "-m", str(free_port()), *extra,
                                        cwd=str(self.dir), env=ENV)
        self.leaf.kind = kind
        return self.leaf

    def wait_linked(self, n=2, timeout=10):
        for srv in (self.hub, self.leaf):
            ok = poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == n, timeout)
            assert ok, "leafnodes never reached %d on %s:\n%s" % (n, srv.argv, srv.log)

    def url(self, srv, user="acc"):
        return "nats://%s:%s@127.0.0.1:%d" % (user, user, srv.port)


@pytest.fixture
def pair(tmp_path, natsd, request):
    """pair(hub_kind, leaf_kind, js=False) -> a linked Pair ("natsd" or "nats-server")."""
    starters = {"natsd": natsd}

    def reference_factory(*args, **kw):
        cmd = nats_server_cmd()
        if cmd is None:
            pytest.skip("nats-server is not installed")
        p = start_server(cmd, *args, **kw)
        started.append(p)
        return p
    started = []
    starters["nats-server"] = reference_factory

    def factory(hub_kind, leaf_kind, js=False, link=True, tls=False):
        if js and "natsd" in (hub_kind, leaf_kind) and not js_available():
            pytest.skip("natsd JetStream (natsd.jetstream.engine.jetstream) is not available")
        p = Pair(tmp_path, starters)
        p.write(js=js, tls=tls)
        p.start_hub(hub_kind)
        p.start_leaf(leaf_kind)
        if link:
            p.wait_linked()
        return p
    yield factory
    for p in started:
        p.kill()


COMBOS = [("natsd", "natsd"), ("nats-server", "natsd"), ("natsd", "nats-server")]
COMBO_IDS = ["natsd-hub+natsd-leaf", "ref-hub+natsd-leaf", "natsd-hub+ref-leaf"]
