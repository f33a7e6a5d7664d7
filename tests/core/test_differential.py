"""Differential tests: the same raw-protocol scripts against natsd and nats-server.

Each script is a list of steps `(client, bytes[, sync])`. After a step with sync (the default)
the runner sends PING on that client and reads up to the PONG (or the close), so the transcript
of every client is deterministic. At the end every open client is synced once more. The bytes
each client received after its INFO line must be identical on both servers.
"""
import json
import os

import pytest

from tests.support.rawclient import RawClient
from tests.support.servers import nats_server_cmd, natsd_cmd, start_server

CLOSED = b"<closed>"

CONFIG = """
max_payload: 2048
max_control_line: 512
"""

AUTH_CONFIG = """
authorization {
  users: [
    {user: alice, password: secret, permissions: {
        publish: {allow: ["allowed.>", "_INBOX.>"], deny: ["allowed.denied"]},
        subscribe: {allow: ["allowed.>", "_INBOX.>", "req"], deny: ["allowed.secret"]}}}
    {user: svc, password: secret, permissions: {
        publish: {deny: [">"]}, subscribe: {allow: ["req"]}, allow_responses: true}}
    {user: bob, password: pw}
  ]
}
"""


def _pair(tmp_path_factory, name, text):
    cmd = nats_server_cmd()
    if cmd is None:
        pytest.skip("nats-server is not installed")
    d = tmp_path_factory.mktemp(name)
    conf = os.path.join(str(d), "server.conf")
    with open(conf, "w") as f:
        f.write(text)
    servers = {}
    try:
        servers["natsd"] = start_server(natsd_cmd(), "-c", conf)
        servers["nats-server"] = start_server(cmd, "-c", conf)
    except Exception:
        for s in servers.values():
            s.kill()
        raise
    return servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = _pair(tmp_path_factory, "diff", CONFIG)
    yield s
    for p in s.values():
        p.kill()


@pytest.fixture(scope="module")
def auth_servers(tmp_path_factory):
    s = _pair(tmp_path_factory, "diffauth", AUTH_CONFIG)
    yield s
    for p in s.values():
        p.kill()


def connect(**kw):
    o = {"verbose": False, "pedantic": False, "headers": True}
    o.update(kw)
    return b"CONNECT " + json.dumps(o, separators=(",", ":")).encode() + b"\r\n"


def run_script(port, steps, nclients=None):
    nclients = nclients or (max(s[0] for s in steps) + 1)
    clients = [RawClient(port) for _ in range(nclients)]
    out = [b"" for _ in clients]
    closed = [False] * nclients

    def sync(k):
        c = clients[k]
        if closed[k]:
            return
        c.try_send(b"PING\r\n")
        try:
            got = c.read_until(b"PONG\r\n", timeout=5)
        except AssertionError:
            if not c.eof:
                raise
            got = c.buf + CLOSED
            c.buf = b""
            closed[k] = True
        out[k] += got

    try:
        for step in steps:
            k, data = step[0], step[1]
            do_sync = step[2] if len(step) > 2 else True
            if closed[k]:
                continue
            clients[k].try_send(data)
            if do_sync:
                sync(k)
        for k in range(nclients):
            sync(k)
    finally:
        for c in clients:
            c.close()
    return out


HELLO = b"PUB foo 5\r\nhello\r\n"

