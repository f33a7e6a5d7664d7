"""Subject utilities for the control path (config, SUB validation, permissions).

Owns: subject/queue validation, tokenizing, and the three wildcard relations
used by permissions, imports/exports and filters:

* ``subject_matches(pattern, subject)`` -- does ``pattern`` match ``subject``;
* ``subject_is_subset(sub, pattern)``   -- is every subject of ``sub`` also one of ``pattern``;
* ``subjects_overlap(a, b)``            -- is there a subject matched by both.

Nothing here runs per message; the routing hot path lives in the Cython core.
Subject grammar (SPEC B.1/B.2): tokens separated by '.', none empty, no
whitespace; ``*`` matches exactly one token, ``>`` one or more and only as
the last token.  Wildcards are only wildcards when they are a whole token
(``foo*`` is a literal token).
"""

from __future__ import annotations

PWC = "*"
FWC = ">"
SEP = "."
# The same whitespace set nats-server rejects in subjects (Go's "\t\n\f\r ").
_WHITESPACE = frozenset(" \t\n\f\r")


def tokenize(s: str) -> list[str]:
    """Split a subject into its tokens (empty tokens are kept, for validation)."""
    return s.split(SEP)


def _token_ok(t: str) -> bool:
    return bool(t) and _WHITESPACE.isdisjoint(t)


def is_valid_subject(s: str) -> bool:
    """Valid subject, wildcards allowed (``>`` only as the last token)."""
    if not isinstance(s, str) or not s:
        return False
    toks = tokenize(s)
    last = len(toks) - 1
    for i, t in enumerate(toks):
        if not _token_ok(t):
            return False
        if t == FWC and i != last:
            return False
    return True


def is_valid_literal_subject(s: str) -> bool:
    """Valid subject without any wildcard token (what a publish may target)."""
    return is_valid_subject(s) and not has_wildcard(s)


def is_valid_queue(q: str) -> bool:
    """Queue group names: non-empty, no whitespace (they may be dotted)."""
    return isinstance(q, str) and _token_ok(q)


def has_wildcard(s: str) -> bool:
    """True if any whole token of ``s`` is ``*`` or ``>``."""
    return any(t == PWC or t == FWC for t in tokenize(s))


def _match_tokens(pat: list[str], subj: list[str]) -> bool:
    n = len(pat)
    if n > len(subj):
        return False
    for i, p in enumerate(pat):
        if p == FWC:
            # '>' needs at least one token; len check above guarantees it.
            return True
        if p != PWC and p != subj[i]:
            return False
    return n == len(subj)


def subject_matches(pattern: str, subject: str) -> bool:
    """Does wildcard ``pattern`` match ``subject``?

    ``subject`` is taken token by token as literal text.  If it happens to
    contain ``*``/``>`` tokens they are opaque tokens that only pattern
    wildcards can match -- exactly how nats-server's sublist ``Match``
    treats a wildcard subject (so ``foo.*`` "matches" ``foo.>``).  Use
    ``subject_is_subset`` for true set containment.
    """
    return _match_tokens(tokenize(pattern), tokenize(subject))


def _subset_tokens(sub: list[str], pat: list[str]) -> bool:
    for i, p in enumerate(pat):
        if i >= len(sub):
            return False
        if p == FWC:
            return True
        s = sub[i]
        if s == FWC:
            # sub covers arbitrarily long tails; only a pattern '>' covers those.
            return False
        if s == PWC:
            if p != PWC:
                return False
            continue
        if p != PWC and p != s:
            return False
    return len(sub) == len(pat)


def subject_is_subset(sub: str, pattern: str) -> bool:
    """Is every subject matched by ``sub`` also matched by ``pattern``?

    ``foo.bar`` ⊂ ``foo.*`` ⊂ ``foo.>`` ⊂ ``>``; ``foo.>`` ⊄ ``foo.*``.
    """
    return _subset_tokens(tokenize(sub), tokenize(pattern))


def _overlap_tokens(a: list[str], b: list[str]) -> bool:
    for i in range(min(len(a), len(b))):
        x, y = a[i], b[i]
        if x == FWC or y == FWC:
            # The other side still has >= 1 token here, which '>' can absorb.
            return True
        if x != PWC and y != PWC and x != y:
            return False
    return len(a) == len(b)


def subjects_overlap(a: str, b: str) -> bool:
    """Is there at least one literal subject matched by both ``a`` and ``b``?"""
    return _overlap_tokens(tokenize(a), tokenize(b))
