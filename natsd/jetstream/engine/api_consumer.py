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
import logging

from natsd._core.router import publish
from natsd.gofmt import go_time
from natsd.ids import random_token
from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine import gojson
from natsd.jetstream.engine.apilevel import required_level_too_high
from natsd.headers import slice_header
from natsd.jetstream.engine.consumer import Consumer, consumer_dir, now_ns
from natsd.jetstream.engine.streamconfig import (STEPDOWN_REQUEST, decode_optional_request,
                                                 is_one_file_name, is_utf8, name_len)
from natsd.subject import subjects_overlap

log = logging.getLogger("natsd")

NAMES_LIMIT = 1024
LIST_LIMIT = 256


def _send(jsa, reply, data, identity=None):
    jsa.last_api_response = data        # read by the API audit advisory (api.py)
    if reply:
        if isinstance(reply, str):
            reply = reply.encode("utf-8", "surrogateescape")
        hdr = None
        if identity is not None:
            hdr = b"NATS/1.0\r\nNats-Stream-Identity: %s\r\n\r\n" % identity.encode()
        publish(jsa.sublist, reply, None, hdr, data)
        due = getattr(jsa, "audits_due", None)
        request = due.pop(bytes(reply), None) if due else None
        if request is not None:         # an answer sent after its request's handler returned
            request.audit_consumer()


def _respond(jsa, reply, type_name, payload, identity=None):
    """Reply; `identity` adds the Nats-Stream-Identity header (API level 5)."""
    if isinstance(payload, E.ApiError):
        fn = getattr(jsa, "api_error", None)
        if fn is not None:
            fn(payload)
    _send(jsa, reply, E.api_response(type_name, payload), identity)


def _stream(jsa, name):
    fn = getattr(jsa, "lookup", None)
    if fn is not None:
        return fn(name)
    return getattr(jsa, "streams", {}).get(name)


def _strict(jsa):
    engine = getattr(jsa, "engine", None)
    return getattr(engine, "strict", True)


def _optional_request(jsa, reply, rtype, payload, spec, type_name):
    """A request body that may be left out, decoded ({} when it is), or None once its error
    has been answered."""
    try:
        return decode_optional_request(payload, spec, type_name, _strict(jsa))
    except E.ApiError as err:
        _respond(jsa, reply, rtype, err)
        return None


_RTYPES = {"CREATE": "consumer_create_response", "DURABLE": "consumer_create_response",
           "INFO": "consumer_info_response", "DELETE": "consumer_delete_response",
           "NAMES": "consumer_names_response", "LIST": "consumer_list_response",
           "PAUSE": "consumer_pause_response", "UNPIN": "consumer_unpin_response",
           "RESET": "consumer_reset_response", "LEADER": "consumer_leader_stepdown_response"}


def handle(jsa, tokens, subject, reply, hdr, payload):
    """Entry point for every `$JS.API.CONSUMER.>` request (returns None; replies itself)."""
    # subjects are bytes and need not be UTF-8: surrogateescape keeps them byte-exact
    if isinstance(subject, bytes):
        subject = subject.decode("utf-8", "surrogateescape")
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "surrogateescape")
    tokens = [t.decode("utf-8", "surrogateescape") if isinstance(t, bytes) else t for t in tokens]
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
            return _leader_stepdown(jsa, tokens[3], tokens[4], reply, payload)
        if op in ("UNPIN", "RESET") and len(tokens) == 4:
            return _unpin_reset(jsa, op, tokens[2], tokens[3], reply, payload, hdr)
    except Exception:
        # an unexpected failure: nats-server's generic error for the op, never the Python
        # error text; the traceback goes to the log
        log.exception("JetStream consumer API request %r failed", subject)
        rtype = _RTYPES.get(op)
        if rtype is not None and reply:
            key = "CONSUMER.DURABLE.CREATE" if op == "DURABLE" else "CONSUMER." + op
            _respond(jsa, reply, rtype, E.internal_error(key))
    return None


# ---- create ----

