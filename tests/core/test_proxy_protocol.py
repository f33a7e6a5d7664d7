"""`proxy_protocol: true` (nats-server 2.12+): a load balancer in front of the client port
announces each connection's real source with a PROXY protocol header (version 1 text or
version 2 binary) before the client speaks. Run against nats-server 2.15.1 and natsd with raw
sockets: the INFO at accept leaves out client_ip; the source in the header becomes the
connection's address (/connz, the INFO after CONNECT); LOCAL and UNKNOWN headers and clients
that send no header at all keep the socket's address; a malformed header closes that
connection with nats-server's log line and nobody else notices."""
import json
import socket
import struct
import time

import pytest

from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd
from tools.serverproc import free_port

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(command, family, src=None, dst=None, extra=b""):
    """A version 2 header: command 0 LOCAL / 1 PROXY, family 0x11 TCP over IPv4, 0x21 IPv6."""
    body = b""
    if src is not None:
        ip_type = socket.AF_INET if family & 0xF0 == 0x10 else socket.AF_INET6
        body = (socket.inet_pton(ip_type, src[0]) + socket.inet_pton(ip_type, dst[0])
                + struct.pack(">HH", src[1], dst[1]))
    body += extra
    return V2_SIG + bytes([0x20 | command, family]) + struct.pack(">H", len(body)) + body


CASES = {
    "v1 tcp4": b"PROXY TCP4 192.0.2.7 198.51.100.1 40001 4222\r\n",
    "v1 tcp6": b"PROXY TCP6 2001:db8::7 2001:db8::1 40002 4222\r\n",
    "v1 unknown": b"PROXY UNKNOWN\r\n",
    "v2 tcp4": v2(1, 0x11, ("192.0.2.9", 40003), ("198.51.100.1", 4222)),
    "v2 tcp6 with a TLV": v2(1, 0x21, ("2001:db8::9", 40004), ("2001:db8::1", 4222), extra=b"\x04\x00\x01x"),
    "v2 local": v2(0, 0x00),
    "no header": b"",
    "v1 in pieces": (b"PRO", b"XY TCP4 192.0.2.8 198.51.100.1 40005 ", b"4222\r\n"),
    "v2 in pieces": (V2_SIG[:5], v2(1, 0x11, ("192.0.2.10", 40006), ("198.51.100.1", 4222))[5:20],
                     v2(1, 0x11, ("192.0.2.10", 40006), ("198.51.100.1", 4222))[20:]),
}
BAD = {
    "v1 garbage": b"PROXY TCP4 not-an-ip 198.51.100.1 1 2\r\n",
    "v1 tcp4 with ipv6": b"PROXY TCP4 2001:db8::7 198.51.100.1 1 2\r\n",
    "v2 udp": v2(1, 0x12, ("192.0.2.9", 1), ("198.51.100.1", 2)),
    "v2 bad version": V2_SIG + b"\x31\x11\x00\x00",
}


