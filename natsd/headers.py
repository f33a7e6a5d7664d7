"""NATS header blocks (`NATS/1.0\r\n` lines, a blank line last) as nats-server reads and
rewrites them: a value by name (sliceHeader), a value replaced where it is (setHeader), a line
removed (removeHeaderIfPresent), a header the server puts on a message in flight, which
replaces every line of that name and goes last (the client's setHeader), and the ClientInfo
of a request's `Nats-Request-Info` (getRequestInfo); a block read as Go's http.Header, and an
answer encoded as its request's `Accept-Encoding` asks (Snappy framed, gzip, or identity)."""
import json

from natsd._core.s2 import snappy_stream


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


def put_last(hdr: bytes | None, name: str, value: str) -> bytes:
    """`hdr` (None: no headers yet) with `name: value` last and no other `name` line."""
    lines = hdr[:-4].split(b"\r\n") if hdr and hdr.endswith(b"\r\n\r\n") else [b"NATS/1.0"]
    key = name.encode() + b":"
    kept = [lines[0]] + [line for line in lines[1:] if not line.startswith(key)]
    return b"\r\n".join(kept + [key + b" " + value.encode()]) + b"\r\n\r\n"


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


def canonical_key(key: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey: `x-b3-traceid` -> `X-B3-Traceid`."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in key.split("-"))


def mime_headers(hdr) -> dict[str, list[str]]:
    """A NATS/1.0 header block as Go's http.Header: canonical keys, every value."""
    out: dict[str, list[str]] = {}
    for line in bytes(hdr or b"").split(b"\r\n")[1:]:
        i = line.find(b":")
        if i > 0:
            key = canonical_key(line[:i].decode("utf-8", "replace").strip())
            out.setdefault(key, []).append(line[i + 1:].strip().decode("utf-8", "replace"))
    return out


def accept_encoding(hdr):
    """The encoding a request's headers ask for: "snappy", "gzip", "identity" or None."""
    if not hdr:
        return None
    ae = (mime_headers(hdr).get("Accept-Encoding") or [""])[0].lower()
    if not ae:
        return None
    if "snappy" in ae or "s2" in ae:
        return "snappy"
    return "gzip" if "gzip" in ae else "identity"


def encoded(encoding, body):
    """(headers, body) of an answer in `encoding` (accept_encoding's; None: as it is)."""
    if encoding is None or not body:
        return None, body
    if encoding == "snappy":
        body = snappy_stream(body)
    elif encoding == "gzip":
        import gzip
        body = gzip.compress(body, mtime=0)
    return b"NATS/1.0\r\nContent-Encoding: %s\r\n\r\n" % encoding.encode(), body
