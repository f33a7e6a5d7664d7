"""Which servers answer a `$SYS.REQ` request (nats-server's EventFilterOptions).

A request body may name `server_name`, `host` and `cluster` (each matched as a substring, or
exactly with `exact_match`), `tags` (the server must have every one) and `domain` (its
JetStream domain). A server that does not match stays silent. A body that is not a JSON
object, or whose filter fields have the wrong types, filters nothing: the endpoint then
answers with its own decoding error, as nats-server's zReq does. (How the answer is encoded,
Accept-Encoding, is natsd/headers.py's.)
"""
import json


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
