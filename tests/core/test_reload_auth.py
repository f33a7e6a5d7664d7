"""A configuration reload (SIGHUP) applies authorization changes to connected clients, as
nats-server's reloadAuthorization does: subscriptions the new permissions forbid are removed
(with an -ERR naming subject and sid), users that no longer exist or whose password changed are
cut with 'Authorization Violation', users moved to another account are disconnected. Every
scenario runs on natsd and on nats-server."""
import signal

from tests.support.rawclient import RawClient
from tests.support.waiting import poll

BASE = """
accounts {
  A: { users: [ {user: a, password: a%(a_perms)s}, {user: pub, password: pub} %(extra_a)s ] }
  B: { users: [ %(users_b)s ] }
}
"""


def conf_text(a_perms="", extra_a="", users_b="{user: b, password: b}"):
    return BASE % {"a_perms": a_perms, "extra_a": extra_a, "users_b": users_b}


def reload(srv, path, text):
    path.write_text(text)
    n = sum("Reloaded server configuration" in ln for ln in srv.lines)
    srv.signal(signal.SIGHUP)
    assert poll(lambda: sum("Reloaded server configuration" in ln for ln in srv.lines) > n, 10), srv.log


def login(srv, user, password=None):
    return RawClient(srv.port).connect(user=user, **{"pass": password or user})


def test_forbidden_subscriptions_are_removed(any_server, tmp_path):
    path = tmp_path / "r.conf"
    path.write_text(conf_text())
    srv = any_server("-c", str(path))
    a = login(srv, "a")
    a.send(b"SUB secret.> 1\r\nSUB a.> 2\r\nSUB secret.q work 3\r\n")
    a.sync()
    pub = login(srv, "pub")
    reload(srv, path, conf_text(a_perms=', permissions: {subscribe: "a.>"}'))
    errs = a.read_until(b"-ERR", 5) + a.read_until(b"-ERR", 5) + a.read_until(b"\r\n", 5)
    assert b"-ERR 'Permissions Violation for Subscription to \"secret.>\" (sid \"1\")'\r\n" in errs
    assert (b"-ERR 'Permissions Violation for Subscription to \"secret.q\" using queue \"work\" "
            b"(sid \"3\")'\r\n") in errs
    srv.wait_log(r'Removed sub "secret.>" \(sid "1"\) for User "a" - not authorized', 5)
    pub.send(b"PUB secret.x 2\r\nno\r\nPUB secret.q 2\r\nno\r\nPUB a.x 3\r\nyes\r\n")
    pub.sync()
    got = a.read_until(b"yes\r\n", 5)
    assert got == b"MSG a.x 2 3\r\nyes\r\n", got
    assert a.sync() == b""


def test_removed_user_and_changed_password_are_cut(any_server, tmp_path):
    path = tmp_path / "r.conf"
    path.write_text(conf_text(extra_a=", {user: gone, password: gone}, {user: pw, password: old}"))
    srv = any_server("-c", str(path))
    gone = login(srv, "gone")
    pw = login(srv, "pw", "old")
    a = login(srv, "a")
    reload(srv, path, conf_text(extra_a=", {user: pw, password: new}"))
    # a user that no longer exists is closed as if it moved away; a changed password is a
    # violation
    assert gone.read_until_eof(5) == b""
    assert pw.read_until_eof(5) == b"-ERR 'Authorization Violation'\r\n"
    srv.wait_log(r'authentication error - User "pw"', 5)
    assert a.sync() == b""


def test_user_moved_to_another_account_is_disconnected(any_server, tmp_path):
    path = tmp_path / "r.conf"
    path.write_text(conf_text(extra_a=", {user: mover, password: mover}"))
    srv = any_server("-c", str(path))
    mover = login(srv, "mover")
    a = login(srv, "a")
    reload(srv, path, conf_text(users_b="{user: b, password: b}, {user: mover, password: mover}"))
    assert b"-ERR" not in mover.read_until_eof(5)
    assert a.sync() == b""
    again = login(srv, "mover")          # the user can log in again, now in B
    assert again.sync() == b""
