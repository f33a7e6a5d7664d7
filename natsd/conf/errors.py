"""ConfigError: every problem found in a config file, one `file:line:col: message` each.

Positions are written as nats-server writes them (`go_position`), so tools that parse
nats-server's stderr read natsd's the same way.
"""
from __future__ import annotations

import errno
import os
import re


def go_position(file: str, line: int, col: int) -> str:
    """`file:line:col` with nats-server's column.

    nats-server's lexer counts a token's column from the previous line's newline, so on
    the first line of a file the column is 0-based and on every later line 1-based.
    natsd keeps 1-based columns internally and converts here."""
    return f"{file}:{line}:{col - 1 if line == 1 else col}"


class ConfigError(Exception):
    """Raised with ALL errors found (nats-server -t style); str() is one per line.

    ``plain`` marks a single error nats-server does not collect in its list of config
    errors (a syntax error, a file it cannot open); ``report()`` then has no trailing
    blank line, as nats-server's output has none for those."""

    def __init__(self, errors: list[str], warnings: list[str] | None = None, plain: bool = False):
        self.errors = list(errors)
        self.warnings = list(warnings or [])
        self.plain = plain
        super().__init__("\n".join(self.errors))

    def __str__(self) -> str:
        return "\n".join(self.errors)

    def report(self) -> str:
        """What nats-server prints after `nats-server: ` (its processConfigErr.Error():
        warnings first, then errors, each line ending in a newline)."""
        if self.plain:
            return "\n".join(self.errors)
        return "".join(line + "\n" for line in self.warnings + self.errors)


def go_read_error(path: str, e: OSError) -> str:
    """Go's *PathError text for a failed os.ReadFile (`open x.conf: no such file or directory`)."""
    msg = (e.strerror or str(e))
    msg = msg[:1].lower() + msg[1:]
    op = "read" if e.errno == errno.EISDIR else "open"
    return f"{op} {path}: {msg}"


# -- syntax errors as nats-server words them --------------------------------------------
# natsd's lexer/parser say where and what in their own words (`file:line:col: message`);
# nats-server's conf package says `Parse error on line N: '<message>'` with the line the
# lexer had reached (past the offending newline, at the end of the file for an unexpected
# end).  Each row: natsd's message (regex), nats-server's message (a format over the match
# groups and `got`, the offending character as nats-server prints it), and which line.
_EOF = "end of file"
_SYNTAX: list[tuple[str, str, str]] = [
    # (natsd message regex, nats-server message, line rule)
    (r'expected an array value terminator "," or "\]", got (?P<got>.+)',
     'Expected an array value terminator "," or an array terminator "]", but got \'{got}\' instead.', "got"),
    (r'unexpected end of file, expected "\]" to close the array',
     'Expected an array value terminator "," or an array terminator "]", but got \'\x00\' instead.', "eof"),
    (r'unexpected array value terminator ",", expected a value', "Unexpected array value terminator ','.", "at"),
    (r'expected a map value to end with a newline, ";", "," or comment, got (?P<got>.+)',
     'Expected a map value terminator "," or a map terminator "}}", but got \'{got}\' instead.', "got"),
    (r'expected a top-level value to end with a newline, ";", "," or comment, got (?P<got>.+)',
     "Expected a top-level value to end with a new line, comment or EOF, but got '{got}' instead.", "got"),
    (r'floats must have a digit after the "\.", got (?P<got>.+)',
     "Floats must have a digit after the '.', but got '{got}' instead.", "got"),
    (r"floats must start with a digit", "Floats must start with a digit", "at"),
    (r'expected a digit after "-", got (?P<got>.+)', "Expected a digit but got '{got}'.", "got"),
    (r"expected a digit, got (?P<got>.+)", "Expected a digit but got '{got}'.", "got"),
    (r'expected a digit in ISO8601 datetime, got (?P<got>.+)',
     "Expected digit in ISO8601 datetime, but found '{got}' instead.", "got"),
    (r'expected "(?P<want>.)" in ISO8601 datetime \(full Zulu form\), got (?P<got>.+)',
     "Expected '{want}' in ISO8601 datetime, but found '{got}' instead.", "got"),
    (r"unterminated (single|double)-quoted string", "Unexpected EOF.", "eof"),
    (r'unexpected end of file in quoted key, expected """',
     "Unexpected EOF processing double quoted map key.", "eof"),
    (r"unexpected end of file in quoted key, expected \"'\"", "Unexpected EOF processing quoted map key.", "eof"),
    (r"unexpected end of file in \( \) block", "Unexpected EOF processing block.", "eof"),
    (r'invalid escape "(?P<ch>.)"; .*',
     "Invalid escape character '{ch}'. Only the following escape characters are allowed: "
     "\\xXX, \\t, \\n, \\r, \\\", \\\\.", "at"),
    (r"expected two hexadecimal digits after \\x, got (?P<hex>'.*'|\".*\")",
     "Expected two hexadecimal digits after '\\x', but got '{hex}'", "at"),
    (r'unexpected "\]", expected a key', "Unexpected array end ']' processing map.", "at"),
    (r'expected a value for key "include", got .*', "Expected include value but found new line", "at"),
    (r'expected a value for key ".*", got "\\n"', "Expected value but found new line", "nl"),
    (r'expected a file name after include, got "\["', "Expected include value but found start of an array", "at"),
    (r'expected a file name after include, got "\{"', "Expected include value but found start of a map", "at"),
    (r'expected a file name after include, got "\("', "Expected include value but found start of a block", "at"),
    (r'expected a file name after include, got "[-0-9]"',
     "Expected include value but found start of a number", "at"),
    (r'expected a file name after include, got "\\\\"', "Expected include value but found escape sequence", "at"),
    (r'expected a file name after include, got "\\n"', "Expected include value but found new line", "got"),
]
# Parser errors nats-server reports without "Parse error on line": (regex, format).
_PARSE: list[tuple[str, str]] = [
    (r"integer '(?P<v>.*)' is out of range", "integer '{v}' is out of the range"),
    (r'variable reference for "\$(?P<name>.*)" can not be found',
     "variable reference for '{name}' on line {line} can not be found"),
    (r'variable reference cycle for "\$(?P<name>.*)"', "variable reference cycle for '{name}'"),
]