def _create(jsa, tokens, reply, hdr, payload, legacy_durable):
    rtype = "consumer_create_response"
    try:
        stream_name, cfg, action, pedantic = cc.decode_create_payload(payload, bool(_strict(jsa)))
    except E.ApiError as err:
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
    if cfg["num_replicas"] > 1 and getattr(jsa.engine, "meta", None) is None:
        _respond(jsa, reply, rtype, E.error("JSStreamReplicasNotSupportedErr"))
        return None
    if cfg.get("direct") and cfg.get("sourcing") and cfg["name"]:
        # a mirror/source elsewhere asks with a stable name; like nats-server, make each
        # create unique so a retry never collides with the consumer it replaces
        cfg["name"] = "%s-%s" % (cfg["name"], random_token(8))
    stream = _stream(jsa, stream_name)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    identity = None
    if cfg.get("direct") or cfg.get("sourcing"):
        # a mirror or source names the stream it expects (API level 5): a re-created stream
        # of the same name is refused, and the identity goes back with the reply
        identity = stream.identity()
        asked = slice_header(hdr, b"Nats-Stream-Identity")
        if asked and bytes(asked) != identity.encode():
            _respond(jsa, reply, rtype, E.error("JSConsumerStreamIdentityMismatchF", msg=identity))
            return None
    replicated = stream.replica is not None and stream.replica.consumers.wants(cfg, stream)
    try:
        if replicated:
            # checked here, created on every replica once the stream's group commits it; the
            # leader answers then (natsd/jetstream/replicated/consumers.py)
            eo, name = check_consumer(jsa, stream, cfg, action, pedantic)
            stream.replica.consumers.propose_create(cfg, name, eo.created if eo else now_ns(),
                                                    action, reply)
            return None

        def answer(info):
            _respond(jsa, reply, rtype, info, None if isinstance(info, E.ApiError) else identity)
        create_consumer(jsa, stream, cfg, answer, action, pedantic)
    except E.ApiError as err:
        _respond(jsa, reply, rtype, err)
    return None


def create_consumer(jsa, stream, cfg, ready, action="create_or_update", pedantic=False):
    """Create (or update) a consumer on `stream`; raises ApiError for what check_consumer
    refuses. ready(answer) runs once a new consumer's files are written (at once when it has
    none), with its info as of its creation or the ApiError of a store that failed (the
    consumer runs meanwhile, and is removed again if they fail)."""
    eo, name = check_consumer(jsa, stream, cfg, action, pedantic)
    if eo is not None:
        if cfg != eo.cfg:
            eo.update_config(cfg)
        ready(eo.info(initial=True))
        return
    persistent = (stream.config.get("storage", "file") == "file" and not cfg["mem_storage"]
                  and not cfg["direct"])
    d = consumer_dir(stream, name) if persistent else None
    if d and not is_one_file_name(name):
        # a name the file system refuses (NUL, more than 255 bytes) fails as nats-server's
        # store creation fails, before anything touches the disk
        raise _store_failed(jsa, stream, cfg, "invalid consumer directory name")
    o = Consumer(stream, name, cfg, now_ns())
    stream.consumers[name] = o
    o.holding = True                    # the answer goes out before the first message
    o.start()
    info = o.info(initial=True)

    def written(exc):
        if exc is not None:
            if stream.consumers.get(name) is o:
                del stream.consumers[name]
            o.stop(delete=True)
            ready(_store_failed(jsa, stream, cfg, exc))
            return
        if not o.closed:
            o.advisory("CREATED", "io.nats.jetstream.advisory.v1.consumer_action", action="create")
        ready(info)
        o.holding = False
        o.kick()
    if not d:
        written(None)
        return
    try:
        o.write_new_files(d, written)
    except ValueError as e:             # a config its JSON cannot hold
        written(e)