SCRIPTS = {
    "pub_sub": [(0, connect() + b"SUB foo 1\r\n" + HELLO)],
    "pub_reply": [(0, connect() + b"SUB foo 1\r\nPUB foo bar 2\r\nhi\r\n")],
    "two_clients": [(0, connect() + b"SUB foo.* 7\r\n"), (1, connect() + b"PUB foo.x 3\r\nabc\r\n")],
    "wildcards": [(0, connect() + b"SUB a.> 1\r\nSUB a.*.c 2\r\nSUB *.b.> 3\r\n"),
                  (1, connect() + b"PUB a 1\r\n1\r\n"), (1, b"PUB a.b 1\r\n2\r\n", True),
                  (1, b"PUB a.b.c 1\r\n3\r\n"), (1, b"PUB x.b.y.z 1\r\n4\r\n")],
    "verbose_ok_ordering": [(0, connect(verbose=True) + b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n"
                             b"UNSUB 1\r\nPUB foo 1\r\nx\r\nSUB foo..bar 2\r\n")],
    "verbose_before_connect": [(0, b"SUB foo 1\r\n" + HELLO)],
    "pedantic_wildcard_publish": [(0, connect(pedantic=True) + b"SUB > 1\r\nPUB foo.* 1\r\nx\r\n"
                                   b"PUB foo.> 1\r\ny\r\nPUB foo..bar 1\r\nz\r\nPUB ok 1\r\nw\r\n")],
    "pedantic_verbose": [(0, connect(pedantic=True, verbose=True) + b"PUB foo.* 1\r\nx\r\n")],
    "not_pedantic_wildcard_publish": [(0, connect() + b"SUB foo.* 1\r\nPUB foo.* 1\r\nx\r\n")],
    "garbage": [(0, connect() + b"FOO BAR\r\n")],
    "garbage_after_sub": [(0, connect() + b"SUB foo 1\r\n"), (0, b"XYZZY\r\n")],
    "control_line_exceeded": [(0, connect() + b"PUB " + b"a" * 600 + b" 1\r\nx\r\n")],
    "control_line_no_newline": [(0, connect() + b"SUB " + b"a" * 700, False)],
    "max_payload": [(0, connect() + b"PUB foo 2049\r\n")],
    "max_payload_exact": [(0, connect() + b"SUB foo 1\r\nPUB foo 2048\r\n" + b"x" * 2048 + b"\r\n")],
    "hpub_max_payload": [(0, connect() + b"HPUB foo 12 3000\r\n")],
    "lower_case_ops": [(0, b"connect {\"verbose\":false}\r\nsub foo 1\r\npub foo 2\r\nhi\r\n"
                       b"ping\r\nunsub 1\r\npUb foo 1\r\nx\r\n")],
    "tabs": [(0, connect() + b"SUB\tfoo\t 1\r\nPUB\t foo\t2\r\nhi\r\nUNSUB\t1\r\n" + HELLO)],
    "unsub_max": [(0, connect() + b"SUB foo 1\r\nUNSUB 1 2\r\n" + HELLO * 3)],
    "unsub_max_already_reached": [(0, connect() + b"SUB foo 1\r\n" + HELLO * 2 + b"UNSUB 1 1\r\n" + HELLO)],
    "unsub_unknown_sid": [(0, connect(verbose=True) + b"UNSUB 99\r\n")],
    "no_responders_without_headers": [(0, connect(headers=False, no_responders=True))],
    "no_responders": [(0, connect(no_responders=True) + b"SUB _INBOX.> 1\r\nPUB nobody _INBOX.abc 0\r\n\r\n")],
    "no_responders_other_sid": [(0, connect(no_responders=True) + b"SUB _INBOX.x 5\r\nSUB _INBOX.* 6\r\n"
                                 b"PUB nobody _INBOX.x 2\r\nhi\r\n")],
    "hpub_to_headerless_sub": [(1, connect(headers=False) + b"SUB foo 1\r\n"),
                               (0, connect() + b"HPUB foo 22 27\r\nNATS/1.0\r\nA: b\r\nA: c\r\n\r\nhello\r\n")],
    "hpub_round_trip": [(0, connect() + b"SUB foo 1\r\nHPUB foo r 22 27\r\nNATS/1.0\r\nA: b\r\nA: c\r\n\r\nhello\r\n")],
    "hpub_from_headerless_client": [(0, connect(headers=False) + b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")],
    "hpub_bad_sizes": [(0, connect() + b"HPUB foo 20 10\r\n")],
    "ping_before_connect": [(0, b"PING\r\n"), (0, connect() + b"SUB foo 1\r\n" + HELLO)],
    "ok_from_client": [(0, connect() + b"+OK\r\n")],
    "err_from_client": [(0, connect() + b"-ERR 'boom'\r\n")],
    "bad_sub_subject": [(0, connect() + b"SUB foo..bar 1\r\nSUB foo. 2\r\nSUB .foo 3\r\nSUB foo.>.bar 4\r\n"
                         b"SUB ok 5\r\nPUB ok 1\r\nx\r\n")],
    "empty_line": [(0, connect() + b"\r\n")],
    "msg_from_client": [(0, connect() + b"MSG foo 1 2\r\nhi\r\n")],
    "reserved_reply_R": [(0, connect() + b"SUB foo 1\r\nPUB foo _R_.x 1\r\nx\r\n")],
    "reserved_reply_js_ack": [(0, connect() + b"SUB foo 1\r\nPUB foo $JS.ACK.x.y 1\r\nx\r\n")],
    "reserved_reply_gateway": [(0, connect() + b"SUB foo 1\r\nPUB foo _GR_.x 1\r\nx\r\n")],
    "reply_exactly_a_reserved_prefix": [(0, connect() + b"SUB foo 1\r\nPUB foo _R_. 1\r\nx\r\n")],
    "queue_sys": [(0, connect() + b"SUB foo _sys_ 1\r\n" + HELLO)],
    # one member per group: the choice among several members is random on both servers
    # one group per receiving client: the order in which a message reaches two groups of the
    # same connection is random in both servers
    "queue_groups": [(0, connect() + b"SUB foo q 1\r\n"), (1, connect() + b"SUB foo r 3\r\n"),
                     (2, connect() + b"SUB foo q 7\r\nSUB foo 8\r\nUNSUB 7\r\n"), (3, connect() + HELLO)],
    "connect_bad_json": [(0, b"CONNECT {bad json\r\n")],
    "connect_not_object": [(0, b"CONNECT [1,2]\r\n")],
    "connect_twice": [(0, connect() + connect(verbose=True) + b"SUB foo 1\r\n")],
    "connect_unknown_fields": [(0, connect(some_future_field={"x": 1}) + b"SUB foo 1\r\n" + HELLO)],
    "info_from_client": [(0, connect() + b"INFO {}\r\nSUB foo 1\r\n" + HELLO)],
    "split_pub_bytewise": [(0, connect() + b"SUB foo 1\r\n")] +
                          [(0, bytes([b]), False) for b in b"PUB foo 5\r\nhello\r\n"] + [(0, b"")],
    "split_payload": [(0, connect() + b"SUB foo 1\r\nPUB foo 10\r\n01234", False),
                      (0, b"56789\r", False), (0, b"\nPING\r\n")],
    "pipelined": [(0, connect() + b"SUB a 1\r\nSUB b 2\r\n" + b"PUB a 1\r\n1\r\nPUB b 1\r\n2\r\n" * 20 +
                   b"UNSUB 1\r\nPUB a 1\r\n3\r\n")],
    "pub_bad_size": [(0, connect() + b"PUB foo abc\r\n")],
    "pub_missing_size": [(0, connect() + b"PUB foo\r\n")],
    "pub_too_many_args": [(0, connect() + b"PUB a b c 1\r\nx\r\n")],
    "pub_payload_too_long": [(0, connect() + b"SUB foo 1\r\nPUB foo 2\r\nhiX\r\n")],
    "sub_too_many_args": [(0, connect() + b"SUB a b c d\r\n")],
    "sub_missing_sid": [(0, connect() + b"SUB foo\r\n")],
    "unsub_bad_max": [(0, connect() + b"SUB foo 1\r\nUNSUB 1 x\r\n" + HELLO)],
    # an empty CONNECT leaves nats-server's defaults: verbose and pedantic on
    "connect_empty_object_defaults": [(0, b"CONNECT {}\r\nSUB foo 1\r\nUNSUB 1\r\nPUB foo.* 1\r\nx\r\n")],
    "connect_no_args": [(0, b"CONNECT\r\n")],
    "unsub_no_args": [(0, connect() + b"UNSUB\r\n")],
    "echo_false": [(0, connect(echo=False) + b"SUB foo 1\r\n" + HELLO),
                   (1, connect() + b"PUB foo 2\r\nhi\r\n")],
    "overlapping_subs": [(0, connect() + b"SUB foo 1\r\nSUB > 2\r\n"), (1, connect() + HELLO)],
    "duplicate_sid": [(0, connect() + b"SUB foo 1\r\nSUB bar 1\r\nPUB foo 1\r\nx\r\nPUB bar 1\r\ny\r\n")],
    "pub_before_connect": [(0, HELLO)],
    "zero_payload": [(0, connect() + b"SUB foo 1\r\nPUB foo 0\r\n\r\n")],
    "utf8_subject": [(0, connect() + "SUB ünï.⚡ 1\r\nPUB ünï.⚡ 2\r\nhi\r\n".encode())],
    # a CR anywhere in a line drops the byte before its LF; SUB, UNSUB (and routed messages)
    # split arguments on CRs, PUB and HPUB only on spaces and tabs
    "cr_inside_sub": [(0, connect() + b"SUB > 3\r\x00\n" + HELLO)],
    "cr_between_sub_args": [(0, connect() + b"SUB foo\r5\r\n" + HELLO + b"UNSUB\t5\r\r\n" + HELLO)],
    "cr_inside_pub_subject": [(0, connect() + b"SUB foo 7\r\nSUB > 8\r\nPUB foo\r 5\r\nhello\r\n")],
    "cr_before_pub_size_end": [(0, connect() + b"SUB foo 7\r\nPUB foo 5\rx\nhello\r\n")],
    "cr_after_op": [(0, connect() + b"SUB foo 7\r\nPUB\rfoo 5\r\nhello\r\n")],
    "cr_hpub": [(0, connect() + b"SUB > 1\r\nHPUB foo 12 14\r\x00\nNATS/1.0\r\n\r\nhi\r\n")],
}


# Differences that live in natsd/_core (the Cython parser/router); strict, so a fix is noticed.
XFAIL = {}


def _params(scripts):
    return [pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True)) if n in XFAIL else n
            for n in sorted(scripts)]


