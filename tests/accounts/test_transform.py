"""Unit tests for natsd/accounts/transform.py (SubjectTransform) and natsd/accounts/mappings.py (MappingTable).

Vectors come from the seed docs (SPEC B.4/B.5) and from nats-server's behaviour; where the
docs have typos (``>`` -> ``baz.>`` on ``bar.a.b``, the "dropping tokens" example) the
tested value is what nats-server actually produces.
"""
import random
from collections import Counter
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

from natsd.accounts.mappings import MappingTable
from natsd.options import MappingDest
from natsd.accounts.transform import SubjectTransform, TransformError, fnv1a32, validate_mapping

T = SubjectTransform.compile


# -- documented examples -----------------------------------------------------------------------

@pytest.mark.parametrize("src,dest,subject,expected", [
    ("bar.*.*", "baz.{{wildcard(2)}}.{{wildcard(1)}}", "bar.a.b", "baz.b.a"),
    ("bar.*.*", "baz.{{wildcard(2)}}.{{wildcard(1)}}", "bar.one.two", "baz.two.one"),
    ("bar.*.*", "baz.$2.$1", "bar.a.b", "baz.b.a"),
    ("bar.*.*", "baz.{{ Wildcard( 2 ) }}.{{WILDCARD(1)}}".replace("WILDCARD", "wildcard"),
     "bar.a.b", "baz.b.a"),
    ("foo", "bar", "foo", "bar"),
    (">", "baz.>", "bar.a.b", "baz.bar.a.b"),                  # doc says baz.bar.b.a (typo)
    ("orders.>", "orders.central.>", "orders.x.y", "orders.central.x.y"),
    ("orders.*", "orders.central.{{wildcard(1)}}", "orders.flush", "orders.central.flush"),
    ("orders.*.*", "foo.{{wildcard(2)}}", "orders.local.order1", "foo.order1"),   # dropping
    ("foo.*.>", "bar.{{wildcard(1)}}.>", "foo.a.b.c", "bar.a.b.c"),
    ("foo.*.>", ">", "foo.a.b.c", "b.c"),
    (">", ">", "any.thing", "any.thing"),
    ("*", "{{split(1,-)}}", "foo-bar", "foo.bar"),
    ("*", "{{split(1,--)}}", "foo--bar", "foo.bar"),
    ("*", "{{split(1,-)}}", "-a--b-", "a.b"),
    ("*", "{{split(1,-)}}", "--a", ".a"),                        # nats-server's stray dot
    ("*", "{{splitfromleft(1,4)}}", "1234567", "1234.567"),
    ("*", "{{SplitFromLeft(1,4)}}", "1234567", "1234.567"),
    ("*", "{{splitfromright(1,4)}}", "1234567", "123.4567"),
    ("*", "{{splitfromleft(1,7)}}", "1234567", "1234567"),
    ("*", "{{splitfromright(1,0)}}", "1234567", "1234567"),
    ("*", "{{slicefromleft(1,2)}}", "1234567", "12.34.56.7"),
    ("*", "{{slicefromright(1,2)}}", "1234567", "1.23.45.67"),
    ("*", "{{SliceFromLeft(1,3)}}", "123456", "123.456"),
    ("*", "{{SliceFromRight(1,3)}}", "123456", "123.456"),
    ("*", "{{slicefromleft(1,9)}}", "1234567", "1234567"),
    ("*", "{{left(1,3)}}", "1234567", "123"),
    ("*", "{{Right(1,3)}}", "1234567", "567"),
    ("*", "{{left(1,30)}}", "1234567", "1234567"),
    ("*.*", "{{partition(0,1)}}.{{wildcard(2)}}", "a.b", "0.b"),
])
def test_documented_vectors(src, dest, subject, expected):
    assert T(src, dest).apply(subject) == expected


@pytest.mark.parametrize("i,part", list(enumerate([0, 2, 1, 2, 1, 0], start=1)))
def test_partition_neworders(i, part):
    t = T("neworders.*", "neworders.{{wildcard(1)}}.{{partition(3,1)}}")
    assert t.apply(f"neworders.customerid{i}") == f"neworders.customerid{i}.{part}"


