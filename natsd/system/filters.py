"""What a `$SYS.REQ` request asks of the answer besides its data: which servers answer
(nats-server's EventFilterOptions) and how the answer is encoded (Accept-Encoding).

A request body may name `server_name`, `host` and `cluster` (each matched as a substring, or
exactly with `exact_match`), `tags` (the server must have every one) and `domain` (its
JetStream domain). A server that does not match stays silent. A body that is not a JSON
object, or whose filter fields have the wrong types, filters nothing: the endpoint then
answers with its own decoding error, as nats-server's zReq does.

A request with an `Accept-Encoding` header gets its answer (when it is not an error) as a
Snappy framed stream ("snappy" or "s2" asked), gzip ("gzip"), or as it is with
`Content-Encoding: identity` (anything else), like nats-server's.
"""
import gzip
import json

from natsd._core.s2 import snappy_stream
from natsd.accounts.latency import mime_headers


def filtered_out(server, payload):
    """True when the request's filter leaves this server out."""
    if not payload or not payload.strip():
        return False
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    wanted = [body.get(k) or "" for k in ("server_name", "host", "cluster")]
    tags = body.get("tags") or []
    domain = body.get("domain") or ""
    if (not all(isinstance(w, str) for w in wanted + [domain]) or not isinstance(tags, list)
            or not all(isinstance(t, str) for t in tags)):
        return False
    mine = (server.name, server.opts.host or "", server.cluster_name() or "")
    if body.get("exact_match") is True:
        if any(w and w != m for w, m in zip(wanted, mine)):
            return True
    elif any(w and w not in m for w, m in zip(wanted, mine)):
        return True
    have = {t.lower() for t in server.opts.server_tags or ()}
    if any(t.lower() not in have for t in tags):
        return True
    return bool(domain) and domain != server.jetstream_domain()


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
        body = gzip.compress(body, mtime=0)
    return b"NATS/1.0\r\nContent-Encoding: %s\r\n\r\n" % encoding.encode(), body
