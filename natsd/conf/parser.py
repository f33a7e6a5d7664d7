"""Parser for the NATS configuration language: tokens -> tree of Nodes.

Owns typing of values (integers with size suffixes, floats, booleans, dates),
`$variable` resolution (enclosing maps first, then the environment, bcrypt
`$2a$...` strings stay literal), `include` (relative to the including file,
merged in place) and nats-server's config digest.  Every Node keeps the file,
line and column it came from, and for map entries the key's position, so
load.py can report ``file:line:col``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from natsd.conf import lexer as L
from natsd.conf.lexer import LexError, Token
from natsd.digest import sha256

MAX_INCLUDE_DEPTH = 16

# Unquoted size suffixes: k/m/g/t/p/e are powers of 1000, the kb/ki/kib forms
# powers of 1024 (conf/parse.go).
_SUFFIX: dict[str, int] = {"": 1}
for _i, _c in enumerate("kmgtpe", start=1):
    _SUFFIX[_c] = 1000 ** _i
    for _form in ("b", "i", "ib"):
        _SUFFIX[_c + _form] = 1024 ** _i

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(eq=False)
class Node:
    """One value of the tree.  Arrays hold list[Node], maps dict[str, Node]."""
    value: Any
    kind: str                 # string integer float bool datetime array map
    file: str
    line: int
    col: int
    quoted: bool = False      # strings: was it written in quotes?
    raw: str = ""             # source text of scalars
    key: str | None = None    # set for map entries
    key_line: int = 0
    key_col: int = 0
    used_variable: bool = False   # some `$name` referenced this entry

    @property
    def pos(self) -> tuple[str, int, int]:
        """Where to point an error about this entry: its key, else the value."""
        if self.key is not None and self.key_line:
            return (self.file, self.key_line, self.key_col)
        return (self.file, self.line, self.col)

    def plain(self) -> Any:
        """The value with Nodes stripped (dicts, lists, scalars)."""
        if self.kind == "map":
            return {k: v.plain() for k, v in self.value.items()}
        if self.kind == "array":
            return [v.plain() for v in self.value]
        return self.value


class ParseError(LexError):
    """Same shape as LexError: file, line, col, msg."""


class Parser:
    def __init__(self, tokens: list[Token], filename: str, depth: int = 0,
                 env_refs: set[str] | None = None):
        self.toks = tokens
        self.k = 0
        self.file = filename
        self.dir = os.path.dirname(filename) if not filename.startswith("<") else ""
        self.depth = depth
        self.ctxs: list[dict[str, Node]] = []   # maps being built, outermost first
        self.env_refs = env_refs if env_refs is not None else set()

    def error(self, tok: Token, msg: str):
        raise ParseError(self.file, tok.line, tok.col, msg)

    def next(self) -> Token:
        t = self.toks[self.k]
        self.k += 1
        return t

    def parse(self) -> dict[str, Node]:
        top: dict[str, Node] = {}
        self.body(top, L.EOF)
        return top

    def body(self, m: dict[str, Node], end: str):
        self.ctxs.append(m)
        try:
            while True:
                t = self.next()
                if t.kind == end:
                    return
                if t.kind == L.INCLUDE:
                    self.include(t, m)
                elif t.kind == L.KEY:
                    node = self.value(self.next())
                    node.key, node.key_line, node.key_col = t.text, t.line, t.col
                    m[t.text] = node   # later definitions win, as in nats-server
                else:
                    self.error(t, f"expected a key, got {t.kind} {t.text!r}")
        finally:
            self.ctxs.pop()

    def value(self, t: Token) -> Node:
        mk = lambda v, kind: Node(v, kind, self.file, t.line, t.col, t.quoted, t.text)  # noqa: E731
        if t.kind == L.STRING:
            return mk(t.text, "string")
        if t.kind == L.BOOL:
            return mk(t.text.lower() in ("true", "yes", "on"), "bool")
        if t.kind == L.INTEGER:
            return mk(self.integer(t), "integer")
        if t.kind == L.FLOAT:
            return mk(float(t.text), "float")
        if t.kind == L.DATETIME:
            try:
                dt = _dt.datetime.strptime(t.text, "%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                self.error(t, f"expected a Zulu formatted datetime, got {t.text!r}")
            return mk(dt.replace(tzinfo=_dt.timezone.utc), "datetime")
        if t.kind == L.ARRAY_START:
            items: list[Node] = []
            while True:
                it = self.next()
                if it.kind == L.ARRAY_END:
                    return mk(items, "array")
                items.append(self.value(it))
        if t.kind == L.MAP_START:
            m: dict[str, Node] = {}
            self.body(m, L.MAP_END)
            return mk(m, "map")
        if t.kind == L.VARIABLE:
            return self.variable(t)
        self.error(t, f"expected a value, got {t.kind} {t.text!r}")

    def integer(self, t: Token) -> int:
        text = t.text
        n = 1 if text.startswith("-") else 0
        while n < len(text) and text[n].isdigit():
            n += 1
        suffix = text[n:].strip().lower()
        if suffix not in _SUFFIX:
            self.error(t, f"invalid size suffix {text[n:]!r} in {text!r} "
                          "(use k, m, g, t, or kb/ki/kib, mb/mi/mib, gb/gi/gib, tb/ti/tib)")
        num = int(text[:n])
        if not INT64_MIN <= num <= INT64_MAX:
            self.error(t, f"integer {text!r} is out of range")
        return num * _SUFFIX[suffix]

    def variable(self, t: Token) -> Node:
        name = t.text
        if name.startswith("2a$"):
            # bcrypt hashes look like variables; nats-server keeps them literal.
            return Node("$" + name, "string", self.file, t.line, t.col, False, "$" + name)
        for ctx in reversed(self.ctxs):
            if name in ctx:
                ref = ctx[name]
                ref.used_variable = True
                return Node(ref.value, ref.kind, self.file, t.line, t.col, ref.quoted, ref.raw)
        if name in self.env_refs:
            self.error(t, f'variable reference cycle for "${name}"')
        if name in os.environ:
            self.env_refs.add(name)
            try:
                toks = L.lex(f"pk={os.environ[name]}", f"<env ${name}>")
                sub = Parser(toks, f"<env ${name}>", self.depth, self.env_refs).parse()
            except LexError as e:
                self.error(t, f'variable reference for "${name}" could not be parsed: {e.msg}')
            finally:
                self.env_refs.discard(name)
            v = sub["pk"]
            return Node(v.value, v.kind, self.file, t.line, t.col, v.quoted, v.raw)
        self.error(t, f'variable reference for "${name}" can not be found')

    def include(self, t: Token, m: dict[str, Node]):
        if self.depth >= MAX_INCLUDE_DEPTH:
            self.error(t, f"include nesting too deep (more than {MAX_INCLUDE_DEPTH}), cycle?")
        path = os.path.normpath(os.path.join(self.dir, t.text))
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            self.error(t, f"cannot read include file {t.text!r}: {e.strerror or e}")
        sub = Parser(L.lex(text, path), path, self.depth + 1).parse()
        m.update(sub)


def parse_string(text: str, filename: str = "<string>") -> dict[str, Node]:
    """Parse config text; raises LexError (or ParseError) on the first syntax error."""
    return Parser(L.lex(text, filename), filename).parse()


def parse_file(path: str) -> dict[str, Node]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_string(text, path)


# -- digest ---------------------------------------------------------------
def _go_float(f: float) -> str:
    """encoding/json's float64 format: plain decimal in [1e-6, 1e21), else exponent."""
    if f == 0:
        return "0"
    a = abs(f)
    if 1e-6 <= a < 1e21:
        s = format(Decimal(repr(f)), "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    mant, exp = repr(f).lower().split("e")
    sign = "-" if exp.startswith("-") else "+"
    return f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"


def _go_json(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(_go_json(k) + ":" + _go_json(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_go_json(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, _dt.datetime):
        return '"' + v.strftime("%Y-%m-%dT%H:%M:%SZ") + '"'
    if v is None:
        return "null"
    s = json.dumps(str(v), ensure_ascii=False)
    # Go escapes HTML-significant characters and the JS line separators.
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def config_digest(tree: dict[str, Node]) -> str:
    """sha256 of the parsed config as nats-server computes it (`nats-server -t`)."""
    data = _go_json({k: n.plain() for k, n in tree.items()}) + "\n"
    return "sha256:" + sha256(data.encode("utf-8")).hexdigest()
