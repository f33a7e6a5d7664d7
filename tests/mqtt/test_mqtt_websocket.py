"""MQTT over WebSocket as nats-server serves it: the `/mqtt` path answers 101 with the `mqtt`
subprotocol and then carries MQTT packets in binary frames; without an `mqtt {}` block the
path is refused (404)."""
import socket

import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

WS_LISTEN = r"Listening for websocket clients on ws://[^ ]*:(\d+)"
UPGRADE = ("GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: mqtt\r\n\r\n").encode()


def _frame(payload: bytes) -> bytes:
    """A masked binary frame (zero mask: the payload as is)."""
    assert len(payload) < 126
    return bytes((0x82, 0x80 | len(payload))) + b"\0\0\0\0" + payload


def _exchange(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(UPGRADE)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        head, _, rest = head.partition(b"\r\n\r\n")
        s.sendall(_frame(M.connect("ws-dev")))
        while len(rest) < 6:
            rest += s.recv(4096)
        return sorted(head.split(b"\r\n")), rest[:6]


def test_mqtt_path_upgrade_and_connack(starters, tmp_path):
    out = on_both(starters, tmp_path, lambda srv: _exchange(int(srv.proc.wait_log(WS_LISTEN).group(1))),
                  top_extra="websocket { port: -1, no_tls: true }")
    assert out[0] == out[1]
    head, frame = out[0]
    assert b"Sec-Websocket-Protocol: mqtt" in head
    assert frame == b"\x82\x04\x20\x02\x00\x00"          # CONNACK in a binary frame


def test_mqtt_path_without_mqtt_is_not_found(starters, tmp_path):
    out = []
    for kind in ("natsd", "nats-server"):
        srv = starters[kind]("-c", _ws_only(tmp_path, kind), "-p", "-1")
        port = int(srv.wait_log(WS_LISTEN).group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(UPGRADE)
            out.append(s.recv(4096).split(b"\r\n")[0])
    assert out[0] == out[1] == b"HTTP/1.1 404 Not Found"


def _ws_only(tmp_path, kind):
    f = tmp_path / (kind + ".conf")
    f.write_text("websocket { port: -1, no_tls: true }\n")
    return str(f)
