"""natsd.subject: validation, matching, subset and overlap (examples + properties)."""

import itertools
import re

import pytest
from hypothesis import given, settings, strategies as st

from natsd.subject import (
    has_wildcard, is_valid_literal_subject, is_valid_queue, is_valid_subject,
    subject_is_subset, subject_matches, subjects_overlap, tokenize,
)


@pytest.mark.parametrize("s", ["foo", "foo.bar", "*", ">", "foo.*.bar", "foo.>", "*.*.east.>",
                               "time.New*.east", "$SYS.REQ", "ünï.cødé", "a.b>c"])
def test_valid_subjects(s):
    assert is_valid_subject(s)


@pytest.mark.parametrize("s", ["", ".", "foo.", ".foo", "foo..bar", "foo.>.bar", ">.foo",
                               "foo bar", "foo\tbar", "foo.\r", "a.b\n"])
def test_invalid_subjects(s):
    assert not is_valid_subject(s)


def test_literal_and_queue():
    assert is_valid_literal_subject("foo.bar")
    assert is_valid_literal_subject("foo*.b>")  # partial-token wildcards are literal
    assert not is_valid_literal_subject("foo.*")
    assert not is_valid_literal_subject("foo.>")
    assert is_valid_queue("workers") and is_valid_queue("v1.*")
    assert not is_valid_queue("") and not is_valid_queue("a b")
    assert tokenize("a.b.c") == ["a", "b", "c"]
    assert has_wildcard("a.*") and not has_wildcard("a*")


@pytest.mark.parametrize("pattern,subject,expected", [
    ("foo.bar", "foo.bar", True), ("foo.*", "foo.bar", True), ("foo.*", "foo.bar.baz", False),
    ("foo.>", "foo.bar.baz", True), ("foo.>", "foo", False), (">", "a", True),
    ("*.*.east.>", "time.us.east.atlanta", True), ("time.New*.east", "time.Newyork.east", False),
    ("time.us.>", "time.us", False), ("*", "a.b", False),
    # wildcard subjects are taken token-literally (nats-server sublist Match):
    ("foo.*", "foo.*", True), ("foo.>", "foo.*", True), ("foo.bar", "foo.*", False),
    ("foo.*", "foo.>", True),
])
def test_subject_matches(pattern, subject, expected):
    assert subject_matches(pattern, subject) is expected


@pytest.mark.parametrize("sub,pattern,expected", [
    ("foo.bar", "foo.*", True), ("foo.*", "foo.>", True), ("foo.>", "foo.>", True),
    ("foo.>", "foo.*", False), (">", "foo.>", False), ("foo.*", "foo.bar", False),
    ("foo.*.baz", "*.*.baz", True), ("foo.*.baz", "foo.*", False), ("a.b", ">", True),
    ("foo", "foo.>", False),
])
def test_subject_is_subset(sub, pattern, expected):
    assert subject_is_subset(sub, pattern) is expected


@pytest.mark.parametrize("a,b,expected", [
    ("foo.*", "foo.bar", True), ("foo.>", "*.*.baz", True), ("a.*", "a.b.>", False),
    ("*.>", "foo", False), ("foo.bar", "foo.baz", False), (">", "x.y.z", True),
    ("a.*.c", "a.b.*", True), ("a.*.c", "a.b.d", False),
])
def test_subjects_overlap(a, b, expected):
    assert subjects_overlap(a, b) is expected
    assert subjects_overlap(b, a) is expected


# ---------------------------------------------------------------- properties

ALPHABET = ["a", "b", "c"]
literal_tok = st.sampled_from(ALPHABET)
pattern_tok = st.sampled_from(ALPHABET + ["*"])


@st.composite
def patterns(draw):
    toks = draw(st.lists(pattern_tok, min_size=1, max_size=4))
    if draw(st.booleans()):
        toks = toks[:-1] + [">"]
    return ".".join(toks)


literals = st.lists(literal_tok, min_size=1, max_size=5).map(".".join)


def regex_model(pattern):
    parts = []
    for t in tokenize(pattern):
        parts.append({"*": r"[^.]+", ">": r"[^.]+(?:\.[^.]+)*"}.get(t, re.escape(t)))
    return re.compile(r"\.".join(parts) + r"\Z")


def all_literals(max_len):
    for n in range(1, max_len + 1):
        for toks in itertools.product(ALPHABET + ["d"], repeat=n):
            yield ".".join(toks)


@settings(max_examples=300, deadline=None)
@given(patterns(), literals)
def test_matches_agrees_with_regex(pattern, subject):
    assert is_valid_subject(pattern)
    assert subject_matches(pattern, subject) == bool(regex_model(pattern).match(subject))


@settings(max_examples=150, deadline=None)
@given(patterns(), patterns())
def test_subset_and_overlap_brute_force(a, b):
    # Subjects up to one token longer than either pattern settle both relations
    # ("d" stands for any token the patterns do not name).
    n = max(len(tokenize(a)), len(tokenize(b))) + 1
    ra, rb = regex_model(a), regex_model(b)
    subset, overlap = True, False
    for s in all_literals(n):
        ma, mb = bool(ra.match(s)), bool(rb.match(s))
        if ma and not mb:
            subset = False
        if ma and mb:
            overlap = True
    assert subject_is_subset(a, b) == subset
    assert subjects_overlap(a, b) == overlap


@settings(max_examples=200, deadline=None)
@given(patterns(), patterns())
def test_subset_implies_overlap(a, b):
    if subject_is_subset(a, b):
        assert subjects_overlap(a, b)
    assert subjects_overlap(a, b) == subjects_overlap(b, a)
    assert subject_is_subset(a, a)


@settings(max_examples=200, deadline=None)
@given(literals, patterns())
def test_literal_relations_agree(s, p):
    # For a literal subject the three relations coincide.
    assert subject_matches(p, s) == subject_is_subset(s, p) == subjects_overlap(s, p)
