"""Config keys shown to act, each on natsd and nats-server in the same test:
`server_metadata`, `http_base_path`, `no_system_account`, `pidfile`, an account's
`default_permissions`, `authorization { user, password }` and `{ token }` in the file, the
top-level `store_dir`, and a leaf remote's `disabled`."""
import socket

from tests.support.rawclient import RawClient
from tests.support.servers import http_get, http_json
from tests.support.waiting import poll


def _conf(tmp_path, text, name="k.conf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_server_metadata_under_http_base_path(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, 'http_port: -1\nhttp_base_path: "/mon"\n'
                                           'server_metadata { team: blue, zone: "1" }\n'))
    assert http_get(srv.http_port, "/varz")[0] == 404
    assert http_json(srv.http_port, "/mon/varz")["metadata"] == {"team": "blue", "zone": "1"}


def test_no_system_account(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "http_port: -1\nno_system_account: true\n"))
    assert "system_account" not in http_json(srv.http_port, "/varz")
    with RawClient(srv.port).connect() as c:
        answer = c.request(b"$SYS.REQ.SERVER.PING", b"", timeout=0.5)
    assert answer is None or answer.startswith(b"NATS/1.0 503")     # nobody serves it


def test_pidfile_in_the_config(any_server, tmp_path):
    pid_path = tmp_path / "server.pid"
    srv = any_server("-c", _conf(tmp_path, 'pidfile: "%s"\n' % pid_path))
    assert poll(lambda: pid_path.exists() and pid_path.read_text().strip() == str(srv.proc.pid), timeout=5)


def test_account_default_permissions(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "accounts { A {\n  default_permissions { publish: \"ok.>\" }\n"
                                           "  users [{user: a, password: p}]\n} }\n"))
    with RawClient(srv.port).connect(user="a", **{"pass": "p"}) as c:
        c.send(b"PUB no.1 0\r\n\r\nPUB ok.1 0\r\n\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Publish to \"no.1\"'\r\n"


def _login(port, **creds):
    with RawClient(port) as c:
        c.connect(ping=False, **creds)
        c.send(b"PING\r\n")
        return c.read_line()


def test_user_password_and_token_in_the_file(any_server, tmp_path):
    srv = any_server("-c", _conf(tmp_path, "authorization { user: u, password: p }\n", "up.conf"))
    assert _login(srv.port, user="u", **{"pass": "p"}) == b"PONG"
    assert _login(srv.port, user="u", **{"pass": "x"}) == b"-ERR 'Authorization Violation'"
    srv.kill()
    srv = any_server("-c", _conf(tmp_path, "authorization { token: s3cr3t }\n", "tok.conf"))
    assert _login(srv.port, auth_token="s3cr3t") == b"PONG"
    assert _login(srv.port, auth_token="nope") == b"-ERR 'Authorization Violation'"


def test_top_level_store_dir(any_server, tmp_path):
    store = tmp_path / "top"
    srv = any_server("-c", _conf(tmp_path, 'store_dir: "%s"\njetstream: enabled\n' % store))
    with RawClient(srv.port).connect() as c:
        assert b'"error"' not in c.request(b"$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s"]}')
    assert (store / "jetstream" / "$G" / "streams" / "S").is_dir()


def _dials(any_server, tmp_path, disabled):
    """Does a server whose leaf remote points at our socket dial it?"""
    hub = socket.socket()
    hub.bind(("127.0.0.1", 0))
    hub.listen(4)
    hub.settimeout(1.5)
    try:
        any_server("-c", _conf(tmp_path, 'leafnodes { remotes [{url: "nats://127.0.0.1:%d"%s}] }\n'
                                         % (hub.getsockname()[1], ", disabled: true" if disabled else ""),
                               "leaf-%s.conf" % disabled))
        try:
            hub.accept()[0].close()
            return True
        except socket.timeout:
            return False
    finally:
        hub.close()


def test_a_disabled_leaf_remote_is_not_dialled(any_server, tmp_path):
    assert _dials(any_server, tmp_path, disabled=False)
    assert not _dials(any_server, tmp_path, disabled=True)