def check_consumer(jsa, stream, cfg, action, pedantic):
    """Fill in `cfg`'s defaults and check it against the stream, the limits and an existing
    consumer of the name, as nats-server does; raises ApiError. -> (the existing consumer or
    None, the consumer's name)."""
    existing_name = cfg["durable_name"] or cfg["name"]
    eo = _existing(stream, existing_name) if existing_name else None
    if eo is not None:
        cfg["pause_until"] = eo.cfg["pause_until"]
    cc.set_static_metadata(cfg)
    scfg = stream.config
    srv_limits = jsa.engine.opts.limits if jsa is not None else None
    acc_limits = getattr(jsa, "limits", None)
    cc.set_defaults(cfg, scfg, pedantic, srv_limits, acc_limits)
    if not cfg["durable_name"] and cfg["inactive_threshold"] <= 0:
        cfg["inactive_threshold"] = cc.DEFAULT_INACTIVE
    cc.check(cfg, scfg, srv_limits, acc_limits)
    retention = scfg.get("retention", "limits")
    if eo is not None:
        if action == "create" and cfg != eo.cfg:
            raise E.error("JSConsumerAlreadyExists")
        if retention == "workqueue" and not _partition_unique(stream, existing_name, cc.filters(cfg)):
            raise E.error("JSConsumerWQConsumerNotUniqueErr")
        err = cc.check_update(eo.cfg, cfg, eo.is_push() and eo._has_interest())
        if err is not None:
            raise err
        return eo, existing_name
    if action == "update":
        raise E.error("JSConsumerDoesNotExist")
    maxc = int(scfg.get("max_consumers") or -1)
    acc_max = int((getattr(jsa, "limits", None) or {}).get("max_consumers", -1) or -1)
    if maxc <= 0 or (0 < acc_max < maxc):
        maxc = acc_max
    # (the consumers are listed only for a rule that needs them: a stream with thousands,
    # MQTT's $MQTT_msgs, would list them all at every create)
    if maxc > 0 and len(stream.client_consumers()) >= maxc:
        raise E.error("JSMaximumConsumersLimitErr")
    if retention == "workqueue" and not cfg["direct"]:
        if cfg["ack_policy"] not in ("explicit", "flow_control"):
            raise E.error("JSConsumerWQRequiresExplicitAckErr")
        if cfg["deliver_policy"] != "all":
            raise E.error("JSConsumerWQConsumerNotDeliverAllErr")
        if stream.client_consumers():
            fl = cc.filters(cfg)
            if not fl:
                raise E.error("JSConsumerWQMultipleUnfilteredErr")
            if not _partition_unique(stream, existing_name, fl):
                raise E.error("JSConsumerWQConsumerNotUniqueErr")
    if cfg["durable_name"]:
        if name_len(cfg["durable_name"]) > cc.MAX_NAME_LEN:      # Go's len(): bytes
            raise E.error("JSConsumerNameTooLongErrF", max=cc.MAX_NAME_LEN)
        name = cfg["durable_name"]
    elif cfg["name"]:
        name = cfg["name"]
    else:
        name = random_token(8)
        while name in stream.consumers:
            name = random_token(8)       # not stamped into the config (as nats-server)
    if not cc.valid_asset_name(name):
        raise E.error("JSConsumerBadDurableNameErr")
    if not is_utf8(name):
        # a name from a subject token that is not UTF-8: nats-server takes the bytes as they
        # are; natsd's consumers (subscriptions, advisories, state) need text, so the create
        # fails the way a store failure does, before anything is set up
        raise _store_failed(jsa, stream, cfg, "consumer name is not UTF-8")
    return None, name


def _store_failed(jsa, stream, cfg, why):
    """nats-server: "Consumer create failed ..." is logged, the client gets the generic
    JSConsumerCreateErrF "error creating store for consumer" (no path, no OS error text)."""
    log.warning("Consumer create failed for '%s > %s > %s': %s", getattr(jsa, "name", "?"),
                stream.name, cfg.get("durable_name") or cfg.get("name") or "", why)
    return E.error("JSConsumerCreateErrF", err="error creating store for consumer")


def _partition_unique(stream, name, fl):
    for c in stream.client_consumers():
        if c.name == name:
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

