"""Raw-protocol behaviour of natsd over plain sockets."""
import json
import re

import pytest

from tests.support.rawclient import RawClient, parse_msgs


@pytest.fixture
def server(natsd, tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text("max_payload: 4096\nmax_control_line: 1024\n")
    return natsd("-c", str(conf))


def client(server, **kw):
    return RawClient(server.port).connect(**kw)


def test_info_fields(server):
    with RawClient(server.port) as c:
        info = c.info
        assert c.info_line.endswith(b" ")          # nats-server writes "INFO {...} \r\n"
    assert re.fullmatch(r"N[A-Z2-7]{55}", info["server_id"])
    assert info["proto"] == 1
    assert info["headers"] is True
    assert info["max_payload"] == 4096
    assert isinstance(info["client_id"], int) and info["client_id"] > 0
    assert info["client_ip"] == "127.0.0.1"
    assert info["port"] == server.port
    assert "auth_required" not in info
    with RawClient(server.port) as c2:
        assert c2.info["client_id"] != info["client_id"]
        assert c2.info["server_id"] == info["server_id"]


def test_pub_one_byte_at_a_time(server):
    with client(server) as sub, client(server) as pub:
        sub.send(b"SUB foo 1\r\n")
        sub.sync()
        for b in b"PUB foo reply 11\r\nhello world\r\n":
            pub.send(bytes([b]))
        pub.sync()
        assert sub.sync() == b"MSG foo 1 reply 11\r\nhello world\r\n"


def test_payload_split_across_sends(server):
    with client(server) as sub, client(server) as pub:
        sub.send(b"SUB big 1\r\n")
        sub.sync()
        payload = bytes(range(256)) * 15
        frame = b"PUB big %d\r\n" % len(payload) + payload + b"\r\n"
        for i in range(0, len(frame), 777):
            pub.send(frame[i:i + 777])
        pub.sync()
        msgs = parse_msgs(sub.sync())
        assert msgs == [(b"big", b"1", None, payload)]


def test_pipelined_commands_in_one_send(server):
    with client(server) as c:
        data = b"SUB a 1\r\nSUB b 2\r\n"
        data += b"".join(b"PUB a 3\r\n%03d\r\nPUB b 3\r\n%03d\r\n" % (i, i) for i in range(200))
        data += b"UNSUB 1\r\nPUB a 1\r\nX\r\nPING\r\n"
        c.send(data)
        out = c.read_until(b"PONG\r\n")
        msgs = parse_msgs(out)
        assert len(msgs) == 400
        assert [m[3] for m in msgs if m[1] == b"1"] == [b"%03d" % i for i in range(200)]
        assert [m[3] for m in msgs if m[1] == b"2"] == [b"%03d" % i for i in range(200)]


def test_garbage_closes_only_that_connection(server):
    with client(server) as good, client(server) as bad:
        good.send(b"SUB foo 1\r\n")
        good.sync()
        bad.send(b"GARBAGE here\r\n")
        assert bad.read_until_eof() == b"-ERR 'Unknown Protocol Operation'\r\n"
        with client(server) as pub:
            pub.send(b"PUB foo 2\r\nok\r\n")
            pub.sync()
        assert good.sync() == b"MSG foo 1 2\r\nok\r\n"


def test_control_line_exceeded(server):
    with client(server) as c:
        c.send(b"PUB " + b"x" * 2000 + b" 1\r\nx\r\n")
        out = c.read_until_eof()
        assert out.startswith(b"-ERR 'maximum control line exceeded")


def test_control_line_exceeded_without_newline(server):
    with client(server) as c:
        c.send(b"SUB " + b"x" * 3000)
        assert c.read_until_eof().startswith(b"-ERR 'maximum control line exceeded")


def test_max_payload_violation(server):
    with client(server) as c:
        c.send(b"PUB foo 4097\r\n")
        assert c.read_until_eof() == b"-ERR 'Maximum Payload Violation'\r\n"


def test_max_payload_exact_is_fine(server):
    with client(server) as c:
        c.send(b"SUB foo 1\r\nPUB foo 4096\r\n" + b"z" * 4096 + b"\r\n")
        assert parse_msgs(c.sync()) == [(b"foo", b"1", None, b"z" * 4096)]


def test_lower_case_ops_and_tabs(server):
    with RawClient(server.port) as c:
        c.send(b'connect {"verbose":false,"pedantic":false}\r\n')
        c.send(b"sub\tfoo\t\tq1\t 5\r\npub\tfoo  2\r\nhi\r\nhpub foo 12 14\r\nNATS/1.0\r\n\r\nyo\r\n")
        c.send(b"ping\r\n")
        # the client did not announce headers: HPUB closes it, so only the PUB is delivered
        assert c.read_until_eof() == b"MSG foo 5 2\r\nhi\r\n"

    with RawClient(server.port) as c:
        c.send(b'cOnNeCt\t{"verbose":false}\r\nsub foo 1\r\npub foo 2\r\nhi\r\nping\r\n')
        assert c.read_until(b"PONG\r\n") == b"MSG foo 1 2\r\nhi\r\nPONG\r\n"


def test_unsub_with_max(server):
    with client(server) as c:
        c.send(b"SUB foo 1\r\nUNSUB 1 3\r\n" + b"PUB foo 1\r\nx\r\n" * 5)
        assert len(parse_msgs(c.sync())) == 3
        c.send(b"PUB foo 1\r\nx\r\n")
        assert c.sync() == b""


def test_no_responders_requires_headers(server):
    with RawClient(server.port) as c:
        c.send(b'CONNECT {"verbose":false,"no_responders":true,"headers":false}\r\nPING\r\n')
        assert c.read_until_eof() == b"-ERR 'no responders requires headers support'\r\n"


def test_no_responders_status(server):
    with client(server, no_responders=True) as c:
        c.send(b"SUB _INBOX.x.* 9\r\nPUB service.none _INBOX.x.1 2\r\nhi\r\n")
        out = c.sync()
        assert out == (b"HMSG _INBOX.x.1 9 44 44\r\nNATS/1.0 503\r\n"
                       b"Nats-Subject: service.none\r\n\r\n\r\n")


def test_hpub_round_trip_keeps_repeated_keys(server):
    with client(server) as c:
        hdr = b"NATS/1.0\r\nX-Key: a\r\nX-Key: b\r\nother: c\r\n\r\n"
        c.send(b"SUB h 1\r\nHPUB h rep %d %d\r\n" % (len(hdr), len(hdr) + 3) + hdr + b"abc\r\n")
        assert c.sync() == b"HMSG h 1 rep %d %d\r\n" % (len(hdr), len(hdr) + 3) + hdr + b"abc\r\n"


def test_verbose_acks_each_command(server):
    with RawClient(server.port) as c:
        c.send(b'CONNECT {"verbose":true}\r\nSUB foo 1\r\nUNSUB 1\r\nPUB bar 0\r\n\r\n')
        out = c.sync()
        assert out == b"+OK\r\n" * 4


def test_pedantic_invalid_publish_subject(server):
    with client(server, pedantic=True) as c:
        c.send(b"PUB foo.*.bar 1\r\nx\r\n")
        assert c.sync() == b"-ERR 'Invalid Publish Subject'\r\n"


def test_invalid_subscription_subject_keeps_connection(server):
    with client(server) as c:
        c.send(b"SUB foo..bar 1\r\n")
        assert c.sync() == b"-ERR 'Invalid Subject'\r\n"
        c.send(b"SUB ok 2\r\nPUB ok 1\r\n!\r\n")
        assert c.sync() == b"MSG ok 2 1\r\n!\r\n"


def test_ping_before_connect(server):
    with RawClient(server.port) as c:
        c.send(b"PING\r\n")
        assert c.read_line() == b"PONG"


def test_reserved_reply_prefix(server):
    with client(server) as c:
        c.send(b"SUB foo 1\r\nPUB foo _R_.abc 1\r\nx\r\n")
        assert c.sync() == b"-ERR 'Permissions Violation for Publish with Reply of \"_R_.abc\"'\r\n"


def test_sys_queue_group_denied(server):
    with client(server) as c:
        c.send(b"SUB foo _sys_ 1\r\n")
        out = c.sync()
        assert out.startswith(b"-ERR 'Permissions Violation for Subscription to \"foo\"")


def test_connect_bad_json_closes(server):
    with RawClient(server.port) as c:
        c.send(b"CONNECT {nope\r\nPING\r\n")
        assert c.is_closed()


def test_server_ping_answered_with_pong_keeps_connection(server):
    with client(server) as c:
        c.send(b"PONG\r\n")                        # an unsolicited PONG is harmless
        assert c.sync() == b""


def test_info_from_client_ignored(server):
    with client(server) as c:
        c.send(b'INFO {"x":1}\r\nSUB a 1\r\nPUB a 1\r\n1\r\n')
        assert c.sync() == b"MSG a 1 1\r\n1\r\n"


def test_many_subscriptions_one_connection(server):
    with client(server) as c:
        c.send(b"".join(b"SUB s.%d %d\r\n" % (i, i) for i in range(1000)))
        c.send(b"".join(b"PUB s.%d 1\r\nx\r\n" % i for i in range(0, 1000, 7)))
        msgs = parse_msgs(c.sync())
        assert [int(m[1]) for m in msgs] == list(range(0, 1000, 7))


def test_connect_info_not_echoed_for_json_errors(server):
    """A CONNECT that is valid JSON but not an object closes too."""
    with RawClient(server.port) as c:
        c.send(b"CONNECT " + json.dumps([1, 2]).encode() + b"\r\nPING\r\n")
        assert c.is_closed()
