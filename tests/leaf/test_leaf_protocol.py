"""The leaf node protocol on the wire: a raw socket plays the soliciting leaf against natsd's
and nats-server's leafnode port, and what each server does with LS+/LMSG is compared."""

import pytest

from tests.support.rawclient import RawClient
from tests.support.servers import http_json, recv_until_quiet
from tests.support.waiting import poll
from tools.serverproc import free_port


@pytest.fixture
def hub(any_server, tmp_path):
    port = free_port()
    conf = tmp_path / "hub.conf"
    conf.write_text("server_name: hub\nleafnodes { port: %d }\n" % port)
    srv = any_server("-c", str(conf), "-m", str(free_port()))
    srv.leaf_port = port
    return srv


def raw_leaf(srv):
    c = RawClient(srv.leaf_port)
    c.send(b'CONNECT {"name":"rawleaf","headers":true,"version":"2.15.1"}\r\n')
    c.read_until(b'"connect_info":true', 5)
    assert poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == 1, 5)
    return c


def test_lmsg_with_many_queue_names_is_counted_and_delivered_once(hub):
    """An LMSG naming more queue groups than fit the fast argument split: delivered to the
    one local member of the group it names, and counted in /varz like any other message."""
    sub = RawClient(hub.port).connect()
    sub.send(b"SUB work q7 1\r\nSUB work other 2\r\n")
    sub.sync()
    leaf = raw_leaf(hub)
    before = http_json(hub.http_port, "/varz")
    queues = b" ".join(b"q%d" % i for i in range(1, 8))
    leaf.send(b"LMSG work | " + queues + b" 5\r\nhello\r\nPING\r\n")
    leaf.read_until(b"PONG\r\n")
    got = sub.read_until(b"hello\r\n", 5)
    assert got.startswith(b"MSG work 1 5\r\n"), got
    assert sub.read_available(0.3) == b""        # not to the group the LMSG did not name
    after = poll(lambda: (lambda v: v if v["in_msgs"] > before["in_msgs"] else None)(
        http_json(hub.http_port, "/varz")), 5)
    assert after["in_msgs"] - before["in_msgs"] == 1
    assert after["in_bytes"] - before["in_bytes"] == 5
    sub.close()
    leaf.close()


def test_lmsg_js_reply_suffix_is_restored_for_clients(hub):
    """`LMSG <inbox> $JS.ACK...@<subject>`: a client receives `MSG <subject> ... $JS.ACK...`."""
    sub = RawClient(hub.port).connect()
    sub.send(b"SUB _INBOX.x 1\r\n")
    sub.sync()
    leaf = raw_leaf(hub)
    ack = b"$JS.ACK.S.C.1.4.2.1700000000000000000.0"
    leaf.send(b"LMSG _INBOX.x " + ack + b"@orders.eu 2\r\nhi\r\nPING\r\n")
    leaf.read_until(b"PONG\r\n")
    got = sub.read_until(b"hi\r\n", 5)
    assert got == b"MSG orders.eu 1 " + ack + b" 2\r\nhi\r\n"
    sub.close()
    leaf.close()


def test_no_credentials_in_clear_to_a_hub_requiring_tls(natsd, tmp_path):
    """A hub whose INFO says tls_required never gets the leaf's CONNECT (credentials) in clear."""
    import socket
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(10)
    conf = tmp_path / "leaf.conf"
    conf.write_text('leafnodes { remotes: [ { url: "nats-leaf://u:secret@127.0.0.1:%d" } ] }\n'
                    % lsock.getsockname()[1])
    leaf = natsd("-c", str(conf))
    conn, _ = lsock.accept()
    conn.sendall(b'INFO {"server_id":"NFAKE","server_name":"hub","version":"2.15.1","proto":1,'
                 b'"headers":true,"auth_required":true,"tls_required":true,"max_payload":1048576,'
                 b'"client_id":3,"nonce":"abc","leafnode_urls":["127.0.0.1:1"]} \r\n')
    got = recv_until_quiet(conn, 5)
    conn.close()
    lsock.close()
    # the leaf answers with a TLS ClientHello (a handshake record), never a CONNECT in clear
    assert got[:1] == b"\x16" and b"CONNECT" not in got and b"secret" not in got, got