def _existing(stream, name):
    """Consumer `name` of `stream`: running here, or (one with a Raft group of its own that
    leads elsewhere) as this server knows it; None: no such consumer."""
    o = stream.consumers.get(name)
    if o is None and stream.replica is not None:
        o = stream.replica.consumers.hosted_view(name)
    return o


def _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=True):
    if need_empty and not gojson.is_empty_request(payload):
        _respond(jsa, reply, rtype, E.error("JSNotEmptyRequestErr"))
        return None
    stream = _stream(jsa, sname)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    o = _existing(stream, cname)
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
    if o is not None and o.stream.replica is not None and o.name in o.stream.replica.consumers.hosts:
        o.stream.replica.consumers.propose_delete(o.name, reply)    # the stream's group deletes it
    elif o is not None and o.replica is not None:
        o.replica.propose_delete(o.name, reply)     # on every replica; the leader answers
    elif o is not None:
        o.delete()
        _respond(jsa, reply, rtype, {"success": True})
    return None


def _leader_stepdown(jsa, sname, cname, reply, payload):
    """CONSUMER.LEADER.STEPDOWN. A consumer with a Raft group of its own
    (natsd/jetstream/replicated/consumergroup.py) moves alone; one whose state rides in its stream's
    group (natsd/jetstream/replicated/consumers.py) leads where the stream does, so both move; a
    one-replica consumer has no group and answers success, as nats-server's does."""
    rtype = "consumer_leader_stepdown_response"
    if getattr(jsa.engine, "meta", None) is None:
        _respond(jsa, reply, rtype, E.error("JSClusterNotActiveErr"))
        return None
    o = _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=False)
    if o is None:
        return None
    if o.replica is not None:
        try:
            req = decode_optional_request(payload, STEPDOWN_REQUEST, "JSApiLeaderStepdownRequest",
                                          _strict(jsa))
            o.replica.rs.step_down(req.get("placement") or {})    # its group's host
        except E.ApiError as err:
            _respond(jsa, reply, rtype, err)
            return None
    _respond(jsa, reply, rtype, {"success": True})
    return None


def _names(jsa, sname, reply, payload, names_only):
    rtype = "consumer_names_response" if names_only else "consumer_list_response"
    req = _optional_request(jsa, reply, rtype, payload, _PAGED_REQ, "JSApiConsumersRequest")
    if req is None:
        return None
    offset = max(0, req.get("offset", 0))
    stream = _stream(jsa, sname)
    if stream is None:
        _respond(jsa, reply, rtype, E.error("JSStreamNotFoundErr"))
        return None
    # with those whose own Raft groups lead them elsewhere (a replicated stream's leader)
    listed = {c.name: c for c in stream.client_consumers()}
    names = sorted(listed)
    limit = NAMES_LIMIT if names_only else LIST_LIMIT
    offset = min(offset, len(names))
    page = names[offset:offset + limit]
    out = {"total": len(names), "offset": offset, "limit": limit}
    if names_only:
        out["consumers"] = page
    else:
        out["consumers"] = [listed[n].info(dynamic_metadata=False) for n in page]
        out["missing"] = None
        del out["missing"]
    _respond(jsa, reply, rtype, out)
    return None


# ---- pause ----

def _pause(jsa, sname, cname, reply, payload):
    rtype = "consumer_pause_response"
    req = _optional_request(jsa, reply, rtype, payload, _PAUSE_REQ, "JSApiConsumerPauseRequest")
    if req is None:
        return None
    pause = req.get("pause_until")
    if pause is not None and pause[1] <= _GO_ZERO_TIME:
        pause = None
    o = _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=False)
    if o is None:
        return None
    if pause is not None and pause[1] <= now_ns():
        pause = None
    if pause is not None:
        pause = (go_time(pause[1]), pause[1])
    was = o.cfg["pause_until"]
    o.set_pause(pause)
    if (was is None) != (pause is None) or (was and pause and was[1] != pause[1]):
        o.advisory("PAUSE", "io.nats.jetstream.advisory.v1.consumer_pause",
                   paused=pause is not None,
                   pause_until=go_time(pause[1]) if pause else None)
    out = {"paused": pause is not None,
           "pause_until": pause[0] if pause else "0001-01-01T00:00:00Z"}
    if pause is not None:
        out["pause_remaining"] = max(0, pause[1] - now_ns())
    _respond(jsa, reply, rtype, out)
    return None