def _start(kind, tmp_path):
    conf = tmp_path / ("%s.conf" % kind)
    conf.write_text("proxy_protocol: true\n")
    proc = ServerProcess(list(natsd_cmd() if kind == "natsd" else nats_server_cmd())
                         + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1", "-m", str(free_port())])
    proc.wait_ready()
    return proc


def _read_until(sock, end, timeout=5):
    sock.settimeout(timeout)
    buf = b""
    while end not in buf:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:        # closed with our bytes unread
            break
        if not chunk:
            break
        buf += chunk
    return buf


def _session(srv, header):
    """Header, CONNECT, PING: the first INFO's keys, the answer and the connection's
    address as /connz lists it (while the socket stays open). A header given as a tuple
    goes out in those pieces, a moment apart."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    try:
        info = json.loads(_read_until(s, b"\r\n").split(b" ", 1)[1])
        pieces = list(header) if isinstance(header, tuple) else [header]
        for piece in pieces[:-1]:
            s.sendall(piece)
            time.sleep(0.05)
        s.sendall(pieces[-1] + b'CONNECT {"verbose":false,"name":"lb"}\r\nPING\r\n')
        answer = _read_until(s, b"PONG\r\n")
        conns = [c for c in http_json(srv.http_port, "/connz")["connections"] if c.get("name") == "lb"]
        where = (conns[0]["ip"], conns[0]["port"]) if conns else None
        local = where is not None and where[0] == "127.0.0.1" and where[1] == s.getsockname()[1]
        return {"client_ip in INFO": "client_ip" in info, "answer": answer.endswith(b"PONG\r\n"),
                "address": "socket" if local else where}
    finally:
        s.close()


def _bad(srv, header):
    """A malformed header: what the connection gets (nothing, closed) and whether a client
    beside it still works."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    _read_until(s, b"\r\n")
    s.sendall(header + b'CONNECT {"verbose":false}\r\nPING\r\n')
    got = _read_until(s, b"PONG\r\n")
    s.close()
    return {"pong": b"PONG" in got, "other client": _session(srv, b"")["answer"]}


def test_proxy_protocol_headers_as_nats_server(tmp_path):
    got = {}
    for kind in ("natsd", "nats-server"):
        srv = _start(kind, tmp_path)
        try:
            got[kind] = {name: _session(srv, header) for name, header in CASES.items()}
            got[kind].update({name: _bad(srv, header) for name, header in BAD.items()})
            deadline = time.monotonic() + 5
            while srv.log.count("Error reading PROXY protocol header from") < len(BAD) and time.monotonic() < deadline:
                time.sleep(0.05)
            got[kind]["log lines"] = [line.split(": ", 1)[1] for line in srv.log.splitlines()
                                      if "Error reading PROXY protocol header from" in line]
            got[kind]["notice"] = "PROXY protocol enabled for client connections" in srv.log
        finally:
            srv.kill()
    assert got["natsd"] == got["nats-server"], got
    ref = got["nats-server"]
    assert ref["v1 tcp4"]["address"] == ("192.0.2.7", 40001) and ref["v2 tcp4"]["address"] == ("192.0.2.9", 40003)
    assert ref["no header"]["address"] == ref["v2 local"]["address"] == "socket"
    assert ref["v1 garbage"] == {"pong": False, "other client": True} and len(ref["log lines"]) == len(BAD)


@pytest.mark.parametrize("data,expected", [
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nPING\r\n", (("1.2.3.4", 1), b"PING\r\n")),
    (b"PROXY TCP6 ::ffff:1.2.3.4 ::1 65535 2\r\n", (("1.2.3.4", 65535), b"")),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1", None),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
     'invalid source port: strconv.ParseUint: parsing "65536": value out of range'),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 x\r\n", 'invalid dest port: strconv.ParseUint: parsing "x": invalid syntax'),
    (b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", "invalid PROXY protocol header: invalid protocol UDP4"),
    (b"PROXY TCP4 1.2.3.4\r\n", "invalid PROXY protocol header: invalid v1 format"),
    (b"PROXY " + b"x" * 101, "invalid PROXY protocol header: v1 line too long"),
    (b"PROXY\r\nCONNECT {}\r\n", (None, b"PROXY\r\nCONNECT {}\r\n")),     # not a header: the client's
    (b"PING\r\n", (None, b"PING\r\n")),
    (b"PING", None),
    (V2_SIG + b"\x21\x11\x00\x04abcd", "IPv4 address data too short: 4 bytes"),
    (V2_SIG + b"\x22\x11\x00\x00", "unknown PROXY protocol command: 0x02"),
    (V2_SIG + b"\x21\x31\x00\x00", "unsupported PROXY protocol feature: unsupported address family 0x30"),
    (V2_SIG + b"\x20\x00\x00\x02ab+", (None, b"+")),                      # LOCAL
    (V2_SIG + b"\x21\x01\x00\x02ab+", (None, b"+")),                      # PROXY, UNSPEC
    (V2_SIG + b"\x21\x00\x00\x00", "unsupported PROXY protocol feature: only STREAM protocol supported"),
    (V2_SIG + b"\x21\x11\x00\x0c" + b"\x01" * 11, None),                  # the address block still coming
    (b"\r\n\r\n\x00\rXXXXXX\x21\x11\x00\x00", "invalid PROXY protocol header: invalid signature"),
])
def test_the_header_reader_follows_nats_servers_rules(data, expected):
    """natsd/net/proxyproto.py alone: nats-server's client_proxyproto.go decisions and texts
    (a PROXY header, not enough bytes yet, no header, or the error)."""
    from natsd.net.proxyproto import ProxyHeaderError, read_header
    try:
        h = read_header(data)
    except ProxyHeaderError as e:
        assert str(e) == expected
        return
    assert (h if h is None else (h.addr, h.rest)) == expected
