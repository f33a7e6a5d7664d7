"""Go's encoding/json as nats-server 2.15.1 (built with Go 1.27) applies it to API requests.

Owns: `unmarshal_request(payload, spec, type_name, strict)` — nats-server's unmarshalRequest:
a json.Decoder with DisallowUnknownFields decoding value after value into the same struct
(later values merge into earlier ones) until EOF, errors worded as Go words them
("invalid character 'x' looking for beginning of value at offset 5", "unexpected EOF",
"exceeded max depth", "json: cannot unmarshal number 1e3 into Go struct field
CreateConsumerRequest.config.max_deliver of type int", `json: unknown field "x"`,
"parsing time ..."), and in non-strict mode Go's json.Unmarshal fallback; plus the request
gates `is_empty_request` / `is_json_object_or_array`, `go_parse_rfc3339` and the
quoting helpers. `decode_plain` reads the common body (exact field names, flat values of
their own JSON types) with json.loads, where Go could not read it differently.

Bytes that are not UTF-8 are kept through the parser (surrogateescape) and become U+FFFD in
decoded strings, as Go does; a JSON escape of a lone surrogate becomes U+FFFD too. Nesting
deeper than 10000 is Go's "exceeded max depth"; the parser is iterative (no RecursionError).

Spec: {json name: (go type, kind[, sub spec])}; kinds: str, int, uint (range from the Go
type), bool, time (RFC 3339 string, kept as text), ctime ((text, unix ns)), enum (stream
enums by field name) or enum:<name>, obj (struct; pointer semantics), objlist, strlist,
durlist, uintlist, strmap, uintmap, any (accepted as is).
"""
import calendar
import json
import re

from natsd.gofmt import go_quote, json_kind

MAX_DEPTH = 10000


class JSONError(Exception):
    """Go's error text for a request body (without nats-server's "invalid JSON: " prefix)."""


class _EOF(Exception):
    pass


class _Syntax(Exception):
    def __init__(self, msg, offset):
        super().__init__(msg)
        self.msg, self.offset = msg, offset


# ---------------------------------------------------------------- quoting (Go's strconv/time)

def _quote_char(c):
    """How Go's JSON scanner names an offending byte: 'x', '\\x01', '\\''."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    return "'" + go_quote(bytes([c]))[1:-1] + "'"


def _bad_char(b, i, context):
    """_Syntax for the character at b[i]: Go names a whole UTF-8 character (offset after
    it), a byte that starts none as '\\xNN'."""
    c = b[i]
    if c >= 0x80:
        for n in (2, 3, 4):
            try:
                ch = b[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            return _Syntax("invalid character '%s' %s" % (go_quote(ch)[1:-1], context), i + n)
    return _Syntax("invalid character %s %s" % (_quote_char(c), context), i + 1)


def _can_backquote(s):
    """Go's rule for an escape sequence in an error: backquoted unless it holds '`', a bad
    byte, white space or a character that is not printable."""
    for ch in s:
        o = ord(ch)
        if ch == "`" or 0xD800 <= o <= 0xDFFF or ch.isspace() or not ch.isprintable():
            return False
    return True


