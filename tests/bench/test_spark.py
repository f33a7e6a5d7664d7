"""spark/throughput.py on a small fixture corpus with local[1].

Owns: the aggregates (exact p50/p90/p99 per implementation/scenario/size/clients, compared as
DataFrames with numpy's percentiles), the natsd/nats-server ratio per revision, regression
detection in commit-time order (a fixture where one revision is slower), corrupt / incomplete
lines skipped and counted, partial runs left out, pytest-benchmark JSON input, the Parquet
layout, report.md + PNGs, and --generate against a natsd started by the test. One Spark session
(module scope) for the whole file. Skipped cleanly without pyspark or Java.
"""
import json
import os
import shutil
import types

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Java is not installed (pyspark needs a JVM)", allow_module_level=True)

from spark import throughput as tp  # noqa: E402

T1 = "2026-01-01T10:00:00+00:00"
T2 = "2026-01-02T10:00:00+00:00"
# revision names sort the other way round from their commit times: order must come from time
OLD, NEW = "zzz1111", "aaa2222"
RATES = {
    ("natsd", "pub", 128, OLD): [100.0, 110.0, 120.0],
    ("natsd", "pub", 128, NEW): [80.0, 90.0, 100.0],          # -18% median: a regression
    ("nats-server", "pub", 128, OLD): [200.0, 210.0, 220.0],
    ("nats-server", "pub", 128, NEW): [205.0, 215.0, 225.0],  # +2.4%
    ("natsd", "pubsub", 16, OLD): [50.0, 70.0, 60.0, 65.0],
}


def rec(impl, scen, size, rev, rate, **kw):
    d = {"schema": 1, "session": "fx", "scenario": scen, "size": size, "clients": 1, "msgs": 1000, "rep": 1,
         "implementation": impl, "revision": rev, "revision_time": T1 if rev == OLD else T2,
         "msgs_per_sec": rate, "mb_per_sec": rate * size / 1e6,
         "latency_us": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0, "samples": 10},
         "server_cpu_pct": 50.0, "server_rss_mb": 20.0, "host": {"cores": 2, "kernel": "k"},
         "timestamp": T1 if rev == OLD else T2, "partial": False, "error": None}
    d.update(kw)
    return d


@pytest.fixture(scope="module")
def spark():
    s = tp.make_spark("local[1]", app="natsd-throughput-test", quick_jvm=True)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    lines = [json.dumps(rec(i, s, z, r, v)) for (i, s, z, r), vals in RATES.items() for v in vals]
    lines.insert(3, '{"implementation": "natsd", "scenario": "pub", "msgs_per_s')      # corrupt (cut short)
    lines.insert(5, "not json at all")                                                 # corrupt
    lines.insert(7, "")                                                                # blank: ignored
    lines.insert(8, json.dumps({"scenario": "pub", "msgs_per_sec": 5.0}))              # incomplete
    lines.append(json.dumps(rec("natsd", "pub", 128, NEW, 1.0, partial=True, error="server exited")))
    (d / "corpus-fx.jsonl").write_text("\n".join(lines) + "\n")
    bench = {"commit_info": {"id": NEW + "ffff", "time": T2}, "datetime": T2,
             "benchmarks": [{"name": "test_e2e_pub[natsd-16]", "stats": {"median": 0.01},
                             "extra_info": {"msgs": 1000, "size": 16, "clients": 1}},
                            {"name": "test_e2e_pub[nats-server-16]", "stats": {"median": 0.02},
                             "extra_info": {"msgs": 1000, "size": 16, "clients": 1}}]}
    (d / "bench.json").write_text(json.dumps(bench))
    (d / "broken.json").write_text("{")
    out = tmp_path_factory.mktemp("out")
    return tp.analyze(spark, str(d), str(out), threshold=10.0), out


