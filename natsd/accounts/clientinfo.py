"""nats-server's ClientInfo of a connection (getClientInfo), as service latency metrics and
JetStream advisories carry it: always the account and the RTT; in detail also the server and
cluster, start, host, id, name, the raw auth user, lang, version, the user JWT with its issuer,
name and tags, and the connection's kind; and the user name nats-server shows for a connection
(getRawAuthUser)."""
from __future__ import annotations

from natsd.gofmt import go_time, omitempty

# ClientInfo's JSON fields in nats-server's struct order (json.Marshal writes them so)
FIELD_ORDER = ("start", "host", "id", "acc", "svc", "user", "name", "lang", "ver", "rtt", "server",
               "cluster", "alts", "stop", "jwt", "issuer_key", "name_tag", "tags", "kind",
               "client_type", "client_id", "nonce")

# What /connz shows as authorized_user for a token client (client.go getRawAuthUser).
REDACTED = "[REDACTED]"


def raw_auth_user(connect: dict, jwt_key: str = "") -> str:
    """nats-server's getRawAuthUser, what /connz, events and auth callout name a client by,
    authenticated or not: CONNECT's nkey, its user, the public key of its JWT (`jwt_key`, once
    verified), or a redacted token."""
    if connect.get("nkey"):
        return str(connect["nkey"])
    if connect.get("user"):
        return str(connect["user"])
    if connect.get("jwt"):
        return jwt_key
    return REDACTED if connect.get("auth_token") else ""


def alternates(server):
    """nats-server's `alts`: with gateways, the other clusters this server has an outbound
    connection to, the nearest (by RTT) first."""
    gateway = getattr(server, "gateway", None)
    if gateway is None:
        return []
    out = sorted(gateway.out.items(), key=lambda kv: getattr(kv[1], "rtt", 0) or 0)
    return [name for name, _ in out]


def client_info(c, account=None, server=None, detailed=True):
    """The ClientInfo of connection `c` (None for an internal publisher, which has no state).
    `account` stands in when the connection has none bound; `server` adds server and cluster."""
    st = getattr(c, "state", None)
    if c is None or st is None:
        return None
    acc = getattr(st, "account", None) or account
    user = getattr(st, "jwt_user", None)
    ci = {}
    if detailed:
        start = getattr(st, "start", None)
        if start:
            ci["start"] = go_time(int(start * 1e9))
        if getattr(st, "host", None):
            ci["host"] = st.host
        if getattr(c, "cid", 0):
            ci["id"] = c.cid
    if acc is not None:
        ci["acc"] = acc.name
    if detailed:
        connect = getattr(st, "connect", None) or {}
        ci.update(omitempty(("user", raw_auth_user(connect, str(getattr(st, "nkey", None) or ""))),
                            ("name", getattr(st, "name", "")), ("lang", getattr(st, "lang", "")),
                            ("ver", getattr(st, "version", ""))))
    if getattr(c, "rtt", 0):
        ci["rtt"] = int(c.rtt * 1e9)        # as measured (getRTT's truncation is for events)
    if detailed:
        if server is not None:
            ci["server"] = server.name
            cluster = server.cluster_name() if hasattr(server, "cluster_name") else ""
            if cluster:
                ci["cluster"] = cluster
            alts = alternates(server)
            if alts:
                ci["alts"] = alts
        if user is not None:
            ci["jwt"] = user.claims.token
            ci["issuer_key"] = user.claims.issuer
            if user.claims.name:
                ci["name_tag"] = user.claims.name
            if user.claims.nats.get("tags"):
                ci["tags"] = list(user.claims.nats["tags"])
        kind = getattr(st, "kind", None)
        ci["kind"] = kind if isinstance(kind, str) and kind else "Client"
        if ci["kind"] == "Client":          # (a link has none)
            ci["client_type"] = client_type(st)
    return ci


def client_type(st) -> str:
    """nats-server's clientTypeString of a client connection's state."""
    return "mqtt" if getattr(st, "mqtt", None) is not None else "websocket" if getattr(st, "ws", False) else "nats"


def in_field_order(ci: dict) -> dict:
    """A ClientInfo with its fields as nats-server orders them (unknown ones last)."""
    rank = {k: i for i, k in enumerate(FIELD_ORDER)}
    return dict(sorted(ci.items(), key=lambda kv: rank.get(kv[0], len(rank))))