@pytest.mark.parametrize("name", _params(SCRIPTS))
def test_script(servers, name):
    steps = SCRIPTS[name]
    got = {k: run_script(s.port, steps) for k, s in servers.items()}
    assert got["natsd"] == got["nats-server"]


AUTH_SCRIPTS = {
    "auth_wrong_password": [(0, connect(user="bob", **{"pass": "nope"}))],
    "auth_no_credentials": [(0, connect())],
    "auth_pub_before_connect": [(0, HELLO)],
    "auth_ok": [(0, connect(user="bob", **{"pass": "pw"}) + b"SUB foo 1\r\n" + HELLO)],
    "perm_publish_deny": [(0, connect(user="alice", **{"pass": "secret"}) + b"SUB allowed.> 1\r\n"
                           b"PUB x 1\r\n1\r\nPUB allowed.denied 1\r\n2\r\nPUB allowed.ok 1\r\n3\r\n")],
    "perm_subscribe_deny": [(0, connect(user="alice", **{"pass": "secret"}) + b"SUB other 1\r\n"
                             b"SUB allowed.secret 2\r\nSUB other q 3\r\nSUB allowed.x 4\r\n"
                             b"PUB allowed.x 1\r\n1\r\n")],
    "perm_subscribe_wildcard_delivery": [(0, connect(user="alice", **{"pass": "secret"}) + b"SUB allowed.> 1\r\n"),
                                         (1, connect(user="bob", **{"pass": "pw"}) +
                                          b"PUB allowed.secret 1\r\n1\r\nPUB allowed.public 1\r\n2\r\n")],
    "perm_allow_responses": [(0, connect(user="svc", **{"pass": "secret"}) + b"SUB req 1\r\n"),
                             (1, connect(user="bob", **{"pass": "pw"}) + b"SUB inbox.1 9\r\n"
                              b"PUB req inbox.1 1\r\nq\r\n"),
                             (0, b"PUB inbox.1 1\r\na\r\nPUB inbox.1 1\r\nb\r\nPUB elsewhere 1\r\nc\r\n")],
    "perm_verbose_violation": [(0, connect(user="alice", verbose=True, **{"pass": "secret"}) +
                                b"PUB x 1\r\n1\r\nSUB y 1\r\n")],
}


