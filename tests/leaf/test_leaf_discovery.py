"""A leaf node remote learns the hub cluster's other leaf node URLs from the hub's INFO
(`leafnode_urls`) and fails over to them when the server it was configured with dies; with
`ignore_discovered_servers` it keeps to its configured URLs. The hub side sends its cluster's
URLs (and an INFO when a server joins). Each side natsd or nats-server. Also the wait for the
hub's first INFO (`first_info_timeout`)."""
import re
import socket
import threading
import time

import pytest

from tests.support.cluster import start_member, wait_mesh
from tests.support.servers import ServerProcess, http_json, server_cmd
from tests.support.waiting import poll
from tools.serverproc import free_port

KINDS = [("natsd", "natsd"), ("natsd", "nats-server"), ("nats-server", "natsd")]


def _spoke(kind, tmp_path, url, extra=""):
    conf = tmp_path / "spoke.conf"
    conf.write_text('server_name: spoke\nhttp_port: -1\nleafnodes {\n  reconnect: "200ms"\n'
                    f'  remotes: [ {{ url: "{url}"\n {extra} }} ]\n}}\n')
    return ServerProcess(list(server_cmd(kind)) + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()


def _leafs(proc):
    return http_json(proc.http_port, "/leafz").get("leafs") or []


def _hub(kind, tmp_path):
    server_cmd(kind)
    a_leaf, b_leaf = free_port(), free_port()
    a = start_member(kind, tmp_path / "a", "A", extra=f"leafnodes {{ host: 127.0.0.1, port: {a_leaf} }}")
    b = start_member(kind, tmp_path / "b", "B", routes=[a.route_url],
                     extra=f"leafnodes {{ host: 127.0.0.1, port: {b_leaf} }}")
    wait_mesh([a, b])
    return a, b, a_leaf


@pytest.mark.parametrize("hub_kind, spoke_kind", KINDS)
@pytest.mark.parametrize("ignore", [False, True])
def test_a_remote_fails_over_to_a_discovered_hub_server(tmp_path, hub_kind, spoke_kind, ignore):
    a, b, a_leaf = _hub(hub_kind, tmp_path)
    spoke = None
    try:
        spoke = _spoke(spoke_kind, tmp_path, f"nats-leaf://127.0.0.1:{a_leaf}",
                       "ignore_discovered_servers: true" if ignore else "")
        assert poll(lambda: len(_leafs(a.proc)) == 1, timeout=15)
        a.proc.kill()                               # kill -9: the configured URL is gone
        if ignore:
            # only the configured URL is tried again, and again
            spoke.wait_log(r"127\.0\.0\.1:%d.*(connection refused|Error trying to connect)" % a_leaf, timeout=10)
            time.sleep(1.5)                         # several reconnect intervals (200ms)
            assert _leafs(b.proc) == []
        else:
            assert poll(lambda: len(_leafs(b.proc)) == 1, timeout=20), spoke.log
    finally:
        for p in (spoke, a.proc, b.proc):
            if p is not None:
                p.kill()


class _SilentHub:
    """A TCP server that takes a connection and never sends INFO; when the peer closed it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        self.accepted.set()
        try:
            while c.recv(4096):
                pass
        except OSError:
            pass
        self.closed.set()


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
@pytest.mark.parametrize("timeout, closes", [('"300ms"', True), ('"30s"', False)])
def test_first_info_timeout(tmp_path, kind, timeout, closes):
    hub = _SilentHub()
    spoke = _spoke(kind, tmp_path, f"nats-leaf://127.0.0.1:{hub.port}", f"first_info_timeout: {timeout}")
    try:
        assert hub.accepted.wait(10)
        # the default wait is 1s: past it the connection is closed only with the short timeout
        assert hub.closed.wait(2.5) == closes
    finally:
        spoke.kill()
        hub.sock.close()


@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_connect_error_reports(tmp_path, kind):
    """`connect_error_reports: 2`: a remote that never connected logs its failed dials as
    errors on the first attempt and every second one (at debug level otherwise)."""
    dead = free_port()
    conf = tmp_path / "s.conf"
    conf.write_text('connect_error_reports: 2\nleafnodes { reconnect: "100ms", remotes: [ { url: '
                    f'"nats-leaf://127.0.0.1:{dead}" }} ] }}\n')
    spoke = ServerProcess(list(server_cmd(kind)) + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()
    try:
        line = r"\[ERR\] Error trying to connect as leafnode to remote server \"127\.0\.0\.1:%d\" \(attempt %d\)"
        spoke.wait_log(line % (dead, 4), timeout=20)
        errors = [n for n in range(1, 5) if re.search(line % (dead, n), spoke.log)]
        assert errors == [1, 2, 4]
    finally:
        spoke.kill()
