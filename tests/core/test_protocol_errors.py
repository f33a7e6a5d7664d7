"""Malformed client commands on natsd and nats-server: the same bytes back (often none: the
connection is just closed) and the same error line in the server log."""
import pytest

from tests.support.rawclient import RawClient

CASES = [
    # (what the client sends after INFO, bytes it gets before EOF, the server's log text)
    (b'CONNECT {"verbose":false}\r\nPUB foo 1234567890\r\n', b"",
     'processPub Bad or Missing Size: "foo 1234567890"'),
    (b'CONNECT {"verbose":false}\r\nPUB foo 123456789\r\n', b"-ERR 'Maximum Payload Violation'\r\n",
     "maximum payload exceeded: 123456789 vs 1048576"),
    (b'CONNECT {"verbose":false}\r\nPUB foo bar 12x\r\n', b"",
     'processPub Bad or Missing Size: "foo bar 12x"'),
    (b'CONNECT {"verbose":false,"headers":true}\r\nHPUB foo x 12\r\n', b"",
     'processHeaderPub Bad or Missing Header Size: "foo x 12"'),
    (b'CONNECT {"verbose":false,"headers":true}\r\nHPUB foo 12 y\r\n', b"",
     'processHeaderPub Bad or Missing Total Size: "foo 12 y"'),
    (b'CONNECT {"verbose":false}\r\nHPUB foo 1234567890 1234567890\r\n', b"",
     "message headers not supported"),
    (b'CONNECT {"verbose":false}\r\nSUB a b c d\r\n', b"", 'processSub Parse Error: "a b c d"'),
    (b'CONNECT {"verbose":"yes"}\r\nPING\r\n', b"",
     "json: cannot unmarshal string into Go struct field ClientOpts.verbose of type bool"),
    (b'CONNECT {"verbose":false,"pedantic":1}\r\nPING\r\n', b"",
     "json: cannot unmarshal number into Go struct field ClientOpts.pedantic of type bool"),
    (b'CONNECT {"name":5}\r\nPING\r\n', b"",
     "json: cannot unmarshal number into Go struct field ClientOpts.name of type string"),
    (b'CONNECT {"protocol":"x"}\r\nPING\r\n', b"",
     "json: cannot unmarshal string into Go struct field ClientOpts.protocol of type int"),
    (b'CONNECT {"protocol":1.5}\r\nPING\r\n', b"",
     "json: cannot unmarshal number 1.5 into Go struct field ClientOpts.protocol of type int"),
    (b'CONNECT []\r\nPING\r\n', b"",
     "json: cannot unmarshal array into Go value of type server.ClientOpts"),
]


@pytest.mark.parametrize("data,reply,log_text", CASES, ids=[c[2][:40] for c in CASES])
def test_malformed_command(any_server, data, reply, log_text):
    srv = any_server()
    with RawClient(srv.port) as c:
        c.send(data)
        assert c.read_until_eof(5) == reply
    srv.wait_log(r"\[ERR\] 127\.0\.0\.1:\d+ - cid:\d+ - " + __import__("re").escape(log_text) + "$", 5)


def test_null_fields_keep_their_defaults(any_server):
    """"echo": null leaves echo on, as Go leaves a field alone for a JSON null."""
    srv = any_server()
    with RawClient(srv.port) as c:
        c.send(b'CONNECT {"echo":null,"verbose":false,"pedantic":null}\r\nSUB x 1\r\nPUB x 2\r\nhi\r\n')
        assert c.sync() == b"MSG x 1 2\r\nhi\r\n"


def test_second_connect_keeps_what_it_leaves_out(any_server):
    """A later CONNECT changes only the fields it carries (verbose stays off here)."""
    srv = any_server()
    with RawClient(srv.port) as c:
        c.send(b'CONNECT {"verbose":false}\r\nCONNECT {"name":"again"}\r\nPING\r\n')
        assert c.read_until(b"PONG\r\n", 5) == b"PONG\r\n"
