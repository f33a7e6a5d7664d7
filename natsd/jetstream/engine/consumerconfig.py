"""Consumer configuration: parse, default, validate and render `ConsumerConfig` like nats-server.

Owns: the field list of nats-server's ConsumerConfig (consumer.go) with its JSON names, types
and omit-empty rules (`to_json`), strict decoding of API requests (unknown field -> 10025),
`set_defaults` (setConsumerConfigDefaults), `check` (checkConsumerCfg), `check_update`
(checkNewConsumerConfig: which fields an update may change), the create request
(`{"stream_name","config","action"}`) and the `_nats.*` metadata keys.

A config is a plain dict holding every field (zero values when unset), so comparisons are
dict equality, as nats-server compares structs with reflect.DeepEqual.
"""
import re

from natsd import VERSION
from natsd.gofmt import go_duration
from natsd.jetstream.engine.apilevel import API_LEVEL
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine import gojson
from natsd.subject import has_wildcard, is_valid_subject, subject_is_subset

NS = 1_000_000_000
MS = 1_000_000
DEFAULT_ACK_WAIT = 30 * NS
DEFAULT_INACTIVE = 5 * NS                # ephemerals
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_MAX_WAITING = 512
DEFAULT_PINNED_TTL = 120 * NS
MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4 * 1024
MAX_METADATA_LEN = 128 * 1024
REQ_LEVEL_KEY = "_nats.req.level"
SERVER_LEVEL_KEY = "_nats.level"
SERVER_VERSION_KEY = "_nats.ver"

DELIVER_POLICIES = ("all", "last", "new", "by_start_sequence", "by_start_time",
                    "last_per_subject")
ACK_POLICIES = ("none", "all", "explicit", "flow_control")
REPLAY_POLICIES = ("instant", "original")
PRIORITY_POLICIES = ("none", "overflow", "pinned_client", "prioritized")
ACTIONS = {"": "create_or_update", "create": "create", "update": "update"}

# (json name, kind, always rendered) in nats-server's struct order.
# kinds: str, int, uint, dur (ns), bool, time (RFC 3339 or None), list_dur, list_str, map,
# and the enums.
FIELDS = (
    ("durable_name", "str", False),
    ("name", "str", False),
    ("description", "str", False),
    ("deliver_policy", "deliver", True),
    ("opt_start_seq", "uint", False),
    ("opt_start_time", "time", False),
    ("ack_policy", "ack", True),
    ("ack_wait", "dur", False),
    ("max_deliver", "int", False),
    ("backoff", "list_dur", False),
    ("filter_subject", "str", False),
    ("filter_subjects", "list_str", False),
    ("replay_policy", "replay", True),
    ("rate_limit_bps", "uint", False),
    ("sample_freq", "str", False),
    ("max_waiting", "int", False),
    ("max_ack_pending", "int", False),
    ("flow_control", "bool", False),
    ("headers_only", "bool", False),
    ("max_batch", "int", False),
    ("max_expires", "dur", False),
    ("max_bytes", "int", False),
    ("deliver_subject", "str", False),
    ("deliver_group", "str", False),
    ("idle_heartbeat", "dur", False),
    ("inactive_threshold", "dur", False),
    ("num_replicas", "int", True),
    ("mem_storage", "bool", False),
    ("direct", "bool", False),
    ("sourcing", "bool", False),
    ("metadata", "map", False),
    ("pause_until", "time", False),
    ("priority_groups", "list_str", False),
    ("priority_policy", "priority", False),
    ("priority_timeout", "dur", False),
)
FIELD_KINDS = {name: kind for name, kind, _ in FIELDS}
_ENUMS = {"deliver": DELIVER_POLICIES, "ack": ACK_POLICIES, "replay": REPLAY_POLICIES,
          "priority": PRIORITY_POLICIES}
_ENUM_DEFAULT = {"deliver": "all", "ack": "none", "replay": "instant", "priority": "none"}

