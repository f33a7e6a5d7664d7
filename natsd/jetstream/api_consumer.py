"""`$JS.API.CONSUMER.>` request handlers: create/update, info, list, names, delete, pause, next.

Owns the consumer half of the JetStream API. The dispatcher (api.py) calls
`handle(jsa, tokens, subject, reply, hdr, payload)` with `tokens` = subject tokens after `API.`
(e.g. ["CONSUMER", "CREATE", "ORDERS", "dur"]). This module sends the JSON reply itself
(`io.nats.jetstream.api.v1.consumer_*_response`) to `reply` in the account, counts failures
with `jsa.api_error(err)`, and returns None. Pull requests (`CONSUMER.MSG.NEXT.<s>.<c>`) are
handed to the consumer, which answers with messages or status headers.

Request checks follow nats-server's jsConsumerCreateRequest (jetstream_api.go) and
addConsumerWithAssignment (consumer.go); error codes are nats-server's (errors.py).
"""
import json
import logging

from natsd._core.router import publish
from natsd.jetstream import consumerconfig as cc
from natsd.jetstream import errors as E
from natsd.jetstream.consumer import Consumer, consumer_dir, now_ns, _ephemeral_name
from natsd.subject import subjects_overlap

log = logging.getLogger("natsd")

NAMES_LIMIT = 1024
LIST_LIMIT = 256


def _send(jsa, reply, data):
    jsa.last_api_response = data        # read by the API audit advisory (api.py)
    if reply:
        if isinstance(reply, str):
            reply = reply.encode()
        publish(jsa.sublist, reply, None, None, data)


def _respond(jsa, reply, type_name, payload):
    if isinstance(payload, E.ApiError):
        fn = getattr(jsa, "api_error", None)
        if fn is not None:
            fn(payload)
    _send(jsa, reply, E.api_response(type_name, payload))


def _stream(jsa, name):
    fn = getattr(jsa, "lookup", None)
    if fn is not None:
        return fn(name)
    return getattr(jsa, "streams", {}).get(name)


def _strict(jsa):
    engine = getattr(jsa, "engine", None)
    return getattr(engine, "strict", True)


def _parse_json(payload):
    try:
        return json.loads(payload)
    except ValueError as e:
        raise E.error("JSInvalidJSONErr", err=_go_json_err(payload, e))


def _go_json_err(payload, e):
    msg = getattr(e, "msg", str(e))
    pos = getattr(e, "pos", 0)
    if isinstance(payload, (bytes, bytearray)):
        ch = payload[pos:pos + 1].decode("latin-1")
    else:
        ch = payload[pos:pos + 1]
    if msg.startswith("Expecting property name"):
        return "invalid character '%s' looking for beginning of object key string at offset %d" % (
            ch, pos + 1) if ch else "unexpected end of JSON input"
    if msg.startswith("Expecting value"):
        if not ch:
            return "unexpected end of JSON input"
        return "invalid character '%s' looking for beginning of value at offset %d" % (ch, pos + 1)
    return msg


def _empty(payload):
    return not payload or not payload.strip()


def handle(jsa, tokens, subject, reply, hdr, payload):
    """Entry point for every `$JS.API.CONSUMER.>` request (returns None; replies itself)."""
    if isinstance(subject, bytes):
        subject = subject.decode()
    if isinstance(reply, bytes):
        reply = reply.decode()
    tokens = [t.decode() if isinstance(t, bytes) else t for t in tokens]
    payload = payload or b""
    if len(tokens) < 2:
        return None
    op = tokens[1]
    try:
        if op == "CREATE" and len(tokens) >= 3:
            return _create(jsa, tokens, reply, hdr, payload, legacy_durable=False)
        if op == "DURABLE" and len(tokens) >= 3 and tokens[2] == "CREATE":
            return _create(jsa, tokens, reply, hdr, payload, legacy_durable=True)
        if op == "INFO" and len(tokens) == 4:
            return _info(jsa, tokens[2], tokens[3], reply, payload)
        if op == "DELETE" and len(tokens) == 4:
            return _delete(jsa, tokens[2], tokens[3], reply, payload)
        if op == "NAMES" and len(tokens) == 3:
            return _names(jsa, tokens[2], reply, payload, names_only=True)
        if op == "LIST" and len(tokens) == 3:
            return _names(jsa, tokens[2], reply, payload, names_only=False)
        if op == "PAUSE" and len(tokens) == 4:
            return _pause(jsa, tokens[2], tokens[3], reply, payload)
        if op == "MSG" and len(tokens) == 5 and tokens[2] == "NEXT":
            return _next(jsa, tokens[3], tokens[4], reply, hdr, payload)
        if op == "LEADER" and len(tokens) == 5 and tokens[2] == "STEPDOWN":
            _respond(jsa, reply, "consumer_leader_stepdown_response",
                     E.error("JSClusterNotActiveErr"))
            return None
        if op in ("UNPIN", "RESET") and len(tokens) == 4:
            return _unpin_reset(jsa, op, tokens[2], tokens[3], reply, payload)
    except Exception:
        log.exception("JetStream consumer API request %s failed", subject)
    return None


