"""StreamConfig: strict JSON decoding, defaults, validation and update rules (as nats-server).

Owns: `decode_request(payload, strict)` (Go's encoding/json behaviour: unknown fields and type
mismatches become 10025 `invalid JSON: ...` with Go's wording), `check_config(cfg, ...)` (the
defaults and rules of nats-server's checkStreamCfg), `check_update(old, new, ...)` and
`config_json(cfg)` (the wire form: Go field order, omit-empty, dynamic `_nats.*` metadata).
A config is a plain dict with the API's JSON field names.
"""
import json

from natsd.gofmt import go_duration
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine import gojson
from natsd.jetstream.engine.apilevel import API_LEVEL
from natsd.subject import is_valid_subject, subjects_overlap, subject_is_subset

MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4 * 1024
MAX_METADATA_LEN = 128 * 1024
MAX_REPLICAS = 5
DEFAULT_DUPLICATE_WINDOW = 120_000_000_000      # 2m in ns
MS100 = 100_000_000

# ---- Go-shaped field specs: name -> (go type, kind[, sub spec]) ----

_TRANSFORM = {"src": ("string", "str"), "dest": ("string", "str")}
_EXTERNAL = {"api": ("string", "str"), "deliver": ("string", "str")}
_CONSUMER_SRC = {"name": ("string", "str"), "deliver_subject": ("string", "str")}
_SOURCE = {
    "name": ("string", "str"),
    "opt_start_seq": ("uint64", "uint"),
    "opt_start_time": ("time.Time", "time"),
    "filter_subject": ("string", "str"),
    "subject_transforms": ("[]server.SubjectTransformConfig", "objlist", _TRANSFORM),
    "external": ("server.ExternalStream", "obj", _EXTERNAL),
    "consumer": ("server.StreamConsumerSource", "obj", _CONSUMER_SRC),
    "domain": ("string", "str"),          # client sugar some clients send
}
PLACEMENT_FIELDS = {"cluster": ("string", "str"), "tags": ("[]string", "strlist"),
              "preferred": ("string", "str")}
STEPDOWN_REQUEST = {"placement": ("*server.Placement", "obj", PLACEMENT_FIELDS)}   # leader stepdowns
_REPUBLISH = {"src": ("string", "str"), "dest": ("string", "str"), "headers_only": ("bool", "bool")}
_CONSUMER_LIMITS = {"inactive_threshold": ("time.Duration", "int"), "max_ack_pending": ("int", "int")}

ENUMS = {
    "retention": ("limits", "interest", "workqueue"),
    "discard": ("old", "new"),
    "storage": ("file", "memory"),
    "compression": ("none", "s2"),
    "persist_mode": ("default", "async"),
}

STREAM_FIELDS = {
    "name": ("string", "str"),
    "description": ("string", "str"),
    "subjects": ("[]string", "strlist"),
    "retention": ("server.RetentionPolicy", "enum"),
    "max_consumers": ("int", "int"),
    "max_msgs": ("int64", "int"),
    "max_bytes": ("int64", "int"),
    "max_age": ("time.Duration", "int"),
    "max_msgs_per_subject": ("int64", "int"),
    "max_msg_size": ("int32", "int"),
    "discard": ("server.DiscardPolicy", "enum"),
    "storage": ("server.StorageType", "enum"),
    "num_replicas": ("int", "int"),
    "no_ack": ("bool", "bool"),
    "duplicate_window": ("time.Duration", "int"),
    "placement": ("server.Placement", "obj", PLACEMENT_FIELDS),
    "mirror": ("server.StreamSource", "obj", _SOURCE),
    "sources": ("[]*server.StreamSource", "objlist", _SOURCE),
    "compression": ("server.StoreCompression", "enum"),
    "first_seq": ("uint64", "uint"),
    "subject_transform": ("server.SubjectTransformConfig", "obj", _TRANSFORM),
    "republish": ("server.RePublish", "obj", _REPUBLISH),
    "allow_direct": ("bool", "bool"),
    "mirror_direct": ("bool", "bool"),
    "discard_new_per_subject": ("bool", "bool"),
    "sealed": ("bool", "bool"),
    "deny_delete": ("bool", "bool"),
    "deny_purge": ("bool", "bool"),
    "allow_rollup_hdrs": ("bool", "bool"),
    "consumer_limits": ("server.StreamConsumerLimits", "obj", _CONSUMER_LIMITS),
    "allow_msg_ttl": ("bool", "bool"),
    "subject_delete_marker_ttl": ("time.Duration", "int"),
    "allow_msg_counter": ("bool", "bool"),
    "allow_atomic": ("bool", "bool"),
    "allow_msg_schedules": ("bool", "bool"),
    "persist_mode": ("server.PersistModeType", "enum"),
    "allow_batched": ("bool", "bool"),
    "metadata": ("map[string]string", "strmap"),
    "pedantic": ("bool", "bool"),
}