def time_quote(s):
    """Go's time package quote() (used in time.ParseError texts)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if o >= 0x80 or o < 0x20:
            if 0xDC80 <= o <= 0xDCFF:
                out.append("\\x%02x" % (o - 0xDC00))
            else:
                out.extend("\\x%02x" % b for b in ch.encode("utf-8", "replace"))
        else:
            if ch == '"' or ch == "\\":
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


# ---------------------------------------------------------------- the scanner/parser

class _Obj(list):
    """A JSON object as its (key, value) pairs in input order (duplicates kept)."""
    __slots__ = ("span",)


class _Arr(list):
    __slots__ = ("span",)


class _Str(str):
    pass


class _Num:
    __slots__ = ("text", "span")

    def __init__(self, text, span):
        self.text, self.span = text, span


_WS = re.compile(rb"[ \t\r\n]*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]+')
_DIGITS = re.compile(rb"[0-9]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LITERALS = {0x74: (b"true", True), 0x66: (b"false", False), 0x6E: (b"null", None)}


def _decode_str(raw, has_escape):
    s = raw.decode("utf-8", "surrogateescape")
    if has_escape:
        s = json.decoder.scanstring(s + '"', 0)[0]
    if _SURROGATE.search(s):
        s = _SURROGATE.sub("\ufffd", s)
    return s


def _string(b, i, n):
    start = i
    i += 1
    esc = False
    while True:
        m = _PLAIN.match(b, i)
        if m:
            i = m.end()
        if i >= n:
            raise _EOF()
        c = b[i]
        if c == 0x22:
            break
        if c == 0x5C:
            esc = True
            if i + 1 >= n:
                raise _EOF()
            e = b[i + 1]
            if e in b'"\\/bfnrt':
                i += 2
                continue
            if e == 0x75:
                # Go's decoder reads its input into a buffer of 64 bytes, doubled while one
                # value fills it: a \u escape cut by the buffer's end that is already not
                # hex is reported with just the bytes buffered so far
                end = 64
                while end < i + 2:
                    end *= 2
                while True:
                    lim = min(end, n)
                    if lim >= i + 6:
                        window = b[i:i + 6]
                        break
                    if not all(h in _HEX for h in b[i + 2:lim]):
                        window = b[i:lim]
                        break
                    if lim >= n:
                        raise _EOF()
                    end *= 2
                if all(h in _HEX for h in window[2:]) and len(window) == 6:
                    i += 6
                    continue
            else:
                window = b[i:i + 2]
            what = window.decode("utf-8", "surrogateescape")
            what = "`%s`" % what if _can_backquote(what) else go_quote(window)
            raise _Syntax("invalid escape sequence %s in string" % what, i + len(window))
        raise _bad_char(b, i, "in string")
    node = _Str(_decode_str(b[start + 1:i], esc))
    node.span = (start, i + 1)
    return node, i + 1


def _number(b, i, n):
    start = i
    if b[i] == 0x2D:
        i += 1
        if i >= n:
            raise _EOF()
        if not 0x30 <= b[i] <= 0x39:
            raise _bad_char(b, i, "in numeric literal")
    if b[i] == 0x30:
        i += 1
    else:
        i = _DIGITS.match(b, i).end()
    for lead in (b".", b"eE"):
        if i < n and b[i] in lead:
            i += 1
            if lead == b"eE" and i < n and b[i] in b"+-":
                i += 1
            if i >= n:
                raise _EOF()
            if not 0x30 <= b[i] <= 0x39:
                raise _bad_char(b, i, "in numeric literal")
            i = _DIGITS.match(b, i).end()
    return _Num(b[start:i].decode("ascii"), (start, i)), i


def _literal(b, i, n):
    word, value = _LITERALS[b[i]]
    for k in range(1, len(word)):
        if i + k >= n:
            raise _EOF()
        if b[i + k] != word[k]:
            raise _bad_char(b, i + k, "in literal %s (expecting %s)" % (word.decode(), _quote_char(word[k])))
    return value, i + len(word)


def _key(b, i, n):
    i = _WS.match(b, i).end()
    if i >= n:
        raise _EOF()
    if b[i] != 0x22:
        raise _bad_char(b, i, "looking for beginning of object key string")
    key, i = _string(b, i, n)
    i = _WS.match(b, i).end()
    if i >= n:
        raise _EOF()
    if b[i] != 0x3A:
        raise _bad_char(b, i, "after object key")
    return str(key), i + 1


def parse_value(b, i=0):
    """One JSON value at b[i:] (leading whitespace allowed) -> (node, end). Raises _EOF when
    the input ends inside the value, _Syntax with Go's message and 1-based offset."""
    n = len(b)
    stack = []          # [kind, container, start, pending key]
    while True:
        i = _WS.match(b, i).end()
        if i >= n:
            raise _EOF()
        c = b[i]
        if c == 0x7B or c == 0x5B:
            if len(stack) >= MAX_DEPTH:
                raise _Syntax("exceeded max depth", i + 1)
            start = i
            i = _WS.match(b, i + 1).end()
            if i >= n:
                raise _EOF()
            if c == 0x7B:
                if b[i] == 0x7D:
                    node = _Obj()
                    node.span = (start, i + 1)
                    i += 1
                else:
                    key, i = _key(b, i, n)
                    stack.append(["o", _Obj(), start, key])
                    continue
            else:
                if b[i] == 0x5D:
                    node = _Arr()
                    node.span = (start, i + 1)
                    i += 1
                else:
                    stack.append(["a", _Arr(), start, None])
                    continue
        elif c == 0x22:
            node, i = _string(b, i, n)
        elif c == 0x2D or 0x30 <= c <= 0x39:
            node, i = _number(b, i, n)
        elif c in _LITERALS:
            node, i = _literal(b, i, n)
        else:
            raise _bad_char(b, i, "looking for beginning of value")
        # a value is complete: hand it to the enclosing containers
        while True:
            if not stack:
                return node, i
            top = stack[-1]
            i = _WS.match(b, i).end()
            if i >= n:
                raise _EOF()
            c = b[i]
            if top[0] == "o":
                top[1].append((top[3], node))
                if c == 0x2C:
                    top[3], i = _key(b, i + 1, n)
                    break
                if c != 0x7D:
                    raise _bad_char(b, i, "after object key:value pair")
            else:
                top[1].append(node)
                if c == 0x2C:
                    i += 1
                    break
                if c != 0x5D:
                    raise _bad_char(b, i, "after array element")
            stack.pop()
            node = top[1]
            node.span = (top[2], i + 1)
            i += 1


