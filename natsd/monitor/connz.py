"""`/connz` and `$SYS.REQ.SERVER.PING.CONNZ`: open and recently closed client connections.

Follows nats-server's `Server.Connz` (monitor.go): same options, defaults, errors, sort orders
(only cid/start and uptime/reason ascending, the rest descending), pagination and field set.
Client and leaf node connections are listed (routes and gateways have their own endpoints).
Closed connections come from `server.closed_clients`; their figures are frozen at close.
"""
import base64
import json
import time
from dataclasses import dataclass

from natsd._core.conn import monotonic
from natsd.accounts.clientinfo import client_type, raw_auth_user
from natsd.monitor import params as P

GLOBAL = "$G"
LISTED_KINDS = ("Client", "Leafnode")
SORT_OPTIONS = ("cid", "start", "subs", "pending", "msgs_to", "msgs_from", "bytes_to",
                "bytes_from", "last", "idle", "uptime", "stop", "reason", "rtt")
DEFAULT_LIMIT = 1024


@dataclass
class ConnzOptions:
    sort: str = ""
    auth: bool = False                  # JSON "auth"
    subscriptions: bool = False
    subscriptions_detail: bool = False
    offset: int = 0
    limit: int = 0
    cid: int = 0
    mqtt_client: str = ""
    state: int = P.CONN_OPEN            # JSON: 0 open, 1 closed, 2 any
    user: str = ""
    account: str = ""                   # JSON "acc"
    filter_subject: str = ""


def options_from_query(q):
    auth = P.q_bool(q, "auth")
    subs, detail = P.q_subs(q)
    return ConnzOptions(sort=P.q_str(q, "sort"), auth=auth, subscriptions=subs,
                        subscriptions_detail=detail, offset=P.q_int(q, "offset"),
                        limit=P.q_int(q, "limit"), cid=P.q_uint64(q, "cid"), state=P.q_state(q),
                        mqtt_client=P.q_str(q, "mqtt_client"), user=P.q_str(q, "user"),
                        account=P.q_str(q, "acc"))


def options_from_json(body):
    b, S = P.j_body(body), "ConnzOptions"
    state = P.j_int(b, "state", S)
    return ConnzOptions(sort=P.j_str(b, "sort", S), auth=P.j_bool(b, "auth", S),
                        subscriptions=P.j_bool(b, "subscriptions", S),
                        subscriptions_detail=P.j_bool(b, "subscriptions_detail", S),
                        offset=P.j_int(b, "offset", S), limit=P.j_int(b, "limit", S),
                        cid=P.j_int(b, "cid", S, unsigned=True), state=state,
                        mqtt_client=P.j_str(b, "mqtt_client", S), user=P.j_str(b, "user", S),
                        account=P.j_str(b, "acc", S),
                        filter_subject=P.j_str(b, "filter_subject", S))


# ---- per-connection facts ----

def kind_of(c):
    return getattr(c.state, "kind", None) or "Client"


def connz_auth_user(st):
    return raw_auth_user(st.connect or {}, str(st.nkey or st.user or ""))


def _redact_bearer(jwt):
    if not jwt:
        return ""
    try:
        payload = jwt.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        if claims.get("nats", {}).get("bearer_token"):
            return ""
    except (IndexError, ValueError, AttributeError):
        pass
    return jwt


def account_name(c):
    acc = c.state.account
    return acc.name if acc is not None else ""


def sub_detail(s, cid, with_account=None):
    d = {}
    if with_account:
        d["account"] = with_account
        d["account_tag"] = with_account
    d["subject"] = s.subject.decode("utf-8", "replace")
    if s.queue is not None:
        d["qgroup"] = s.queue.decode("utf-8", "replace")
    d["sid"] = s.sid.decode("utf-8", "replace")
    d["msgs"] = s.delivered
    if s.max_msgs:
        d["max"] = s.max_msgs
    d["cid"] = cid
    return d


def wall_last_activity(c, now, mono_now):
    return now - (mono_now - c.last_activity)