# ---- create ----

def _create(jsa, tokens, reply, hdr, payload, legacy_durable):
    rtype = "consumer_create_response"
    try:
        obj = _parse_json(payload) if not _empty(payload) else {}
        stream_name, cfg, action, pedantic = cc.decode_create_request(obj)
    except E.ApiError as err:
        if not _strict(jsa) and "unknown field" in err.description:
            obj = {k: v for k, v in obj.items() if k in ("stream_name", "config", "action", "pedantic")}
            if isinstance(obj.get("config"), dict):
                obj["config"] = {k: v for k, v in obj["config"].items() if k in cc.FIELD_KINDS}
            stream_name, cfg, action, pedantic = cc.decode_create_request(obj)
        else:
            _respond(jsa, reply, rtype, err)
            return None
    filtered = ""
    if legacy_durable:
        if len(tokens) != 5:
            _respond(jsa, reply, rtype, E.error("JSConsumerDurableNameNotInSubjectErr"))
            return None
        sname, cname = tokens[3], tokens[4]
    else:
        sname = tokens[2]
        cname = tokens[3] if len(tokens) > 3 else cfg["name"]
        if len(tokens) > 4:
            filtered = ".".join(tokens[4:])
    if sname != stream_name:
        _respond(jsa, reply, rtype, E.error("JSStreamMismatchErr"))
        return None
    if cname and ("\\" in cname or "/" in cname):
        _respond(jsa, reply, rtype, E.error("JSConsumerNameContainsPathSeparatorsErr"))
        return None
    if legacy_durable:
        if not cfg["durable_name"]:
            _respond(jsa, reply, rtype, E.error("JSConsumerDurableNameNotSetErr"))
            return None
        if cname != cfg["durable_name"]:
            _respond(jsa, reply, rtype, E.error("JSConsumerDurableNameNotMatchSubjectErr"))
            return None
        cfg["name"] = cname
    elif len(tokens) > 3:
        if cfg["durable_name"] and cname != cfg["durable_name"]:
            _respond(jsa, reply, rtype, E.error("JSConsumerDurableNameNotMatchSubjectErr"))
            return None
        cfg["name"] = cname
    elif cfg["durable_name"]:
        _respond(jsa, reply, rtype, E.error("JSConsumerEphemeralWithDurableNameErr"))
        return None
    if filtered and cfg["filter_subjects"]:
        _respond(jsa, reply, rtype, E.error("JSConsumerMultipleFiltersNotAllowed"))
        return None
    if filtered and cfg["filter_subject"] != filtered:
        _respond(jsa, reply, rtype, E.error("JSConsumerCreateFilterSubjectMismatchErr"))
        return None
    if cfg["num_replicas"] > 1:
        _respond(jsa, reply, rtype, E.error("JSStreamReplicasNotSupportedErr"))
        return None
    if cfg.get("direct") and cfg.get("sourcing") and cfg["name"]:
        # a mirror/source elsewhere asks with a stable name; like nats-server, make each
        # create unique so a retry never collides with the consumer it replaces
        cfg["name"] = "%s-%s" % (cfg["name"], _ephemeral_name())
    stream = _stream(jsa, stream_name)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    try:
        o = create_consumer(jsa, stream, cfg, action, pedantic)
    except E.ApiError as err:
        _respond(jsa, reply, rtype, err)
        return None
    _respond(jsa, reply, rtype, o.info(initial=True))
    return None