@pytest.mark.parametrize("subject,part", [("foo.1.a", 1), ("foo.1.b", 0), ("foo.2.b", 9),
                                          ("foo.2.a", 2)])
def test_partition_two_tokens(subject, part):
    t = T("foo.*.*", "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(10,1,2)}}")
    assert t.apply(subject) == f"{subject}.{part}"


def test_partition_composite_key_example():
    t = T("foo.*.*", "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(5,1,2)}}")
    assert t.apply("foo.us.customerid") == "foo.us.customerid.0"


def test_partition_whole_subject_and_fnv():
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
    t = T("foo.*", "p.{{partition(7)}}")
    assert t.apply("foo.bar") == "p.%d" % (fnv1a32(b"foo.bar") % 7)
    # Without source wildcards partition(n, i...) hashes the whole subject too.
    assert T("foo", "p.{{partition(7,1)}}").apply("foo") == "p.%d" % (fnv1a32(b"foo") % 7)


def test_random():
    random.seed(7)
    t = T("foo.*", "r.{{random(5)}}")
    seen = {t.apply("foo.x") for _ in range(200)}
    assert seen == {f"r.{i}" for i in range(5)}
    assert T("foo", "r.{{random(0)}}").apply("foo") == "r.0"


def test_match_and_no_match():
    t = T("foo.*.bar", "x.$1")
    assert t.match("foo.a.bar") and t.apply("foo.a.bar") == "x.a"
    assert not t.match("foo.a.baz") and t.apply("foo.a.baz") is None
    assert t.apply("foo.a.bar.c") is None
    assert t.apply("foo.*.bar") is None           # wildcard subjects are not literal
    assert t.apply("foo..bar") is None
    assert T("", "foo.>").apply("a.b") == "foo.a.b"  # empty source means ">"


def test_dollar_tokens_that_are_not_wildcards_stay_literal():
    assert T("foo.*", "$JS.$x.$1").apply("foo.a") == "$JS.$x.a"


# -- invalid transforms ----------------------------------------------------------------------

BAD = "invalid mapping destination"


@pytest.mark.parametrize("src,dest,strict,message", [
    ("foo..", "bar", False, "invalid subject"),
    ("foo.*", "bar.*", False, "invalid subject"),
    ("foo.*", "bar.$1.>", False, "invalid subject"),
    ("foo.>", "bar.baz", False, "invalid subject"),
    ("foo.>.bar", "x.>", False, "invalid subject"),
    ("foo", "", False, "invalid subject"),
    ("foo.*", "bar.$2", False, f"{BAD}: wildcard index out of range in $2: [2]"),
    ("foo.*", "foo.{{wildcard(2)}}", False,
     f"{BAD}: wildcard index out of range in {{{{wildcard(2)}}}}: [2]"),
    ("foo.>", "{{wildcard(1)}}.>", False,
     f"{BAD}: wildcard index out of range in {{{{wildcard(1)}}}}: [1]"),
    ("foo", "{{wildcard(1)}}", False, f"{BAD}: wildcard index out of range in {{{{wildcard(1)}}}}"),
    ("foo", "{{split(1,-)}}", False, f"{BAD}: wildcard index out of range in {{{{split(1,-)}}}}"),
    ("foo.*", "{{partition(2,2)}}", False,
     f"{BAD}: wildcard index out of range in {{{{partition(2,2)}}}}: [2]"),
    ("foo.*", "{{foo(1)}}", False, f"{BAD}: unknown function in {{{{foo(1)}}}}"),
    ("foo.*", "{{SPLITFROMLEFT(1,2)}}", False,
     f"{BAD}: unknown function in {{{{SPLITFROMLEFT(1,2)}}}}"),
    ("foo.*", "{{wildcard()}}", False,
     f"{BAD}: not enough arguments passed to the function in {{{{wildcard()}}}}"),
    ("foo.*", "{{wildcard(1,2)}}", False,
     f"{BAD}: too many arguments passed to the function in {{{{wildcard(1,2)}}}}"),
    ("foo.*", "{{wildcard(x)}}", False,
     f"{BAD}: function argument is invalid or in the wrong format in {{{{wildcard(x)}}}}"),
    ("foo.*", "{{splitfromleft(1)}}", False,
     f"{BAD}: not enough arguments passed to the function in {{{{splitfromleft(1)}}}}"),
    ("foo.*", "{{slicefromright(1,2,3)}}", False,
     f"{BAD}: too many arguments passed to the function in {{{{slicefromright(1,2,3)}}}}"),
    ("foo.*", "{{left(1,99999999999)}}", False,
     f"{BAD}: function argument is invalid or in the wrong format in {{{{left(1,99999999999)}}}}"),
    ("foo.*", "{{split(1,a b)}}", False,
     f"{BAD}: function argument is invalid or in the wrong format in {{{{split(1,a b)}}}}"),
    ("foo.*", "{{partition(3000000000,1)}}", False,
     f"{BAD}: function argument is invalid or in the wrong format in {{{{partition(3000000000,1)}}}}"),
    ("foo.*", "{{random(1,2)}}", False,
     f"{BAD}: not enough arguments passed to the function in {{{{random(1,2)}}}}"),
    ("foo.*", "{{random()}}", False,
     f"{BAD}: function argument is invalid or in the wrong format in {{{{random()}}}}"),
    # strict (imports/exports)
    ("foo.*.*", "bar.$2", True, f"{BAD}: not using all of the token wildcard(s) in bar.$2"),
    ("foo.*", "foo.$foo", True, f"{BAD}: not using all of the token wildcard(s) in foo.$foo"),
    ("foo.*", "bar.{{Partition(2,1)}}", True,
     f"{BAD}: the only mapping function allowed for import transforms is {{{{Wildcard()}}}} "
     "in {{Partition(2,1)}}"),
])
def test_invalid(src, dest, strict, message):
    with pytest.raises(TransformError) as ei:
        T(src, dest, strict=strict)
    assert str(ei.value) == message


