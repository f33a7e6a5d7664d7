"""spark/throughput.py: the throughput corpus job (PySpark).

Owns: reading the corpus (tools/corpus.py JSON lines) and pytest-benchmark JSON files, the
aggregates, the Parquet output, the human report, and the distributed load generator.

  spark-submit spark/throughput.py CORPUS OUT
  python -m spark.throughput CORPUS OUT [--master local[*]] [--threshold 10] [--fail-on-regression]
  python -m spark.throughput --generate --target nats://host:port CORPUS_DIR [OUT]
      [--modes pub,pubsub] [--sizes 16,128] [--clients 1] [--msgs 50000] [--reps 1] [--label NAME]

CORPUS is a file or a directory (every *.jsonl / *.json below it). `*.jsonl` files are corpus
lines; `*.json` files are pytest-benchmark output (`make bench`), turned into rows with
msgs/s = extra_info msgs / median (or extra_info msgs_per_sec_median). Lines that are not valid
JSON or lack the required fields are skipped and counted (never a crash); partial runs are kept
in the Parquet data but left out of the statistics.

Computed: p50/p90/p99 of msgs/s per (implementation, scenario, size, clients) (exact
percentiles, linear interpolation as numpy); the natsd / nats-server ratio of median msgs/s per
scenario per revision; regressions: for each (implementation, scenario, size, clients), revisions
in commit order (revision_time, else the earliest run timestamp), a drop of the median msgs/s
by more than --threshold % from one revision to the next. Written to OUT: `runs/` (Parquet,
partitioned by implementation and scenario), `percentiles/`, `ratios/`, `regressions/`
(Parquet), `report.md` and PNG charts (matplotlib, Agg).

--generate spreads the scenario matrix over Spark tasks (one task per run); each task runs the
bench client (bench/scenarios.py) against --target and returns a corpus record; the driver writes
them to CORPUS_DIR/corpus-<session>.jsonl (implementation = --label, default "target").
"""
import argparse
import datetime
import glob
import json
import os
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

REQUIRED = ("implementation", "scenario", "msgs_per_sec")


def runs_schema():
    from pyspark.sql import types as T
    return T.StructType([
        T.StructField("source", T.StringType()),
        T.StructField("session", T.StringType()),
        T.StructField("implementation", T.StringType()),
        T.StructField("scenario", T.StringType()),
        T.StructField("size", T.LongType()),
        T.StructField("clients", T.LongType()),
        T.StructField("msgs", T.LongType()),
        T.StructField("rep", T.LongType()),
        T.StructField("revision", T.StringType()),
        T.StructField("revision_time", T.StringType()),
        T.StructField("timestamp", T.StringType()),
        T.StructField("msgs_per_sec", T.DoubleType()),
        T.StructField("mb_per_sec", T.DoubleType()),
        T.StructField("lat_p50_us", T.DoubleType()),
        T.StructField("lat_p90_us", T.DoubleType()),
        T.StructField("lat_p99_us", T.DoubleType()),
        T.StructField("server_cpu_pct", T.DoubleType()),
        T.StructField("server_rss_mb", T.DoubleType()),
        T.StructField("host_cores", T.LongType()),
        T.StructField("host_kernel", T.StringType()),
        T.StructField("partial", T.BooleanType()),
        T.StructField("error", T.StringType()),
    ])


def _num(v, conv=float):
    if v is None or isinstance(v, bool):
        return None
    try:
        return conv(v)
    except (TypeError, ValueError):
        return None


