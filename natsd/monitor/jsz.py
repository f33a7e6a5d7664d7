"""`/jsz` and `$SYS.REQ.SERVER.PING.JSZ` / `$SYS.REQ.ACCOUNT.<acc>.JSZ`: JetStream figures.

Without JetStream (`server.jetstream` missing or None) the answer is nats-server's disabled
shape: zeroed `JetStreamStats`, `disabled: true`, `config: {max_memory: 0, max_storage: 0}`.
`leader-only` then fails with "filtered response: not leader" (`SkipResponse`: HTTP 400; a
`$SYS` responder must stay silent instead, like nats-server's errSkipZreq).

When JetStream exists, `server.jetstream` must offer (all values JSON-ready, nats-server names):
  - `enabled` (bool attribute), `is_leader()` -> bool (True when not clustered)
  - `config()` -> dict: max_memory, max_storage, store_dir, sync_interval, domain, ...
  - `limits()` -> dict (JSLimitOpts) or None
  - `usage()` -> dict JetStreamStats: memory, storage, reserved_memory, reserved_storage,
    accounts, ha_assets, api {level, total, errors, inflight}
  - `meta_cluster()` -> dict (MetaClusterInfo) or None
  - `accounts()` -> list of JS accounts, each with:
      `name`, `usage()` -> dict (memory, storage, reserved_memory, reserved_storage,
      api {total, errors}), `streams()` -> list of streams, each with:
        `name`, `created` (unix seconds), `config()` -> dict, `state()` -> dict (StreamState:
        messages, bytes, first_seq, ..., consumer_count), `consumers()` -> consumers each with
        `info()` -> dict ConsumerInfo (with "config"), and optionally `direct_consumers()`,
        `cluster_info()`, `mirror_info()`, `sources_info()`, `raft_group` (str), `is_leader()`.
The same interface feeds `/metrics` (per-stream and per-consumer families).
"""
import time
from dataclasses import dataclass

from natsd.monitor import params as P


class SkipResponse(P.OptionsError):
    """The request is filtered out: HTTP 400 with nats-server's text; $SYS: no reply at all."""


@dataclass
class JszOptions:
    account: str = ""                   # query "acc"
    accounts: bool = False
    streams: bool = False
    consumer: bool = False              # query "consumers"
    direct_consumer: bool = False       # query "direct-consumers"
    config: bool = False
    leader_only: bool = False           # query "leader-only"
    offset: int = 0
    limit: int = 0
    raft: bool = False
    stream_leader_only: bool = False    # query "stream-leader-only"


def options_from_query(q):
    # decoded in nats-server's order so the first bad parameter is the one reported
    accounts = P.q_bool(q, "accounts")
    streams = P.q_bool(q, "streams")
    consumers = P.q_bool(q, "consumers")
    direct = P.q_bool(q, "direct-consumers")
    config = P.q_bool(q, "config")
    offset = P.q_int(q, "offset")
    limit = P.q_int(q, "limit")
    leader = P.q_bool(q, "leader-only")
    raft = P.q_bool(q, "raft")
    sleader = P.q_bool(q, "stream-leader-only")
    return JszOptions(account=P.q_str(q, "acc"), accounts=accounts, streams=streams,
                      consumer=consumers, direct_consumer=direct, config=config,
                      leader_only=leader, offset=offset, limit=limit, raft=raft,
                      stream_leader_only=sleader)


def options_from_json(body):
    b, S = P.j_body(body), "JSzOptions"
    return JszOptions(account=P.j_str(b, "account", S), accounts=P.j_bool(b, "accounts", S),
                      streams=P.j_bool(b, "streams", S), consumer=P.j_bool(b, "consumer", S),
                      direct_consumer=P.j_bool(b, "direct_consumer", S),
                      config=P.j_bool(b, "config", S), leader_only=P.j_bool(b, "leader_only", S),
                      offset=P.j_int(b, "offset", S), limit=P.j_int(b, "limit", S),
                      raft=P.j_bool(b, "raft", S),
                      stream_leader_only=P.j_bool(b, "stream_leader_only", S))


def _zero_stats():
    return {"memory": 0, "storage": 0, "reserved_memory": 0, "reserved_storage": 0,
            "accounts": 0, "ha_assets": 0, "api": {"level": 0, "total": 0, "errors": 0}}


def jetstream(server):
    js = getattr(server, "jetstream", None)
    if js is None or not getattr(js, "enabled", True):
        return None
    return js


# Metadata nats-server adds to stream and consumer configs only in JetStream API replies
# (setDynamicStreamMetadata); /jsz shows the stored config without them.
DYNAMIC_METADATA = ("_nats.ver", "_nats.level")


def stored_config(cfg):
    meta = cfg.get("metadata") if isinstance(cfg, dict) else None
    if not meta or not any(k in meta for k in DYNAMIC_METADATA):
        return cfg
    cfg = dict(cfg)
    meta = {k: v for k, v in meta.items() if k not in DYNAMIC_METADATA}
    if meta:
        cfg["metadata"] = meta
    else:
        del cfg["metadata"]
    return cfg


