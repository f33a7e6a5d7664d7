"""NATS message headers as JetStream reads and writes them: the `NATS/1.0` block parsed
(first value per key, as nats-server's sliceHeader) and built, the Nats-TTL value read and
parsed (parseMessageTTL). Generic reads and edits (and a request's `Nats-Request-Info`) are
natsd/headers.py's."""
from natsd.gofmt import parse_go_duration
from natsd.headers import slice_header

NS = 1_000_000_000


def parse_headers(hdr):
    """NATS/1.0 header block -> dict of the first value per key (keys as sent)."""
    out = {}
    if not hdr:
        return out
    lines = hdr.split(b"\r\n")
    for line in lines[1:]:
        if not line:
            continue
        i = line.find(b":")
        if i <= 0:
            continue
        k = line[:i].decode("utf-8", "replace").strip()
        if k not in out:
            out[k] = line[i + 1:].strip().decode("utf-8", "replace")
    return out


def build_headers(pairs, base=None, status=None):
    """Encode headers; `base` is an existing header block whose entries come first."""
    if base:
        head = base[:-2] if base.endswith(b"\r\n\r\n") else base + b"\r\n"
        if not head.endswith(b"\r\n"):
            head += b"\r\n"
    else:
        head = b"NATS/1.0" + ((" " + status).encode() if status else b"") + b"\r\n"
    for k, v in pairs:
        head += k.encode() + b": " + str(v).encode() + b"\r\n"
    return head + b"\r\n"


def header_lines(hdr):
    """Every `key: value` line of a header block, in order (repeats kept)."""
    out = []
    for line in (hdr or b"").split(b"\r\n")[1:]:
        i = line.find(b":")
        if i > 0:
            out.append((line[:i].decode("utf-8", "replace").strip(),
                        line[i + 1:].strip().decode("utf-8", "replace")))
    return out


def parse_ttl(v):
    """nats-server's parseMessageTTL: Nats-TTL value -> seconds (-1 = never); ValueError when
    invalid. A Go duration of at least 1s, or digits only (int64, wrapping like Go's parseInt64)."""
    if v.lower() == "never":
        return -1
    try:
        d = parse_go_duration(v)
    except ValueError:
        if not v or not v.isascii() or not v.isdigit():
            raise ValueError(v)
        n = 0
        for c in v:
            n = (n * 10 + ord(c) - 48) & 0xFFFFFFFFFFFFFFFF
        if n >= 1 << 63:
            raise ValueError(v)      # wrapped negative: nats-server's parse failure value
        return n
    if d < NS:
        raise ValueError(v)
    return d // NS


def ttl_header(hdr):
    """The Nats-TTL value as nats-server reads it (sliceHeader), or None."""
    v = slice_header(hdr, b"Nats-TTL")
    return None if v is None else bytes(v).decode("utf-8", "surrogateescape")


