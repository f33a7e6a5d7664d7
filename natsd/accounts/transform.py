"""Subject transforms: compile ``(src, dest)`` once, then match/apply per subject.

Owns ``SubjectTransform`` (SPEC B.4/B.5), ``TransformError`` and ``validate_mapping``.
Used by account mappings (natsd/accounts/mappings.py), import/export ``to:`` renames (strict mode,
with ``reverse()``), and JetStream subject transforms.

Destination tokens are literal text, legacy ``$n``, ``>`` (only when the source has one),
or exactly one ``{{function(args)}}`` whose name is case-insensitive on the first letter
of each camel segment (``splitFromLeft`` and ``SplitFromLeft`` work, ``SPLITFROMLEFT`` does
not), as in nats-server.  Functions and their failure texts follow nats-server 2.15:

    wildcard(i)  partition(n, i...)  partition(n)  random(n)  split(i, sep)
    SplitFromLeft(i, pos)  SplitFromRight(i, pos)  SliceFromLeft(i, size)
    SliceFromRight(i, size)  Left(i, n)  Right(i, n)

``i`` is the 1-based position of a ``*`` in the source.  Error messages are
``"<reason> in <token>"``, e.g. ``invalid mapping destination: wildcard index out of
range in {{wildcard(3)}}: [3]``.  Lengths are measured in code points (nats-server uses
UTF-8 bytes; they agree for ASCII tokens).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from natsd.subject import FWC, PWC, SEP, _subset_tokens, tokenize

# -- error texts (nats-server errors.go) -----------------------------------------------------

ERR_BAD_SUBJECT = "invalid subject"
ERR_NO_TRANSFORMS = "no matching transforms available"
ERR_INVALID_DEST = "invalid mapping destination"
ERR_INVALID_TRANSFORM = ERR_INVALID_DEST + ": invalid transform"
ERR_NOT_ALL_WILDCARDS = ERR_INVALID_DEST + ": not using all of the token wildcard(s)"
ERR_UNKNOWN_FUNCTION = ERR_INVALID_DEST + ": unknown function"
ERR_INDEX_OUT_OF_RANGE = ERR_INVALID_DEST + ": wildcard index out of range"
ERR_NOT_ENOUGH_ARGS = ERR_INVALID_DEST + ": not enough arguments passed to the function"
ERR_INVALID_ARG = ERR_INVALID_DEST + ": function argument is invalid or in the wrong format"
ERR_TOO_MANY_ARGS = ERR_INVALID_DEST + ": too many arguments passed to the function"
ERR_IMPORT_ONLY_WILDCARD = (ERR_INVALID_DEST + ": the only mapping function allowed for "
                            "import transforms is {{Wildcard()}}")


class TransformError(ValueError):
    """An invalid transform; ``str(e)`` is nats-server's text.  ``source`` is set by
    MappingTable to the mapping's source subject."""

    def __init__(self, reason: str, token: str = "", source: str = ""):
        self.reason = reason
        self.token = token
        self.source = source
        super().__init__(f"{reason} in {token}" if token else reason)


# -- destination token kinds -----------------------------------------------------------------

LITERAL = "literal"
WILDCARD = "wildcard"
PARTITION = "partition"
RANDOM = "random"
SPLIT = "split"
SPLIT_FROM_LEFT = "SplitFromLeft"
SPLIT_FROM_RIGHT = "SplitFromRight"
SLICE_FROM_LEFT = "SliceFromLeft"
SLICE_FROM_RIGHT = "SliceFromRight"
LEFT = "Left"
RIGHT = "Right"