def _consumer_info(con, opts):
    info = dict(con.info())
    if not opts.config:
        info.pop("config", None)
    elif "config" in info:
        info["config"] = stored_config(info["config"])
    return info


def _stream_detail(server, stream, opts):
    sd = {"name": stream.name, "created": P.now_rfc3339(stream.created)}
    ci = stream.cluster_info() if hasattr(stream, "cluster_info") else None
    if ci:
        sd["cluster"] = ci
    if opts.config:
        sd["config"] = stored_config(stream.config())
    sd["state"] = stream.state()
    if opts.consumer:
        cons = [_consumer_info(con, opts) for con in stream.consumers()]
        if cons:
            sd["consumer_detail"] = cons
        if opts.direct_consumer and hasattr(stream, "direct_consumers"):
            direct = [_consumer_info(c, opts) for c in stream.direct_consumers()]
            if direct:
                sd["direct_consumer_detail"] = direct
    for key, attr in (("mirror", "mirror_info"), ("sources", "sources_info")):
        fn = getattr(stream, attr, None)
        val = fn() if fn else None
        if val:
            sd[key] = val
    if opts.raft and getattr(stream, "raft_group", ""):
        sd["stream_raft_group"] = stream.raft_group
        if opts.consumer:
            groups = [{"name": c["name"], "raft_group": stream.raft_group}
                      for c in sd.get("consumer_detail") or ()]
            if groups:
                sd["consumer_raft_groups"] = groups
    return sd


def account_detail(server, jsa, opts):
    d = {"name": jsa.name, "id": jsa.name}
    d.update(jsa.usage())
    if opts.streams:
        streams = []
        for stream in jsa.streams():
            if opts.stream_leader_only and hasattr(stream, "is_leader") and not stream.is_leader():
                continue
            streams.append(_stream_detail(server, stream, opts))
        if streams:
            d["stream_detail"] = streams
    return d


def handler(server, opts):
    offset = max(opts.offset, 0)
    limit = opts.limit or 1024
    if opts.consumer:
        opts.streams = True
    if opts.streams and not opts.account:
        opts.accounts = True
    now = P.now_rfc3339(time.time())
    js = jetstream(server)
    if js is None:
        if opts.leader_only:
            raise SkipResponse("filtered response: not leader")
        out = _zero_stats()
        out.update({"server_id": server.id, "now": now, "disabled": True,
                    "config": {"max_memory": 0, "max_storage": 0}, "streams": 0, "consumers": 0,
                    "messages": 0, "bytes": 0, "total": 0})
        return out
    if opts.leader_only and not js.is_leader():
        raise SkipResponse("filtered response: not leader")
    accounts = list(js.accounts())
    out = dict(js.usage())
    out.update({"server_id": server.id, "now": now, "config": js.config()})
    limits = js.limits()
    if limits is not None:
        out["limits"] = limits
    n_streams = n_consumers = messages = nbytes = streams_led = consumers_led = 0
    for jsa in accounts:
        for stream in jsa.streams():
            st = stream.state()
            n_streams += 1
            messages += st.get("messages", 0)
            nbytes += st.get("bytes", 0)
            n_consumers += st.get("consumer_count", 0)
            if opts.raft and (not hasattr(stream, "is_leader") or stream.is_leader()):
                streams_led += 1
                consumers_led += len(stream.consumers())
    out["streams"] = n_streams
    if streams_led:
        out["streams_leader"] = streams_led
    out["consumers"] = n_consumers
    if consumers_led:
        out["consumers_leader"] = consumers_led
    out.update({"messages": messages, "bytes": nbytes})
    meta = js.meta_cluster()
    if meta:
        out["meta_cluster"] = meta
    chosen = [a for a in accounts if a.name == opts.account]
    if not chosen and opts.accounts:
        chosen = P.paginate(sorted(accounts, key=lambda a: a.name), offset, limit)
    if chosen:
        out["account_details"] = [account_detail(server, a, opts) for a in chosen]
    out["total"] = len(accounts)
    return out


def account_handler(server, opts):
    """`$SYS.REQ.ACCOUNT.<acc>.JSZ`: that account's AccountDetail alone (nats-server's
    JszAccount); `streams` lists the streams, `consumer` and `config` add to them."""
    js = jetstream(server)
    if js is None:
        raise P.OptionsError("jetstream not enabled")
    if server.accounts.accounts.get(opts.account) is None:
        raise P.OptionsError('account "%s" not found' % opts.account)
    jsa = next((a for a in js.accounts() if a.name == opts.account), None)
    if jsa is None:
        raise P.OptionsError('account "%s" not jetstream enabled' % opts.account)
    return account_detail(server, jsa, opts)
