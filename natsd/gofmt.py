"""Go's text formats where nats-server's output shows them: `%q` quoting of strings in error
texts and log lines (strconv.Quote). Subjects and names may hold bytes that are not UTF-8;
they arrive here as bytes or as str decoded with "surrogateescape", and every invalid byte is
written `\\xNN` as Go does. And json.Marshal's output bytes."""
import json
import re

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


def go_quote(s):
    """strconv.Quote: `"..."` with Go's escapes for quotes, backslashes, control and other
    non-printable runes, and `\\xNN` for each byte that is not part of valid UTF-8."""
    b = s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")
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