def decode_request(payload, spec, type_name, strict):
    """Decode an API request body into a dict of the fields present, as nats-server's
    unmarshalRequest does (Go's decoder, see gojson); raises ApiError 10025."""
    try:
        return gojson.unmarshal_request(payload, spec, type_name, bool(strict))
    except gojson.JSONError as e:
        raise E.error("JSInvalidJSONErr", err=str(e))


def decode_optional_request(payload, spec, type_name, strict):
    """decode_request for a request whose body may be left out: {} unless the body holds a
    JSON object or array."""
    if gojson.is_json_object_or_array(payload):
        return decode_request(payload, spec, type_name, strict)
    return {}


def decode_stream_config(payload, strict):
    return decode_request(payload, STREAM_FIELDS, "StreamConfigRequest", strict)


# ---- validation ----

def is_valid_name(name):
    """nats-server's isValidAssetName (other control bytes, NUL included, are allowed)."""
    if not name or not isinstance(name, str):
        return False
    for ch in name:
        if ch in " \t\r\n\f.*>/\\":
            return False
    return True


def name_len(name):
    """A name's length as Go's len(): UTF-8 bytes."""
    return len(name.encode("utf-8", "surrogateescape"))


def is_utf8(name):
    """Whether a name is text: no surrogate escape (a byte that was not UTF-8) in it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_one_file_name(name):
    """Whether a name can be one file or directory name (Linux: no NUL, at most 255 bytes,
    not "." or "..") - the streams' and consumers' directories are named after them."""
    return "\x00" not in name and name_len(name) <= 255 and name not in (".", "..")


def _invalid(msg):
    return E.error("JSStreamInvalidConfigF", err=msg)


def _valid_mapping(src, dest):
    if not dest:
        return None         # nats-server's ValidateMapping: no destination is no mapping
    from natsd.accounts.transform import validate_mapping
    try:
        validate_mapping(src or ">", dest)
        return None
    except Exception as e:      # TransformError and friends
        return str(e) or "invalid subject transform"


def check_filters_at_create(cfg):
    """The filter checks nats-server makes when it adds a stream (after its config checks):
    a mirror's or source's filter subject that is not a subject fails the create (500 10049)."""
    mirror = cfg.get("mirror")
    if mirror and not mirror.get("subject_transforms"):
        f = mirror.get("filter_subject")
        if f and not is_valid_subject(f):
            raise E.error("JSStreamCreateErrF", err="subject filter '%s' for the mirror invalid subject" % f)
    for src in cfg.get("sources") or []:
        if src and not src.get("subject_transforms"):
            f = src.get("filter_subject")
            if f and not is_valid_subject(f):
                raise E.error("JSStreamCreateErrF", err="subject filter '%s' for the source: invalid subject" % f)


def _server_limits(jsa):
    """The config's `jetstream { limits {} }` as seen through an account (or {})."""
    engine = getattr(jsa, "engine", None)
    return engine.opts.limits if engine is not None else {}