def conn_info(c, now, mono_now, opts, closed=False):
    """One ConnInfo (nats-server field order); '_'-prefixed keys are sort keys, removed later."""
    st = c.state
    kind = kind_of(c)
    last = wall_last_activity(c, now, mono_now)
    end = (st.stop or now) if closed else now
    ci = {"cid": c.cid, "kind": kind}
    if kind == "Client":
        ci["type"] = client_type(st)
    if st.port:
        ci["ip"] = st.host
        ci["port"] = st.port
    else:
        ci["ip"] = ""
        ci["port"] = 0
    ci["start"] = P.now_rfc3339(st.start)
    ci["last_activity"] = P.now_rfc3339(last)
    if closed:
        ci["stop"] = P.now_rfc3339(end)
        if st.reason:
            ci["reason"] = st.reason
    ci["rtt"] = P.rtt_string(c.rtt)
    ci["uptime"] = P.my_uptime(end - st.start)
    ci["idle"] = P.my_uptime(end - last)
    ci["pending_bytes"] = 0 if closed else c.pending_bytes()
    ci["in_msgs"] = c.in_msgs
    ci["out_msgs"] = c.out_msgs
    ci["in_bytes"] = c.in_bytes
    ci["out_bytes"] = c.out_bytes
    subs = subscriptions_of(c)
    ci["subscriptions"] = len(subs)
    for key, val in (("name", st.name), ("lang", st.lang), ("version", st.version)):
        if val:
            ci[key] = val
    tls = getattr(st, "tls", None)
    if tls and not closed:
        if isinstance(tls, dict):
            for key in ("tls_version", "tls_cipher_suite", "tls_peer_certs", "tls_first"):
                if tls.get(key) and (opts.auth or key != "tls_peer_certs"):
                    ci[key] = tls[key]
    acc = account_name(c)
    if opts.auth:
        user = connz_auth_user(st)
        if user:
            ci["authorized_user"] = user
        if acc and acc != GLOBAL:
            ci["account"] = acc
    if subs:
        if opts.subscriptions_detail:
            ci["subscriptions_list_detail"] = [
                sub_detail(s, c.cid, acc if closed else None) for s in subs]
        elif opts.subscriptions:
            ci["subscriptions_list"] = [s.subject.decode("utf-8", "replace") for s in subs]
    if opts.auth:
        jwt = _redact_bearer((st.connect or {}).get("jwt") or "")
        if jwt:
            ci["jwt"] = jwt
        user = getattr(st, "jwt_user", None)
        if user is not None:
            ci["issuer_key"] = user.claims.issuer
        account = getattr(st, "account", None)
        tag = account.name_tag if account is not None else acc
        if closed:
            if acc and acc != GLOBAL:
                ci["name_tag"] = tag
        elif acc:
            ci["name_tag"] = tag
        if user is not None and user.claims.nats.get("tags"):
            ci["tags"] = list(user.claims.nats["tags"])
    mqtt_id = mqtt_client_id(c)
    if mqtt_id:
        ci["mqtt_client"] = mqtt_id
    ci["_last"] = last
    ci["_stop"] = end
    ci["_start"] = st.start
    ci["_rtt"] = c.rtt
    return ci


_SORT_KEYS = {
    "subs": lambda ci: ci["subscriptions"],
    "pending": lambda ci: ci["pending_bytes"],
    "msgs_to": lambda ci: ci["out_msgs"],
    "msgs_from": lambda ci: ci["in_msgs"],
    "bytes_to": lambda ci: ci["out_bytes"],
    "bytes_from": lambda ci: ci["in_bytes"],
    "last": lambda ci: ci["_last"],
    "stop": lambda ci: ci["_stop"],
    "rtt": lambda ci: ci["_rtt"],
}


def _sort(infos, sort, now):
    if sort in ("", "cid", "start"):
        infos.sort(key=lambda ci: ci["cid"])
    elif sort in _SORT_KEYS:
        infos.sort(key=_SORT_KEYS[sort], reverse=True)
    elif sort == "idle":
        infos.sort(key=lambda ci: now - ci["_last"], reverse=True)
    elif sort == "uptime":
        infos.sort(key=lambda ci: ci["_stop"] - ci["_start"])
    elif sort == "reason":
        infos.sort(key=lambda ci: ci.get("reason", ""))


def open_connections(server):
    """Client and leaf connections, by cid (leaf connections may live in `server.leafs`)."""
    seen = dict(server.clients)
    for c in (getattr(server, "leafs", None) or {}).values():
        seen.setdefault(c.cid, c)
    return [c for c in seen.values() if kind_of(c) in LISTED_KINDS]


