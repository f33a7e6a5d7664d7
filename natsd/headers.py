"""NATS header blocks (`NATS/1.0\r\n` lines, a blank line last) as nats-server reads and
rewrites them: a value by name (sliceHeader), a value replaced where it is (setHeader), a line
removed (removeHeaderIfPresent), a header the server puts on a message in flight, which
replaces every line of that name and goes last (the client's setHeader), and the ClientInfo
of a request's `Nats-Request-Info` (getRequestInfo)."""
import json


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