def _from_python(v):
    """A decoded Python value (dict/list/str/int/float/bool/None) as parser nodes."""
    if isinstance(v, dict):
        o = _Obj((k, _from_python(x)) for k, x in v.items())
        o.span = None
        return o
    if isinstance(v, list):
        a = _Arr(_from_python(x) for x in v)
        a.span = None
        return a
    if isinstance(v, str):
        s = _Str(v)
        s.span = None
        return s
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return _Num(json.dumps(v), None)
    return v


# ---------------------------------------------------------------- unmarshal into a spec

_NODE_KINDS = {type(None): "null", _Num: "number", _Obj: "object"}    # _Obj is a list


def _jkind(node):
    """A parser node's JSON type as Go names it (gofmt.json_kind for the others)."""
    return _NODE_KINDS.get(type(node)) or json_kind(node)


class _Ctx:
    __slots__ = ("data", "root", "strict")

    def __init__(self, data, root, strict):
        self.data, self.root, self.strict = data, root, strict

    def raw(self, node):
        if node is None:
            return b"null"
        if node is True:
            return b"true"
        if node is False:
            return b"false"
        span = getattr(node, "span", None)
        if span is not None and self.data is not None:
            return self.data[span[0]:span[1]]
        return _py_json(node).encode("utf-8", "surrogateescape")

    def type_error(self, value, path, gotype):
        if not path:
            return JSONError("json: cannot unmarshal %s into Go value of type %s" % (value, gotype))
        where = "%s.%s" % (self.root, ".".join(path))
        if path[-1].isdigit():
            return JSONError("json: cannot unmarshal %s into %s of type %s" % (value, where, gotype))
        return JSONError("json: cannot unmarshal %s into Go struct field %s of type %s" % (value, where, gotype))


def _py_json(node):
    if isinstance(node, _Num):
        return node.text
    if isinstance(node, _Obj):
        return "{" + ",".join("%s:%s" % (json.dumps(k), _py_json(v)) for k, v in node) + "}"
    if isinstance(node, _Arr):
        return "[" + ",".join(_py_json(v) for v in node) + "]"
    return json.dumps(node, ensure_ascii=False)


