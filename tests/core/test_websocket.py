"""WebSocket clients on natsd and nats-server side by side: nats-py over ws:// and wss://, the
upgrade's checks and answers (key, version, method, origins, permessage-deflate,
Nats-No-Masking), frames (masking required, ping/pong, close codes, compression both ways),
the websocket block's own authorization and cookies, and the handshake timeout."""
import asyncio
import json
import re
import socket
import ssl

import nats
import pytest

from tests.support.wsclient import WsClient, upgrade_request
from tools.serverproc import free_port


def ws_server(factory, tmp_path, block="no_tls: true", extra=""):
    port = free_port()
    p = tmp_path / "ws.conf"
    p.write_text("websocket {\n  port: %d\n  %s\n}\n%s" % (port, block, extra))
    srv = factory("-c", str(p))
    srv.ws_port = port
    return srv


def nats_py_roundtrip(url, **kw):
    async def go():
        nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, **kw)
        sub = await nc.subscribe("w.x")
        await nc.publish("w.x", b"over websocket" * 20)
        msg = await sub.next_msg(5)
        await nc.close()
        return msg.data
    return asyncio.run(go())


def ws_connect(srv, **connect):
    c = WsClient(srv.ws_port, extra=connect.pop("extra", ()))
    assert c.status == 101, c.head
    info = json.loads(c.read_until(b"\r\n")[5:].split(b"\r\n")[0])
    opts = {"verbose": False, "pedantic": False}
    opts.update(connect)
    c.send(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
    return c, info


def test_nats_py_over_ws(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path)
    assert nats_py_roundtrip("ws://127.0.0.1:%d" % srv.ws_port) == b"over websocket" * 20


def test_nats_py_over_wss(any_server, tmp_path, pki):
    cert, key = pki["server"]
    srv = ws_server(any_server, tmp_path, 'tls { cert_file: "%s", key_file: "%s" }' % (cert, key))
    ctx = ssl.create_default_context(cafile=pki["ca"])
    assert nats_py_roundtrip("wss://localhost:%d" % srv.ws_port, tls=ctx) == b"over websocket" * 20


def test_info_over_ws(natsd, reference, tmp_path):
    keys = {}
    for name, factory in (("natsd", natsd), ("nats-server", reference)):
        srv = ws_server(factory, tmp_path)
        c, info = ws_connect(srv)
        assert c.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
        keys[name] = set(info)
        c.close()
    assert keys["natsd"] == keys["nats-server"] - {"git_commit"}


def test_pubsub_frames(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path)
    c, _ = ws_connect(srv)
    c.read_until(b"PONG\r\n")
    c.send(b"SUB f 1\r\nPUB f 5\r\nhello\r\nPING\r\n")
    assert c.read_until(b"PONG\r\n").startswith(b"MSG f 1 5\r\nhello\r\n")
    c.close()


@pytest.mark.parametrize("extra,status,reason", [
    (("Sec-WebSocket-Version: 12",), 400, "invalid version"),
    (("Origin: http://evil.example.com",), 403, "origin not allowed: not in the allowed list"),
])
def test_refused_upgrades(any_server, tmp_path, extra, status, reason):
    srv = ws_server(any_server, tmp_path, 'no_tls: true\n  allowed_origins: ["http://good.example.com"]')
    s = socket.create_connection(("127.0.0.1", srv.ws_port), timeout=5)
    req = upgrade_request(srv.ws_port)
    if extra[0].startswith("Sec-WebSocket-Version"):
        req = req.replace(b"Sec-WebSocket-Version: 13", extra[0].encode())
    else:
        req = req.replace(b"\r\n\r\n", b"\r\n" + extra[0].encode() + b"\r\n\r\n")
    s.sendall(req)
    resp = b""
    s.settimeout(5)
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        resp += chunk
        if b"\r\n\r\n" in resp and resp.endswith(b"\n"):
            break
    assert resp.startswith(b"HTTP/1.1 %d " % status), resp
    assert b"Sec-Websocket-Version: 13" in resp
    srv.wait_log(re.escape("websocket handshake error: " + reason), 5)
    s.close()


def test_origin_allowed(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path, 'no_tls: true\n  allowed_origins: ["http://good.example.com"]')
    c = WsClient(srv.ws_port, extra=("Origin: http://good.example.com",))
    assert c.status == 101
    c.close()


def test_unmasked_frame_is_a_protocol_error(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path)
    c, _ = ws_connect(srv)
    c.read_until(b"PONG\r\n")
    c.send_frame(b"PING\r\n", mask=False)
    with pytest.raises(EOFError):
        c.read_until(b"never", 5)
    # dropped; nats-server queues a 1002 close frame first, which may or may not make it out
    # before the socket closes
    assert c.closed_with in (None, (1002, b"mask bit missing"))
    srv.wait_log(r" - wid:\d+ - read error: mask bit missing", 5)


def test_ping_pong_and_close(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path)
    c, _ = ws_connect(srv)
    c.read_until(b"PONG\r\n")
    c.send_frame(b"are you there", opcode=9)
    op, fin, _, payload = c.read_frame()
    assert (op, fin, payload) == (10, True, b"are you there")
    c.send_frame(b"\x03\xe8bye", opcode=8)
    op, _, _, payload = c.read_frame()
    assert (op, payload) == (8, b"\x03\xe8bye")


def test_compression_both_ways(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path, "no_tls: true\n  compression: true")
    c, _ = ws_connect(srv, extra=("Sec-WebSocket-Extensions: permessage-deflate; "
                                  "client_no_context_takeover; server_no_context_takeover",))
    assert c.compressed
    assert b"server_no_context_takeover; client_no_context_takeover" in c.head
    c.read_until(b"PONG\r\n")
    c.send(b"SUB z 1\r\n", compress=True)
    body = b"x" * 1000
    c.send(b"PUB z %d\r\n%s\r\nPING\r\n" % (len(body), body), compress=True)
    # the message comes back compressed (RSV1 set on its first frame)
    got = b""
    saw_rsv1 = False
    while b"PONG" not in got:
        op, fin, rsv1, payload = c.read_frame()
        saw_rsv1 = saw_rsv1 or rsv1
        got += __import__("zlib").decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff") \
            if rsv1 else payload
    assert b"MSG z 1 1000\r\n" + body in got and saw_rsv1


def test_no_masking_for_leafnode_style_clients(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path)
    c = WsClient(srv.ws_port, extra=("Nats-No-Masking: true",))
    assert b"Nats-No-Masking: true" in c.head
    c.read_until(b"\r\n")
    c.send_frame(b'CONNECT {"verbose":false}\r\nPING\r\n', mask=False)
    assert c.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
    c.close()


def test_websocket_authorization_and_cookies(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path, "no_tls: true\n  authorization { user: wsu, password: wsp }\n"
                    "  user_cookie: u\n  pass_cookie: p")
    c, info = ws_connect(srv, user="wsu", **{"pass": "wsp"})
    assert info.get("auth_required") is True
    assert c.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
    c.close()
    c = WsClient(srv.ws_port, extra=("Cookie: u=wsu; p=wsp",))
    c.read_until(b"\r\n")
    c.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
    assert c.read_until(b"PONG\r\n").endswith(b"PONG\r\n")
    c.close()
    c, _ = ws_connect(srv, user="wsu", **{"pass": "nope"})
    with pytest.raises(EOFError):
        c.read_until(b"never")
    assert c.closed_with[0] == 1008


def test_handshake_timeout(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path, 'no_tls: true\n  handshake_timeout: "500ms"')
    s = socket.create_connection(("127.0.0.1", srv.ws_port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\n")
    s.settimeout(5)
    t0 = __import__("time").monotonic()
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    assert __import__("time").monotonic() - t0 < 3
    print(srv.argv[0], got)
    s.close()


def _upgrade_status(srv, *extra):
    c = WsClient(srv.ws_port, extra=extra)
    try:
        return c.status, c.head
    finally:
        c.close()


def test_same_origin_and_custom_headers(any_server, tmp_path):
    """`same_origin`: an Origin must name the host the client reached; `headers`: sent with the
    101 answer. (`origins` is one of allowed_origins' names.)"""
    srv = ws_server(any_server, tmp_path, 'no_tls: true\n  same_origin: true\n  headers { X-Team: "blue" }')
    status, head = _upgrade_status(srv, "Origin: http://127.0.0.1:%d" % srv.ws_port)
    assert status == 101 and b"\r\nX-Team: blue" in head
    assert _upgrade_status(srv, "Origin: http://elsewhere.example.com")[0] == 403
    srv.kill()
    srv = ws_server(any_server, tmp_path, 'no_tls: true\n  origins: ["http://good.example.com"]')
    assert _upgrade_status(srv, "Origin: http://good.example.com")[0] == 101
    assert _upgrade_status(srv, "Origin: http://evil.example.com")[0] == 403


def test_compress_is_compression(any_server, tmp_path):
    srv = ws_server(any_server, tmp_path, "no_tls: true\n  compress: true")
    status, head = _upgrade_status(srv, "Sec-WebSocket-Extensions: permessage-deflate")
    assert status == 101 and b"permessage-deflate" in head
