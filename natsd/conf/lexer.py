"""Lexer for the NATS configuration language: text -> list of Tokens.

Owns the character-level rules of nats-server's conf/lex.go (what ends a bare
string, when digits become a number, a size, a date or an IP address, the
`include` keyword, comments) but reports errors as ``file:line:col: message``
with 1-based line and column.  Values are left as text; ``parser`` gives them
types and builds the tree.
"""
from __future__ import annotations

from dataclasses import dataclass

# Token kinds
KEY = "key"
STRING = "string"        # quoted or bare string (quoted tells which)
BOOL = "bool"
INTEGER = "integer"      # text, may carry a size suffix: "1G", "256mib"
FLOAT = "float"
DATETIME = "datetime"
VARIABLE = "variable"    # text without the leading "$"
INCLUDE = "include"
ARRAY_START = "["
ARRAY_END = "]"
MAP_START = "{"
MAP_END = "}"
EOF = "eof"

BOOL_WORDS = {"true", "false", "yes", "no", "on", "off"}
NUMBER_SUFFIX = set("kKmMgGtTpPeE")
WS = " \t"
NL = "\n\r"


class LexError(Exception):
    """A syntax error: file, 1-based line and column, message."""

    def __init__(self, file: str, line: int, col: int, msg: str):
        self.file, self.line, self.col, self.msg = file, line, col, msg
        super().__init__(f"{file}:{line}:{col}: {msg}")


@dataclass
class Token:
    kind: str
    text: str
    line: int
    col: int
    quoted: bool = False


def _show(ch: str) -> str:
    """Render the offending character for an error message."""
    if ch == "":
        return "end of file"
    return {"\n": '"\\n"', "\r": '"\\r"', "\t": '"\\t"', " ": '" "'}.get(ch, f'"{ch}"')


