"""Account subject mappings (SPEC B.4): the rules of one account's ``mappings {}`` block.

Owns ``MappingTable``: built once from ``{source: [MappingDest, ...]}`` and the server's
cluster name, then ``map(subject)`` per published message.

Semantics follow nats-server's AddWeightedMappings / selectMappedSubject:

* Only the first matching rule applies (no recursion).  A rule whose source is literal
  and equal to the subject is found first; wildcard rules are then tried in config order.
  (nats-server keeps rules in Go map order, which is random per start, so overlapping
  rules are non-deterministic there; literal-first is one of its possible orders.)
* Weights are percent.  If a rule's weights do not add up to 100 the remainder maps the
  subject to *itself* -- unless the source itself is listed as a destination, in which
  case the remainder is dropped (``map`` returns ``""``).
* Destinations with ``cluster: X`` form a separate weighted set used only when the server's
  cluster is named X; otherwise the unscoped set is used (identity when it is empty).

Known difference: for a literal source with ``{{partition(n)}}`` nats-server sometimes
hashes an empty token list (when that rule happens to be checked first); we always hash
the subject.  An empty destination is rejected here; nats-server accepts it and then
crashes on the first matching publish.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from natsd.gofmt import go_quote
from natsd.subject import PWC, SEP, _subset_tokens, has_wildcard, is_valid_subject, tokenize
from natsd.accounts.transform import (
    ERR_BAD_SUBJECT, SubjectTransform, TransformError, validate_mapping)

DROP = ""     # map() result meaning "discard the message"

# nats-server's generateJSMappingTable: what follows `$JS.<domain>.API.` -> the subject it stands for
_JS_DOMAIN_TABLE = {"INFO": "$JS.API.INFO", "STREAM.>": "$JS.API.STREAM.>", "CONSUMER.>": "$JS.API.CONSUMER.>",
                    "DIRECT.>": "$JS.API.DIRECT.>", "META.>": "$JS.API.META.>", "SERVER.>": "$JS.API.SERVER.>",
                    "ACCOUNT.>": "$JS.API.ACCOUNT.>", "$KV.>": "$KV.>", "$OBJ.>": "$OBJ.>"}


@dataclass(frozen=True)
class _Choice:
    transform: SubjectTransform
    upto: int        # cumulative weight: chosen when the draw in [0, 100) is below this


def _identity_dest(src: str) -> str:
    """``foo.*.*`` -> ``foo.$1.$2`` (the source mapped onto itself)."""
    n, out = 0, []
    for t in tokenize(src):
        if t == PWC:
            n += 1
            t = f"${n}"
        out.append(t)
    return SEP.join(out)


def _cumulate(src: str, entries: list[tuple[SubjectTransform, int]], src_listed: bool):
    """Add the implicit identity remainder, sort by weight, make weights cumulative."""
    total = sum(w for _, w in entries)
    if total != 100 and not src_listed:
        entries.append((SubjectTransform.compile(src, _identity_dest(src)), 100 - total))
    entries.sort(key=lambda e: e[1])
    out, upto = [], 0
    for t, w in entries:
        upto += w
        out.append(_Choice(t, upto))
    return tuple(out)


class _Rule:
    __slots__ = ("source", "tokens", "choices", "certain")

    def __init__(self, source: str, choices: tuple[_Choice, ...]):
        self.source = source
        self.tokens = tokenize(source)
        self.choices = choices
        # The single-destination fast path (no random draw).
        self.certain = choices[0].transform if len(choices) == 1 and choices[0].upto == 100 else None

    def pick(self) -> SubjectTransform | None:
        if self.certain is not None:
            return self.certain
        draw = int(random.random() * 100)
        for c in self.choices:
            if draw < c.upto:
                return c.transform
        return None


def _check_dest(src: str, d, seen: set, totals: dict) -> None:
    if d.subject in seen:
        raise TransformError(f"duplicate entry for {go_quote(d.subject)}", source=src)
    seen.add(d.subject)
    if d.weight > 100 or d.weight < 0:
        raise TransformError("individual weights need to be <= 100", source=src)
    totals[d.cluster] = totals.get(d.cluster, 0) + d.weight
    if totals[d.cluster] > 100:
        raise TransformError("total weight needs to be <= 100", source=src)


def build_rule(src: str, dests: list, cluster_name: str = "") -> _Rule:
    """Validate and compile one mapping; raises TransformError (``.source`` = src)."""
    if not is_valid_subject(src):
        raise TransformError(ERR_BAD_SUBJECT, source=src)
    seen: set[str] = set()
    totals: dict[str, int] = {}
    unscoped, scoped = [], {}
    for d in dests:
        _check_dest(src, d, seen, totals)
        try:
            t = validate_mapping(src, d.subject)
        except TransformError as e:
            e.source = src
            raise
        (scoped.setdefault(d.cluster, []) if d.cluster else unscoped).append((t, d.weight))
    chosen = scoped.get(cluster_name) if cluster_name else None
    return _Rule(src, _cumulate(src, chosen if chosen else unscoped, src in seen))


class MappingTable:
    """The mappings of one account, ready for per-message use."""

    __slots__ = ("cluster_name", "_literal", "_wildcard", "_sources")

    def __init__(self, rules: list[_Rule] = (), cluster_name: str = ""):
        self.cluster_name = cluster_name
        self._literal = {r.source: r for r in rules if not has_wildcard(r.source)}
        self._wildcard = [r for r in rules if has_wildcard(r.source)]
        self._sources = [r.source for r in rules]

    @classmethod
    def from_options(cls, mappings: dict, cluster_name: str = "") -> "MappingTable":
        """``mappings``: ``{source: [MappingDest(subject, weight, cluster), ...]}`` (config
        order).  Raises TransformError on the first invalid rule (its ``source`` is set)."""
        return cls([build_rule(src, dests, cluster_name) for src, dests in mappings.items()],
                   cluster_name)

    def map(self, subject: str) -> str | None:
        """None: no rule matched (keep the subject).  ``""``: drop the message.
        Otherwise the subject to route (possibly ``subject`` itself)."""
        rule = self._literal.get(subject)
        tokens = None
        if rule is None:
            tokens = tokenize(subject)
            rule = self._find_wildcard(tokens)
            if rule is None:
                return None
        t = rule.pick()
        if t is None:
            return DROP
        return t.render(tokens if tokens is not None else tokenize(subject))

    def _find_wildcard(self, tokens: list[str]) -> _Rule | None:
        for r in self._wildcard:
            if _subset_tokens(tokens, r.tokens):
                return r
        return None

    def sources(self) -> list[str]:
        """Source subjects in config order (for interest propagation)."""
        return list(self._sources)

    def __bool__(self) -> bool:
        return bool(self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    def __repr__(self):
        return f"MappingTable({self._sources!r}, cluster_name={self.cluster_name!r})"


def default_domain_rules(domain: str) -> dict:
    """`default_js_domain`'s rules for an account: nats-server's domain mapping table turned
    around, so the account's JetStream, KV and object store requests go to `domain`
    (`$JS.API.STREAM.>` -> `$JS.<domain>.API.STREAM.>`, `$KV.>` -> `$JS.<domain>.API.$KV.>`)."""
    from natsd.options import MappingDest
    return {plain: [MappingDest("$JS.%s.API.%s" % (domain, suffix))] for suffix, plain in _JS_DOMAIN_TABLE.items()}