@pytest.mark.parametrize("name", _params(AUTH_SCRIPTS))
def test_auth_script(auth_servers, name):
    steps = AUTH_SCRIPTS[name]
    got = {k: run_script(s.port, steps) for k, s in auth_servers.items()}
    assert got["natsd"] == got["nats-server"]


# INFO keys of nats-server 2.15 that natsd does not send (reported, not hidden): git_commit (omitted
# when empty).
INFO_OPTIONAL = {"git_commit"}


def test_info_key_sets(servers, auth_servers):
    for pair in (servers, auth_servers):
        keys = {}
        for k, s in pair.items():
            with RawClient(s.port) as c:
                keys[k] = set(c.info)
        assert keys["nats-server"] - INFO_OPTIONAL <= keys["natsd"], keys
        assert keys["natsd"] - keys["nats-server"] == set(), keys


def test_info_values_match(servers):
    infos = {}
    for k, s in servers.items():
        with RawClient(s.port) as c:
            infos[k] = c.info
    for key in ("proto", "headers", "max_payload", "host", "client_ip"):
        assert infos["natsd"].get(key) == infos["nats-server"].get(key), key
    for info in infos.values():
        assert info["server_id"] == info["server_name"]


def test_info_after_first_pong_for_protocol_1(servers):
    got = {}
    for k, s in servers.items():
        with RawClient(s.port) as c:
            c.send(connect(protocol=1) + b"PING\r\n")
            c.read_until(b"PONG\r\n")
            line = c.read_line(timeout=2)
            assert line.startswith(b"INFO "), line
            got[k] = json.loads(line[5:])
            assert got[k].get("connect_info") is True
    assert set(got["natsd"]) >= set(got["nats-server"]) - INFO_OPTIONAL