def empty_config():
    cfg = {}
    for name, kind, _ in FIELDS:
        if kind in _ENUMS:
            cfg[name] = _ENUM_DEFAULT[kind]
        elif kind in ("int", "uint", "dur"):
            cfg[name] = 0
        elif kind == "bool":
            cfg[name] = False
        elif kind == "str":
            cfg[name] = ""
        else:
            cfg[name] = None
    return cfg


# ---- time helpers ----


def parse_time(s):
    """RFC 3339 -> unix ns; raises ValueError with Go's time.Parse text."""
    return gojson.go_parse_rfc3339(s)





# ---- decoding ----

def _bad(msg):
    return E.error("JSInvalidJSONErr", err=msg)


_SPEC_KINDS = {"str": ("string", "str"), "int": ("int", "int"), "uint": ("uint64", "uint"),
               "dur": ("time.Duration", "int"), "bool": ("bool", "bool"), "time": ("time.Time", "ctime"),
               "list_dur": ("[]time.Duration", "durlist"), "list_str": ("[]string", "strlist"),
               "map": ("map[string]string", "strmap"),
               "deliver": ("server.DeliverPolicy", "enum:deliver"), "ack": ("server.AckPolicy", "enum:ack"),
               "replay": ("server.ReplayPolicy", "enum:replay"),
               "priority": ("server.PriorityPolicy", "enum:priority")}
# ConsumerConfig and CreateConsumerRequest as Go decodes them (gojson spec form)
CONSUMER_SPEC = {name: _SPEC_KINDS[kind] for name, kind, _ in FIELDS}
CREATE_REQUEST = {"stream_name": ("string", "str"),
                  "config": ("server.ConsumerConfig", "obj", CONSUMER_SPEC),
                  "action": ("server.ConsumerAction", "enum:action"),
                  "pedantic": ("bool", "bool")}


def _full(fields):
    cfg = empty_config()
    cfg.update(fields or {})
    return cfg


def decode_config(raw):
    """JSON object (dict) -> full config dict. Raises ApiError 10025 on shape errors."""
    if raw is None:
        return empty_config()
    try:
        req = gojson.unmarshal({"config": raw}, CREATE_REQUEST, "CreateConsumerRequest")
    except gojson.JSONError as e:
        raise _bad(str(e))
    return _full(req.get("config"))


def _request(req):
    return (req.get("stream_name", ""), _full(req.get("config")),
            req.get("action", "create_or_update"), bool(req.get("pedantic", False)))


def decode_create_request(obj):
    """{"stream_name","config","action","pedantic"} -> (stream, config, action, pedantic)."""
    try:
        req = gojson.unmarshal(obj, CREATE_REQUEST, "CreateConsumerRequest")
    except gojson.JSONError as e:
        raise _bad(str(e))
    return _request(req)


def decode_create_payload(payload, strict=True):
    """A CONSUMER.CREATE request body as nats-server decodes it (see gojson.unmarshal_request)
    -> (stream, config, action, pedantic); raises ApiError 10025."""
    try:
        req = gojson.unmarshal_request(payload, CREATE_REQUEST, "CreateConsumerRequest", strict)
    except gojson.JSONError as e:
        raise _bad(str(e))
    return _request(req)


# ---- rendering ----

def to_json(cfg, dynamic_metadata=False):
    """The dict nats-server marshals for ConsumerInfo.config (omitempty applied)."""
    out = {}
    for name, kind, always in FIELDS:
        v = cfg.get(name)
        if kind == "time":
            if v is None:
                continue
            v = v[0]
        elif kind == "priority":
            if v == "none":
                continue
        elif not always and (v is None or v == 0 or v == "" or v is False or v == [] or v == {}):
            continue
        if kind == "map":
            v = dict(v)
            if dynamic_metadata:
                v[SERVER_LEVEL_KEY] = str(API_LEVEL)
                v[SERVER_VERSION_KEY] = VERSION
            v = dict(sorted(v.items()))
        out[name] = v
    if dynamic_metadata and "metadata" not in out:
        out["metadata"] = {SERVER_LEVEL_KEY: str(API_LEVEL), SERVER_VERSION_KEY: VERSION}
    return out


