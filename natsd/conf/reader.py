"""The config loader's reading tools: typed access to config nodes, nats-server's texts for a
wrong type, Go durations and JetStream sizes, and errors collected with their `file:line:col`.

The section mixins (auth, accounts, jetstream, links) and the top level (load.py) build on it.
"""
from __future__ import annotations

from typing import Any, Callable

from natsd.gofmt import parse_go_duration
from natsd.options import AccountOpts, ExportOpts, ImportOpts, Options
from natsd.conf.errors import go_position
from natsd.conf.parser import Node

KIND_NAME = {"string": "a string", "integer": "an integer", "float": "a float", "bool": "a boolean",
              "datetime": "a datetime", "array": "an array", "map": "a map"}
# The Go types nats-server's config values have (its type-assertion panics name them).
GO_TYPE = {"string": "string", "integer": "int64", "float": "float64", "bool": "bool",
            "datetime": "time.Time", "array": "[]interface {}", "map": "map[string]interface {}"}

# -- units ------------------------------------------------------------------


def parse_duration(s: str | int | float) -> float:
    """Go time.ParseDuration ("1h30m", "500ms", "-2s", "0") -> seconds.

    Plain numbers are taken as seconds (nats-server's legacy integer form)."""
    if isinstance(s, bool):
        raise ValueError(f"invalid duration {s!r}")
    if isinstance(s, (int, float)):
        return float(s)
    return parse_go_duration(s.strip()) / 1e9


def parse_size(v: str | int) -> int:
    """JetStream storage sizes: an int is bytes; a string "256M" uses K/M/G/T = 1024 powers.

    (Unquoted `256M` never gets here as a string: the parser already made it
    256*1000^2.  That quoted/unquoted difference is nats-server's.)"""
    if isinstance(v, bool):
        raise ValueError("must be int64 or string")
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        raise ValueError("must be int64 or string")
    if v == "":
        return 0
    mult = {"K": 10, "M": 20, "G": 30, "T": 40}.get(v[-1])
    try:
        num = int(v[:-1])
    except ValueError:
        raise ValueError(f"invalid size {v!r}") from None
    if mult is None:
        raise ValueError("sizes defined as strings must end in K, M, G, T")
    return num << mult


# -- TLS blocks, as nats-server's parseTLS / GenTLSConfig check them -------------------------

