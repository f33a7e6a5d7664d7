"""Go's text formats where nats-server's output shows them: `%q` quoting of strings in error
texts and log lines (strconv.Quote). Subjects and names may hold bytes that are not UTF-8;
they arrive here as bytes or as str decoded with "surrogateescape", and every invalid byte is
written `\\xNN` as Go does. json.Marshal's output bytes (omitempty fields), and the JSON type
names of its errors (json_kind). And time.Duration both ways: `go_duration` (String()) and
`parse_go_duration` (time.ParseDuration), the one place natsd prints or reads a Go duration;
and `go_time`, a time.Time as Go's JSON writes it. And `uvarint`, encoding/binary's Uvarint
(protobuf's varint too), which nats-server's store files and Sparkplug payloads both use."""
import json
import math
import re
import time

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def _utf8_len(lead):
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")     # not a surrogate escape


def go_quote(s):
    """strconv.Quote: `"..."` with Go's escapes for quotes, backslashes, control and other
    non-printable runes, and `\\xNN` for each byte that is not part of valid UTF-8. `s` is
    bytes (or a bytearray) or a str whose surrogate escapes stand for the bytes they were
    decoded from; a lone surrogate, which stands for no byte, is written `\\ufffd`."""
    if isinstance(s, str):
        try:
            b = s.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return '"' + "\\ufffd".join(go_quote(part)[1:-1] for part in _LONE_SURROGATE.split(s)) + '"'
    else:
        b = bytes(s)
    out = ['"']
    i, n = 0, len(b)
    while i < n:
        k = _utf8_len(b[i])
        ch = None
        if k and i + k <= n:
            try:
                ch = b[i:i + k].decode("utf-8")
            except UnicodeDecodeError:
                ch = None
        if ch is None:
            out.append("\\x%02x" % b[i])
            i += 1
            continue
        i += k
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            cp = ord(ch)
            if cp < 0x20 or cp == 0x7F:
                out.append("\\x%02x" % cp)
            elif cp < 0x10000:
                out.append("\\u%04x" % cp)
            else:
                out.append("\\U%08x" % cp)
    out.append('"')
    return "".join(out)


_HTML_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                 ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SURROGATE = re.compile("[\ud800-\udfff]")


def go_json(obj, indent=None):
    """json.Marshal's bytes (json.MarshalIndent's with `indent`): non-ASCII as UTF-8, HTML
    characters escaped (`>` as \\u003e, which every permission and wildcard subject shows), and
    each byte that is not valid UTF-8 (a surrogate-escaped str) as \\ufffd."""
    if indent is None:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    else:
        text = json.dumps(obj, indent=indent, ensure_ascii=False)
    for ch, esc in _HTML_ESCAPES:
        if ch in text:
            text = text.replace(ch, esc)
    return _SURROGATE.sub(r"\\ufffd", text).encode("utf-8")



def omitempty(*fields):
    """The (name, value) fields json.Marshal writes of `,omitempty` ones: those with a value
    that is not empty (0, "", false, nil, an empty slice or map), as a dict in their order."""
    return {k: v for k, v in fields if v}


def json_kind(v):
    """A decoded JSON value's type as Go's encoding/json names it in an UnmarshalTypeError:
    bool, number, string, array, else object."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _fmt_frac(v, prec):
    """Go's fmtFrac: v in units of 10**-prec, trailing zeros dropped."""
    digits = ""
    printed = False
    for _ in range(prec):
        d = v % 10
        printed = printed or d != 0
        if printed:
            digits = str(d) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def go_duration(nanos):
    """time.Duration.String(): 0s, 487µs, 1.227311ms, 1m2.5s, 1h0m0s."""
    nanos = int(nanos)
    if nanos == 0:
        return "0s"
    neg = nanos < 0
    u = -nanos if neg else nanos
    if u < 1000000000:
        if u < 1000:
            s = "%dns" % u
        elif u < 1000000:
            frac, whole = _fmt_frac(u, 3)
            s = "%d%sµs" % (whole, frac)
        else:
            frac, whole = _fmt_frac(u, 6)
            s = "%d%sms" % (whole, frac)
    else:
        frac, whole = _fmt_frac(u, 9)
        s = "%d%ss" % (whole % 60, frac)
        whole //= 60
        if whole > 0:
            s = "%dm" % (whole % 60) + s
            whole //= 60
            if whole > 0:
                s = "%dh" % whole + s
    return "-" + s if neg else s