def set_static_metadata(cfg):
    md = dict(cfg.get("metadata") or {})
    md.pop(SERVER_LEVEL_KEY, None)
    md.pop(SERVER_VERSION_KEY, None)
    level = 0
    if cfg.get("pause_until") is not None and cfg["pause_until"][1] > 0:
        level = 1
    if (cfg["priority_policy"] != "none" or cfg["priority_timeout"] or cfg["priority_groups"]):
        level = max(level, 1)
    if cfg["ack_policy"] == "flow_control":
        level = max(level, 4)
    md[REQ_LEVEL_KEY] = str(level)
    cfg["metadata"] = md


def filters(cfg):
    if cfg.get("filter_subject"):
        return [cfg["filter_subject"]]
    return list(cfg.get("filter_subjects") or [])


def is_durable(cfg):
    return bool(cfg.get("durable_name"))


def is_push(cfg):
    return bool(cfg.get("deliver_subject"))


def valid_asset_name(name):
    return bool(name) and not any(c in name for c in ".*>\\/ \t\r\n\f")


# ---- defaults and validation ----

def set_defaults(cfg, stream_cfg=None, pedantic=False, server_limits=None, account_limits=None):
    """setConsumerConfigDefaults. `server_limits` is the config's `jetstream { limits {} }`,
    `account_limits` the account's JetStream limits (both dicts, possibly empty)."""
    srv = server_limits or {}
    acc_map = int((account_limits or {}).get("max_ack_pending", -1) or -1)
    climits = (stream_cfg or {}).get("consumer_limits") or {}
    if cfg["max_deliver"] == 0 or cfg["max_deliver"] < -1:
        if pedantic and cfg["max_deliver"] < -1:
            raise E.error("JSPedanticErrF", err="max_deliver must be set to -1")
        cfg["max_deliver"] = -1
    for key, text in (("max_waiting", "max_waiting must not be negative"),
                      ("max_batch", "max_batch must not be negative"),
                      ("max_expires", "max_expires must not be negative"),
                      ("max_bytes", "max_bytes must not be negative"),
                      ("idle_heartbeat", "idle_heartbeat must not be negative"),
                      ("inactive_threshold", "inactive_threshold must not be negative"),
                      ("priority_timeout", "priority_timeout must not be negative")):
        if cfg[key] < 0:
            if pedantic:
                raise E.error("JSPedanticErrF", err=text)
            cfg[key] = 0
    if cfg["max_ack_pending"] < -1:
        if pedantic:
            raise E.error("JSPedanticErrF", err="max_ack_pending must be set to -1")
        cfg["max_ack_pending"] = -1
    if not cfg["deliver_subject"] and cfg["max_waiting"] == 0:
        cfg["max_waiting"] = DEFAULT_MAX_WAITING
    if cfg["ack_wait"] == 0 and cfg["ack_policy"] in ("explicit", "all"):
        cfg["ack_wait"] = DEFAULT_ACK_WAIT
    if cfg["backoff"]:
        if pedantic and cfg["ack_wait"] != cfg["backoff"][0]:
            raise E.error("JSPedanticErrF", err="first backoff value has to equal batch AckWait")
        cfg["ack_wait"] = cfg["backoff"][0]
    if cfg["max_ack_pending"] == 0:
        cfg["max_ack_pending"] = int(climits.get("max_ack_pending") or 0)
    if cfg["inactive_threshold"] == 0:
        cfg["inactive_threshold"] = int(climits.get("inactive_threshold") or 0)
    if cfg["max_ack_pending"] == 0 and cfg["ack_policy"] != "none":
        cfg["max_ack_pending"] = min([DEFAULT_MAX_ACK_PENDING] + [
            lim for lim in (int(srv.get("max_ack_pending", 0)), acc_map) if lim > 0])
    if not cfg["deliver_subject"] and cfg["max_batch"] == 0 and srv.get("max_request_batch", 0) > 0:
        if pedantic:
            raise E.error("JSPedanticErrF",
                          err="max_request_batch must be set if it's JetStream limits are set")
        cfg["max_batch"] = int(srv["max_request_batch"])
    if cfg["priority_policy"] == "pinned_client" and cfg["priority_timeout"] == 0:
        cfg["priority_timeout"] = DEFAULT_PINNED_TTL
    if cfg["ack_policy"] == "flow_control" and not pedantic:
        cfg["flow_control"] = True
        cfg["idle_heartbeat"] = NS
    if not is_durable(cfg) and cfg["inactive_threshold"] <= 0:
        cfg["inactive_threshold"] = DEFAULT_INACTIVE