class Reader:
    def __init__(self, tree: dict[str, Node], filename: str):
        self.tree = tree
        self.file = filename
        self.o = Options(config_file=None if filename.startswith("<") else filename)
        self.errors: list[tuple[tuple[str, int, int], str]] = []
        self.warnings: list[str] = []
        self.usernames: dict[str, Node] = {}
        self.imports: list[tuple[AccountOpts, ImportOpts, Node]] = []
        self.export_accounts: list[tuple[ExportOpts, Node]] = []
        self._svc_import_subjects: dict[int, dict[str, list[ImportOpts]]] = {}
        self._added_imports: dict[str, list[ImportOpts]] = {}

    # -- reporting / typed access ------------------------------------------
    def err(self, n: Node | tuple | None, msg: str):
        """An error at node `n` (or a (file, line, col)); None: one nats-server reports
        without a position."""
        pos = self.go_pos(n) if isinstance(n, Node) else n
        self.errors.append((pos, msg))

    def warn(self, n: Node, msg: str):
        self.warnings.append(f"{go_position(*self.go_pos(n))}: {msg}")

    @staticmethod
    def go_pos(n: Node) -> tuple[str, int, int]:
        """Where nats-server points: a map entry's key; a quoted string that is not a map
        entry (an array item) at its first character inside the quotes."""
        f, l, c = n.pos
        if n.key is None and n.kind == "string" and n.quoted:
            c += 1
        return f, l, c

    def unknown(self, key: str, n: Node):
        if not n.used_variable:
            self.err(n, f'unknown field "{key}"')

    def want(self, n: Node, kinds: tuple[str, ...], what: str) -> bool:
        if n.kind in kinds:
            return True
        if len(kinds) == 1:
            # nats-server type-asserts the value and reports the panic.
            self.err(n, f"interface conversion: interface {{}} is {GO_TYPE[n.kind]}, not {GO_TYPE[kinds[0]]}")
            return False
        exp = " or ".join(KIND_NAME[k] for k in kinds)
        self.err(n, f'expected {exp} for "{what}", got {KIND_NAME[n.kind]} ({self.show(n)})')
        return False

    @staticmethod
    def show(n: Node) -> str:
        if n.kind in ("map", "array"):
            return n.kind
        return repr(n.plain()) if n.kind == "string" else (n.raw or str(n.value))

    def s(self, n: Node, what: str, default: Any = "") -> Any:
        return n.value if self.want(n, ("string",), what) else default

    def i(self, n: Node, what: str, default: Any = 0) -> Any:
        return n.value if self.want(n, ("integer",), what) else default

    def b(self, n: Node, what: str, default: Any = False) -> Any:
        return n.value if self.want(n, ("bool",), what) else default

    def switch(self, n: Node) -> bool | None:
        """A bool, or the strings enabled/enable/disabled/disable (any case), as nats-server's
        `jetstream` keys take them; None after reporting anything else."""
        if n.kind == "bool":
            return n.value
        v = n.value.lower()
        if v in ("enabled", "enable"):
            return True
        if v in ("disabled", "disable"):
            return False
        self.err(n, f"Expected 'enabled' or 'disabled' for string value, got '{n.value}'")
        return None

    def m(self, n: Node, what: str) -> dict[str, Node] | None:
        return n.value if self.want(n, ("map",), what) else None

    def strs(self, n: Node, what: str) -> list[str]:
        """A string or an array of strings."""
        if n.kind == "string":
            return [n.value]
        if not self.want(n, ("string", "array"), what):
            return []
        out = []
        for it in n.value:
            if self.want(it, ("string",), what):
                out.append(it.value)
        return out

    def duration(self, n: Node, what: str, default: float = 0.0, int_ok: bool = True) -> float:
        """Go duration string; a bare integer means seconds (with nats-server's warning)."""
        if n.kind == "string":
            try:
                return parse_duration(n.value)
            except ValueError as e:
                self.err(n, f"error parsing {what}: {e}")
                return default
        if n.kind in ("integer", "float") and int_ok:
            self.warn(n, f'invalid use of field "{what}": {what} should be converted to a duration')
            return float(n.value)
        if int_ok and n.kind in ("bool", "array", "map", "datetime"):
            # nats-server warns as for a number, then cannot read it as one
            self.warn(n, f'invalid use of field "{what}": {what} should be converted to a duration')
            self.err(n, f"interface conversion: interface {{}} is {GO_TYPE[n.kind]}, not int64")
            return default
        self.want(n, ("string",), what)
        return default

    def write_policy(self, n: Node, what: str) -> str:
        """A `write_timeout` policy: exactly default, close or retry (nats-server's
        parseWriteDeadlinePolicy, case-sensitive)."""
        v = self.s(n, what)
        if v not in ("default", "close", "retry"):
            self.err(n, "write_timeout must be 'default', 'close' or 'retry'")
            return "default"
        return v

    def listen(self, n: Node, what: str) -> tuple[str, int] | None:
        if n.kind == "integer":
            return "", n.value
        if n.kind == "string":
            hp = n.value
            host, sep, port = hp.rpartition(":")
            if not sep:
                self.err(n, f"could not parse address string {hp!r} for \"{what}\" (expected host:port)")
                return None
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            try:
                return host, int(port)
            except ValueError:
                self.err(n, f"could not parse port {port!r} in \"{what}\"")
                return None
        self.want(n, ("integer", "string"), what)
        return None

    def dispatch(self, m: dict[str, Node], handlers: dict[str, Callable[[str, Node], None]]):
        for key, n in m.items():
            h = handlers.get(key.lower())
            if h is None:
                self.unknown(key, n)
            else:
                h(key, n)