def check_config(cfg, pedantic=False, lookup=None, limits=None, api_request=True):
    """Apply defaults and validate; returns a new config dict or raises ApiError.

    `lookup(name)` returns another stream's config or None (mirror/source checks);
    `limits` is the JsAccount (max_bytes_required etc.) or None. `api_request`: a create or
    update through the API, which records the API level the config needs in its metadata
    (`_nats.req.level`); a restore does not, as nats-server's does not.
    """
    cfg = json.loads(json.dumps(cfg))       # deep copy
    cfg.pop("pedantic", None)
    name = cfg.get("name", "")
    if not is_valid_name(name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if name_len(name) > MAX_NAME_LEN:
        raise _invalid("stream name is too long, maximum allowed is %d" % MAX_NAME_LEN)
    if name_len(cfg.get("description", "")) > MAX_DESCRIPTION_LEN:
        raise _invalid("stream description is too long, maximum allowed is %d" % MAX_DESCRIPTION_LEN)
    md = cfg.get("metadata") or {}
    if sum(name_len(k) + name_len(v) for k, v in md.items()) > MAX_METADATA_LEN:
        raise _invalid("stream metadata exceeds maximum size of %d bytes" % MAX_METADATA_LEN)
    cfg.setdefault("retention", "limits")
    cfg.setdefault("discard", "old")
    cfg.setdefault("compression", "none")
    cfg.setdefault("storage", "file")
    reps = cfg.get("num_replicas", 0) or 0
    if reps == 0:
        reps = 1
    if reps > MAX_REPLICAS:
        raise _invalid("maximum replicas is %d" % MAX_REPLICAS)
    if reps < 0:
        raise E.error("JSReplicasCountCannotBeNegative")
    cfg["num_replicas"] = reps
    for key in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        v = cfg.get(key, 0)
        if v == 0 or v < -1:
            if pedantic and v < -1:
                raise E.error("JSPedanticErrF", err="%s must be set to -1" % key)
            cfg[key] = -1
    max_age = cfg.get("max_age", 0)
    cfg["max_age"] = max_age
    if max_age < 0:
        raise _invalid("max age can not be negative")
    if max_age != 0 and max_age < MS100:
        raise _invalid("max age needs to be >= 100ms")
    mirror = cfg.get("mirror")
    sources = cfg.get("sources") or []
    dup = cfg.get("duplicate_window", 0)
    srv_dup = int(_server_limits(limits).get("duplicate_window", 0) * 1e9)
    if dup == 0 and mirror is None and not sources:
        max_window = DEFAULT_DUPLICATE_WINDOW
        if 0 < srv_dup < max_window:
            if pedantic:
                raise E.error("JSPedanticErrF", err="duplicate window limits are higher than current limits")
            max_window = srv_dup
        if max_age != 0 and max_age < max_window:
            if pedantic:
                raise E.error("JSPedanticErrF", err="duplicate window cannot be bigger than max age")
            dup = max_age
        else:
            dup = max_window
    if dup < 0:
        raise _invalid("duplicates window can not be negative")
    if max_age != 0 and dup > max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if 0 < srv_dup < dup:
        raise _invalid("duplicates window can not be larger then server limit of %s"
                       % go_duration(srv_dup))
    if 0 < dup < MS100:
        raise _invalid("duplicates window needs to be >= 100ms")
    if dup:
        cfg["duplicate_window"] = dup
    else:
        cfg.pop("duplicate_window", None)
    if cfg.get("deny_purge") and cfg.get("allow_rollup_hdrs"):
        raise _invalid("roll-ups require the purge permission")
    if cfg.get("allow_msg_counter"):
        if cfg["discard"] == "new":
            raise _invalid("counter stream cannot use discard new")
        if cfg.get("allow_msg_ttl"):
            raise _invalid("counter stream cannot use message TTLs")
        if cfg.get("allow_msg_schedules"):
            raise _invalid("counter stream cannot use message schedules")
        if cfg["retention"] != "limits":
            raise _invalid("counter stream can only use limits retention")
    if cfg.get("discard_new_per_subject"):
        if cfg["discard"] != "new":
            raise _invalid("discard new per subject requires discard new policy to be set")
        if cfg["max_msgs_per_subject"] <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")
    sdm = cfg.get("subject_delete_marker_ttl", 0) or 0
    if sdm > 0:
        if sdm < 1_000_000_000:
            raise _invalid("subject delete marker TTL must be at least 1 second")
        if not cfg.get("allow_msg_ttl"):
            if pedantic:
                raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
            cfg["allow_msg_ttl"] = True
        if not cfg.get("allow_rollup_hdrs"):
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            cfg["allow_rollup_hdrs"], cfg["deny_purge"] = True, False
    elif sdm < 0:
        raise _invalid("subject delete marker TTL must not be negative")
    if cfg.get("allow_msg_schedules"):
        if cfg["discard"] == "new":
            raise _invalid("message scheduling cannot use discard new")
        if not cfg.get("allow_rollup_hdrs"):
            if pedantic:
                raise _invalid("message scheduling cannot be set if roll-ups are disabled")
            cfg["allow_rollup_hdrs"], cfg["deny_purge"] = True, False
    if cfg.get("persist_mode") == "async":
        if cfg["storage"] != "file":
            raise _invalid("async persist mode is only supported on file storage")
        if cfg.get("allow_atomic"):
            raise _invalid("async persist mode is not supported with atomic batch publish")
    elif cfg.get("persist_mode") == "default":
        cfg.pop("persist_mode")

    if mirror is not None:
        if cfg.get("first_seq", 0) > 0:
            raise E.error("JSMirrorWithFirstSeqErr")
        if cfg.get("subjects"):
            raise E.error("JSMirrorWithSubjectsErr")
        if sources:
            raise E.error("JSMirrorWithSourcesErr")
        if cfg.get("allow_msg_counter"):
            raise E.error("JSMirrorWithCountersErr")
        if cfg.get("allow_atomic"):
            raise E.error("JSMirrorWithAtomicPublishErr")
        if cfg.get("allow_batched"):
            raise E.error("JSMirrorWithBatchPublishErr")
        if cfg.get("allow_msg_schedules"):
            raise E.error("JSMirrorWithMsgSchedulesErr")
        if mirror.get("filter_subject") and mirror.get("subject_transforms"):
            raise E.error("JSMirrorMultipleFiltersNotAllowed")
        if sdm > 0:
            raise _invalid("subject delete markers forbidden on mirrors")
        for tr in mirror.get("subject_transforms") or []:
            if tr.get("src") and not is_valid_subject(tr["src"]):
                raise E.error("JSMirrorInvalidSubjectFilter", err="invalid subject %s" % tr["src"])
            err = _valid_mapping(tr.get("src", ""), tr.get("dest", ""))
            if err:
                raise E.error("JSMirrorInvalidTransformDestination", err=err)
        if mirror.get("external") is None:
            if not is_valid_name(mirror.get("name", "")):
                raise E.error("JSMirrorInvalidStreamName")
            ocfg = lookup(mirror["name"]) if lookup else None
            if ocfg is not None:
                if 0 < cfg["max_msg_size"] < ocfg.get("max_msg_size", -1):
                    raise E.error("JSMirrorMaxMessageSizeTooBigErr")
                cfg["mirror_direct"] = bool(ocfg.get("allow_direct"))
    if sources and cfg.get("allow_msg_schedules"):
        raise E.error("JSSourceWithMsgSchedulesErr")
    seen = set()
    for src in sources:
        if src is None or not is_valid_name(src.get("name", "")):
            raise E.error("JSSourceInvalidStreamName")
        iname = (src["name"], (src.get("external") or {}).get("api", ""), src.get("filter_subject", ""),
                 tuple((t.get("src", ""), t.get("dest", "")) for t in src.get("subject_transforms") or []))
        if iname in seen:
            raise E.error("JSSourceDuplicateDetected")
        seen.add(iname)
        if src.get("filter_subject") and src.get("subject_transforms"):
            raise E.error("JSSourceMultipleFiltersNotAllowed")
        trs = src.get("subject_transforms") or []
        for tr in trs:
            if tr.get("src") and not is_valid_subject(tr["src"]):
                raise E.error("JSSourceInvalidSubjectFilter", err="invalid subject %s" % tr["src"])
            err = _valid_mapping(tr.get("src", ""), tr.get("dest", ""))
            if err:
                raise E.error("JSSourceInvalidTransformDestination", err=err)
        for i, a in enumerate(trs):
            for j, b in enumerate(trs):
                if i != j and subject_is_subset(a.get("src", ""), b.get("src", "")):
                    raise E.error("JSSourceOverlappingSubjectFilters")
        if src.get("external") is None and lookup:
            ocfg = lookup(src["name"])
            if ocfg is not None and 0 < cfg["max_msg_size"] < ocfg.get("max_msg_size", -1):
                raise E.error("JSSourceMaxMessageSizeTooBigErr")
    for src in ([mirror] if mirror else []) + sources:
        ext = src.get("external") or {}
        if ext.get("api"):
            api = ext["api"]
            if not is_valid_subject(api) or "*" in api.split(".") or ">" in api.split("."):
                raise _invalid("stream external api prefix %s must be a valid subject without wildcards"
                               % json.dumps(api))
            if subjects_overlap(api, "$JS.API"):
                raise E.error("JSStreamExternalApiOverlapErrF", prefix=api, subject="$JS.API")

    subjects = cfg.get("subjects") or []
    if not subjects:
        if mirror is None and not sources:
            subjects = [name]
    else:
        seen = set()
        for i, subj in enumerate(subjects):
            if not is_valid_subject(subj):
                raise _invalid("invalid subject")
            if subj in seen:
                raise _invalid("duplicate subjects detected")
            if subj == ">":
                if not cfg.get("no_ack"):
                    raise _invalid("capturing all subjects requires no-ack to be true")
            if not cfg.get("no_ack"):
                for ns in ("$JS.>", "$JSC.>", "$NRG.>"):
                    if subjects_overlap(subj, ns) and not subject_is_subset(subj, "$JS.EVENT.>"):
                        raise _invalid("subjects that overlap with jetstream api require no-ack to be true")
                if subjects_overlap(subj, "$SYS.>") and not subject_is_subset(subj, "$SYS.ACCOUNT.>"):
                    raise _invalid("subjects that overlap with system api require no-ack to be true")
            for t in subjects[i + 1:]:
                if subjects_overlap(t, subj):
                    raise _invalid("subject %s overlaps with %s" % (json.dumps(subj), json.dumps(t)))
            seen.add(subj)
    if subjects:
        cfg["subjects"] = subjects
    else:
        cfg.pop("subjects", None)
    if not subjects and not sources and mirror is None:
        raise _invalid("stream needs at least one configured subject or be a source/mirror")
    if limits is not None:
        required, limit = limits.max_bytes_limits(cfg)
        if required and cfg["max_bytes"] <= 0:
            raise E.error("JSStreamMaxBytesRequired")
        if limit > 0 and cfg["max_bytes"] > limit:
            raise E.error("JSStreamMaxStreamBytesExceeded")
    st = cfg.get("subject_transform")
    if st is not None:
        if st.get("src") and not is_valid_subject(st["src"]):
            raise E.error("JSStreamTransformInvalidSource", err="invalid subject %s" % st["src"])
        err = _valid_mapping(st.get("src", ""), st.get("dest", ""))
        if err:
            raise E.error("JSStreamTransformInvalidDestination", err=err)
    rp = cfg.get("republish")
    if rp is not None:
        if not rp.get("src"):
            if pedantic:
                raise E.error("JSPedanticErrF", err="republish source can not be empty")
            rp["src"] = ">"
        dest = rp.get("dest", "")
        rp["dest"] = dest
        for subj in subjects:
            if dest and subjects_overlap(dest, subj):
                raise _invalid("stream configuration for republish destination forms a cycle")
        if _valid_mapping(rp["src"], dest) is not None:      # no destination: no republish
            raise _invalid("stream configuration for republish with transform from '%s' to '%s' not valid"
                           % (rp["src"], dest))
    pl = cfg.get("placement")
    if pl is not None and not any(pl.values()):
        cfg.pop("placement")
    elif pl is not None and pl.get("preferred"):
        raise _invalid("preferred server not permitted in placement")
    cfg.setdefault("consumer_limits", {})
    if api_request:
        set_static_metadata(cfg)
    return cfg


def set_static_metadata(cfg):
    md = dict(cfg.get("metadata") or {})
    md.pop("_nats.ver", None)
    md.pop("_nats.level", None)
    level = 0
    if cfg.get("allow_msg_ttl") or (cfg.get("subject_delete_marker_ttl") or 0) > 0:
        level = max(level, 1)
    if cfg.get("allow_msg_counter") or cfg.get("allow_atomic") or cfg.get("allow_msg_schedules") \
            or cfg.get("persist_mode") == "async":
        level = max(level, 2)
    if cfg.get("allow_batched"):
        level = max(level, 4)
    md["_nats.req.level"] = str(level)
    cfg["metadata"] = md


def check_update(old, new, pedantic=False, lookup=None, limits=None, clustered=False):
    cfg = check_config(new, pedantic, lookup, limits)
    if cfg["name"] != old["name"]:
        raise _invalid("stream configuration name must match original")
    if not clustered and cfg["num_replicas"] > 1:
        raise E.error("JSStreamReplicasNotSupportedErr")
    if cfg["storage"] != old["storage"]:
        raise _invalid("stream configuration update can not change storage type")
    if cfg["retention"] != old["retention"] and "workqueue" in (cfg["retention"], old["retention"]):
        raise _invalid("stream configuration update can not change retention policy to/from workqueue")
    if not cfg.get("sealed") and old.get("sealed"):
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if not cfg.get("deny_delete") and old.get("deny_delete"):
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if not cfg.get("deny_purge") and old.get("deny_purge"):
        raise _invalid("stream configuration update can not cancel deny purge")
    if cfg.get("mirror") is not None and cfg.get("mirror") != old.get("mirror"):
        raise E.error("JSStreamMirrorNotUpdatableErr")
    if old.get("allow_msg_ttl") and not cfg.get("allow_msg_ttl"):
        raise _invalid("message TTL status can not be disabled")
    if bool(cfg.get("allow_msg_counter")) != bool(old.get("allow_msg_counter")):
        raise _invalid("stream configuration update can not change message counter setting")
    if old.get("allow_msg_schedules") and not cfg.get("allow_msg_schedules"):
        raise _invalid("message schedules can not be disabled")
    if old.get("persist_mode") != cfg.get("persist_mode"):
        raise _invalid("stream configuration update can not change persist mode")
    if cfg.get("first_seq", 0) != old.get("first_seq", 0):
        pass    # first_seq is creation-only; nats-server keeps the original silently
    cfg["first_seq"] = old.get("first_seq", 0)
    if not cfg["first_seq"]:
        cfg.pop("first_seq")
    if cfg.get("sealed"):
        cfg["max_age"] = 0
        cfg["discard"] = "new"
        cfg["deny_delete"] = cfg["deny_purge"] = True
        cfg["allow_rollup_hdrs"] = False
    # the required level recorded at creation is kept
    md = cfg["metadata"]
    oreq = (old.get("metadata") or {}).get("_nats.req.level")
    if oreq is not None:
        md["_nats.req.level"] = oreq
    return cfg


# ---- wire form ----

ORDER = ["name", "description", "subjects", "retention", "max_consumers", "max_msgs", "max_bytes",
         "max_age", "max_msgs_per_subject", "max_msg_size", "discard", "storage", "num_replicas",
         "no_ack", "duplicate_window", "placement", "mirror", "sources", "compression", "first_seq",
         "subject_transform", "republish", "allow_direct", "mirror_direct", "discard_new_per_subject",
         "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs", "consumer_limits", "allow_msg_ttl",
         "subject_delete_marker_ttl", "allow_msg_counter", "allow_atomic", "allow_msg_schedules",
         "persist_mode", "allow_batched", "metadata"]
ALWAYS = {"name", "retention", "max_consumers", "max_msgs", "max_bytes", "max_age",
          "max_msgs_per_subject", "discard", "storage", "num_replicas", "compression", "allow_direct",
          "mirror_direct", "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs",
          "consumer_limits", "allow_msg_ttl"}
ZERO = {"retention": "limits", "discard": "old", "storage": "file", "compression": "none",
        "consumer_limits": {}}


def config_json(cfg, dynamic=True):
    """The config as nats-server prints it (field order, omit-empty, `_nats.*` metadata)."""
    out = {}
    for k in ORDER:
        v = cfg.get(k)
        if k in ALWAYS:
            if v is None:
                v = ZERO.get(k, False if k in ("allow_direct", "mirror_direct", "sealed", "deny_delete",
                                               "deny_purge", "allow_rollup_hdrs", "allow_msg_ttl") else 0)
            out[k] = v
        elif v not in (None, "", 0, False, [], {}):
            out[k] = v
    if dynamic:
        md = dict(out.get("metadata") or {})
        md["_nats.level"] = str(API_LEVEL)
        from natsd import VERSION
        md["_nats.ver"] = VERSION
        out["metadata"] = dict(sorted(md.items()))
    return out


def matching(configs, subject):
    """The (name, config) pairs whose subjects overlap `subject` (all when it is empty),
    sorted by name."""
    out = sorted(configs, key=lambda nc: nc[0])
    if subject:
        out = [(n, c) for n, c in out if any(subjects_overlap(subject, x) for x in c.get("subjects") or [])]
    return out
