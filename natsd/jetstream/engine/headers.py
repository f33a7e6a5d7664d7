"""NATS message headers as JetStream reads and writes them: the `NATS/1.0` block parsed
(first value per key, as nats-server's sliceHeader), built, edited (nats-server's setHeader),
the Nats-TTL value read and parsed (parseMessageTTL), and the ClientInfo of a request's
`Nats-Request-Info` (getRequestInfo)."""
import json

from natsd.gofmt import parse_go_duration

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


def slice_header(hdr, name):
    """nats-server's sliceHeader: the value of the first `\r\n<name>:` line, leading blanks
    skipped, the rest kept (bytes); None without one."""
    key = b"\r\n" + name + b":"
    i = hdr.find(key) if hdr else -1
    if i < 0:
        return None
    i += len(key)
    while i < len(hdr) and hdr[i] == 0x20:
        i += 1
    j = hdr.find(b"\r\n", i)
    return hdr[i:j if j >= 0 else len(hdr)]


def request_info(hdr):
    """The ClientInfo a request's `Nats-Request-Info` header carries, as nats-server's
    getRequestInfo reads it: {} for a request without headers; None for headers without it,
    or with one that is not a JSON object (nats-server refuses those)."""
    if not hdr:
        return {}
    try:
        ci = json.loads(slice_header(bytes(hdr), b"Nats-Request-Info") or b"")
    except ValueError:
        return None
    return ci if isinstance(ci, dict) else None


def ttl_header(hdr):
    """The Nats-TTL value as nats-server reads it (sliceHeader), or None."""
    v = slice_header(hdr, b"Nats-TTL")
    return None if v is None else bytes(v).decode("utf-8", "surrogateescape")


def set_header(hdr, key, value):
    """nats-server's setHeader: replace the first `key:` line's value, or append the line."""
    line = key.encode() + b": " + value.encode()
    if not hdr:
        return b"NATS/1.0\r\n" + line + b"\r\n\r\n"
    k = b"\r\n" + key.encode() + b":"
    i = hdr.find(k)
    if i < 0:
        return hdr[:-2] + line + b"\r\n\r\n"
    j = hdr.find(b"\r\n", i + 2)
    return hdr[:i + 2] + line + hdr[j:]


def remove_header(hdr, key):
    """nats-server's removeHeaderIfPresent: drop the first `key:` line; a header block left
    with no lines becomes None."""
    k = b"\r\n" + key.encode() + b":"
    i = hdr.find(k) if hdr else -1
    if i < 0:
        return hdr
    j = hdr.find(b"\r\n", i + 2)
    if j < 0:
        return hdr
    hdr = hdr[:i + 2] + hdr[j + 2:]
    return None if len(hdr) <= len(b"NATS/1.0\r\n\r\n") else hdr
