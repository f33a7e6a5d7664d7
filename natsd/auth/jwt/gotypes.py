"""The Go types of the claims' fields, as nats-io/jwt v2's structs declare them: a token whose
`nats` holds a value Go's encoding/json cannot put in its field (a string for a limit, 1.5 for
an integer, an object for a list) does not decode, and nats-server refuses it. Unknown fields
and nulls are let through, as Go lets them through.

check(kind, nats) raises ValueError with Go's text ("json: cannot unmarshal string into Go
struct field UserClaims.nats.subs of type int64").
"""
from natsd.gofmt import go_quote

STR, INT, UINT8, BOOL, ANY = "string", "int64", "uint8", "bool", "any"
EXPORT_TYPE = "ExportType"          # "stream" or "service"
CIDR_LIST = "CIDRList"              # a list of strings, or one comma-separated string


def list_of(t):
    return ("list", t)


def map_of(t):
    return ("map", t)


PERMISSION = {"allow": list_of(STR), "deny": list_of(STR)}
PERMISSIONS = {"pub": PERMISSION, "sub": PERMISSION, "resp": {"max": INT, "ttl": INT}}
GENERIC = {"tags": list_of(STR), "type": STR, "version": INT}
USER = {**PERMISSIONS, **GENERIC, "src": CIDR_LIST,
        "times": list_of({"start": STR, "end": STR}), "times_location": STR,
        "subs": INT, "data": INT, "payload": INT, "bearer_token": BOOL,
        "allowed_connection_types": list_of(STR), "issuer_account": STR}
JETSTREAM_LIMITS = {"mem_storage": INT, "disk_storage": INT, "streams": INT, "consumer": INT,
                    "max_ack_pending": INT, "mem_max_stream_bytes": INT,
                    "disk_max_stream_bytes": INT, "max_bytes_required": BOOL}
ACCOUNT_LIMITS = {"subs": INT, "data": INT, "payload": INT, "imports": INT, "exports": INT,
                  "wildcards": BOOL, "disallow_bearer": BOOL, "conn": INT, "leaf": INT,
                  **JETSTREAM_LIMITS, "tiered_limits": map_of(JETSTREAM_LIMITS)}
IMPORT = {"name": STR, "subject": STR, "account": STR, "token": STR, "to": STR,
          "local_subject": STR, "type": EXPORT_TYPE, "share": BOOL, "allow_trace": BOOL}
EXPORT = {"name": STR, "subject": STR, "type": EXPORT_TYPE, "token_req": BOOL,
          "revocations": map_of(INT), "response_type": STR, "response_threshold": INT,
          "service_latency": ANY, "account_token_position": INT, "advertise": BOOL,
          "allow_trace": BOOL, "description": STR, "info_url": STR}
ACCOUNT = {**GENERIC, "imports": list_of(IMPORT), "exports": list_of(EXPORT),
           "limits": ACCOUNT_LIMITS, "signing_keys": ANY, "revocations": map_of(INT),
           "default_permissions": PERMISSIONS,
           "mappings": map_of(list_of({"subject": STR, "weight": UINT8, "cluster": STR})),
           "authorization": {"auth_users": list_of(STR), "allowed_accounts": list_of(STR),
                             "xkey": STR},
           "trace": {"dest": STR, "sampling": INT}, "cluster_traffic": STR,
           "description": STR, "info_url": STR}
OPERATOR = {**GENERIC, "signing_keys": list_of(STR), "account_server_url": STR,
            "operator_service_urls": list_of(STR), "system_account": STR,
            "assert_server_version": STR, "strict_signing_key_usage": BOOL}
ACTIVATION = {**GENERIC, "subject": STR, "kind": EXPORT_TYPE, "issuer_account": STR}
CLAIMS = {"user": ("UserClaims", USER), "account": ("AccountClaims", ACCOUNT),
          "operator": ("OperatorClaims", OPERATOR), "activation": ("ActivationClaims", ACTIVATION)}
INT64 = (-(1 << 63), (1 << 63) - 1)


def check(kind, nats):
    """Raise ValueError as Go's json.Unmarshal would for `nats` of a `kind` claim."""
    if kind in CLAIMS:
        struct, spec = CLAIMS[kind]
        _check(nats, spec, struct + ".nats")


def _json_kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number " + json_number(v)
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def json_number(v):
    return repr(v) if isinstance(v, float) else str(v)


def _fail(v, path, gotype):
    raise ValueError("json: cannot unmarshal %s into Go struct field %s of type %s"
                     % (_json_kind(v), path, gotype))


def _check(v, spec, path):
    if v is None or spec == ANY:
        return
    if isinstance(spec, dict):
        if not isinstance(v, dict):
            _fail(v, path, "struct")
        for k, sub in spec.items():
            if k in v:
                _check(v[k], sub, path + "." + k)
    elif isinstance(spec, tuple):
        container, item = spec
        if container == "list":
            if not isinstance(v, list):
                _fail(v, path, "[]" + _name(item))
            for x in v:
                _check(x, item, path)
        else:
            if not isinstance(v, dict):
                _fail(v, path, "map[string]" + _name(item))
            for x in v.values():
                _check(x, item, path)
    elif spec == STR:
        if not isinstance(v, str):
            _fail(v, path, STR)
    elif spec == BOOL:
        if not isinstance(v, bool):
            _fail(v, path, BOOL)
    elif spec in (INT, UINT8):
        lo, hi = INT64 if spec == INT else (0, 255)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            _fail(v, path, spec)
    elif spec == EXPORT_TYPE:
        if not isinstance(v, str):
            _fail(v, path, STR)
        if v not in ("stream", "service"):
            raise ValueError("unknown export type %s" % go_quote(v))
    elif spec == CIDR_LIST:
        if not isinstance(v, str) and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            _fail(v, path, STR)


def _name(spec):
    return spec if isinstance(spec, str) else "struct"
