"""Super-clusters of real servers for tests: natsd and nats-server members of clusters joined
by gateways.

Every server gets a config (server name, ephemeral client and monitoring ports, a route port
when its cluster has more than one server, a gateway port chosen before the start) and the
remote clusters it is told of; the others it must find (implicit gateways). Waiting is on
/gatewayz (wait_gateways: every server has an outbound connection to every other cluster)
and on the interest one server's outbound connection holds (wait_gateway_interest), never on
sleeps. Servers are ServerProcess objects (tests/support/servers.py), killed by PID.
"""
import os

from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll


class GatewayServer:
    def __init__(self, kind, name, cluster, gw_port, proc, conf):
        self.kind = kind
        self.name = name
        self.cluster = cluster
        self.gw_port = gw_port
        self.proc = proc
        self.conf = conf

    @property
    def url(self):
        return self.proc.url

    @property
    def gw_url(self):
        return "nats://127.0.0.1:%d" % self.gw_port

    def get(self, path):
        return http_json(self.proc.http_port, path)


def server_conf(tmp_path, name, cluster, gw_port, remotes=None, route_port=None, routes=(),
                gateway_extra="", extra="", remote_extra=None):
    """A config: `remotes` is {cluster name: [gateway URL, ...]} (what this server is told),
    `remote_extra` {cluster name: more keys of that remote's entry, e.g. its own `tls {}`}."""
    os.makedirs(str(tmp_path), exist_ok=True)
    path = os.path.join(str(tmp_path), "%s.conf" % name)
    more = {n: ", " + text.strip() for n, text in (remote_extra or {}).items()}
    gws = ", ".join(('{ name: %s, url: "%s"%s }' % (n, urls[0], more.get(n, "")) if len(urls) == 1 else
                     '{ name: %s, urls: [%s]%s }' % (n, ", ".join('"%s"' % u for u in urls), more.get(n, "")))
                    for n, urls in (remotes or {}).items())
    text = 'server_name: %s\nhttp_port: -1\n%s\n' % (name, extra)
    if route_port is not None:
        text += 'cluster {\n  name: %s\n  port: %d\n  routes: [%s]\n}\n' % (
            cluster, route_port, ", ".join('"%s"' % r for r in routes))
    text += 'gateway {\n  name: %s\n  port: %d\n  gateways: [%s]\n%s\n}\n' % (
        cluster, gw_port, gws, gateway_extra)
    with open(path, "w") as f:
        f.write(text)
    return path


def start_gateway_server(kind, tmp_path, name, cluster, gw_port, remotes=None, route_port=None,
                         routes=(), gateway_extra="", extra="", wait=True, remote_extra=None):
    cmd = natsd_cmd() if kind == "natsd" else nats_server_cmd()
    conf = server_conf(tmp_path, name, cluster, gw_port, remotes, route_port, routes,
                       gateway_extra, extra, remote_extra)
    proc = ServerProcess(list(cmd) + ["-c", conf, "-p", "-1", "-a", "127.0.0.1"])
    if wait:
        proc.wait_ready()
    return GatewayServer(kind, name, cluster, gw_port, proc, conf)


def outbound_names(server):
    return set(server.get("/gatewayz").get("outbound_gateways") or {})


def wait_gateways(servers, timeout=20.0):
    """Until every server has an outbound connection to every other cluster of `servers`."""
    clusters = {s.cluster for s in servers}

    def missing():
        return {s.name: (clusters - {s.cluster}) - outbound_names(s) for s in servers
                if (clusters - {s.cluster}) - outbound_names(s)}
    if poll(lambda: not missing(), timeout, 0.05) is False:
        raise AssertionError("gateways never formed: %r" % missing())


def wait_outbound(server, clusters, timeout=20.0):
    """Until `server` has an outbound connection to each of `clusters`."""
    if not poll(lambda: set(clusters) <= outbound_names(server), timeout, 0.05):
        raise AssertionError("%s never reached %r" % (server.name, set(clusters) - outbound_names(server)))


def outbound_subjects(server, cluster, account="$G"):
    """What `server`'s outbound connection to `cluster` was told of `account`'s interest."""
    gz = server.get("/gatewayz?accs=1&subs=1&gw_name=%s" % cluster)
    out = (gz.get("outbound_gateways") or {}).get(cluster) or {}
    for a in out.get("accounts") or []:
        if a.get("name") == account:
            return set(a.get("subscriptions_list") or [])
    return set()


def wait_gateway_interest(servers, cluster, subject, timeout=10.0, present=True, account="$G"):
    """Until every server of `servers` (outside `cluster`) knows (or no longer knows)
    `cluster`'s interest in `subject` (in `account`)."""
    def lacking():
        return [s.name for s in servers if s.cluster != cluster
                and (subject in outbound_subjects(s, cluster, account)) != present]
    if not poll(lambda: not lacking(), timeout, 0.05):
        raise AssertionError("interest in %r from %s never %s %r" % (
            subject, cluster, "reached" if present else "left", lacking()))
