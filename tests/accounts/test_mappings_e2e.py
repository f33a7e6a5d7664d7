"""Differential test: MappingTable predicts what the real nats-server does with mappings.

Each scenario writes one config, loads it with natsd's config loader to build a
MappingTable, runs the reference ``nats-server`` on the same file, publishes subjects with
nats-py and records the subject a ``>`` subscriber receives for each publish (matched
through the payload).  Deterministic rules must agree exactly; weighted rules must land on
one of the outcomes the table can produce.  Skipped when nats-server is not installed.
natsd itself is not started here (its wiring of mappings lives elsewhere).
"""
import asyncio
import subprocess
from unittest import mock

import nats
import pytest

from natsd.conf.load import load_file
from natsd.accounts.mappings import MappingTable
from natsd.accounts.transform import TransformError
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")

RULES = """
mappings {
  "bar.*.*": "baz.{{wildcard(2)}}.{{wildcard(1)}}"
  "legacy.*.*": "old.$2.$1"
  "neworders.*": "neworders.{{wildcard(1)}}.{{partition(3,1)}}"
  "foo.*.*": "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(10,1,2)}}"
  "whole.*.*": "whole.{{partition(7)}}"
  "orders.>": "orders.central.>"
  "transform.order": "target.order"
  "target.order": "transform.order"
  "split.*": "s.{{split(1,-)}}"
  "sfl.*": "sfl.{{SplitFromLeft(1,4)}}"
  "sfr.*": "sfr.{{splitfromright(1,4)}}"
  "sll.*": "slices.{{SliceFromLeft(1,2)}}"
  "slr.*": "slices.{{slicefromright(1,2)}}"
  "lr.*": "lr.{{Left(1,2)}}.{{Right(1,3)}}"
  "drop.*.*": "dropped.{{wildcard(2)}}"
  "prefix.>": "p.>"
  "canary": [{destination: canary.v1, weight: 100%}]
  "myservice.requests": [{destination: myservice.requests.v3, weight: 90%},
                         {destination: myservice.requests.v3.fail, weight: 8%}]
  "loss.>": [{destination: "loss.>", weight: 50%}]
  "cl": [{destination: cl.west, weight: 100%, cluster: west},
         {destination: cl.east, weight: 100%, cluster: east}]
  "cl2": [{destination: cl2.west, weight: 100%, cluster: west},
          {destination: cl2.any, weight: 100%}]
}
"""

SUBJECTS = (
    ["bar.a.b", "bar.one.two", "bar.a", "legacy.x.y"]
    + [f"neworders.customerid{i}" for i in range(1, 7)]
    + ["foo.1.a", "foo.1.b", "foo.2.b", "foo.2.a", "foo.us.customerid"]
    + ["whole.a.b", "whole.x.y", "orders.x", "orders.x.y.z", "transform.order", "target.order"]
    + ["split.foo-bar", "split.a--b-", "split.nosep", "sfl.1234567", "sfr.1234567", "sfl.12"]
    + ["sll.1234567", "slr.1234567", "lr.abcdef", "lr.ab", "drop.a.b", "prefix.a.b.c"]
    + ["canary", "myservice.requests", "loss.a", "cl", "cl2", "unmapped", "unmapped.a.b"]
)


async def _received(url, subjects):
    """Publish each subject (payload = its index); return {index: received subject}."""
    nc = await nats.connect(url)
    got = {}

    async def cb(msg):
        got[int(msg.data)] = msg.subject

    try:
        await nc.subscribe(">", cb=cb)
        await nc.flush()
        for i, s in enumerate(subjects):
            await nc.publish(s, str(i).encode())
        await nc.flush()
        # One more round trip through the server so every delivery has arrived.
        await nc.publish("zz.sentinel", str(len(subjects)).encode())
        for _ in range(200):
            if len(subjects) in got:
                break
            await asyncio.sleep(0.01)
    finally:
        await nc.close()
    return got


def _outcomes(table, subject):
    """Every result of table.map(subject) over all 100 weight draws."""
    results = set()
    for k in range(100):
        with mock.patch("random.random", return_value=(k + 0.5) / 100):
            results.add(table.map(subject))
    return results