# ---- differential fuzz: random valid command streams, same bytes back from both servers ----

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

DIFF_COMMANDS = [
    b"SUB foo 1\r\n", b"SUB foo.* 2\r\n", b"SUB > 3\r\n", b"SUB foo.bar q 4\r\n", b"SUB bar 5\r\n",
    b"SUB _INBOX.> 6\r\n", b"SUB foo..x 7\r\n",
    b"UNSUB 1\r\n", b"UNSUB 3\r\n", b"UNSUB 2 2\r\n", b"UNSUB 5 1\r\n", b"UNSUB 42\r\n",
    b"PUB foo 2\r\nhi\r\n", b"PUB foo.bar r 3\r\nabc\r\n", b"PUB bar 0\r\n\r\n",
    b"PUB nobody _INBOX.a 1\r\nx\r\n", b"PUB x.y.z 4\r\n1234\r\n",
    b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", b"HPUB foo.bar 22 27\r\nNATS/1.0\r\nA: b\r\nA: c\r\n\r\nhello\r\n",
    b"PING\r\n", b"PONG\r\n", b"sub baz 8\r\npub baz 1\r\n!\r\n",
]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cmds=st.lists(st.sampled_from(DIFF_COMMANDS), min_size=1, max_size=15),
       headers=st.booleans(), no_responders=st.booleans())
def test_differential_random_streams(servers, cmds, headers, no_responders):
    hello = connect(headers=headers, no_responders=no_responders and headers)
    steps = [(0, hello + b"".join(cmds))]
    got = {k: run_script(s.port, steps) for k, s in servers.items()}
    assert got["natsd"] == got["nats-server"], cmds