def test_strict_accepts_all_wildcards_in_any_order():
    t = T("foo.*.*", "bar.{{wildcard(2)}}.$1", strict=True)
    assert t.apply("foo.a.b") == "bar.b.a"
    assert T("foo.*.*", "bar.{{wildcard(2)}}", strict=False).apply("foo.a.b") == "bar.b"


@pytest.mark.parametrize("dest,message", [
    ("a..b", f"{BAD}: invalid transform"),
    ("a.>.b", f"{BAD}: invalid transform in b"),
    ("a b.$1", f"{BAD}: invalid transform"),
    ("x.{{nope(1)}}", f"{BAD}: unknown function in {{{{nope(1)}}}}"),
])
def test_validate_mapping(dest, message):
    src = "foo.>" if ">" in dest else "foo.*"
    with pytest.raises(TransformError) as ei:
        validate_mapping(src, dest)
    assert str(ei.value) == message


def test_validate_mapping_allows_functions_with_spaces():
    assert validate_mapping("foo.*", "x.{{split(1, -)}}").apply("foo.a-b") == "x.a.b"
    assert validate_mapping("foo.*", "x.{{Left(1,1)}}").apply("foo.ab") == "x.a"


# -- reverse ---------------------------------------------------------------------------------

def test_reverse_swap_matches_nats_server():
    t = T("foo.*.*", "bar.$2.{{Wildcard(1)}}", strict=True)
    r = t.reverse()
    assert r.src == "bar.*.*"
    assert r.apply(t.apply("foo.b.a")) == "foo.b.a"
    assert t.reverse(positional=True).apply("bar.a.b") == r.apply("bar.a.b")


def test_reverse_three_cycle_vs_positional():
    t = T("a.*.*.*", "b.$2.$3.$1")
    assert t.apply("a.x.y.z") == "b.y.z.x"
    assert t.reverse().apply("b.y.z.x") == "a.x.y.z"
    # nats-server's reverse() reuses the placeholders positionally: not an inverse here.
    assert t.reverse(positional=True).apply("b.y.z.x") == "a.z.x.y"


