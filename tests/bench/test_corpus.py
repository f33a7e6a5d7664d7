"""tools/corpus.py (the corpus writer) and tools/bench_compare.py (the regression gate).

Owns: one small real corpus run against natsd and nats-server (fresh server per run, one JSON
line per run with every documented field), partial marking when the server dies mid-run or the
scenario fails, and bench_compare's table / exit status on pytest-benchmark JSON fixtures.
"""
import json
import os
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bench_compare  # noqa: E402
import corpus  # noqa: E402

FIELDS = {"scenario", "size", "clients", "msgs", "rep", "implementation", "revision", "revision_time",
          "msgs_per_sec", "mb_per_sec", "latency_us", "server_cpu_pct", "server_rss_mb", "server_rss_peak_mb",
          "host", "timestamp", "partial", "error", "session"}


def test_corpus_side_by_side(tmp_path):
    if corpus.nats_server_path() is None:
        pytest.skip("nats-server not installed")
    rc = corpus.main(["--dir", str(tmp_path), "--session", "t", "--modes", "pub,pubsub", "--sizes", "64",
                      "--msgs", "5000"])
    assert rc == 0
    path = tmp_path / "corpus-t.jsonl"
    recs = [json.loads(l) for l in path.read_text().splitlines()]
    assert [(r["scenario"], r["implementation"]) for r in recs] == [
        ("pub", "natsd"), ("pub", "nats-server"), ("pubsub", "natsd"), ("pubsub", "nats-server")]
    for r in recs:
        assert FIELDS <= set(r), FIELDS - set(r)
        assert r["partial"] is False and r["error"] is None
        assert r["msgs_per_sec"] > 0 and r["mb_per_sec"] > 0 and r["msgs_done"] == 5000
        assert set(r["latency_us"]) >= {"p50", "p90", "p99"} and r["latency_us"]["samples"] > 0
        assert r["latency_us"]["p50"] <= r["latency_us"]["p90"] <= r["latency_us"]["p99"]
        assert r["server_rss_mb"] > 1 and r["server_cpu_pct"] is not None
        assert {"cores", "memory_bytes", "kernel", "python"} <= set(r["host"])
        assert len(r["revision"]) >= 7
    # a second session appends to its own file; the same session appends
    corpus.append(str(path), {"x": 1})
    assert len(path.read_text().splitlines()) == 5


def test_partial_when_server_dies(monkeypatch, tmp_path):
    """The server is SIGKILLed while the publisher runs: the line says partial, with the error."""
    orig = corpus.Server.start_sampling

    def start_and_kill(self):
        orig(self)
        threading.Timer(0.8, lambda: self.proc.kill()).start()

    monkeypatch.setattr(corpus.Server, "start_sampling", start_and_kill)
    monkeypatch.setattr(corpus, "run_scenario", _slow_pub)
    rec = corpus.run_one("natsd", "pub", 64, 1, 3000, 1, "s", ("abc", None, False), 10)
    assert rec["partial"] is True
    assert rec["error"]
    assert rec["timestamp"]


def _slow_pub(url, mode, size, clients, msgs, timeout):
    from bench import fastclient as fc
    from bench.scenarios import _outcome
    ev = threading.Event()
    ev.set()
    r = fc.run_publisher(url, 1, "slow", msgs, size, sleep=0.002, start_event=ev)
    return _outcome([r])


def test_failed_scenario_is_partial(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")
    monkeypatch.setattr(corpus, "run_scenario", boom)
    rec = corpus.run_one("natsd", "pub", 16, 1, 10, 1, "s", ("abc", None, False), 5)
    assert rec["partial"] is True and "boom" in rec["error"]


def _bench_json(path, medians):
    doc = {"benchmarks": [{"name": n, "fullname": "bench/x.py::" + n, "stats": {"median": m}}
                          for n, m in medians.items()]}
    path.write_text(json.dumps(doc))
    return str(path)


def test_bench_compare(tmp_path, capsys):
    base = _bench_json(tmp_path / "a.json", {"t_fast": 0.010, "t_same": 0.020, "t_gone": 0.1})
    same = _bench_json(tmp_path / "b.json", {"t_fast": 0.0105, "t_same": 0.020, "t_new": 1.0})
    slow = _bench_json(tmp_path / "c.json", {"t_fast": 0.0115, "t_same": 0.020})
    assert bench_compare.main([base, same]) == 0
    out = capsys.readouterr().out
    assert "t_new" in out and "new" in out and "missing" in out and "+5.0%" in out
    assert bench_compare.main([base, slow]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "+15.0%" in out and "1 regression(s)" in out
    assert bench_compare.main([base, slow, "--threshold", "20"]) == 0
    assert bench_compare.main([base, str(tmp_path / "nope.json")]) == 2
