"""The raw WebSocket client of the protocol tests: the upgrade request, masked frames out,
frames in (permessage-deflate aware), close codes."""
import base64
import os
import socket
import struct
import time
import zlib


def upgrade_request(port, path="/", key=None, version="13", extra=(), method="GET", host=True):
    key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
    lines = ["%s %s HTTP/1.1" % (method, path)]
    if host:
        lines.append("Host: 127.0.0.1:%d" % port)
    lines += ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
              "Sec-WebSocket-Version: " + version]
    lines += list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class WsClient:
    def __init__(self, port, extra=(), path="/", sock=None, timeout=5.0):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.sendall(upgrade_request(port, path, extra=extra))
        self.buf = b""
        self.head = self._read_head()
        self.status = int(self.head.split(b" ", 2)[1])
        self.compressed = b"permessage-deflate" in self.head
        self.closed_with = None

    def _recv(self, timeout=5.0):
        self.sock.settimeout(timeout)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def _read_head(self):
        while b"\r\n\r\n" not in self.buf:
            self._recv()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        return head

    # ---- frames ----

    def send_frame(self, payload, opcode=2, fin=True, mask=True, rsv1=False):
        b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
        n = len(payload)
        if n < 126:
            hdr = bytes([b0, (0x80 if mask else 0) | n])
        elif n < 65536:
            hdr = bytes([b0, (0x80 if mask else 0) | 126]) + struct.pack(">H", n)
        else:
            hdr = bytes([b0, (0x80 if mask else 0) | 127]) + struct.pack(">Q", n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i & 3] for i, b in enumerate(payload))
            hdr += key
        self.sock.sendall(hdr + payload)

    def send(self, data, compress=False):
        if compress:
            co = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
            data = co.compress(data) + co.flush(zlib.Z_SYNC_FLUSH)
            assert data.endswith(b"\x00\x00\xff\xff")
            self.send_frame(data[:-4], rsv1=True)
        else:
            self.send_frame(data)

    def read_frame(self, timeout=5.0):
        """(opcode, fin, rsv1, payload)."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 2:
                b0, b1 = self.buf[0], self.buf[1]
                n, at = b1 & 0x7F, 2
                if n == 126 and len(self.buf) >= 4:
                    n, at = struct.unpack(">H", self.buf[2:4])[0], 4
                elif n == 127 and len(self.buf) >= 10:
                    n, at = struct.unpack(">Q", self.buf[2:10])[0], 10
                if (b1 & 0x7F) < 126 or at > 2:
                    if len(self.buf) >= at + n:
                        payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
                        return b0 & 0x0F, bool(b0 & 0x80), bool(b0 & 0x40), payload
            self._recv(max(0.01, deadline - time.monotonic()))

    def read_message(self, timeout=5.0):
        """The next data message (inflated), control frames recorded on the way."""
        parts, compressed = [], False
        while True:
            op, fin, rsv1, payload = self.read_frame(timeout)
            if op == 8:
                self.closed_with = (struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None,
                                    payload[2:])
                raise EOFError("close frame %r" % (self.closed_with,))
            if op in (9, 10):
                continue
            if op in (1, 2):
                compressed = rsv1
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                if compressed:
                    data = zlib.decompressobj(-15).decompress(data + b"\x00\x00\xff\xff")
                return data

    def read_until(self, token, timeout=5.0):
        out = b""
        deadline = time.monotonic() + timeout
        while token not in out:
            out += self.read_message(max(0.05, deadline - time.monotonic()))
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