@pytest.mark.parametrize("src,dest", [
    ("foo.*.*", "bar.$1"),                     # dropped wildcard
    ("foo.*", "bar.$1.$1"),                    # repeated wildcard
    ("foo.*", "bar.{{partition(2,1)}}"),       # not a wildcard function
    ("foo.*", "bar.{{split(1,-)}}"),
])
def test_not_reversible(src, dest):
    assert T(src, dest).reverse() is None


def test_reverse_with_fwc_and_literal():
    t = T("foo.*.>", "bar.$1.>")
    assert t.reverse().apply("bar.a.b.c") == "foo.a.b.c"
    assert T("foo", "bar").reverse().apply("bar") == "foo"


_tok = st.text(alphabet="abcxyz019-_", min_size=1, max_size=5)


@st.composite
def wildcard_transforms(draw):
    """A random source with n '*' (and maybe '>') and a destination using each once."""
    n = draw(st.integers(0, 4))
    lits = draw(st.lists(_tok, min_size=0, max_size=3))
    src = ["*"] * n + lits
    src = draw(st.permutations(src)) if src else ["root"]
    fwc = draw(st.booleans())
    perm = draw(st.permutations(list(range(1, n + 1))))
    holders = [draw(st.sampled_from(["$%d", "{{wildcard(%d)}}", "{{ Wildcard(%d) }}"])) % i
               for i in perm]
    dest = holders + draw(st.lists(_tok, min_size=1 if not holders else 0, max_size=3))
    dest = list(draw(st.permutations(dest)))
    if fwc:
        src, dest = src + [">"], dest + [">"]
    subject = [draw(_tok) if t in ("*",) else t for t in src if t != ">"]
    if fwc:
        subject += draw(st.lists(_tok, min_size=1, max_size=3))
    return ".".join(src), ".".join(dest), ".".join(subject)


@settings(max_examples=150, deadline=None)
@given(wildcard_transforms())
def test_reverse_round_trip(case):
    src, dest, subject = case
    t = T(src, dest, strict=True)
    out = t.apply(subject)
    assert out is not None
    r = t.reverse()
    assert r is not None and r.strict
    assert r.apply(out) == subject
    assert r.reverse().apply(subject) == out


@settings(max_examples=150, deadline=None)
@given(st.lists(_tok, min_size=1, max_size=4), st.integers(1, 6))
def test_slicing_preserves_characters(tokens, size):
    subject = ".".join(tokens)
    for fn in ("SliceFromLeft", "SliceFromRight", "SplitFromLeft", "SplitFromRight"):
        t = T("*." * (len(tokens) - 1) + "*", "{{%s(1,%d)}}" % (fn, size))
        out = t.apply(subject)
        assert out.replace(".", "") == tokens[0]
        assert all(out.split("."))


# -- MappingTable ----------------------------------------------------------------------------

def D(subject, weight=100, cluster=""):
    return MappingDest(subject=subject, weight=weight, cluster=cluster)


def table(rules, cluster=""):
    return MappingTable.from_options({s: d if isinstance(d, list) else [D(d)]
                                      for s, d in rules.items()}, cluster)


def test_table_basic_and_sources():
    t = table({"foo": "bar", "orders.*": "orders.central.{{wildcard(1)}}", "a.>": "b.>"})
    assert bool(t) and len(t) == 3
    assert t.sources() == ["foo", "orders.*", "a.>"]
    assert t.map("foo") == "bar"
    assert t.map("orders.x") == "orders.central.x"
    assert t.map("a.b.c") == "b.b.c"
    assert t.map("nope") is None
    assert not MappingTable.from_options({})


def test_table_not_recursive():
    t = table({"transform.order": "target.order", "target.order": "transform.order"})
    assert t.map("transform.order") == "target.order"
    assert t.map("target.order") == "transform.order"


def test_table_literal_rule_wins_over_wildcard():
    t = table({"orders.*": "orders.central.{{wildcard(1)}}", "orders.flush": "orders.central.flush.now"})
    assert t.map("orders.flush") == "orders.central.flush.now"
    assert t.map("orders.other") == "orders.central.other"


def test_table_first_wildcard_rule_wins():
    t = table({"a.*": "first.$1", "*.b": "second.$1"})
    assert t.map("a.b") == "first.b"
    assert t.map("x.b") == "second.x"