def _expected(table, subject):
    """What a '>' subscriber should see: a set of possible subjects (None = nothing)."""
    out = set()
    for r in _outcomes(table, subject):
        out.add(subject if r is None else (r or None))
    return out


def _run(reference, conf_path, subjects):
    server = reference("-c", str(conf_path))
    got = asyncio.run(asyncio.wait_for(_received(server.url, subjects), 30))
    return [got.get(i) for i in range(len(subjects))]


@pytest.mark.parametrize("cluster", ["", "west"])
def test_mappings_match_nats_server(reference, tmp_path, cluster):
    conf = tmp_path / "mappings.conf"
    header = f"cluster {{ name: {cluster}, port: -1 }}\n" if cluster else ""
    conf.write_text(header + RULES)
    opts = load_file(str(conf))
    table = MappingTable.from_options(opts.mappings, opts.cluster.name if cluster else "")
    assert len(table) == 21
    received = _run(reference, conf, SUBJECTS)
    mismatches = []
    for subject, got in zip(SUBJECTS, received):
        expected = _expected(table, subject)
        if got not in expected:
            mismatches.append((subject, got, expected))
    assert not mismatches
    # Spot checks that the scenario really exercised what it claims.
    by_subject = dict(zip(SUBJECTS, received))
    assert by_subject["bar.a.b"] == "baz.b.a"
    assert by_subject["transform.order"] == "target.order"
    assert by_subject["cl"] == ("cl.west" if cluster else "cl")


def test_weighted_loss_rate_matches(reference, tmp_path):
    conf = tmp_path / "loss.conf"
    conf.write_text('mappings { "loss.>": [{destination: "loss.>", weight: 50%}] }\n')
    table = MappingTable.from_options(load_file(str(conf)).mappings)
    n = 400
    received = _run(reference, conf, ["loss.a"] * n)
    server_kept = sum(r is not None for r in received)
    ours_kept = sum(bool(table.map("loss.a")) for _ in range(n))
    # Binomial(400, 0.5): sd = 10, so +-60 is far outside normal variation.
    assert 140 <= server_kept <= 260 and 140 <= ours_kept <= 260


INVALID = [
    ('"x.*": "y.{{foo(1)}}"', "invalid mapping destination: unknown function in {{foo(1)}}"),
    ('"x.*": "y.$2"', "invalid mapping destination: wildcard index out of range in $2: [2]"),
    ('"x.*": "y.{{wildcard(1,2)}}"',
     "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}"),
    ('"x.*": "y.{{splitfromleft(1)}}"',
     "invalid mapping destination: not enough arguments passed to the function in {{splitfromleft(1)}}"),
    ('"x.*": "y.{{partition(a,1)}}"',
     "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(a,1)}}"),
    ('"x": "y.{{wildcard(1)}}"',
     "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"),
    ('"x.*": "y.*"', "invalid subject"),
    ('"x.>": "y"', "invalid subject"),
    ('"x": [{destination: a, weight: 60%}, {destination: b, weight: 60%}]',
     "total weight needs to be <= 100"),
    ('"x": [{destination: a, weight: 10%}, {destination: a, weight: 20%}]',
     'duplicate entry for "a"'),
]


@pytest.mark.parametrize("rule,message", INVALID)
def test_invalid_mapping_texts_match(tmp_path, rule, message):
    conf = tmp_path / "bad.conf"
    conf.write_text("mappings { %s }\n" % rule)
    res = subprocess.run(nats_server_cmd() + ["-t", "-c", str(conf)], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    try:
        mappings = load_file(str(conf)).mappings
    except Exception as e:   # the config loader may reject it itself (e.g. total weight)
        assert message in str(e)
        return
    with pytest.raises(TransformError) as ei:
        MappingTable.from_options(mappings)
    assert str(ei.value) == message


def test_seed_whitespace_form_loads(tmp_path):
    conf = tmp_path / "seed.conf"
    conf.write_text("mappings {\n  orders.flush  orders.central.flush \n"
                    "\torders.* orders.central.{{wildcard(1)}}\n}\n")
    table = MappingTable.from_options(load_file(str(conf)).mappings)
    assert table.map("orders.x") == "orders.central.x"
    assert table.map("orders.flush") == "orders.central.flush"