def _unpin_reset(jsa, op, sname, cname, reply, payload, hdr=None):
    rtype = "consumer_unpin_response" if op == "UNPIN" else "consumer_reset_response"
    if op == "RESET":
        # nats-server answers CONSUMER.RESET from the consumer itself: nothing without one
        stream = _stream(jsa, sname)
        o = stream.consumers.get(cname) if stream is not None else None
        if o is None or getattr(o, "internal", False) or not reply:
            return None
        if required_level_too_high(hdr):
            _respond(jsa, reply, rtype, E.error("JSRequiredApiLevelErr"))
            return None
        seq = 0
        if payload:
            try:
                seq = gojson.unmarshal(gojson.loads_node(payload), _RESET_REQ, "JSApiConsumerResetRequest",
                                       strict=False, data=bytes(payload)).get("seq", 0)
            except gojson.JSONError as e:
                _respond(jsa, reply, rtype, E.error("JSInvalidJSONErr", err=str(e)))
                return None
        try:
            seq = o.reset_to(seq)
        except ValueError as e:
            _respond(jsa, reply, rtype, E.error("JSConsumerInvalidResetErr", err=str(e)))
            return None
        out = o.info()
        out["reset_seq"] = seq
        # asked for, the stream identity comes back (never checked here, as in nats-server)
        asked = slice_header(hdr, b"Nats-Stream-Identity") is not None
        _respond(jsa, reply, rtype, out, stream.identity() if asked else None)
        return None
    # UNPIN: jsConsumerUnpinRequest (json.Unmarshal of {"group"}, then the group checks)
    try:
        req = gojson.unmarshal(gojson.loads_node(payload), _UNPIN_REQ, "JSApiConsumerUnpinRequest",
                               strict=False, data=bytes(payload or b""))
    except gojson.JSONError as e:
        _respond(jsa, reply, rtype, E.error("JSInvalidJSONErr", err=str(e)))
        return None
    group = req.get("group", "")
    if not group:
        _respond(jsa, reply, rtype, E.error("JSInvalidJSONErr", err="consumer group not specified"))
        return None
    if not cc.valid_group_name(group):
        _respond(jsa, reply, rtype, E.error("JSConsumerInvalidGroupNameErr"))
        return None
    o = _lookup(jsa, sname, cname, reply, rtype, payload, need_empty=False)
    if o is None:
        return None
    if group not in (o.cfg.get("priority_groups") or []):
        _respond(jsa, reply, rtype, E.error("JSConsumerInvalidPriorityGroupErr"))
        return None
    o.unpin(group)
    _respond(jsa, reply, rtype, {})
    return None


def precheck(op, payload, strict=True):
    """The error nats-server finds in a CONSUMER.* request before it checks the required API
    level (Nats-Required-Api-Level), or None."""
    try:
        if op in ("CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE"):
            cc.decode_create_payload(payload, strict)
        elif op == "CONSUMER.PAUSE":
            decode_optional_request(payload, _PAUSE_REQ, "JSApiConsumerPauseRequest", strict)
        elif op == "CONSUMER.INFO" and not gojson.is_empty_request(payload):
            return E.error("JSNotEmptyRequestErr")
    except E.ApiError as err:
        return err
    return None



_PAGED_REQ = {"offset": ("int", "int")}
_PAUSE_REQ = {"pause_until": ("time.Time", "ctime")}
_UNPIN_REQ = {"group": ("string", "str")}
_RESET_REQ = {"seq": ("uint64", "uint")}
_GO_ZERO_TIME = -62135596800 * 1_000_000_000      # 0001-01-01T00:00:00Z


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
        from natsd.jetstream.engine.pull import status_hdr
        o.send_status(reply, status_hdr(409, "Consumer is push based"))
        return None
    o.waiting.request(reply, payload, hdr)
    return None
