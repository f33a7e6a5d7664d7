"""What a server learns of the cluster's other servers from their `$SYS` events
(natsd/system/remote.py), on natsd and on nats-server alike:

- an account's `max_connections` counts its connections on every server: a client over it is
  refused wherever it connects, and a server's report that puts the account over closes the
  newest clients; a server that shuts down (or says it will) takes its count with it;
- `$SYS.DEBUG.SUBSCRIBERS` counts the system account's subscriptions on every server;
- `$SYS.REQ.SERVER.<id>.RELOAD` reads the configuration file again.
"""
import contextlib
import json

import pytest

from tests.support.cluster import start_member, wait_mesh
from tests.support.rawclient import RawClient
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

ACCOUNTS = """
system_account: SYS
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: {
    users: [{user: a, password: a}]
    limits: { max_connections: 2 }
  }
}
"""
OVER = b"-ERR 'maximum account active connections exceeded'"
KINDS = ["natsd", "nats-server"]


@contextlib.contextmanager
def two_servers(kind, tmp_path):
    """Two servers of `kind` routed to each other, with ACCOUNTS."""
    first = start_member(kind, tmp_path, "R1", extra=ACCOUNTS)
    try:
        second = start_member(kind, tmp_path, "R2", routes=[first.route_url], extra=ACCOUNTS)
        try:
            wait_mesh([first, second])
            yield first, second
        finally:
            second.proc.kill()
    finally:
        first.proc.kill()


def login(member, user):
    return RawClient(member.proc.port).connect(user=user, **{"pass": user})


def refused(member):
    """Does a new client of account A get told the account is full, and closed?"""
    rc = RawClient(member.proc.port)
    rc.connect({"user": "a", "pass": "a"}, ping=False)
    rc.send(b"PING\r\n")
    out = rc.read_until_eof()
    rc.close()
    return OVER in out and b"PONG" not in out


def conns_seen(watcher, count, reporter):
    """Read the CONNS reports of account A until server `reporter` says `count` connections
    (the server `watcher` is on has then read that report too)."""
    while True:
        watcher.read_until(b"MSG ")
        watcher.read_line()
        report = json.loads(watcher.read_line())
        if report["server"]["name"] == reporter and report["conns"] == count:
            return True


@pytest.mark.parametrize("kind", KINDS)
def test_an_account_limit_counts_its_connections_on_every_server(kind, tmp_path):
    with two_servers(kind, tmp_path) as (first, second):
        watchers = [login(first, "sys"), login(second, "sys")]
        for w in watchers:
            w.send(b"SUB $SYS.SERVER.ACCOUNT.A.CONNS 1\r\n")
            w.sync()
        here = [login(first, "a"), login(first, "a")]
        assert conns_seen(watchers[1], 2, "R1")
        assert refused(second)
        here.pop().close()
        assert conns_seen(watchers[1], 1, "R1")
        there = login(second, "a")          # room again
        assert conns_seen(watchers[0], 1, "R2")
        assert refused(first)
        there.close()
        here[0].close()


def fake_server(seq):
    return {"name": "elsewhere", "host": "127.0.0.1", "id": "NELSEWHERE", "ver": "2.15.1", "seq": seq}


@pytest.mark.parametrize("kind", KINDS)
def test_a_report_over_the_limit_closes_the_newest_clients_and_a_shutdown_clears_it(kind, tmp_path):
    server = start_member(kind, tmp_path, "R1", extra=ACCOUNTS)
    try:
        older, newer = login(server, "a"), login(server, "a")
        sys = login(server, "sys")
        report = {"type": "io.nats.server.advisory.v1.account_connections", "acc": "A",
                  "conns": 1, "leafnodes": 0, "total_conns": 1, "server": fake_server(1)}
        sys.send(b"PUB $SYS.SERVER.ACCOUNT.A.CONNS %d\r\n%s\r\n" % (len(json.dumps(report)),
                                                                    json.dumps(report).encode()))
        sys.sync()
        assert OVER in newer.read_until_eof()
        assert older.sync() == b""          # the older one stays
        assert refused(server)              # 1 here and 1 elsewhere
        closed = poll(lambda: server.get("/connz?state=closed")["connections"], timeout=5)
        assert {c["reason"] for c in closed} == {"Maximum Account Connections Exceeded"}
        gone = json.dumps(fake_server(2)).encode()
        sys.send(b"PUB $SYS.SERVER.NELSEWHERE.SHUTDOWN %d\r\n%s\r\n" % (len(gone), gone))
        sys.sync()
        login(server, "a").close()          # elsewhere's count went with it
        older.close()
    finally:
        server.proc.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_debug_subscribers_counts_every_server(kind, tmp_path):
    with two_servers(kind, tmp_path) as (first, second):
        one = login(first, "sys")
        one.send(b"SUB dbg.x 11\r\nSUB dbg.x 12\r\nSUB dbg.q g 13\r\n")
        one.sync()
        two = login(second, "sys")
        two.send(b"SUB dbg.x 11\r\nSUB dbg.y 12\r\n")
        two.sync()

        def count(body):
            return int(two.request(b"$SYS.DEBUG.SUBSCRIBERS", body))
        # the first server's report of its connection reaches the second one soon after
        assert poll(lambda: count(b"dbg.x") == 3, timeout=10)
        assert [count(b) for b in (b"dbg.*", b"dbg.q g", b"dbg.q other", b"dbg.>", b"none")] \
            == [5, 1, 0, 5, 0]
        one.close()
        two.close()


@pytest.mark.parametrize("kind", KINDS)
def test_reload_request_reads_the_config_file_again(kind, tmp_path):
    server = start_member(kind, tmp_path, "R1", extra=ACCOUNTS)
    try:
        sys = login(server, "sys")
        subject = b"$SYS.REQ.SERVER.%s.RELOAD" % sys.info["server_id"].encode()
        with open(server.conf) as f:
            conf = f.read()
        with open(server.conf, "w") as f:
            f.write(conf.replace("{user: a, password: a}", "{user: a, password: a}, {user: b, password: b}"))
        answer = json.loads(sys.request(subject, b""))
        assert set(answer) == {"server"}, answer
        login(server, "b").close()          # the new user logs in
        with open(server.conf, "w") as f:
            f.write(conf + "\nthis is not a config {\n")
        answer = json.loads(sys.request(subject, b""))
        assert answer["error"]["code"] == 500, answer
        assert answer["error"]["description"].startswith("Parse error on line "), answer
        assert json.loads(sys.request(subject, b"{not json"))["error"]["code"] == 400
        # a filter that names another server: no reload, no answer
        assert sys.request(subject, b'{"server_name": "nobody"}', timeout=0.5) is None
        sys.close()
    finally:
        server.proc.kill()