def create_consumer(jsa, stream, cfg, action="create_or_update", pedantic=False):
    """Create (or update) a consumer on `stream`; raises ApiError. Used by the API and mirrors."""
    existing_name = cfg["durable_name"] or cfg["name"]
    eo = stream.consumers.get(existing_name) if existing_name else None
    if eo is not None:
        cfg["pause_until"] = eo.cfg["pause_until"]
    cc.set_static_metadata(cfg)
    scfg = stream.config
    cc.set_defaults(cfg, scfg, pedantic)
    if not cfg["durable_name"] and cfg["inactive_threshold"] <= 0:
        cfg["inactive_threshold"] = cc.DEFAULT_INACTIVE
    cc.check(cfg, scfg)
    retention = scfg.get("retention", "limits")
    if eo is not None:
        if action == "create" and cfg != eo.cfg:
            raise E.error("JSConsumerAlreadyExists")
        if retention == "workqueue" and not _partition_unique(stream, existing_name, cc.filters(cfg)):
            raise E.error("JSConsumerWQConsumerNotUniqueErr")
        err = cc.check_update(eo.cfg, cfg, eo.is_push() and eo._has_interest())
        if err is not None:
            raise err
        if cfg != eo.cfg:
            eo.update_config(cfg)
        return eo
    if action == "update":
        raise E.error("JSConsumerDoesNotExist")
    maxc = int(scfg.get("max_consumers") or -1)
    acc_max = int((getattr(jsa, "limits", None) or {}).get("max_consumers", -1) or -1)
    if maxc <= 0 or (0 < acc_max < maxc):
        maxc = acc_max
    if maxc > 0 and len([c for c in stream.consumers.values() if not getattr(c, "internal", False)]) >= maxc:
        raise E.error("JSMaximumConsumersLimitErr")
    if retention == "workqueue" and not cfg["direct"]:
        if cfg["ack_policy"] not in ("explicit", "flow_control"):
            raise E.error("JSConsumerWQRequiresExplicitAckErr")
        if cfg["deliver_policy"] != "all":
            raise E.error("JSConsumerWQConsumerNotDeliverAllErr")
        if [c for c in stream.consumers.values() if not getattr(c, "internal", False)]:
            fl = cc.filters(cfg)
            if not fl:
                raise E.error("JSConsumerWQMultipleUnfilteredErr")
            if not _partition_unique(stream, existing_name, fl):
                raise E.error("JSConsumerWQConsumerNotUniqueErr")
    if cfg["durable_name"]:
        if len(cfg["durable_name"]) > cc.MAX_NAME_LEN:
            raise E.error("JSConsumerNameTooLongErrF", max=cc.MAX_NAME_LEN)
        name = cfg["durable_name"]
    elif cfg["name"]:
        name = cfg["name"]
    else:
        name = _ephemeral_name()
        while name in stream.consumers:
            name = _ephemeral_name()       # not stamped into the config (as nats-server)
    if not cc.valid_asset_name(name):
        raise E.error("JSConsumerBadDurableNameErr")
    o = Consumer(stream, name, cfg, now_ns())
    persistent = (scfg.get("storage", "file") == "file" and not cfg["mem_storage"]
                  and not cfg["direct"])
    if persistent:
        d = consumer_dir(stream, name)
        if d:
            o.directory = d
            try:
                from natsd.jetstream import persist
                persist.remove_dir(d)
                persist.write_meta(d, o)
            except OSError as e:
                raise E.error("JSConsumerStoreFailedErrF", err=str(e))
    stream.consumers[name] = o
    o.start()
    o.save_now()
    o.advisory("CREATED", "io.nats.jetstream.advisory.v1.consumer_action", action="create")
    return o


def _partition_unique(stream, name, fl):
    for c in stream.consumers.values():
        if c.name == name or getattr(c, "internal", False):
            continue
        other = c.filters
        if not other:
            return False
        for a in fl:
            for b in other:
                if subjects_overlap(a, b):
                    return False
    return True


# ---- info / delete / names / list ----

def _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=True):
    if need_empty and not _empty(payload):
        _respond(jsa, reply, rtype, E.error("JSNotEmptyRequestErr"))
        return None
    stream = _stream(jsa, sname)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    o = stream.consumers.get(cname)
    if o is None or getattr(o, "internal", False):
        _respond(jsa, reply, rtype, E.error("JSConsumerNotFoundErr"))
        return None
    return o