INT_RANGES = {"int": (-(1 << 63), (1 << 63) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
              "time.Duration": (-(1 << 63), (1 << 63) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
              "uint64": (0, (1 << 64) - 1), "uint32": (0, (1 << 32) - 1), "uint": (0, (1 << 64) - 1)}
_INT_RE = re.compile(r"-?[0-9]+\Z")
_UINT_RE = re.compile(r"[0-9]+\Z")


def _int(ctx, node, path, gotype, unsigned):
    if not isinstance(node, _Num):
        raise ctx.type_error(_jkind(node), path, gotype)
    text = node.text
    lo, hi = INT_RANGES.get(gotype, INT_RANGES["int"])
    if (_UINT_RE if unsigned else _INT_RE).match(text):
        v = int(text)
        if lo <= v <= hi:
            return v
    raise ctx.type_error("number " + text, path, gotype)


def _deref(gotype):
    return gotype.lstrip("[]*") if gotype.startswith("[]") else gotype.lstrip("*")


def _stream_enum(values, lower=False):
    def check(ctx, node, raw):
        key = raw.lower() if lower else raw
        v = values.get(key)
        if v is None:
            raise JSONError("can not unmarshal %s" % go_quote(raw))
        return v
    return check


def _compression(ctx, node, raw):
    if node is not None and not isinstance(node, _Str):
        raise JSONError("json: cannot unmarshal %s into Go value of type string" % _jkind(node))
    s = node or ""
    if s in ("s2", "none"):
        return s
    raise JSONError("unknown compression algorithm")


def _exact(values, fmt):
    table = {('"%s"' % k).encode(): v for k, v in values.items()}

    def check(ctx, node, raw):
        v = table.get(raw)
        if v is None:
            raise JSONError(fmt % raw.decode("utf-8", "surrogateescape"))
        return v
    return check


def _same(*names):
    return {n: n for n in names}


ENUMS = {
    "retention": _stream_enum({b'"limits"': "limits", b'"interest"': "interest",
                               b'"workqueue"': "workqueue"}),
    "discard": _stream_enum({b'"old"': "old", b'"new"': "new"}, lower=True),
    "storage": _stream_enum({b'"file"': "file", b'"memory"': "memory"}),
    "compression": _compression,
    "persist_mode": _stream_enum({b'"default"': "default", b'""': "default", b'"async"': "async"}),
    "deliver": _stream_enum({b'"all"': "all", b'"undefined"': "all", b'"last"': "last",
                             b'"last_per_subject"': "last_per_subject", b'"new"': "new",
                             b'"by_start_sequence"': "by_start_sequence",
                             b'"by_start_time"': "by_start_time"}),
    "ack": _stream_enum({b'"none"': "none", b'"all"': "all", b'"explicit"': "explicit",
                         b'"flow_control"': "flow_control"}),
    "replay": _stream_enum({b'"instant"': "instant", b'"original"': "original"}),
    "priority": _exact(_same("none", "overflow", "pinned_client", "prioritized"),
                       "unknown priority policy: %s"),
    "action": _exact({"create": "create", "update": "update", "": "create_or_update"},
                     "unknown consumer action: %s"),
}


def _struct(ctx, node, spec, path, gotype, out):
    if node is None:
        return out
    if not isinstance(node, _Obj):
        raise ctx.type_error(_jkind(node), path, gotype)
    if out is None:
        out = {}
    for key, val in node:
        name, f = key, spec.get(key)
        if f is None:
            low = key.lower()
            for cand in spec:
                if cand.lower() == low:
                    name, f = cand, spec[cand]
                    break
        if f is None:
            if ctx.strict:
                raise JSONError("json: unknown field %s" % go_quote(key))
            continue
        _field(ctx, val, name, f, path + [key], out)
    return out


def _field(ctx, node, name, f, path, out):
    gotype, kind = f[0], f[1]
    if kind == "any":
        out[name] = node if not isinstance(node, (_Obj, _Arr, _Num)) else _plain(node)
        return
    if kind.startswith("enum"):
        fn = ENUMS[kind[5:] if kind.startswith("enum:") else name]
        out[name] = fn(ctx, node, ctx.raw(node))
        return
    if node is None:
        if kind in ("obj", "objlist", "strlist", "durlist", "uintlist", "strmap", "uintmap", "time",
                    "ctime"):
            out.pop(name, None)
        return
    if kind == "str":
        if not isinstance(node, _Str):
            raise ctx.type_error(_jkind(node), path, gotype)
        out[name] = str(node)
    elif kind in ("int", "uint"):
        out[name] = _int(ctx, node, path, gotype, kind == "uint")
    elif kind == "bool":
        if not isinstance(node, bool):
            raise ctx.type_error(_jkind(node), path, gotype)
        out[name] = node
    elif kind in ("time", "ctime"):
        if not isinstance(node, _Str):
            raise ctx.type_error(_jkind(node), path, "time.Time")
        try:
            ns = go_parse_rfc3339(str(node))
        except ValueError as e:
            raise JSONError(str(e))
        out[name] = (str(node), ns) if kind == "ctime" else str(node)
    elif kind == "obj":
        prev = out.get(name)
        out[name] = _struct(ctx, node, f[2], path, gotype, prev if isinstance(prev, dict) else None)
    elif kind in ("objlist", "strlist", "durlist", "uintlist"):
        if not isinstance(node, _Arr):
            raise ctx.type_error(_jkind(node), path, gotype)
        elem = _deref(gotype)
        items = []
        for idx, x in enumerate(node):
            p = path + [str(idx)]
            if kind == "objlist":
                items.append(None if x is None else _struct(ctx, x, f[2], p, elem, None))
            elif kind == "strlist":
                if x is not None and not isinstance(x, _Str):
                    raise ctx.type_error(_jkind(x), p, "string")
                items.append("" if x is None else str(x))
            elif kind == "uintlist":
                items.append(0 if x is None else _int(ctx, x, p, elem, True))
            else:
                items.append(0 if x is None else _int(ctx, x, p, "time.Duration", False))
        out[name] = items
    elif kind in ("strmap", "uintmap"):
        if not isinstance(node, _Obj):
            raise ctx.type_error(_jkind(node), path, gotype)
        m = out.get(name)
        m = dict(m) if isinstance(m, dict) else {}
        for k, x in node:
            if kind == "uintmap":
                m[k] = 0 if x is None else _int(ctx, x, path + [k], "uint64", True)
                continue
            if x is not None and not isinstance(x, _Str):
                raise ctx.type_error(_jkind(x), path + [k], "string")
            m[k] = "" if x is None else str(x)
        out[name] = m
    else:
        raise ValueError("unknown spec kind %r" % kind)


def _plain(node):
    if isinstance(node, _Num):
        return json.loads(node.text)
    if isinstance(node, _Obj):
        return {k: _plain(v) for k, v in node}
    if isinstance(node, _Arr):
        return [_plain(v) for v in node]
    if isinstance(node, _Str):
        return str(node)
    return node


def unmarshal(value, spec, type_name, strict=True, out=None, data=None):
    """Decode a parsed node (or a plain Python value) into a dict of the fields present,
    like Go decoding into server.<type_name>; raises JSONError."""
    if not isinstance(value, (_Obj, _Arr, _Str, _Num)) and value not in (None, True, False):
        value = _from_python(value)
    elif isinstance(value, (dict, list)) and not isinstance(value, (_Obj, _Arr)):
        value = _from_python(value)
    ctx = _Ctx(data, type_name, strict)
    return _struct(ctx, value, spec, [], "server." + type_name, out) or (out if out is not None else {})


_PLAIN_TYPES = {"str": str, "int": int, "uint": int, "bool": bool}


def decode_plain(data, spec):
    """A body json.loads can read as Go would -> the dict of its fields; None for anything
    else (the caller then decodes with Go's rules): one JSON object whose keys are the spec's
    exact field names, each value a string, integer or boolean of its field's kind, integers
    in the Go type's range (and no "-0" where Go reads unsigned), strings ASCII (Go turns a
    lone surrogate escape into U+FFFD, Python keeps it); an enum's string when the body has
    no escape at all (the enum reads the value's raw text); a nested struct's object when its
    key occurs once in the body (Go merges a repeated one, json.loads keeps the last)."""
    try:
        d = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if type(d) is not dict:
        return None
    return _plain_fields(d, spec, data)


def _plain_fields(d, spec, data):
    out = {}
    for k, v in d.items():
        f = spec.get(k)
        if f is None:
            return None
        kind = f[1]
        if kind == "obj":
            if type(v) is not dict or data.count(b'"%s"' % k.encode()) != 1:
                return None
            v = _plain_fields(v, f[2], data)
            if v is None:
                return None
        elif kind.startswith("enum"):
            if type(v) is not str or not v.isascii() or b"\\" in data:
                return None
            try:
                v = ENUMS[kind[5:] if kind.startswith("enum:") else k](None, v, b'"%s"' % v.encode())
            except JSONError:
                return None
        else:
            t = _PLAIN_TYPES.get(kind)
            if t is None or type(v) is not t:
                return None
            if t is int:
                lo, hi = INT_RANGES.get(f[0], INT_RANGES["int"])
                if not lo <= v <= hi or (v == 0 and lo == 0 and b"-" in data):
                    return None
            elif t is str and not v.isascii():
                return None
        out[k] = v
    return out


def unmarshal_request(payload, spec, type_name, strict=True):
    """nats-server's unmarshalRequest: -> dict of the fields present; raises JSONError."""
    data = bytes(payload or b"")
    if data[:1] == b"{":
        plain = decode_plain(data, spec)
        if plain is not None:
            return plain
    out = {}
    try:
        i, n = 0, len(data)
        while True:
            i = _WS.match(data, i).end()
            if i >= n:
                return out
            try:
                node, i = parse_value(data, i)
            except _EOF:
                raise JSONError("unexpected EOF")
            except _Syntax as e:
                raise JSONError("%s at offset %d" % (e.msg, e.offset))
            ctx = _Ctx(data, type_name, True)         # the decoder always disallows unknown fields
            _struct(ctx, node, spec, [], "server." + type_name, out)
    except JSONError:
        if strict:
            raise
    return _unmarshal_whole(data, spec, type_name)      # not strict: json.Unmarshal once more


def _unmarshal_whole(data, spec, type_name):
    """Go's json.Unmarshal (the non-strict fallback): one value, unknown fields ignored."""
    node = loads_node(data)
    ctx = _Ctx(data, type_name, False)
    return _struct(ctx, node, spec, [], "server." + type_name, {})


def loads_node(payload):
    """Go's json.Unmarshal syntax check: exactly one value -> parser node; JSONError."""
    data = bytes(payload or b"")
    try:
        node, i = parse_value(data, 0)
    except _EOF:
        raise JSONError("unexpected end of JSON input")
    except _Syntax as e:
        raise JSONError(e.msg)
    i = _WS.match(data, i).end()
    if i < len(data):
        raise JSONError(_bad_char(data, i, "after top-level value").msg)
    return node


def loads(payload):
    """The one JSON value of `payload` as plain Python (strings Go-decoded); JSONError."""
    return _plain(loads_node(payload))


def is_json_object_or_array(payload):
    """nats-server's isJSONObjectOrArray: the first non-blank byte is '{' or '['."""
    m = _WS.match(payload or b"")
    i = m.end()
    return i < len(payload or b"") and payload[i] in b"{["


def is_empty_request(payload):
    """nats-server's isEmptyRequest: nothing, `{}`, or any JSON object without members."""
    if not payload:
        return True
    if payload == b"{}":
        return True
    try:
        # what json.loads reads, Go reads the same way as far as emptiness goes (it may
        # refuse a body json.loads takes, which is "not empty" too)
        v = json.loads(bytes(payload).decode())
        return type(v) is dict and not v
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    try:
        v = loads(payload)
    except JSONError:
        return False
    return isinstance(v, dict) and not v


# ---------------------------------------------------------------- time and durations

_RFC3339 = "2006-01-02T15:04:05Z07:00"


def _perr(value, rest, elem):
    return ValueError("parsing time %s as %s: cannot parse %s as %s"
                      % (time_quote(value), time_quote(_RFC3339), time_quote(rest), time_quote(elem)))


def _rerr(value, what):
    return ValueError("parsing time %s: %s out of range" % (time_quote(value), what))


def _digits(s, k):
    return len(s) >= k and all("0" <= c <= "9" for c in s[:k])


def go_parse_rfc3339(value):
    """time.Time's JSON decoding (RFC 3339, strict) -> unix ns; ValueError with Go's text."""
    s = value
    if not _digits(s, 4):
        raise _perr(value, s, "2006")
    year, s = int(s[:4]), s[4:]
    fields = []
    for sep, elem, fixed in (("-", "01", True), ("-", "02", True), ("T", "15", False),
                             (":", "04", True), (":", "05", True)):
        if not s.startswith(sep):
            raise _perr(value, s, sep)
        s = s[len(sep):]
        if fixed or (len(s) >= 2 and s[1].isdigit() and s[0].isdigit()):
            if not _digits(s, 2):
                raise _perr(value, s, elem)
            num, s = int(s[:2]), s[2:]
        else:
            if not _digits(s, 1):
                raise _perr(value, s, elem)
            num, s = int(s[:1]), s[1:]
        fields.append(num)
        if elem == "01" and not 1 <= num <= 12:
            raise _rerr(value, "month")
        if elem == "02" and num > 31:
            raise _rerr(value, "day")
        if elem == "15" and num > 23:
            raise _rerr(value, "hour")
        if elem == "04" and num > 59:
            raise _rerr(value, "minute")
        if elem == "05" and num > 59:
            raise _rerr(value, "second")
    month, day, hour, minute, sec = fields
    nsec = 0
    if len(s) >= 2 and s[0] in ".," and s[1].isdigit():
        k = 1
        while k < len(s) and s[k].isdigit():
            k += 1
        frac = s[1:k]
        nsec = int((frac + "000000000")[:9])
        s = s[k:]
    if s.startswith("Z"):
        s, off = s[1:], 0
    else:
        if len(s) < 6 or s[3] != ":" or s[0] not in "+-" or not _digits(s[1:], 2) or not _digits(s[4:], 2):
            raise _perr(value, s, "Z07:00")
        hh, mm = int(s[1:3]), int(s[4:6])
        if hh > 24:
            raise _rerr(value, "time zone offset hour")
        if mm > 60:
            raise _rerr(value, "time zone offset minute")
        off = (hh * 3600 + mm * 60) * (1 if s[0] == "+" else -1)
        s = s[6:]
    if s:
        raise ValueError("parsing time %s: extra text: %s" % (time_quote(value), time_quote(s)))
    mdays = [31, 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28,
             31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    if day < 1 or day > mdays:
        raise _rerr(value, "day")
    # the strict RFC 3339 checks time.Time.UnmarshalJSON adds to the layout parse
    b = value
    if len(b) > 12 and b[12] == ":":
        raise ValueError("parsing time %s as %s: cannot parse %s as %s"
                         % (time_quote(value), time_quote(_RFC3339), time_quote(b[11:12]), time_quote("15")))
    if len(b) > 19 and b[19] == ",":
        raise ValueError("parsing time %s as %s: cannot parse %s as %s"
                         % (time_quote(value), time_quote(_RFC3339), time_quote(","), time_quote(".")))
    if not b.endswith("Z"):
        if int(b[-5:-3]) >= 24:
            raise ValueError("parsing time %s: timezone hour out of range" % time_quote(value))
        if int(b[-2:]) >= 60:
            raise ValueError("parsing time %s: timezone minute out of range" % time_quote(value))
    secs = calendar.timegm((year, month, day, hour, minute, sec, 0, 0, 0)) - off
    return secs * 1_000_000_000 + nsec