def corpus_row(d, source):
    """A corpus record -> a runs row, or None when a required field is missing/invalid."""
    if not isinstance(d, dict):
        return None
    if any(d.get(k) in (None, "") for k in REQUIRED[:2]):
        return None
    rate = _num(d.get("msgs_per_sec"))
    partial = bool(d.get("partial"))
    if rate is None and not partial:
        return None
    lat = d.get("latency_us") if isinstance(d.get("latency_us"), dict) else {}
    host = d.get("host") if isinstance(d.get("host"), dict) else {}
    return {
        "source": source, "session": str(d.get("session") or ""), "implementation": str(d["implementation"]),
        "scenario": str(d["scenario"]), "size": _num(d.get("size"), int), "clients": _num(d.get("clients"), int),
        "msgs": _num(d.get("msgs"), int), "rep": _num(d.get("rep"), int),
        "revision": str(d.get("revision") or "unknown"), "revision_time": d.get("revision_time"),
        "timestamp": d.get("timestamp"), "msgs_per_sec": rate, "mb_per_sec": _num(d.get("mb_per_sec")),
        "lat_p50_us": _num(lat.get("p50")), "lat_p90_us": _num(lat.get("p90")), "lat_p99_us": _num(lat.get("p99")),
        "server_cpu_pct": _num(d.get("server_cpu_pct")), "server_rss_mb": _num(d.get("server_rss_mb")),
        "host_cores": _num(host.get("cores"), int), "host_kernel": host.get("kernel"),
        "partial": partial, "error": d.get("error"),
    }


def benchmark_rows(doc, source):
    """pytest-benchmark JSON -> runs rows (implementation from the test id when it names one)."""
    ci = doc.get("commit_info") or {}
    rev = (ci.get("id") or "unknown")[:12]
    when = ci.get("time") or doc.get("datetime")
    rows = []
    for b in doc.get("benchmarks") or []:
        stats = b.get("stats") or {}
        extra = b.get("extra_info") or {}
        med = _num(stats.get("median"))
        rate = _num(extra.get("msgs_per_sec_median"))
        if rate is None and med and _num(extra.get("msgs")):
            rate = float(extra["msgs"]) / med
        if rate is None:
            continue
        name = b.get("name") or b.get("fullname") or "?"
        impl = "nats-server" if "nats-server" in name else "natsd"
        scenario = name
        for tag in ("[nats-server-", "[natsd-"):          # test_x[natsd-16] -> test_x[16]
            scenario = scenario.replace(tag, "[")
        for tag in ("[nats-server]", "[natsd]", "-nats-server]", "-natsd]"):
            scenario = scenario.replace(tag, "]" if tag.startswith("-") else "")
        rows.append({
            "source": source, "session": "pytest-benchmark", "implementation": impl,
            "scenario": "pytest:" + scenario,
            "size": _num(extra.get("size"), int), "clients": _num(extra.get("clients"), int),
            "msgs": _num(extra.get("msgs"), int), "rep": None, "revision": rev, "revision_time": when,
            "timestamp": doc.get("datetime") or when, "msgs_per_sec": rate,
            "mb_per_sec": (rate * extra["size"] / 1e6) if _num(extra.get("size")) else None,
            "lat_p50_us": None, "lat_p90_us": None, "lat_p99_us": None, "server_cpu_pct": None,
            "server_rss_mb": None, "host_cores": _num((doc.get("machine_info") or {}).get("cpu", {}).get("count"), int)
            if isinstance((doc.get("machine_info") or {}).get("cpu"), dict) else None,
            "host_kernel": (doc.get("machine_info") or {}).get("release"), "partial": False, "error": None,
        })
    return rows


def list_inputs(corpus):
    if os.path.isdir(corpus):
        files = sorted(glob.glob(os.path.join(corpus, "**", "*.jsonl"), recursive=True) +
                       glob.glob(os.path.join(corpus, "**", "*.json"), recursive=True))
    else:
        files = sorted(glob.glob(corpus)) or [corpus]
    return [f for f in files if os.path.isfile(f)]


