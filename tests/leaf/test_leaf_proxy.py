"""A leaf node remote's connection through an HTTP proxy (`proxy { url, username, password,
timeout }`; meant for WebSocket URLs, used by nats-server 2.15.1 for a nats-leaf:// one too),
natsd against nats-server as the spoke: the proxy (written here)
receives the same CONNECT request, the link forms through it and carries messages; a proxy
that refuses the credentials gives nats-server's error line; bad proxy settings are refused
with nats-server's words at the proxy's position."""
import base64
import socket
import subprocess
import threading

import pytest

from tests.support.rawclient import RawClient, parse_msgs
from tests.support.servers import ROOT, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


class ConnectProxy:
    """An HTTP proxy that answers CONNECT, checking Basic credentials `user:password`, and
    then carries bytes both ways; it keeps every request head it read."""

    def __init__(self, user, password, silent=False):
        self.silent = silent                    # reads the CONNECT and never answers
        self.held = []
        self.expected = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        self.heads = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = c.recv(4096)
            if not chunk:
                c.close()
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
        self.heads.append(lines)
        if self.silent:
            self.held.append(c)
            return
        fields = dict(x.split(": ", 1) for x in lines[1:])
        if fields.get("Proxy-Authorization") != self.expected:
            c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                      b"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
            c.close()
            return
        host, port = lines[0].split()[1].rsplit(":", 1)
        up = socket.create_connection((host, int(port)))
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for a, b in ((c, up), (up, c)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def close(self):
        self.listener.close()


def hub(start, tmp_path, scheme):
    """The hub and the port its leaf nodes reach it on (WebSocket's, or the leaf port)."""
    conf = tmp_path / "hub.conf"
    conf.write_text("server_name: hub\nleafnodes { port: -1 }\nwebsocket { port: -1, no_tls: true }\n")
    srv = start("-c", str(conf), "-p", "-1")
    if scheme == "ws":
        return srv, int(srv.wait_log(r"Listening for websocket clients on ws://[^ ]*:(\d+)").group(1))
    return srv, int(srv.wait_log(r"Listening for leafnode connections on [^ ]*:(\d+)").group(1))


def spoke_conf(tmp_path, scheme, ws_port, proxy_port, password):
    conf = tmp_path / "spoke.conf"
    conf.write_text('server_name: spoke\nleafnodes { remotes: [ { url: "%s://127.0.0.1:%d"\n'
                    '  proxy { url: "http://127.0.0.1:%d", username: dev, password: %s } } ] }\n'
                    % (scheme, ws_port, proxy_port, password))
    return str(conf)


def scenario(start, tmp_path, password, scheme="ws"):
    """-> (the CONNECT request line and header names the proxy saw, whether a message
    crossed the link, the spoke's error line or None)."""
    tmp_path.mkdir()
    h, ws_port = hub(start, tmp_path, scheme)
    proxy = ConnectProxy("dev", "s3cret")
    try:
        spoke = start("-c", spoke_conf(tmp_path, scheme, ws_port, proxy.port, password), "-p", "-1")
        if password == "s3cret":
            spoke.wait_log("Leafnode connection created", timeout=10)
            sub = RawClient(spoke.port).connect()
            sub.send(b"SUB via.proxy 1\r\n")
            sub.sync()
            pub = RawClient(h.port).connect()

            def crossed():
                pub.send(b"PUB via.proxy 2\r\nok\r\n")
                pub.sync()
                return parse_msgs(sub.read_available(quiet=0.05, timeout=0.1))
            ok, error = bool(poll(crossed, 10, 0.01)), None
        else:
            line = spoke.wait_log(r"\[ERR\] (Error trying to connect as leafnode .*)", timeout=10)
            ok, error = False, line.group(1).replace(str(ws_port), "WS")
        head = proxy.heads[0]
        return head[0].replace(str(ws_port), "WS"), sorted(x.split(":")[0] for x in head[1:]), ok, error
    finally:
        proxy.close()


@pytest.mark.parametrize("password, scheme", [("s3cret", "ws"), ("wrong", "ws"), ("s3cret", "nats-leaf")],
                         ids=["ws", "ws-wrong-password", "tcp-url-tunneled-too"])
def test_a_remote_through_an_http_proxy_as_nats_server(natsd, reference, tmp_path, password, scheme):
    theirs = scenario(reference, tmp_path / "ref", password, scheme)
    ours = scenario(natsd, tmp_path / "natsd", password, scheme)
    assert ours == theirs
    assert ours[0] == "CONNECT 127.0.0.1:WS HTTP/1.1" and "Proxy-Authorization" in ours[1]
    if password == "s3cret":
        assert ours[2] is True
    else:
        assert ours[3] == ('Error trying to connect as leafnode to remote server "127.0.0.1:WS" (attempt 1): '
                           'proxy CONNECT failed: 407 Proxy Authentication Required')


@pytest.mark.parametrize("remote, expected", [
    ('url: "ws://127.0.0.1:1", proxy { url: "ftp://127.0.0.1:3128" }',
     "proxy URL scheme must be http or https, got: ftp"),
    ('url: "ws://127.0.0.1:1", proxy { url: "http://127.0.0.1:3128", username: dev }',
     "proxy username and password must both be specified or both be empty"),
    ('url: "wss://127.0.0.1:1", proxy { url: "http://127.0.0.1:3128" }',
     "proxy is configured but remote URL wss://127.0.0.1:1 requires TLS and no TLS configuration is provided"),
    ('url: "nats-leaf://127.0.0.1:1", proxy { url: "http://127.0.0.1:3128" }', None),
], ids=["scheme", "half-credentials", "wss-without-tls", "tcp-url-accepted"])
def test_proxy_settings_checked_as_nats_server(tmp_path, remote, expected):
    conf = tmp_path / "p.conf"
    conf.write_text("leafnodes {\n  remotes: [ {\n    %s\n  } ]\n}\n" % remote)
    outs = []
    for cmd in (nats_server_cmd(), natsd_cmd()):
        r = subprocess.run(list(cmd) + ["-t", "-c", str(conf)], cwd=ROOT, capture_output=True, text=True,
                           timeout=30)
        text = r.stdout + r.stderr
        if expected is None:                    # valid, and said so
            outs.append((r.returncode, "is valid" in text))
            continue
        hit = next((x for x in text.splitlines() if expected in x), None)
        assert hit, (cmd, text)
        outs.append((r.returncode, hit[hit.index("p.conf"):]))
    assert outs[0] == outs[1]
    assert outs[0][0] == (0 if expected is None else 1)


def silent_proxy(start, tmp_path):
    """-> (the spoke's error line, addresses masked; seconds from its start to that line)."""
    from tests.leaf.test_leaf_dial_timeout import _when
    import re
    tmp_path.mkdir()
    proxy = ConnectProxy("dev", "s3cret", silent=True)
    try:
        conf = tmp_path / "spoke.conf"
        conf.write_text('leafnodes { remotes: [ { url: "ws://127.0.0.1:1"\n'
                        '  proxy { url: "http://127.0.0.1:%d", timeout: "2s" } } ] }\n' % proxy.port)
        spoke = start("-c", str(conf), "-p", "-1")
        line = spoke.wait_log(r"\[ERR\] Error trying to connect as leafnode .*", timeout=10).group(0)
        started = next(x for x in spoke.lines if "Starting nats-server" in x)
        hit = next(x for x in spoke.lines if line in x)
        took = (_when(hit) - _when(started)).total_seconds()
        return re.sub(r"127\.0\.0\.1:\d+", "ADDR", line), took
    finally:
        proxy.close()


def test_a_proxy_that_does_not_answer_times_out_as_nats_server(natsd, reference, tmp_path):
    theirs = silent_proxy(reference, tmp_path / "ref")
    ours = silent_proxy(natsd, tmp_path / "natsd")
    assert ours[0] == theirs[0]
    for took in (ours[1], theirs[1]):
        assert 1.9 < took < 3.4, (ours, theirs)             # the proxy's 2 s, not the dial's 1 s