def _go_char(got: str) -> str:
    """natsd's rendering of the offending character -> nats-server's (`%v` of a rune,
    with only the newline escaped; the end of the input is rune 0)."""
    if got == _EOF:
        return "\x00"
    if len(got) >= 2 and got[0] == got[-1] == '"':
        inner = got[1:-1]
        return {"\\n": "\\n", "\\r": "\r", "\\t": "\t"}.get(inner, inner)
    return got


def _depth_at(text: str, line: int, col: int) -> int:
    """How many maps are open before (line, col): enough to tell a top-level key from a
    map key (quoted strings and comments are skipped)."""
    lines = text.split("\n")
    upto = "\n".join(lines[:line - 1] + [lines[line - 1][:col - 1]] if line - 1 < len(lines) else lines)
    depth, quote, comment = 0, "", False
    for ch in upto:
        if comment:
            comment = ch != "\n"
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
    return depth


def _go_message(e, text: str) -> str | None:
    """nats-server's text for natsd's syntax error `e` in `text`, or None if unknown."""
    eof_line = text.count("\n") + 1
    msg = e.msg
    if msg.startswith("unexpected key separator"):
        return f"Parse error on line {e.line}: 'Unexpected key separator ':'" + \
            ("." if _depth_at(text, e.line, e.col) > 0 else "") + "'"
    if msg == 'unexpected end of file, expected "}" to close the map':
        if text.rstrip(" \t").endswith("\n"):
            return f"Parse error on line {eof_line}: 'Unexpected EOF processing map.'"
        return (f"Parse error on line {eof_line}: 'Expected a map value terminator \",\" or a map "
                f"terminator \"}}\", but got '\x00' instead.'")
    if msg.startswith('expected a value for key "') and msg.endswith("got end of file") \
            and not msg.startswith('expected a value for key "include"'):
        return f"config is invalid ({go_position(e.file, e.line, e.col)})"
    for pattern, fmt, rule in _SYNTAX:
        m = re.fullmatch(pattern, msg)
        if not m:
            continue
        groups = m.groupdict()
        got = groups.get("got")
        if got is not None:
            groups["got"] = _go_char(got)
        if "hex" in groups:
            groups["hex"] = groups["hex"][1:-1]
        line = e.line
        if rule == "eof" or (rule == "got" and got == _EOF):
            line = eof_line
        elif rule == "nl" or (rule == "got" and got == '"\\n"'):
            line = e.line + 1
        return f"Parse error on line {line}: '{fmt.format(**groups)}'"
    for pattern, fmt in _PARSE:
        m = re.fullmatch(pattern, msg)
        if m:
            return fmt.format(line=e.line, **m.groupdict())
    m = re.fullmatch(r"cannot read include file (?P<inc>'.*'|\".*\"): (?P<err>.*)", msg)
    if m:
        inc = m.group("inc")[1:-1]
        path = os.path.normpath(os.path.join(os.path.dirname(e.file) if not e.file.startswith("<") else "", inc))
        err = m.group("err")
        op = "read" if err == os.strerror(errno.EISDIR) else "open"
        return f"error parsing include file '{inc}', {op} {path}: {err[:1].lower() + err[1:]}"
    return None


def _include_chain(top: str, text: str, target: str, depth: int = 0) -> list[str] | None:
    """The `include` values leading from file `top` (contents `text`) to file `target`."""
    from natsd.conf.lexer import INCLUDE, LexError, lex
    if depth > 16:
        return None
    try:
        tokens = lex(text, top)
    except LexError:
        return None
    base = os.path.dirname(top) if not top.startswith("<") else ""
    for t in tokens:
        if t.kind != INCLUDE:
            continue
        path = os.path.normpath(os.path.join(base, t.text))
        if path == target:
            return [t.text]
        try:
            with open(path, encoding="utf-8") as f:
                sub = f.read()
        except OSError:
            continue
        rest = _include_chain(path, sub, target, depth + 1)
        if rest is not None:
            return [t.text] + rest
    return None


def go_syntax_error(e, text: str, filename: str) -> str:
    """A LexError/ParseError as nats-server reports it; natsd's own `file:line:col: msg`
    when nats-server's text for it is not known."""
    src = text
    chain: list[str] = []
    if e.file != filename:
        try:
            with open(e.file, encoding="utf-8") as f:
                src = f.read()
        except OSError:
            return str(e)
        chain = _include_chain(filename, text, e.file) or []
        if not chain:
            return str(e)
    msg = _go_message(e, src)
    if msg is None:
        return str(e)
    for inc in reversed(chain):
        msg = f"error parsing include file '{inc}', {msg}"
    return msg