_GROUP_RE = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")


def valid_group_name(g):
    return bool(_GROUP_RE.match(g)) and "\n" not in g


def check(cfg, stream_cfg=None, server_limits=None, account_limits=None):
    """checkConsumerCfg: raise the ApiError nats-server would return."""
    scfg = stream_cfg or {}
    srv = server_limits or {}
    retention = scfg.get("retention", "limits")
    if cfg["name"] and not valid_asset_name(cfg["name"]):
        raise E.error("JSStreamInvalidConfigF",
                      err="consumer name can not contain '.', '*', '>', '\\', '/'")
    if cfg["durable_name"] and not valid_asset_name(cfg["durable_name"]):
        raise E.error("JSStreamInvalidConfigF",
                      err="consumer durable name can not contain '.', '*', '>', '\\', '/'")
    replicas = int(scfg.get("num_replicas") or 1)
    if cfg["num_replicas"] > 0 and cfg["num_replicas"] > replicas:
        raise E.error("JSConsumerReplicasExceedsStream")
    if cfg["num_replicas"] < 0:
        raise E.error("JSReplicasCountCannotBeNegative")
    if retention in ("interest", "workqueue") and cfg["num_replicas"] not in (0, replicas):
        raise E.error("JSConsumerReplicasShouldMatchStream")
    if any(b < 0 for b in cfg["backoff"] or ()):
        raise E.error("JSConsumerBackOffNegativeErr")
    if cfg["ack_wait"] < 0:
        raise E.error("JSConsumerAckWaitNegativeErr")
    if cfg["ack_policy"] == "flow_control":
        if not cfg["deliver_subject"]:
            raise E.error("JSConsumerAckFCRequiresPushErr")
        if not cfg["flow_control"]:
            raise E.error("JSConsumerAckFCRequiresFCErr")
        if cfg["idle_heartbeat"] != NS:
            raise E.error("JSStreamInvalidConfigF",
                          err="flow control ack policy heartbeat needs to be 1s")
        if cfg["max_ack_pending"] <= 0:
            raise E.error("JSConsumerAckFCRequiresMaxAckPendingErr")
        if cfg["ack_wait"] or cfg["backoff"]:
            raise E.error("JSConsumerAckFCRequiresNoAckWaitErr")
        if cfg["max_deliver"] > 0:
            raise E.error("JSConsumerAckFCRequiresNoMaxDeliverErr")
    lbo = len(cfg["backoff"] or ())
    if lbo and cfg["max_deliver"] != -1 and lbo > cfg["max_deliver"]:
        raise E.error("JSConsumerMaxDeliverBackoffErr")
    if len(cfg["description"].encode()) > MAX_DESCRIPTION_LEN:
        raise E.error("JSConsumerDescriptionTooLongErrF", max=MAX_DESCRIPTION_LEN)
    if cfg["deliver_subject"]:
        ds = cfg["deliver_subject"]
        if has_wildcard(ds):
            raise E.error("JSConsumerDeliverToWildcardsErr")
        if not is_valid_subject(ds):
            raise E.error("JSConsumerInvalidDeliverSubject")
        if any(subject_is_subset(ds, s) for s in scfg.get("subjects") or ()):
            raise E.error("JSConsumerDeliverCycleErr")
        if cfg["max_waiting"] != 0:
            raise E.error("JSConsumerPushMaxWaitingErr")
        if cfg["max_ack_pending"] > 0 and cfg["ack_policy"] == "none":
            raise E.error("JSConsumerMaxPendingAckPolicyRequiredErr")
        if 0 < cfg["idle_heartbeat"] < 100 * MS:
            raise E.error("JSConsumerSmallHeartbeatErr")
    else:
        if cfg["ack_policy"] == "none" and retention == "workqueue":
            raise E.error("JSConsumerPullRequiresAckErr")
        if cfg["rate_limit_bps"] > 0:
            raise E.error("JSConsumerPullWithRateLimitErr")
        if cfg["max_waiting"] < 0:
            raise E.error("JSConsumerMaxWaitingNegativeErr")
        if cfg["idle_heartbeat"] > 0:
            raise E.error("JSConsumerHBRequiresPushErr")
        if cfg["flow_control"]:
            raise E.error("JSConsumerFCRequiresPushErr")
        if cfg["max_batch"] < 0:
            raise E.error("JSConsumerMaxRequestBatchNegativeErr")
        if cfg["max_expires"] != 0 and cfg["max_expires"] < MS:
            raise E.error("JSConsumerMaxRequestExpiresTooSmall")
        srv_batch = int(srv.get("max_request_batch", 0))
        if 0 < srv_batch < cfg["max_batch"]:
            raise E.error("JSConsumerMaxRequestBatchExceededF", limit=srv_batch)
    climits = scfg.get("consumer_limits") or {}
    for cap in (int(srv.get("max_ack_pending", 0)),
                int((account_limits or {}).get("max_ack_pending", -1) or -1),
                int(climits.get("max_ack_pending") or 0)):
        if 0 < cap < cfg["max_ack_pending"]:
            raise E.error("JSConsumerMaxPendingAckExcessErrF", limit=cap)
    cit = int(climits.get("inactive_threshold") or 0)
    if cit > 0 and cfg["inactive_threshold"] > cit:
        raise E.error("JSConsumerInactiveThresholdExcess", limit=go_duration(cit))
    if cfg["direct"]:
        if not cfg["deliver_subject"]:
            raise E.error("JSConsumerDirectRequiresPushErr")
        if is_durable(cfg):
            raise E.error("JSConsumerDirectRequiresEphemeralErr")
    if cfg["filter_subject"] and cfg["filter_subjects"]:
        raise E.error("JSConsumerDuplicateFilterSubjects")
    if cfg["filter_subject"] and not is_valid_subject(cfg["filter_subject"]):
        raise E.error("JSStreamInvalidConfigF", err="invalid subject")
    for f in cfg["filter_subjects"] or ():
        if f == "":
            raise E.error("JSConsumerEmptyFilter")
    fl = filters(cfg)
    for i, a in enumerate(fl):
        if not is_valid_subject(a):
            raise E.error("JSStreamInvalidConfigF", err="invalid subject")
        for j, b in enumerate(fl):
            if i != j and subject_is_subset(a, b):
                raise E.error("JSConsumerOverlappingSubjectFilters")
    _check_start(cfg)
    if cfg["sample_freq"]:
        s = cfg["sample_freq"][:-1] if cfg["sample_freq"].endswith("%") else cfg["sample_freq"]
        try:
            if not re.fullmatch(r"[+-]?\d+", s):
                raise ValueError
            if int(s) < 0:
                raise E.error("JSConsumerInvalidSamplingErrF", err="<nil>")
        except ValueError:
            raise E.error("JSConsumerInvalidSamplingErrF",
                          err='strconv.Atoi: parsing "%s": invalid syntax' % s)
    if cfg["flow_control"] and cfg["idle_heartbeat"] == 0:
        raise E.error("JSConsumerWithFlowControlNeedsHeartbeats")
    if cfg["durable_name"] and cfg["name"] and cfg["name"] != cfg["durable_name"]:
        raise E.error("JSConsumerCreateDurableAndNameMismatch")
    md_len = sum(len(k.encode()) + len(v.encode()) for k, v in (cfg["metadata"] or {}).items())
    if md_len > MAX_METADATA_LEN:
        raise E.error("JSConsumerMetadataLengthErrF", limit="%dKB" % (MAX_METADATA_LEN // 1024))
    if cfg["priority_policy"] != "none":
        if cfg["deliver_subject"]:
            raise E.error("JSConsumerPushWithPriorityGroupErr")
        if not cfg["priority_groups"]:
            raise E.error("JSConsumerPriorityPolicyWithoutGroup")
        for g in cfg["priority_groups"]:
            if g == "":
                raise E.error("JSConsumerEmptyGroupName")
            if not _GROUP_RE.match(g):
                raise E.error("JSConsumerInvalidGroupNameErr")
    else:
        if cfg["priority_groups"]:
            raise E.error("JSConsumerPriorityGroupWithPolicyNone")
        if cfg["priority_timeout"] > 0:
            raise E.error("JSConsumerPinnedTTLWithoutPriorityPolicyNone")


def _check_start(cfg):
    dp, seq, tm = cfg["deliver_policy"], cfg["opt_start_seq"], cfg["opt_start_time"]

    def bad(name, start):
        return E.error("JSConsumerInvalidPolicyErrF", err="consumer delivery policy is deliver %s,"
                       " but optional start %s is also set" % (name, start))

    def not_set(name, what):
        return E.error("JSConsumerInvalidPolicyErrF", err="consumer delivery policy is deliver %s,"
                       " but optional %s is not set" % (name, what))
    names = {"all": "all", "last": "last", "last_per_subject": "last per subject", "new": "new"}
    if dp in names:
        if seq > 0:
            raise bad(names[dp], "sequence")
        if tm is not None:
            raise bad(names[dp], "time")
        if dp == "last_per_subject" and not filters(cfg):
            raise not_set("last per subject", "filter subject")
    elif dp == "by_start_sequence":
        if seq == 0:
            raise not_set("by start sequence", "start sequence")
        if tm is not None:
            raise bad("by start sequence", "time")
    elif dp == "by_start_time":
        if tm is None:
            raise not_set("by start time", "start time")
        if seq != 0:
            raise bad("by start time", "start sequence")


def check_update(old, new, deliver_has_interest=False):
    """checkNewConsumerConfig: the error text for a forbidden change, or None."""
    if old == new:
        return None
    for key, text in (("deliver_policy", "deliver policy can not be updated"),
                      ("mem_storage", "storage type can not be updated"),
                      ("direct", "direct can not be updated"),
                      ("sourcing", "sourcing can not be updated"),
                      ("opt_start_seq", "start sequence can not be updated")):
        if old[key] != new[key]:
            return E.error("JSConsumerCreateErrF", err=text)
    ot, nt = old["opt_start_time"], new["opt_start_time"]
    if (ot is None) != (nt is None) or (ot is not None and ot[1] != nt[1]):
        return E.error("JSConsumerCreateErrF", err="start time can not be updated")
    for key, text in (("ack_policy", "ack policy can not be updated"),
                      ("replay_policy", "replay policy can not be updated"),
                      ("idle_heartbeat", "heart beats can not be updated"),
                      ("flow_control", "flow control can not be updated")):
        if old[key] != new[key]:
            return E.error("JSConsumerCreateErrF", err=text)
    if old["deliver_subject"] != new["deliver_subject"]:
        if not old["deliver_subject"]:
            return E.error("JSConsumerCreateErrF", err="can not update pull consumer to push based")
        if not new["deliver_subject"]:
            return E.error("JSConsumerCreateErrF", err="can not update push consumer to pull based")
        if deliver_has_interest:
            return E.error("JSConsumerNameExistErr")
    if old["max_waiting"] != new["max_waiting"]:
        return E.error("JSConsumerCreateErrF", err="max waiting can not be updated")
    lbo = len(new["backoff"] or ())
    if lbo and new["max_deliver"] != -1 and lbo > new["max_deliver"]:
        return E.error("JSConsumerMaxDeliverBackoffErr")
    return None