ZERO_TIME = "0001-01-01T00:00:00Z"


def rtt_nanos(seconds):
    """A connection's RTT as nats-server's getRTT gives it: nanoseconds, truncated to whole
    microseconds between 1 µs and 1 ms; 0 when not measured."""
    n = int(seconds * 1e9) if seconds else 0
    if 1000 < n < 1000000:
        n -= n % 1000
    return n


_second = [None, ""]                    # the whole second go_time last formatted, and its text


def go_time(ns):
    """Unix ns -> time.Time's JSON text (RFC 3339 UTC, nanoseconds with trailing zeros trimmed);
    None or 0 -> Go's zero time."""
    if not ns:
        return ZERO_TIME
    secs, frac = divmod(int(ns), 1_000_000_000)
    if secs == _second[0]:
        out = _second[1]
    else:
        out = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        _second[0], _second[1] = secs, out
    if frac:
        out += ("." + "%09d" % frac).rstrip("0")
    return out + "Z"


def friendly_bytes(n):
    """nats-server's friendlyBytes for its log lines: 512 B, 1.50 KB, 17.66 GB."""
    n = float(n)
    if n < 1024:
        return "%g B" % n
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return "%.2f %sB" % (n / 1024 ** exp, "KMGTPE"[exp - 1])


def go_float(v):
    """A float64 field as encoding/json writes it: 2.0 -> 2, 0.5 -> 0.5."""
    return int(v) if float(v).is_integer() else v


def go_seconds(seconds):
    """A duration held in seconds (a float), as time.Duration.String() prints it."""
    return go_duration(round(seconds * 1e9))


_UNITS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 1_000_000,
          "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}


def parse_go_duration(s):
    """time.ParseDuration -> nanoseconds; ValueError with Go's error text."""
    orig = s
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError("time: invalid duration " + go_quote(orig))
    d = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise ValueError("time: invalid duration " + go_quote(orig))
        k = 0
        while k < len(s) and "0" <= s[k] <= "9":
            k += 1
        pre = k > 0
        v = int(s[:k]) if pre else 0
        if v > (1 << 63):
            raise ValueError("time: invalid duration " + go_quote(orig))
        s = s[k:]
        f, scale, post = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            k = 0
            overflow = False
            while k < len(s) and "0" <= s[k] <= "9":
                if not overflow:
                    if f > ((1 << 63) - 1) // 10:
                        overflow = True
                    else:
                        f = f * 10 + int(s[k])
                        scale *= 10
                k += 1
            post = k > 0
            s = s[k:]
        if not pre and not post:
            raise ValueError("time: invalid duration " + go_quote(orig))
        k = 0
        while k < len(s) and not (s[k] == "." or "0" <= s[k] <= "9"):
            k += 1
        if k == 0:
            raise ValueError("time: missing unit in duration " + go_quote(orig))
        unit = _UNITS.get(s[:k])
        if unit is None:
            raise ValueError("time: unknown unit " + go_quote(s[:k]) + " in duration " + go_quote(orig))
        s = s[k:]
        if v > (1 << 63) // unit:
            raise ValueError("time: invalid duration " + go_quote(orig))
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > (1 << 63):
                raise ValueError("time: invalid duration " + go_quote(orig))
        d += v
        if d > (1 << 63):
            raise ValueError("time: invalid duration " + go_quote(orig))
    if neg:
        return -d
    if d > (1 << 63) - 1:
        raise ValueError("time: invalid duration " + go_quote(orig))
    return d


def uvarint(buf, i, error=ValueError):
    """(value, next index) of the unsigned varint at buf[i] (Go's binary.Uvarint); raises
    `error` when it runs off the end or past 64 bits."""
    v = shift = 0
    n = len(buf)
    while i < n:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        if b < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            break
    raise error("bad uvarint")