_WS = r"[\t\n\f\r ]"            # Go's \s
_ARG_SEP = re.compile(r"," + _WS + "*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63
_INT32 = 1 << 31


def _function_regex(name: str) -> re.Pattern:
    """``{{ Name ( args ) }}`` with each camel segment's first letter in either case."""
    name_rx = "".join(f"[{c.lower()}{c.upper()}]" if i == 0 or c.isupper() else c
                      for i, c in enumerate(name))
    return re.compile(r"\{\{" + _WS + "*" + name_rx + _WS + r"*\((.*)\)" + _WS + r"*\}\}")


# Tried in this order (it matters only for odd tokens holding several "{{...}}").
_FUNCTIONS = [(kind, _function_regex(kind)) for kind in (
    WILDCARD, PARTITION, SPLIT_FROM_LEFT, SPLIT_FROM_RIGHT, SLICE_FROM_LEFT,
    SLICE_FROM_RIGHT, RIGHT, LEFT, SPLIT, RANDOM)]


def _atoi(s: str) -> int | None:
    """Go's strconv.Atoi: optional sign, ASCII digits, fits in int64."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if -_INT64 <= v < _INT64 else None


def _int32(s: str) -> int | None:
    v = _atoi(s)
    return v if v is not None and -_INT32 <= v < _INT32 else None


def _wrap_int32(v: int) -> int:
    """Go's int32(v) conversion."""
    return (v + _INT32) % (2 * _INT32) - _INT32


@dataclass(frozen=True)
class _Parsed:
    kind: str
    indexes: tuple = ()        # 1-based wildcard indexes named by the function
    num: int = -1              # partitions, position, size, length, random ceiling
    text: str = ""             # split separator


def _is_mustache(token: str) -> bool:
    return len(token) > 4 and token.startswith("{{") and token.endswith("}}")


def _parse_legacy(token: str) -> _Parsed:
    """``$n``; any other ``$``-token is literal text."""
    n = _atoi(token[1:])
    return _Parsed(LITERAL) if n is None else _Parsed(WILDCARD, (n,))


def _parse_index_int(token: str, kind: str, args: list[str]) -> _Parsed:
    if len(args) < 2:
        raise TransformError(ERR_NOT_ENOUGH_ARGS, token)
    if len(args) > 2:
        raise TransformError(ERR_TOO_MANY_ARGS, token)
    index, num = _atoi(args[0].strip(" ")), _int32(args[1].strip(" "))
    if index is None or num is None:
        raise TransformError(ERR_INVALID_ARG, token)
    return _Parsed(kind, (index,), num)


def _parse_wildcard(token: str, args: list[str]) -> _Parsed:
    if args == [""]:
        raise TransformError(ERR_NOT_ENOUGH_ARGS, token)
    if len(args) > 1:
        raise TransformError(ERR_TOO_MANY_ARGS, token)
    index = _atoi(args[0].strip(" "))
    if index is None:
        raise TransformError(ERR_INVALID_ARG, token)
    return _Parsed(WILDCARD, (index,))


def _parse_partition(token: str, args: list[str]) -> _Parsed:
    n = _atoi(args[0].strip(" "))
    if n is None or n >= _INT32:
        raise TransformError(ERR_INVALID_ARG, token)
    indexes = tuple(_atoi(a.strip(" ")) for a in args[1:])
    if None in indexes:
        raise TransformError(ERR_INVALID_ARG, token)
    return _Parsed(PARTITION, indexes, _wrap_int32(n))


def _parse_split(token: str, args: list[str]) -> _Parsed:
    if len(args) < 2:
        raise TransformError(ERR_NOT_ENOUGH_ARGS, token)
    if len(args) > 2:
        raise TransformError(ERR_TOO_MANY_ARGS, token)
    index = _atoi(args[0].strip(" "))
    if index is None or " " in args[1] or SEP in args[1]:
        raise TransformError(ERR_INVALID_ARG, token)
    return _Parsed(SPLIT, (index,), -1, args[1])


def _parse_random(token: str, args: list[str]) -> _Parsed:
    if len(args) != 1:
        raise TransformError(ERR_NOT_ENOUGH_ARGS, token)
    n = _atoi(args[0].strip(" "))
    if n is None or n >= _INT32:
        raise TransformError(ERR_INVALID_ARG, token)
    return _Parsed(RANDOM, (), _wrap_int32(n))


def _parse_function(token: str) -> _Parsed:
    for kind, rx in _FUNCTIONS:
        m = rx.search(token)
        if m is None:
            continue
        args = _ARG_SEP.split(m.group(1))
        if kind == WILDCARD:
            return _parse_wildcard(token, args)
        if kind == PARTITION:
            return _parse_partition(token, args)
        if kind == SPLIT:
            return _parse_split(token, args)
        if kind == RANDOM:
            return _parse_random(token, args)
        return _parse_index_int(token, kind, args)
    raise TransformError(ERR_UNKNOWN_FUNCTION, token)


def parse_dest_token(token: str) -> _Parsed:
    """Classify one destination token (raises TransformError for a bad function)."""
    if len(token) > 1 and token[0] == "$":
        return _parse_legacy(token)
    if _is_mustache(token):
        return _parse_function(token)
    return _Parsed(LITERAL)


def _subject_shape(subject: str) -> tuple[list[str], int, bool] | None:
    """(tokens, number of '*', has '>') if structurally valid (no empty token, nothing
    after '>'); whitespace is not checked here, as in nats-server."""
    if not subject:
        return None
    tokens = tokenize(subject)
    npwc, fwc = 0, False
    for t in tokens:
        if not t or fwc:
            return None
        fwc = t == FWC
        npwc += t == PWC
    return tokens, npwc, fwc


# -- per-token operations at apply time ------------------------------------------------------

def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _partition(key: str, n: int) -> str:
    if n == 0:
        return "0"
    return str(fnv1a32(key.encode("utf-8")) % (n & 0xFFFFFFFF))


def _random(n: int) -> str:
    if n == 0:
        return "0"
    return str(random.randrange(_INT32) % abs(n))


def _split(token: str, sep: str) -> str:
    parts = token.split(sep) if sep else list(token)
    kept = [p for p in parts if p]
    out = SEP.join(kept)
    # nats-server emits a stray leading '.' when the token starts with two or more
    # separators ("--a" -> ".a"); reproduced for byte-identical subjects.
    if kept and parts.index(kept[0]) >= 2:
        out = SEP + out
    return out


def _split_at(token: str, pos: int) -> str:
    return token[:pos] + SEP + token[pos:] if 0 < pos < len(token) else token


def _slices(token: str, size: int, from_right: bool) -> str:
    if not 0 < size < len(token):
        return token
    start = len(token) % size if from_right else 0
    pieces = [token[:start]] if start else []
    pieces += [token[i:i + size] for i in range(start, len(token), size)]
    return SEP.join(pieces)


def _left(token: str, n: int) -> str:
    return token[:n] if 0 < n < len(token) else token


def _right(token: str, n: int) -> str:
    return token[len(token) - n:] if 0 < n < len(token) else token


@dataclass(frozen=True)
class _Op:
    kind: str
    text: str = ""             # literal text or split separator
    positions: tuple = ()      # source token positions (0-based)
    num: int = -1

    def render(self, tokens: list[str]) -> str:
        k = self.kind
        if k == LITERAL:
            return self.text
        if k == WILDCARD:
            p = self.positions[0]
            return tokens[p] if p < len(tokens) else ""
        if k == PARTITION:
            key = "".join(tokens[p] for p in self.positions) if self.positions else SEP.join(tokens)
            return _partition(key, self.num)
        if k == RANDOM:
            return _random(self.num)
        tok = tokens[self.positions[0]]
        if k == SPLIT:
            return _split(tok, self.text)
        if k == SPLIT_FROM_LEFT:
            return _split_at(tok, self.num)
        if k == SPLIT_FROM_RIGHT:
            return _split_at(tok, len(tok) - self.num) if 0 < self.num < len(tok) else tok
        if k == SLICE_FROM_LEFT:
            return _slices(tok, self.num, False)
        if k == SLICE_FROM_RIGHT:
            return _slices(tok, self.num, True)
        if k == LEFT:
            return _left(tok, self.num)
        return _right(tok, self.num)


# -- compilation -----------------------------------------------------------------------------

def _wildcard_positions(stoks: list[str]) -> list[int]:
    return [i for i, t in enumerate(stoks) if t == PWC]


def _position(index: int, positions: list[int]) -> int:
    # nats-server looks indexes up in a map: 0 or negative silently mean source token 0.
    return positions[index - 1] if index >= 1 else 0


def _compile_with_wildcards(token: str, parsed: _Parsed, wc: list[int], strict: bool) -> _Op:
    if strict and parsed.kind not in (LITERAL, WILDCARD):
        raise TransformError(ERR_IMPORT_ONLY_WILDCARD, token)
    if parsed.kind == LITERAL:
        return _Op(LITERAL, token)
    if parsed.kind == RANDOM:
        return _Op(RANDOM, num=parsed.num)
    for index in parsed.indexes:
        if index > len(wc):
            raise TransformError(ERR_INDEX_OUT_OF_RANGE, f"{token}: [{index}]")
    return _Op(parsed.kind, parsed.text, tuple(_position(i, wc) for i in parsed.indexes),
               parsed.num)


def _compile_without_wildcards(token: str, parsed: _Parsed) -> _Op:
    if parsed.kind == LITERAL:
        return _Op(LITERAL, token)
    if parsed.kind in (RANDOM, PARTITION):
        # partition(n, i...) without source wildcards hashes the whole subject.
        return _Op(parsed.kind, num=parsed.num)
    raise TransformError(ERR_INDEX_OUT_OF_RANGE, token)


class SubjectTransform:
    """A compiled ``src -> dest`` subject transform."""

    __slots__ = ("src", "dest", "strict", "_stoks", "_ops", "_fwc_tail", "_identity")

    def __init__(self, src: str, dest: str, strict: bool, stoks: list[str], ops: list[_Op],
                 fwc_tail: bool):
        self.src, self.dest, self.strict = src, dest, strict
        self._stoks = stoks
        self._ops = ops
        self._fwc_tail = fwc_tail          # dest ends in '>': append the source's tail
        self._identity = src == FWC and dest == FWC

    @classmethod
    def compile(cls, src: str, dest: str, strict: bool = False) -> "SubjectTransform":
        """Compile, or raise TransformError with nats-server's text.

        ``strict`` (imports/exports) allows only wildcard functions and requires every
        source wildcard to be used.  An empty ``src`` means ``>``.
        """
        if not dest:
            raise TransformError(ERR_BAD_SUBJECT)
        src = src or FWC
        s, d = _subject_shape(src), _subject_shape(dest)
        if s is None or d is None or d[1] > 0 or s[2] != d[2]:
            raise TransformError(ERR_BAD_SUBJECT)
        stoks, npwc, has_fwc = s
        dtoks = d[0]
        ops = []
        if npwc or has_fwc:
            wc = _wildcard_positions(stoks)
            used = 0
            for token in dtoks:
                parsed = parse_dest_token(token)
                ops.append(_compile_with_wildcards(token, parsed, wc, strict))
                if parsed.kind not in (LITERAL, RANDOM):
                    used += len(parsed.indexes)
            if strict and used < npwc:
                raise TransformError(ERR_NOT_ALL_WILDCARDS, dest)
        else:
            ops = [_compile_without_wildcards(t, parse_dest_token(t)) for t in dtoks]
        fwc_tail = dtoks[-1] == FWC
        if fwc_tail:
            ops.pop()
        return cls(src, dest, strict, stoks, ops, fwc_tail)

    def __repr__(self):
        return f"SubjectTransform({self.src!r}, {self.dest!r}{', strict=True' if self.strict else ''})"

    # -- use ----------------------------------------------------------------------------------

    def match(self, subject: str) -> bool:
        """Does the literal ``subject`` match the source pattern?"""
        if self._identity:
            return True
        tokens = tokenize(subject)
        return _is_literal(tokens) and _subset_tokens(tokens, self._stoks)

    def apply(self, subject: str) -> str | None:
        """The transformed subject, or None when ``subject`` does not match the source."""
        if self._identity:
            return subject
        tokens = tokenize(subject)
        if not (_is_literal(tokens) and _subset_tokens(tokens, self._stoks)):
            return None
        return self.render(tokens)

    def render(self, tokens: list[str]) -> str:
        """Build the destination from already-matched subject tokens (no matching)."""
        parts = [op.render(tokens) for op in self._ops]
        if self._fwc_tail:
            parts.extend(tokens[len(self._stoks) - 1:])
        return SEP.join(parts)

    @property
    def is_literal_dest(self) -> bool:
        """True when the result does not depend on the subject (no functions, no '>')."""
        return not self._fwc_tail and all(op.kind == LITERAL for op in self._ops)

    # -- reverse (imports/exports) ------------------------------------------------------------

    def reverse(self, positional: bool = False) -> "SubjectTransform | None":
        """The strict transform mapping results back to sources, or None when this one is
        not reversible (functions other than wildcard, unused or repeated wildcards).

        ``bar.*.*`` -> ``baz.$2.$1`` reverses to ``baz.*.*`` -> ``bar.{{wildcard(2)}}.{{wildcard(1)}}``.
        ``positional=True`` reproduces nats-server's reverse(), which reuses the forward
        placeholders in order: identical for swaps, not an inverse for longer cycles
        (``a.*.*.*`` -> ``b.$2.$3.$1``).
        """
        if any(op.kind not in (LITERAL, WILDCARD) for op in self._ops):
            return None
        wc = _wildcard_positions(self._stoks)
        # refs[k]: which source wildcard (0-based) the k-th destination placeholder copies.
        refs = [wc.index(op.positions[0]) if op.positions[0] in wc else -1
                for op in self._ops if op.kind == WILDCARD]
        if sorted(refs) != list(range(len(wc))):
            return None
        rsrc = [PWC if op.kind == WILDCARD else op.text for op in self._ops]
        rdest = list(self._stoks)
        for i, p in enumerate(wc):
            n = refs[i] if positional else refs.index(i)
            rdest[p] = "{{wildcard(%d)}}" % (n + 1)
        if self._fwc_tail:
            rsrc.append(FWC)
        try:
            return SubjectTransform.compile(SEP.join(rsrc), SEP.join(rdest), strict=True)
        except TransformError:
            return None


def _is_literal(tokens: list[str]) -> bool:
    return all(t and t != PWC and t != FWC for t in tokens)


def validate_mapping(src: str, dest: str) -> SubjectTransform:
    """Account-mapping validation (nats-server ValidateMapping) then compile.

    Stricter than ``compile`` on the destination's shape: whitespace outside a function
    and unknown ``{{...}}`` functions are rejected first.  (nats-server's source omits
    Left/Right from this check, but the released 2.15.1 binary accepts them; so do we.)
    """
    seen_fwc = False
    for token in tokenize(dest):
        if not token or seen_fwc:
            raise TransformError(ERR_INVALID_TRANSFORM, token)
        if _is_mustache(token):
            if not any(rx.search(token) for _, rx in _FUNCTIONS):
                raise TransformError(ERR_UNKNOWN_FUNCTION, token)
            continue
        if token == FWC:
            seen_fwc = True
        elif any(c in token for c in "\t\n\f\r "):
            raise TransformError(ERR_INVALID_TRANSFORM)
    return SubjectTransform.compile(src, dest)
