"""Leaf node links for the tests: the seed-000 `accounts.conf`/`hub.conf`/`leaf.conf` written
to a directory with free ports (with JetStream domains or TLS links if asked), a Pair that
starts the hub and the leaf, each either natsd or the reference nats-server, and waits until
both leaf connections (SYS and ACC) are up; COMBOS, the kinds on either side the leaf tests
run. tests/leaf/conftest.py makes the `pair` fixture of it."""
from tests.support.servers import ENV, http_json
from tests.support.waiting import poll
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


COMBOS = [("natsd", "natsd"), ("nats-server", "natsd"), ("natsd", "nats-server")]
COMBO_IDS = ["natsd-hub+natsd-leaf", "ref-hub+natsd-leaf", "natsd-hub+ref-leaf"]