def test_weighted_distribution():
    random.seed(1234)
    t = table({"myservice.requests": [D("myservice.requests.v1", 80), D("myservice.requests.v2", 20)]})
    c = Counter(t.map("myservice.requests") for _ in range(10000))
    assert set(c) == {"myservice.requests.v1", "myservice.requests.v2"}
    assert 1800 <= c["myservice.requests.v2"] <= 2200


def test_weighted_remainder_keeps_subject():
    random.seed(99)
    t = table({"svc": [D("svc.v3", 90), D("svc.fail", 8)]})
    c = Counter(t.map("svc") for _ in range(20000))
    assert set(c) == {"svc.v3", "svc.fail", "svc"}       # remainder: mapped to itself
    assert 250 <= c["svc"] <= 550 and 1400 <= c["svc.fail"] <= 1800


def test_weighted_loss_when_source_listed():
    random.seed(5)
    t = table({"foo.loss.>": [D("foo.loss.>", 50)]})
    c = Counter(t.map("foo.loss.a") for _ in range(10000))
    assert set(c) == {"foo.loss.a", ""}
    assert 4700 <= c[""] <= 5300


def test_weighted_draw_boundaries():
    t = table({"s": [D("s.a", 30), D("s.b", 70)]})
    for value, expected in [(0.0, "s.a"), (0.2999, "s.a"), (0.30, "s.b"), (0.9999, "s.b")]:
        with mock.patch("random.random", return_value=value):
            assert t.map("s") == expected


def test_zero_weight_never_chosen():
    t = table({"foo": [D("foo.a", 0)]})
    assert {t.map("foo") for _ in range(200)} == {"foo"}


def test_wildcard_remainder_identity():
    random.seed(3)
    t = table({"myservice.requests.*": [D("myservice.requests.{{wildcard(1)}}", 80),
                                        D("myservice.requests.fail.{{wildcard(1)}}", 10)]})
    assert {t.map("myservice.requests.x") for _ in range(2000)} == {
        "myservice.requests.x", "myservice.requests.fail.x"}


CLUSTERED = {"foo": [D("foo.west", 100, "west"), D("foo.central", 100, "central"),
                     D("foo.east", 100, "east")],
             "bar": [D("bar.east", 100, "east"), D("bar.any", 100)]}


@pytest.mark.parametrize("cluster,foo,bar", [("west", "foo.west", "bar.any"),
                                             ("east", "foo.east", "bar.east"),
                                             ("", "foo", "bar.any"),
                                             ("other", "foo", "bar.any")])
def test_cluster_scoped(cluster, foo, bar):
    t = MappingTable.from_options(CLUSTERED, cluster)
    assert t.map("foo") == foo and t.map("bar") == bar


@pytest.mark.parametrize("rules,message", [
    ({"foo": [D("a", 50), D("a", 50)]}, 'duplicate entry for "a"'),
    ({"foo": [D("a", 101)]}, "individual weights need to be <= 100"),
    ({"foo": [D("a", 60), D("b", 60)]}, "total weight needs to be <= 100"),
    ({"foo": [D("a", 60, "c1"), D("b", 60, "c1")]}, "total weight needs to be <= 100"),
    ({"foo..x": [D("a")]}, "invalid subject"),
    ({"foo.*": [D("a.$2")]}, f"{BAD}: wildcard index out of range in $2: [2]"),
    ({"foo.*": [D("a.{{bogus(1)}}")]}, f"{BAD}: unknown function in {{{{bogus(1)}}}}"),
    ({"foo": [D("")]}, f"{BAD}: invalid transform"),  # nats-server accepts it, then crashes
])
def test_table_errors(rules, message):
    with pytest.raises(TransformError) as ei:
        MappingTable.from_options(rules)
    assert str(ei.value) == message
    assert ei.value.source == next(iter(rules))


def test_cluster_weights_are_separate():
    t = MappingTable.from_options({"foo": [D("a", 60, "c1"), D("b", 60, "c2")]}, "c2")
    random.seed(0)
    assert {t.map("foo") for _ in range(500)} == {"b", "foo"}