class Lexer:
    def __init__(self, text: str, filename: str = "<string>"):
        self.s = text
        self.file = filename
        self.i = 0
        self.line = 1
        self.line_start = 0   # index of the first char of the current line
        self.tokens: list[Token] = []

    # -- low level -------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def advance(self) -> str:
        ch = self.peek()
        if ch:
            self.i += 1
            if ch == "\n":
                self.line += 1
                self.line_start = self.i
        return ch

    def col(self, idx: int | None = None) -> int:
        return (self.i if idx is None else idx) - self.line_start + 1

    def error(self, msg: str, line: int | None = None, col: int | None = None):
        raise LexError(self.file, line or self.line, col or self.col(), msg)

    def emit(self, kind: str, text: str, line: int, col: int, quoted: bool = False):
        self.tokens.append(Token(kind, text, line, col, quoted))

    def skip_comment(self) -> bool:
        """Skip a `#` or `//` comment up to (not including) the newline."""
        if self.peek() == "#" or (self.peek() == "/" and self.peek(1) == "/"):
            while self.peek() and self.peek() not in NL:
                self.advance()
            return True
        return False

    def skip_space(self, newlines: bool = True):
        """Skip blanks (and newlines, comments when newlines=True)."""
        while True:
            ch = self.peek()
            if ch in WS and ch:
                self.advance()
            elif newlines and ch and (ch in NL or ch.isspace()):
                self.advance()
            elif newlines and self.skip_comment():
                continue
            else:
                return

    # -- structure -------------------------------------------------------
    def run(self) -> list[Token]:
        self.skip_space()
        if self.peek() == "{":
            # The whole file may be wrapped in one `{ ... }` block (lex.go lexTop).
            self.advance()
            self.body(top=False)
            self.tokens.pop()  # the closing "}" of the wrapper is not a map end
            self.skip_space()
            if self.peek():
                self.error(f"expected end of file after the top-level block, got {_show(self.peek())}")
        else:
            self.body(top=True)
        self.emit(EOF, "", self.line, self.col())
        return self.tokens

    def body(self, top: bool):
        """Key/value pairs until EOF (top) or the closing `}` of a map."""
        while True:
            self.skip_space()
            ch = self.peek()
            if ch == "":
                if not top:
                    self.error('unexpected end of file, expected "}" to close the map')
                return
            if ch == "}":
                if top and self.tokens and not self.s[self.i + 1:].strip():
                    # nats-server ignores one stray `}` ending the file (seed 003's
                    # `orders.> orders.central.>}` + `}` mapping example loads there).
                    self.advance()
                    self.skip_space()
                    return
                if top:
                    self.error('unexpected "}" with no map to close')
                line, col = self.line, self.col()
                self.advance()
                self.emit(MAP_END, "}", line, col)
                return
            if ch in ":=":
                self.error(f"unexpected key separator {_show(ch)}, expected a key")
            if ch == "]":
                self.error('unexpected "]", expected a key')
            if ch in ",;":
                self.advance()   # stray terminator between entries
                continue
            self.key_value(top)

    def key_value(self, top: bool):
        line, col = self.line, self.col()
        ch = self.peek()
        if ch in "\"'":
            self.advance()
            start = self.i
            while self.peek() != ch:
                if self.peek() == "":
                    self.error(f"unexpected end of file in quoted key, expected {_show(ch)}", line, col)
                self.advance()
            key = self.s[start:self.i]
            self.advance()
            self.emit(KEY, key, line, col, quoted=True)
        else:
            start = self.i
            while True:
                c = self.peek()
                if c == "" or c in ":=" or c.isspace():
                    break
                self.advance()
            key = self.s[start:self.i]
            if key.lower() == "include" and self.peek() in WS and self.peek():
                self.include(line, col)
                self.value_end(top)
                return
            self.emit(KEY, key, line, col)
        # Separator: blanks/newlines, then at most one `=` or `:`.
        self.skip_space(newlines=True)
        if self.peek() and self.peek() in ":=":
            self.advance()
            self.skip_space(newlines=not top)
        if self.peek() == "" or (top and self.peek() in NL and self.peek()):
            self.error(f'expected a value for key "{key}", got {_show(self.peek())}')
        if not top and self.peek() == "}":
            self.error(f'expected a value for key "{key}", got "}}"')
        if self.peek() == ",":
            self.error(f'expected a value for key "{key}", got ","')
        self.value()
        self.value_end(top)

    def value_end(self, top: bool):
        """After a value: blanks, an optional comment, then a terminator."""
        self.skip_space(newlines=False)
        self.skip_comment()
        ch = self.peek()
        if ch == "" or ch in NL or ch in ";,":
            if ch:
                self.advance()
            return
        if ch == "}":
            return  # closes the enclosing map (body() consumes it)
        where = "a top-level" if top else "a map"
        self.error(f'expected {where} value to end with a newline, ";", "," or comment, got {_show(ch)}')

    def include(self, line: int, col: int):
        self.skip_space(newlines=False)
        vl, vc = self.line, self.col()
        ch = self.peek()
        if ch in "\"'" and ch:
            self.advance()
            start = self.i
            while self.peek() != ch:
                if self.peek() == "" or self.peek() in NL:
                    self.error(f"unterminated quoted include path, expected {_show(ch)}", vl, vc)
                self.advance()
            path = self.s[start:self.i]
            self.advance()
        else:
            if ch == "" or ch in NL:
                self.error("expected a file name after include", vl, vc)
            if ch in "[{(":
                self.error(f"expected a file name after include, got {_show(ch)}", vl, vc)
            start = self.i
            while self.peek() and self.peek() not in NL and self.peek() not in WS and self.peek() not in ";}'":
                self.advance()
            path = self.s[start:self.i]
        self.emit(INCLUDE, path, vl, vc)

    # -- values ----------------------------------------------------------
    def value(self):
        line, col = self.line, self.col()
        ch = self.peek()
        if ch == "[":
            self.advance()
            self.emit(ARRAY_START, "[", line, col)
            self.array()
        elif ch == "{":
            self.advance()
            self.emit(MAP_START, "{", line, col)
            self.body(top=False)
        elif ch == "'":
            self.advance()
            start = self.i
            while self.peek() != "'":
                if self.peek() == "":
                    self.error("unterminated single-quoted string", line, col)
                self.advance()
            self.emit(STRING, self.s[start:self.i], line, col, quoted=True)
            self.advance()
        elif ch == '"':
            self.advance()
            self.emit(STRING, self.dq_string(line, col), line, col, quoted=True)
        elif ch == "-":
            self.number(line, col, negative=True)
        elif ch.isdigit():
            self.number(line, col)
        elif ch == "(":
            self.block(line, col)
        elif ch == ".":
            self.error("floats must start with a digit")
        else:
            self.bare_string(line, col)

    def array(self):
        while True:
            self.skip_space()
            ch = self.peek()
            if ch == "":
                self.error('unexpected end of file, expected "]" to close the array')
            if ch == "]":
                line, col = self.line, self.col()
                self.advance()
                self.emit(ARRAY_END, "]", line, col)
                return
            if ch == ",":
                self.error('unexpected array value terminator ",", expected a value')
            self.value()
            # array value end: blanks, comment, then `,` / newline / `]`
            self.skip_space(newlines=False)
            self.skip_comment()
            ch = self.peek()
            if ch and (ch == "," or ch in NL):
                self.advance()
            elif ch != "]":
                self.error(f'expected an array value terminator "," or "]", got {_show(ch)}')

    def dq_string(self, line: int, col: int) -> str:
        out = []
        while True:
            ch = self.advance()
            if ch == "":
                self.error("unterminated double-quoted string", line, col)
            if ch == '"':
                return "".join(out)
            if ch == "\\":
                out.append(self.escape())
            else:
                out.append(ch)

    def escape(self) -> str:
        ecol = self.col() - 1
        ch = self.advance()
        simple = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
        if ch in simple and ch:
            return simple[ch]
        if ch == "x":
            hexd = self.peek() + self.peek(1)
            if len(hexd) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexd):
                self.advance(), self.advance()
                return bytes.fromhex(hexd).decode("latin-1")
            self.error(f"expected two hexadecimal digits after \\x, got {hexd!r}")
        self.error(f"invalid escape {_show(ch)}; allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\", col=ecol)

    def bare_string(self, line: int, col: int, start: int | None = None):
        """Unquoted string: ends at blank, newline, `;` `,` `]` `}` (lex.go lexString)."""
        start = self.i if start is None else start
        parts: list[str] = []
        seg = start
        escaped = False
        while True:
            ch = self.peek()
            if ch == "{" and self.peek(1) == "{":
                # `{{wildcard(1)}}` in an unquoted mapping destination (seed 003's
                # whitespace form): keep the template whole instead of letting its `}}`
                # close the enclosing map, as long as it ends on this line.
                end = self.s.find("}}", self.i + 2)
                nl = min((j for j in (self.s.find("\n", self.i), self.s.find("\r", self.i)) if j >= 0),
                         default=len(self.s))
                if 0 <= end < nl:
                    while self.i < end + 2:
                        self.advance()
                    continue
            if ch == "" or ch in WS or ch in NL or ch in ";,]}'":
                break
            if ch == "\\":
                parts.append(self.s[seg:self.i])
                self.advance()
                parts.append(self.escape())
                seg = self.i
                escaped = True
                continue
            self.advance()
        parts.append(self.s[seg:self.i])
        text = "".join(parts)
        if self.peek() == "'":
            self.advance()  # lex.go drops a stray closing quote after a bare string
        if escaped:
            self.emit(STRING, text, line, col)
        elif text.lower() in BOOL_WORDS:
            self.emit(BOOL, text, line, col)
        elif text.startswith("$"):
            self.emit(VARIABLE, text[1:], line, col)
        else:
            self.emit(STRING, text, line, col)

    def _ends_number(self, ch: str) -> bool:
        """What ends an unsigned integer in Go's lexer: not `]`, so `[5]` is an array holding
        the string "5]" that never closes, as nats-server reads it."""
        return ch == "" or ch in WS or ch in NL or ch in ";,}"

    def number(self, line: int, col: int, negative: bool = False):
        start = self.i
        if negative:
            self.advance()
            if not self.peek().isdigit():
                self.error(f"expected a digit after \"-\", got {_show(self.peek())}")
        while self.peek().isdigit():
            self.advance()
        ch = self.peek()
        if ch == "-" and not negative and self.i - start == 4:
            self.datetime(start, line, col)
            return
        if ch == ".":
            self.advance()
            if not self.peek().isdigit():
                self.error(f"floats must have a digit after the \".\", got {_show(self.peek())}")
            while self.peek().isdigit():
                self.advance()
            if self.peek() == "." and not negative:
                # Dotted quad (maybe with :port): an IP address string.
                while self.peek() and (self.peek().isdigit() or self.peek() in ".:-"):
                    self.advance()
                self.emit(STRING, self.s[start:self.i], line, col)
                return
            self.emit(FLOAT, self.s[start:self.i], line, col)
            return
        if ch and ch in NUMBER_SUFFIX:
            self.advance()
            while self.peek() and self.peek() in "bBiI":
                self.advance()
            if self._ends_number(self.peek()):
                self.emit(INTEGER, self.s[start:self.i], line, col)
                return
            if negative:
                self.error(f"invalid size suffix in {self.s[start:self.i + 1]!r}")
            self.bare_string(line, col, start)   # e.g. "10ms", "2min"
            return
        if self._ends_number(ch) or (negative and ch == "]"):
            self.emit(INTEGER, self.s[start:self.i], line, col)
            return
        if negative:
            self.error(f"expected a digit, got {_show(ch)}")
        # a string after all, e.g. "10s", "1h30m", "98%": Go's lexer has taken the character
        # that told it so, whatever it is (a `]` too: `[5]` holds "5]" and never closes)
        self.advance()
        self.bare_string(line, col, start)

    def datetime(self, start: int, line: int, col: int):
        # after the 4-digit year: -MM-DDTHH:MM:SSZ
        pattern = "-00-00T00:00:00Z"
        for f in pattern:
            ch = self.peek()
            if f == "0":
                if not ch.isdigit():
                    self.error(f"expected a digit in ISO8601 datetime, got {_show(ch)}")
            elif ch != f:
                self.error(f"expected {_show(f)} in ISO8601 datetime (full Zulu form), got {_show(ch)}")
            self.advance()
        self.emit(DATETIME, self.s[start:self.i], line, col)

    def block(self, line: int, col: int):
        """`( ... )` raw block: ends at a `)` alone at the start of a line."""
        self.advance()
        start = self.i
        while True:
            ch = self.peek()
            if ch == "":
                self.error("unexpected end of file in ( ) block", line, col)
            if ch == ")" and (self.i == 0 or self.s[self.i - 1] == "\n") and self.peek(1) in ("\n", ""):
                text = self.s[start:self.i - 1] if self.i > start else ""
                self.advance()
                self.emit(STRING, text, line, col, quoted=True)
                return
            self.advance()


def lex(text: str, filename: str = "<string>") -> list[Token]:
    return Lexer(text, filename).run()