def test_percentiles_dataframe(spark, analyzed):
    s, out = analyzed
    from pyspark.sql import functions as F
    got = spark.read.parquet(str(out / "percentiles")).where(~F.col("scenario").startswith("pytest:"))
    groups = {}
    for (impl, scen, size, _rev), vals in RATES.items():
        groups.setdefault((impl, scen, size), []).extend(vals)
    exp_rows = [(impl, scen, size, 1, len(v), *[float(x) for x in np.percentile(v, [50, 90, 99])])
                for (impl, scen, size), v in sorted(groups.items())]
    expected = spark.createDataFrame(exp_rows, got.select("implementation", "scenario", "size", "clients", "runs",
                                                          "p50", "p90", "p99").schema)
    try:
        from pyspark.testing import assertDataFrameEqual
    except ImportError:      # pyspark < 3.5
        assertDataFrameEqual = None
    if assertDataFrameEqual is not None:
        assertDataFrameEqual(got.select(*expected.columns), expected, rtol=1e-9)
    else:
        assert sorted(got.select(*expected.columns).collect()) == sorted(expected.collect())


def test_counts_corrupt_incomplete_partial(analyzed):
    s, out = analyzed
    assert s["stats"]["corrupt"] == 2
    assert s["stats"]["incomplete"] == 1
    assert s["stats"]["bench_files_bad"] == 1
    assert s["partial"] == 1
    assert s["runs"] == sum(len(v) for v in RATES.values()) + 2
    report = (out / "report.md").read_text()
    assert "2 corrupt" in report and "1 incomplete" in report and "partial runs" in report


def test_ratios_per_revision(analyzed):
    s, _ = analyzed
    r = {(x["scenario"], x["size"], x["revision"]): x["ratio"] for x in s["ratios"]}
    assert r[("pub", 128, OLD)] == pytest.approx(110 / 210)
    assert r[("pub", 128, NEW)] == pytest.approx(90 / 215)
    # pytest-benchmark rows pair up too: 1000/0.01 vs 1000/0.02
    assert r[("pytest:test_e2e_pub[16]", 16, (NEW + "ffff")[:12])] == pytest.approx(2.0)
    assert not any(k[0] == "pubsub" for k in r)          # no nats-server runs: no ratio


def test_regression_detected_in_commit_order(analyzed):
    s, out = analyzed
    regs = s["regressions"]
    assert len(regs) == 1
    g = regs[0]
    assert (g["implementation"], g["scenario"], g["size"], g["prev_revision"], g["revision"]) == (
        "natsd", "pub", 128, OLD, NEW)
    assert g["change_pct"] == pytest.approx((90 - 110) / 110 * 100)
    report = (out / "report.md").read_text()
    assert "## Regressions" in report and "**1**" in report


def test_outputs_layout(analyzed):
    s, out = analyzed
    assert (out / "runs" / "implementation=natsd" / "scenario=pub").is_dir()
    assert (out / "runs" / "implementation=nats-server" / "scenario=pub").is_dir()
    for name in ("percentiles", "ratios", "regressions"):
        assert any(p.suffix == ".parquet" for p in (out / name).iterdir())
    for png in s["charts"]:
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(s["charts"]) >= {"throughput_p50.png", "revisions.png", "ratio.png"}
    report = (out / "report.md").read_text()
    for png in s["charts"]:
        assert "](%s)" % png in report


def test_generate_against_natsd(spark, natsd, tmp_path):
    srv = natsd()
    a = types.SimpleNamespace(corpus=str(tmp_path), modes="pub,pubsub", sizes="32", clients="1", msgs=2000,
                              reps=1, target=srv.url, label="natsd", session="gen", timeout=20.0)
    path, recs = tp.generate(spark, a)
    assert os.path.basename(path) == "corpus-gen.jsonl"
    lines = [json.loads(l) for l in open(path)]
    assert len(lines) == 2 and {r["scenario"] for r in lines} == {"pub", "pubsub"}
    for r in lines:
        assert r["implementation"] == "natsd" and r["partial"] is False and r["error"] is None
        assert r["msgs_per_sec"] > 0 and r["target"] == srv.url and r["latency_us"]["samples"] > 0