def _info(jsa, sname, cname, reply, payload):
    rtype = "consumer_info_response"
    o = _lookup(jsa, sname, cname, reply, rtype, payload)
    if o is not None:
        _respond(jsa, reply, rtype, o.info())
    return None


def _delete(jsa, sname, cname, reply, payload):
    rtype = "consumer_delete_response"
    o = _lookup(jsa, sname, cname, reply, rtype, payload)
    if o is not None:
        o.delete()
        _respond(jsa, reply, rtype, {"success": True})
    return None


def _names(jsa, sname, reply, payload, names_only):
    rtype = "consumer_names_response" if names_only else "consumer_list_response"
    offset = 0
    if not _empty(payload):
        try:
            req = _parse_json(payload)
        except E.ApiError as err:
            _respond(jsa, reply, rtype, err)
            return None
        if isinstance(req, dict):
            try:
                offset = max(0, int(req.get("offset") or 0))
            except (TypeError, ValueError):
                _respond(jsa, reply, rtype, E.error("JSInvalidJSONErr",
                                                    err="json: cannot unmarshal offset"))
                return None
    stream = _stream(jsa, sname)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    names = sorted(n for n, c in stream.consumers.items() if not getattr(c, "internal", False))
    limit = NAMES_LIMIT if names_only else LIST_LIMIT
    offset = min(offset, len(names))
    page = names[offset:offset + limit]
    out = {"total": len(names), "offset": offset, "limit": limit}
    if names_only:
        out["consumers"] = page
    else:
        out["consumers"] = [stream.consumers[n].info(dynamic_metadata=False) for n in page]
        out["missing"] = None
        del out["missing"]
    _respond(jsa, reply, rtype, out)
    return None


# ---- pause ----

def _pause(jsa, sname, cname, reply, payload):
    rtype = "consumer_pause_response"
    pause = None
    if not _empty(payload):
        try:
            req = _parse_json(payload)
        except E.ApiError as err:
            _respond(jsa, reply, rtype, err)
            return None
        pu = req.get("pause_until") if isinstance(req, dict) else None
        if pu:
            try:
                pause = (pu, cc.parse_time(pu))
            except ValueError as e:
                _respond(jsa, reply, rtype, E.error("JSInvalidJSONErr", err=str(e)))
                return None
    o = _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=False)
    if o is None:
        return None
    if pause is not None and pause[1] <= now_ns():
        pause = None
    if pause is not None:
        pause = (cc.format_time(pause[1]), pause[1])
    was = o.cfg["pause_until"]
    o.set_pause(pause)
    if (was is None) != (pause is None) or (was and pause and was[1] != pause[1]):
        o.advisory("PAUSE", "io.nats.jetstream.advisory.v1.consumer_pause",
                   paused=pause is not None,
                   pause_until=cc.format_time(pause[1]) if pause else None)
    out = {"paused": pause is not None,
           "pause_until": pause[0] if pause else "0001-01-01T00:00:00Z"}
    if pause is not None:
        out["pause_remaining"] = max(0, pause[1] - now_ns())
    _respond(jsa, reply, rtype, out)
    return None


def _unpin_reset(jsa, op, sname, cname, reply, payload):
    rtype = "consumer_unpin_response" if op == "UNPIN" else "consumer_reset_response"
    o = _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=False)
    if o is None:
        return None
    if op == "UNPIN":
        _respond(jsa, reply, rtype, E.error("JSConsumerInvalidPriorityGroupErr"))
    else:
        _respond(jsa, reply, rtype, E.error("JSConsumerInvalidResetErr",
                                            err="not supported"))
    return None


# ---- pull ----

def _next(jsa, sname, cname, reply, hdr, payload):
    if not reply:
        return None
    stream = _stream(jsa, sname)
    if stream is None:
        return None
    o = stream.consumers.get(cname)
    if o is None or o.closed:
        return None
    if o.waiting is None:
        from natsd.jetstream.pull import status_hdr
        o.send_status(reply, status_hdr(409, "Consumer is push based"))
        return None
    o.waiting.request(reply, payload, hdr)
    return None