def handler(server, opts):
    sort = opts.sort
    if sort and sort not in SORT_OPTIONS:
        raise P.OptionsError("invalid sorting option: %s" % sort)
    offset = max(opts.offset, 0)
    limit = opts.limit if opts.limit > 0 else DEFAULT_LIMIT
    state = opts.state
    if state not in (P.CONN_OPEN, P.CONN_CLOSED, P.CONN_ALL):
        state = P.CONN_OPEN
    if sort == "stop" and state != P.CONN_CLOSED:
        raise P.OptionsError("sort by stop only valid on closed connections")
    if sort == "reason" and state != P.CONN_CLOSED:
        raise P.OptionsError("sort by reason only valid on closed connections")
    cid = opts.cid
    if cid > 0:
        limit = 1
    flt = ""
    if opts.filter_subject and opts.filter_subject != ">":
        if not opts.account:
            raise P.OptionsError("filter by subject only valid with account filtering")
        flt = opts.filter_subject
    now = time.time()
    mono_now = monotonic()
    out = {"server_id": server.id, "now": P.now_rfc3339(now), "num_connections": 0,
           "total": 0, "offset": offset, "limit": limit, "connections": []}

    acc_name = opts.account
    if acc_name:
        acc = server.accounts.accounts.get(acc_name) if hasattr(server.accounts, "accounts") \
            else server.accounts.get(acc_name)
        if acc is None:                 # nats-server answers an empty Connz here
            out["server_id"] = ""
            out["connections"] = None
            return out
        clist = [c for c in acc.clients if kind_of(c) in LISTED_KINDS]
    else:
        clist = open_connections(server)

    closed = []
    total = 0
    if state in (P.CONN_OPEN, P.CONN_ALL):
        total += len(clist)
    if state in (P.CONN_CLOSED, P.CONN_ALL):
        closed = list(server.closed_clients)
        total += len(closed)
    if acc_name and closed:             # closed records keep "" for the global account
        kept = [c for c in closed if _closed_acc(c) == acc_name]
        total -= len(closed) - len(kept)
        closed = kept
    out["total"] = total

    opened = []
    if cid > 0:
        if state in (P.CONN_OPEN, P.CONN_ALL):
            c = server.clients.get(cid)
            if c is not None and not c.closed:
                opened = [c]
                closed = []
        if not opened and state in (P.CONN_CLOSED, P.CONN_ALL):
            closed = [c for c in closed if c.cid == cid][:1]
    elif state in (P.CONN_OPEN, P.CONN_ALL):
        opened = [c for c in clist if _selected(c, account_name, acc_name, opts)]
    if flt:
        from natsd.subject import subjects_overlap
        opened = [c for c in opened if any(
            subjects_overlap(flt, s.subject.decode("utf-8", "replace")) for s in c.subs.values())]

    if not opened and not closed:
        return out

    infos = [conn_info(c, now, mono_now, opts) for c in opened]
    infos += [conn_info(c, now, mono_now, opts, closed=True) for c in closed
              if _selected(c, _closed_acc, acc_name, opts)]

    _sort(infos, sort, now)
    page = P.paginate(infos, offset, limit)
    for ci in page:
        for k in [k for k in ci if k[0] == "_"]:
            del ci[k]
    out["connections"] = page
    out["num_connections"] = len(page)
    return out


def _selected(c, account_of, acc_name, opts):
    """Whether the options' account (acc_name, compared with account_of(c)), user and MQTT
    client id select connection c."""
    if acc_name and account_of(c) != acc_name:
        return False
    if opts.user and connz_auth_user(c.state) != opts.user:
        return False
    return not opts.mqtt_client or mqtt_client_id(c) == opts.mqtt_client


def subscriptions_of(c) -> list:
    """A connection's subscriptions: a client's own, or an MQTT client's (its filters, their
    parent levels, its consumers' deliver subjects), as nats-server lists them."""
    m = getattr(c.state, "mqtt", None)
    if m is not None:
        return list(m.subs.values())
    return list(c.subs.values())


def mqtt_client_id(c) -> str:
    m = getattr(c.state, "mqtt", None)
    return m.client_id if m is not None else ""


def _closed_acc(c):
    name = account_name(c)
    return "" if name == GLOBAL else name