def corpus_schema():
    """The corpus line schema as Spark's JSON reader sees it (+ the corrupt-record column)."""
    from pyspark.sql import types as T
    lat = T.StructType([T.StructField(k, T.DoubleType()) for k in ("p50", "p90", "p99", "max")])
    host = T.StructType([T.StructField("cores", T.LongType()), T.StructField("kernel", T.StringType())])
    return T.StructType([
        T.StructField("session", T.StringType()), T.StructField("implementation", T.StringType()),
        T.StructField("scenario", T.StringType()), T.StructField("size", T.LongType()),
        T.StructField("clients", T.LongType()), T.StructField("msgs", T.LongType()), T.StructField("rep", T.LongType()),
        T.StructField("revision", T.StringType()), T.StructField("revision_time", T.StringType()),
        T.StructField("timestamp", T.StringType()), T.StructField("msgs_per_sec", T.DoubleType()),
        T.StructField("mb_per_sec", T.DoubleType()), T.StructField("latency_us", lat),
        T.StructField("server_cpu_pct", T.DoubleType()), T.StructField("server_rss_mb", T.DoubleType()),
        T.StructField("host", host), T.StructField("partial", T.BooleanType()), T.StructField("error", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ])


def load_runs(spark, corpus):
    """The runs DataFrame from every input, and the counts of what was skipped.

    Corpus lines are parsed by Spark's JSON reader (PERMISSIVE: a line that is not JSON or has a
    field of the wrong type lands in `_corrupt` and is counted, never raised); lines without
    implementation/scenario, or without msgs_per_sec while not partial, count as incomplete.
    pytest-benchmark files are small and read on the driver."""
    from pyspark.sql import functions as F
    files = list_inputs(corpus)
    jsonl = [f for f in files if not f.endswith(".json")]
    bench = [f for f in files if f.endswith(".json")]
    stats = {"files": len(files), "lines": 0, "corrupt": 0, "incomplete": 0, "bench_files_bad": 0}
    parts = []
    if jsonl:
        raw = (spark.read.schema(corpus_schema()).option("mode", "PERMISSIVE")
               .option("columnNameOfCorruptRecord", "_corrupt").json(jsonl)
               .withColumn("source", F.element_at(F.split(F.input_file_name(), "/"), -1))).cache()
        ok = F.col("_corrupt").isNull()
        complete = (F.col("implementation").isNotNull() & (F.col("implementation") != "") &
                    F.col("scenario").isNotNull() & (F.col("scenario") != "") &
                    (F.col("msgs_per_sec").isNotNull() | F.coalesce(F.col("partial"), F.lit(False))))
        c = raw.agg(F.count("*").alias("n"), F.sum(F.when(~ok, 1).otherwise(0)).alias("bad"),
                    F.sum(F.when(ok & ~complete, 1).otherwise(0)).alias("inc")).collect()[0]
        stats.update(lines=c["n"] or 0, corrupt=c["bad"] or 0, incomplete=c["inc"] or 0)
        parts.append(raw.where(ok & complete).select(
            "source", F.coalesce("session", F.lit("")).alias("session"), "implementation", "scenario", "size",
            "clients", "msgs", "rep", F.coalesce("revision", F.lit("unknown")).alias("revision"), "revision_time",
            "timestamp", "msgs_per_sec", "mb_per_sec", F.col("latency_us.p50").alias("lat_p50_us"),
            F.col("latency_us.p90").alias("lat_p90_us"), F.col("latency_us.p99").alias("lat_p99_us"),
            "server_cpu_pct", "server_rss_mb", F.col("host.cores").alias("host_cores"),
            F.col("host.kernel").alias("host_kernel"), F.coalesce("partial", F.lit(False)).alias("partial"),
            "error"))
    rows = []
    for f in bench:
        try:
            with open(f) as fh:
                doc = json.load(fh)
            rows.extend(benchmark_rows(doc, os.path.basename(f)))
        except (OSError, ValueError, AttributeError, TypeError):
            stats["bench_files_bad"] += 1
    if rows or not parts:
        parts.append(spark.createDataFrame(rows, schema=runs_schema()))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    return df, stats


def aggregates(spark, runs_df, threshold=10.0):
    """(percentiles, ratios, regressions) DataFrames from the runs DataFrame."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    good = runs_df.where(~F.col("partial") & F.col("msgs_per_sec").isNotNull())
    keys = ["implementation", "scenario", "size", "clients"]
    pct = (good.groupBy(*keys)
           .agg(F.count("*").alias("runs"),
                F.expr("percentile(msgs_per_sec, array(0.5, 0.9, 0.99))").alias("p"))
           .select(*keys, "runs", F.col("p")[0].alias("p50"), F.col("p")[1].alias("p90"), F.col("p")[2].alias("p99"))
           .orderBy(*keys))
    by_rev = (good.groupBy("revision", *keys)
              .agg(F.expr("percentile(msgs_per_sec, 0.5)").alias("median_msgs_per_sec"),
                   F.count("*").alias("runs"),
                   F.min(F.coalesce(F.col("revision_time"), F.col("timestamp"))).alias("revision_time")))
    nd = by_rev.where(F.col("implementation") == "natsd").select(
        "revision", "scenario", "size", "clients", F.col("median_msgs_per_sec").alias("natsd_msgs_per_sec"))
    ns = by_rev.where(F.col("implementation") == "nats-server").select(
        "revision", "scenario", "size", "clients", F.col("median_msgs_per_sec").alias("nats_server_msgs_per_sec"))
    ratios = (nd.join(ns, ["revision", "scenario", "size", "clients"], "inner")
              .withColumn("ratio", F.col("natsd_msgs_per_sec") / F.col("nats_server_msgs_per_sec"))
              .orderBy("scenario", "size", "clients", "revision"))
    w = Window.partitionBy(*keys).orderBy("revision_time", "revision")
    reg = (by_rev.withColumn("prev_revision", F.lag("revision").over(w))
           .withColumn("prev_median", F.lag("median_msgs_per_sec").over(w))
           .where(F.col("prev_median").isNotNull())
           .withColumn("change_pct", (F.col("median_msgs_per_sec") - F.col("prev_median")) / F.col("prev_median") * 100)
           .withColumn("regression", F.col("change_pct") < -threshold)
           .select(*keys, "prev_revision", "revision", "revision_time", "prev_median", "median_msgs_per_sec",
                   "change_pct", "regression")
           .orderBy(*keys, "revision_time"))
    return pct, ratios, reg


def _fill_keys(df):
    """size/clients null (pytest-benchmark rows) -> 0 so that joins and groupings keep them."""
    return df.fillna({"size": 0, "clients": 0})


def fmt_rate(v):
    return "-" if v is None else "{:,.0f}".format(v)


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def charts(out, pct_rows, reg_rows, ratio_rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    if pct_rows:
        labels = sorted({(r["scenario"], r["size"], r["clients"]) for r in pct_rows})
        impls = sorted({r["implementation"] for r in pct_rows})
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels) + 2), 4.5))
        width = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            vals = []
            for lab in labels:
                m = [r["p50"] for r in pct_rows if (r["scenario"], r["size"], r["clients"]) == lab
                     and r["implementation"] == impl]
                vals.append(m[0] if m else 0)
            ax.bar([i + k * width for i in range(len(labels))], vals, width, label=impl)
        ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(labels))])
        ax.set_xticklabels(["%s %sB c%s" % lab for lab in labels], fontsize=7, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("msgs/s (p50, log scale)")
        ax.set_title("Median throughput by scenario")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput_p50.png"), dpi=90)
        plt.close(fig)
        made.append("throughput_p50.png")
    if reg_rows or pct_rows:
        series = {}
        for r in reg_rows:
            key = (r["implementation"], r["scenario"], r["size"], r["clients"])
            s = series.setdefault(key, [])
            if not s:
                s.append((r["prev_revision"], r["prev_median"]))
            s.append((r["revision"], r["median_msgs_per_sec"]))
        if series:
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for key, pts in sorted(series.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s %s %sB c%s" % key)
            ax.set_ylabel("median msgs/s (log scale)")
            ax.set_yscale("log")
            ax.set_xlabel("revision (commit order)")
            ax.set_title("Throughput across revisions")
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(out, "revisions.png"), dpi=90)
            plt.close(fig)
            made.append("revisions.png")
    if ratio_rows:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        labels = ["%s %sB c%s @%s" % (r["scenario"], r["size"], r["clients"], r["revision"][:8]) for r in ratio_rows]
        ax.barh(range(len(ratio_rows)), [r["ratio"] for r in ratio_rows])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_yticks(range(len(ratio_rows)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel("natsd / nats-server (median msgs/s)")
        ax.set_title("natsd vs nats-server")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "ratio.png"), dpi=90)
        plt.close(fig)
        made.append("ratio.png")
    return made


def write_report(out, corpus, stats, n_runs, n_partial, pct_rows, ratio_rows, reg_rows, pngs, threshold):
    regs = [r for r in reg_rows if r["regression"]]
    lines = ["# natsd throughput report", "",
             "Generated %s from `%s`." % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                         corpus), "",
             "- input files: %d; corpus lines read: %d" % (stats["files"], stats["lines"]),
             "- runs used: %d; partial runs (kept in Parquet, left out of the statistics): %d" % (n_runs, n_partial),
             "- skipped lines: %d corrupt (not JSON), %d incomplete (missing %s); unreadable benchmark files: %d"
             % (stats["corrupt"], stats["incomplete"], "/".join(REQUIRED), stats["bench_files_bad"]),
             "- regressions (median msgs/s drop > %.0f%% from one revision to the next): **%d**" % (threshold, len(regs)),
             ""]
    if regs:
        lines += ["## Regressions", "", md_table(
            ["implementation", "scenario", "size", "clients", "from", "to", "before msgs/s", "after msgs/s", "change"],
            [(r["implementation"], r["scenario"], r["size"], r["clients"], r["prev_revision"], r["revision"],
              fmt_rate(r["prev_median"]), fmt_rate(r["median_msgs_per_sec"]), "%+.1f%%" % r["change_pct"])
             for r in regs]), ""]
    lines += ["## Throughput percentiles (msgs/s)", "", md_table(
        ["implementation", "scenario", "size", "clients", "runs", "p50", "p90", "p99"],
        [(r["implementation"], r["scenario"], r["size"], r["clients"], r["runs"], fmt_rate(r["p50"]),
          fmt_rate(r["p90"]), fmt_rate(r["p99"])) for r in pct_rows]), ""]
    lines += ["## natsd / nats-server (median msgs/s, per revision)", ""]
    if ratio_rows:
        lines.append(md_table(["scenario", "size", "clients", "revision", "natsd", "nats-server", "ratio"],
                              [(r["scenario"], r["size"], r["clients"], r["revision"], fmt_rate(r["natsd_msgs_per_sec"]),
                                fmt_rate(r["nats_server_msgs_per_sec"]), "%.2f" % r["ratio"]) for r in ratio_rows]))
    else:
        lines.append("(no scenario has runs of both implementations at the same revision)")
    lines.append("")
    if reg_rows:
        lines += ["## Revision to revision", "", md_table(
            ["implementation", "scenario", "size", "clients", "from", "to", "change", "regression"],
            [(r["implementation"], r["scenario"], r["size"], r["clients"], r["prev_revision"], r["revision"],
              "%+.1f%%" % r["change_pct"], "yes" if r["regression"] else "no") for r in reg_rows]), ""]
    if pngs:
        lines += ["## Charts", ""] + ["![%s](%s)" % (p, p) for p in pngs] + [""]
    lines += ["Parquet: `runs/` (partitioned by implementation and scenario), `percentiles/`, `ratios/`, "
              "`regressions/`.", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))


def make_spark(master, app="natsd-throughput", quick_jvm=False):
    """A SparkSession; quick_jvm (tests, tiny corpora) trades peak JIT speed for start-up time."""
    from pyspark.sql import SparkSession
    pp = os.environ.get("PYTHONPATH", "")
    if ROOT not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = ROOT + (os.pathsep + pp if pp else "")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = (SparkSession.builder.appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    if quick_jvm:
        b = (b.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.default.parallelism", "1"))
    if master:
        b = b.master(master)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def analyze(spark, corpus, out, threshold=10.0):
    """Run the whole analysis; returns a summary dict (also used by the tests)."""
    from pyspark.sql import functions as F
    os.makedirs(out, exist_ok=True)
    df, stats = load_runs(spark, corpus)
    df = _fill_keys(df).cache()
    c = df.agg(F.count("*").alias("n"), F.sum(F.col("partial").cast("int")).alias("p")).collect()[0]
    n_partial = c["p"] or 0
    n_runs = c["n"] - n_partial
    (df.write.mode("overwrite").partitionBy("implementation", "scenario").parquet(os.path.join(out, "runs")))
    pct, ratios, reg = aggregates(spark, df, threshold)
    pct, ratios, reg = pct.cache(), ratios.cache(), reg.cache()
    pct_rows = [r.asDict() for r in pct.collect()]
    ratio_rows = [r.asDict() for r in ratios.collect()]
    reg_rows = [r.asDict() for r in reg.collect()]
    for name, d in (("percentiles", pct), ("ratios", ratios), ("regressions", reg)):
        d.coalesce(1).write.mode("overwrite").parquet(os.path.join(out, name))
    pngs = charts(out, pct_rows, reg_rows, ratio_rows)
    write_report(out, corpus, stats, n_runs, n_partial, pct_rows, ratio_rows, reg_rows, pngs, threshold)
    return {"stats": stats, "runs": n_runs, "partial": n_partial, "percentiles": pct_rows, "ratios": ratio_rows,
            "regressions": [r for r in reg_rows if r["regression"]], "charts": pngs}


# ------------------------------------------------------------------------------- --generate
def _code_zip():
    """bench/ and the corpus tool (tools/corpus.py and what it imports) as a zip for the
    executors (sc.addPyFile)."""
    path = os.path.join(tempfile.mkdtemp(prefix="natsd-bench-code-"), "natsd_bench_code.zip")
    with zipfile.ZipFile(path, "w") as z:
        for f in glob.glob(os.path.join(ROOT, "bench", "*.py")):
            if not os.path.basename(f).startswith(("test_", "conftest")):
                z.write(f, os.path.join("bench", os.path.basename(f)))
        for name in ("corpus.py", "serverproc.py"):
            z.write(os.path.join(ROOT, "tools", name), os.path.join("tools", name))
        z.writestr(os.path.join("tools", "__init__.py"), "")
    return path


def _run_task(task):
    """On an executor: one scenario against the target -> a corpus record."""
    import time as _t
    from bench.scenarios import run_scenario
    from tools.corpus import SCHEMA, host_facts, latency_percentiles
    rec = {"schema": SCHEMA, "session": task["session"], "scenario": task["mode"], "size": task["size"],
           "clients": task["clients"], "msgs": task["msgs"], "rep": task["rep"], "implementation": task["label"],
           "revision": task["revision"], "revision_time": task["revision_time"], "target": task["target"],
           "msgs_per_sec": None, "mb_per_sec": None, "latency_us": latency_percentiles([]),
           "server_cpu_pct": None, "server_rss_mb": None, "host": host_facts(), "partial": False, "error": None}
    t0 = _t.time()
    try:
        o = run_scenario(task["target"], task["mode"], size=task["size"], clients=task["clients"],
                         msgs=task["msgs"], timeout=task["timeout"],
                         subject="bench.%s.%s" % (task["mode"], task["id"]))
        rec.update(msgs_per_sec=round(o["msgs_per_sec"], 1), mb_per_sec=round(o["mb_per_sec"], 3),
                   msgs_done=o["msgs"], seconds=round(o["seconds"], 6),
                   latency_us=latency_percentiles(o["latencies"]), partial=bool(o["partial"]), error=o["error"])
    except Exception as e:
        rec.update(partial=True, error="%s: %s" % (type(e).__name__, e))
    rec["timestamp"] = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).isoformat()
    return rec


def generate(spark, a):
    from tools.corpus import MODES, csv_list, git_revision
    modes = csv_list(a.modes)
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise SystemExit("unknown mode(s) %s; known: %s" % (bad, ", ".join(MODES)))
    rev, rev_time, _dirty = git_revision()
    session = a.session or datetime.datetime.now(datetime.timezone.utc).strftime("gen-%Y%m%dT%H%M%SZ")
    tasks = []
    for rep in range(1, a.reps + 1):
        for mode in modes:
            for size in csv_list(a.sizes, int):
                for clients in csv_list(a.clients, int):
                    tasks.append({"id": len(tasks), "mode": mode, "size": size, "clients": clients, "msgs": a.msgs,
                                  "rep": rep, "target": a.target, "label": a.label, "session": session,
                                  "revision": rev, "revision_time": rev_time, "timeout": a.timeout})
    sc = spark.sparkContext
    sc.addPyFile(_code_zip())
    recs = sc.parallelize(tasks, numSlices=max(1, len(tasks))).map(_run_task).collect()
    os.makedirs(a.corpus, exist_ok=True)
    path = os.path.join(a.corpus, "corpus-%s.jsonl" % session)
    with open(path, "a") as f:
        for r in recs:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    bad = sum(1 for r in recs if r["partial"] or r["error"])
    print("generated %d runs (%d partial/failed) against %s -> %s" % (len(recs), bad, a.target, path))
    return path, recs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="corpus file or directory (with --generate: the directory to write to)")
    ap.add_argument("out", nargs="?", default=None, help="output directory (Parquet, report.md, PNGs)")
    ap.add_argument("--master", default=None, help="Spark master (default local[*]; spark-submit's own when "
                                                    "launched by spark-submit)")
    ap.add_argument("--threshold", type=float, default=10.0, help="regression threshold, percent")
    ap.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a regression is flagged")
    g = ap.add_argument_group("--generate")
    g.add_argument("--generate", action="store_true")
    g.add_argument("--target", default=None, help="nats://host:port to load")
    g.add_argument("--label", default="target", help="implementation name written in the records")
    g.add_argument("--modes", default="pub,pubsub")
    g.add_argument("--sizes", default="16,128")
    g.add_argument("--clients", default="1")
    g.add_argument("--msgs", type=int, default=50_000)
    g.add_argument("--reps", type=int, default=1)
    g.add_argument("--session", default=None)
    g.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args(argv)
    if a.generate and not a.target:
        ap.error("--generate needs --target nats://host:port")
    if not a.generate and not a.out:
        ap.error("OUT is required")
    master = a.master
    if master is None and "SPARK_ENV_LOADED" not in os.environ and "spark.master" not in os.environ.get(
            "PYSPARK_SUBMIT_ARGS", ""):
        master = "local[*]"
    spark = make_spark(master)
    try:
        if a.generate:
            generate(spark, a)
            if not a.out:
                return 0
        s = analyze(spark, a.corpus, a.out, a.threshold)
    finally:
        spark.stop()
    st = s["stats"]
    print("report: %s  (runs %d, partial %d, corrupt lines %d, incomplete %d, regressions %d)" % (
        os.path.join(a.out, "report.md"), s["runs"], s["partial"], st["corrupt"], st["incomplete"],
        len(s["regressions"])))
    return 1 if (a.fail_on_regression and s["regressions"]) else 0


if __name__ == "__main__":
    sys.exit(main())
