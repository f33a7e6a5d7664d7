"""Option decoding shared by the monitoring endpoints (owned with connz/subsz/... by monitoring).

Every endpoint takes its options from two places that must give the same options object:
the HTTP query string (`?subs=1&limit=10`) and the JSON body of a `$SYS.REQ.SERVER.PING.<EP>`
request (`{"subscriptions": true, "limit": 10}`). The query decoders reproduce nats-server's
`decodeBool` / `decodeInt` / `decodeUint64` / `decodeState` / `decodeSubs` (monitor.go),
including their 400 texts; the JSON decoders follow Go's `encoding/json` (unknown keys are
ignored, a wrong type is an error).
"""
import re
from dataclasses import fields
from datetime import datetime, timezone

from natsd.gofmt import go_duration, go_quote, rtt_nanos

class HttpError(Exception):
    """A monitoring request answered with an HTTP error status and nats-server's text."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_UINT_RE = re.compile(r"[0-9]+\Z")

INT_MAX = 2 ** 63 - 1
UINT64_MAX = 2 ** 64 - 1

CONN_OPEN, CONN_CLOSED, CONN_ALL = 0, 1, 2


class OptionsError(HttpError):
    """Malformed options: HTTP 400 with nats-server's text (also 400 for $SYS requests)."""

    def __init__(self, message):
        super().__init__(400, message)


# ---- query string (values are strings; "" means "not given") ----

def _decode_error(go_type, name, go_func, s, why):
    """nats-server's 400 text for a query value strconv refused (monitor.go's decodeX)."""
    return OptionsError("Error decoding %s for '%s': strconv.%s: parsing %s: %s"
                        % (go_type, name, go_func, go_quote(s), why))


def q_bool(query, name):
    s = query.get(name, "")
    if s == "":
        return False
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise _decode_error("boolean", name, "ParseBool", s, "invalid syntax")


def _q_integer(query, name, go_type, go_func, pattern, lo, hi):
    """A query integer as strconv.Atoi/ParseUint reads it (0 when absent), within lo..hi."""
    s = query.get(name, "")
    if s == "":
        return 0
    if not pattern.match(s):
        raise _decode_error(go_type, name, go_func, s, "invalid syntax")
    v = int(s)
    if not lo <= v <= hi:
        raise _decode_error(go_type, name, go_func, s, "value out of range")
    return v


def q_int(query, name):
    return _q_integer(query, name, "int", "Atoi", _INT_RE, -INT_MAX - 1, INT_MAX)


def q_uint64(query, name):
    return _q_integer(query, name, "uint64", "ParseUint", _UINT_RE, 0, UINT64_MAX)


def q_subs(query):
    """`subs=detail` -> (False, True); otherwise a boolean -> (bool, False)."""
    if query.get("subs", "").lower() == "detail":
        return False, True
    return q_bool(query, "subs"), False


def q_state(query):
    s = query.get("state", "")
    if s == "":
        return CONN_OPEN
    v = {"open": CONN_OPEN, "closed": CONN_CLOSED, "any": CONN_ALL, "all": CONN_ALL}.get(s.lower())
    if v is None:
        raise OptionsError("Error decoding state for %s" % s)
    return v


def q_str(query, name):
    return query.get(name, "")


# ---- JSON bodies ($SYS requests) ----

def _json_type_error(struct, key, got, want):
    kinds = {bool: "bool", int: "number", float: "number", str: "string", list: "array",
             dict: "object", type(None): "null"}
    raise OptionsError("json: cannot unmarshal %s into Go struct field %s.%s of type %s"
                       % (kinds.get(type(got), "value"), struct, key, want))


def j_bool(body, key, struct):
    v = body.get(key)
    if v is None:
        return False
    if not isinstance(v, bool):
        _json_type_error(struct, key, v, "bool")
    return v


def j_int(body, key, struct, unsigned=False):
    v = body.get(key)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            isinstance(v, float) and not v.is_integer()) or (unsigned and v < 0):
        _json_type_error(struct, key, v, "uint64" if unsigned else "int")
    return int(v)


def j_str(body, key, struct):
    v = body.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        _json_type_error(struct, key, v, "string")
    return v


def j_str_list(body, key, struct):
    v = body.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        _json_type_error(struct, key, v, "[]string")
    return list(v)


def j_body(body):
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise OptionsError("json: cannot unmarshal %s into Go value" % type(body).__name__)
    return body


# ---- both, for options that are plain fields ----

_QUERY_DECODERS = {bool: q_bool, int: q_int, str: q_str}
_JSON_DECODERS = {bool: j_bool, int: j_int, str: j_str}


def plain_options(cls, **query_names):
    """(options_from_query, options_from_json) for an options dataclass whose fields are all
    bool, int or str (as their defaults are), decoded in field order. A field's query parameter
    is its name unless `query_names` gives another; its JSON key is its name; JSON type errors
    name the class as the Go struct."""
    kinds = [(f.name, type(f.default)) for f in fields(cls)]

    def options_from_query(query):
        return cls(**{name: _QUERY_DECODERS[kind](query, query_names.get(name, name))
                      for name, kind in kinds})

    def options_from_json(body):
        b = j_body(body)
        return cls(**{name: _JSON_DECODERS[kind](b, name, cls.__name__) for name, kind in kinds})

    return options_from_query, options_from_json


# ---- output formatting shared by the endpoints ----

def now_rfc3339(ts):
    """Unix time -> RFC 3339 UTC with nanoseconds trimmed like Go's time.Time JSON."""
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    frac = ("%09d" % (int(round((ts % 1) * 1e9)) % 1000000000)).rstrip("0")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ("." + frac if frac else "") + "Z"


def my_uptime(seconds):
    """nats-server's myUptime: 1y2d3h4m5s, leading zero units dropped."""
    tsecs = max(0, int(seconds))
    tmins, thrs = tsecs // 60, tsecs // 3600
    tdays = thrs // 24
    tyrs = tdays // 365
    if tyrs > 0:
        return "%dy%dd%dh%dm%ds" % (tyrs, tdays % 365, thrs % 24, tmins % 60, tsecs % 60)
    if tdays > 0:
        return "%dd%dh%dm%ds" % (tdays, thrs % 24, tmins % 60, tsecs % 60)
    if thrs > 0:
        return "%dh%dm%ds" % (thrs, tmins % 60, tsecs % 60)
    if tmins > 0:
        return "%dm%ds" % (tmins, tsecs % 60)
    return "%ds" % tsecs



def rtt_string(seconds):
    """A connection's RTT as nats-server prints it (µs-truncated below 1ms)."""
    return go_duration(rtt_nanos(seconds))


def paginate(items, offset, limit):
    n = len(items)
    lo = min(max(offset, 0), n)
    return items[lo:lo + min(limit, n - lo)]
