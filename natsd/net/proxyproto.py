"""The PROXY protocol header a load balancer puts before a client's first byte
(`proxy_protocol: true`): version 1 (a text line) and version 2 (binary), read as nats-server
2.12+ reads them, with its error texts.

`read_header(buf)` looks at what has arrived so far and answers one of:
- None: not enough bytes to tell yet;
- Header(addr, rest): a header was read; `addr` is the (host, port) it names, or None for
  LOCAL/UNKNOWN/UNSPEC (the socket's own address stands); `rest` is what follows it;
- Header(None, buf) with `recognized` False: the client sent no header (its bytes are its own).
It raises ProxyHeaderError with nats-server's text for a header it cannot use.
"""
import ipaddress
import struct

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX = b"PROXY "
V1_MAX_LINE = 107                   # the longest v1 line, CRLF included
DETECT = 6                          # bytes that tell v1, v2 or no header apart
READ_TIMEOUT = 5.0                  # nats-server's proxyProtoReadTimeout (seconds)


class ProxyHeaderError(Exception):
    pass


class Header:
    __slots__ = ("addr", "rest", "recognized")

    def __init__(self, addr, rest, recognized=True):
        self.addr = addr
        self.rest = rest
        self.recognized = recognized


def _invalid(why):
    return ProxyHeaderError("invalid PROXY protocol header: " + why)


def read_header(buf: bytes):
    if len(buf) < DETECT:
        return None
    if buf[:DETECT] == V1_PREFIX:
        return _v1(buf)
    if buf[:DETECT] == V2_SIGNATURE[:DETECT]:
        return _v2(buf)
    return Header(None, buf, recognized=False)


def _v1(buf):
    end = buf.find(b"\r\n", DETECT, V1_MAX_LINE)
    if end < 0:
        if len(buf) >= V1_MAX_LINE:
            raise _invalid("v1 line too long")
        return None
    parts = buf[DETECT:end].decode("latin-1").split()
    rest = buf[end + 2:]
    if not parts:
        raise _invalid("invalid v1 format")
    if parts[0] == "UNKNOWN":
        return Header(None, rest)
    if len(parts) != 5:
        raise _invalid("invalid v1 format")
    protocol, src, dst = parts[0], _ip(parts[1]), _ip(parts[2])
    if src is None or dst is None:
        raise _invalid("invalid address")
    src_port = _port(parts[3], "source")
    _port(parts[4], "dest")
    src_v6, dst_v6 = ":" in parts[1], ":" in parts[2]
    if protocol == "TCP4" and (src_v6 or dst_v6):
        raise _invalid("TCP4 with IPv6 address")
    if protocol == "TCP6" and (not src_v6 or not dst_v6):
        raise _invalid("TCP6 with IPv4 address")
    if protocol not in ("TCP4", "TCP6"):
        raise _invalid("invalid protocol " + protocol)
    return Header((_go_ip(src), src_port), rest)


def _go_ip(ip):
    """Go's net.IP.String(): an IPv4-mapped IPv6 address prints as IPv4."""
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped if mapped is not None else ip)


def _ip(text):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _port(text, which):
    """Go's strconv.ParseUint(text, 10, 16) with nats-server's wording around its error."""
    if not text.isdigit() or not text.isascii():
        raise ProxyHeaderError('invalid %s port: strconv.ParseUint: parsing "%s": invalid syntax' % (which, text))
    if int(text) > 0xFFFF:
        raise ProxyHeaderError('invalid %s port: strconv.ParseUint: parsing "%s": value out of range' % (which, text))
    return int(text)


def _v2(buf):
    """Checked in nats-server's order: the fixed part first, the address block once whole."""
    if len(buf) < 16:
        return None
    if buf[:12] != V2_SIGNATURE:
        raise _invalid("invalid signature")
    ver_cmd, fam_proto, length = buf[12], buf[13], struct.unpack(">H", buf[14:16])[0]
    if ver_cmd & 0xF0 != 0x20:
        raise _invalid("invalid version 0x%02x" % (ver_cmd & 0xF0))
    command, family, protocol = ver_cmd & 0x0F, fam_proto & 0xF0, fam_proto & 0x0F
    if command not in (0x00, 0x01):
        raise ProxyHeaderError("unknown PROXY protocol command: 0x%02x" % command)
    if command == 0x01:
        if protocol != 0x01:
            raise ProxyHeaderError("unsupported PROXY protocol feature: only STREAM protocol supported")
        if family not in (0x00, 0x10, 0x20):
            raise ProxyHeaderError("unsupported PROXY protocol feature: unsupported address family 0x%02x"
                                   % family)
        if family == 0x10 and length < 12:
            raise ProxyHeaderError("IPv4 address data too short: %d bytes" % length)
        if family == 0x20 and length < 36:
            raise ProxyHeaderError("IPv6 address data too short: %d bytes" % length)
    if len(buf) < 16 + length:
        return None
    body, rest = buf[16:16 + length], buf[16 + length:]
    if command == 0x00 or family == 0x00:           # LOCAL (a health check), or UNSPEC
        return Header(None, rest)
    if family == 0x10:
        src, port = ipaddress.IPv4Address(body[0:4]), struct.unpack(">H", body[8:10])[0]
    else:
        src, port = ipaddress.IPv6Address(body[0:16]), struct.unpack(">H", body[32:34])[0]
    return Header((_go_ip(src), port), rest)
