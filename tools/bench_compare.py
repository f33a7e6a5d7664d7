#!/usr/bin/env python3
"""tools/bench_compare.py: fail on a benchmark regression between two pytest-benchmark JSON files.

Owns: the `make bench-compare` gate. For every benchmark (matched by fullname) present in both
BASELINE.json and NEW.json it compares the median time per round; a benchmark whose median grew
by more than --threshold (default 10%) is a regression. Prints a table (name, baseline median,
new median, change, verdict; benchmarks only in one file are listed as `new` / `missing`) and
exits 1 when any regression is found, 0 otherwise, 2 when a file cannot be read.

usage:
  python tools/bench_compare.py BASELINE.json NEW.json [--threshold 10]
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        name = b.get("fullname") or b.get("name")
        med = (b.get("stats") or {}).get("median")
        if name and isinstance(med, (int, float)):
            out[name] = float(med)
    return out


def fmt_time(s):
    if s is None:
        return "-"
    for unit, mult in (("s", 1.0), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
        if s * mult >= 1.0 or unit == "ns":
            return "%.3f %s" % (s * mult, unit)


def compare(base, new, threshold):
    """Rows (name, base, new, change_pct or None, verdict) and the number of regressions."""
    rows, regressions = [], 0
    for name in sorted(set(base) | set(new)):
        b, n = base.get(name), new.get(name)
        if b is None:
            rows.append((name, None, n, None, "new"))
            continue
        if n is None:
            rows.append((name, b, None, None, "missing"))
            continue
        change = (n - b) / b * 100.0 if b > 0 else 0.0
        if change > threshold:
            verdict = "REGRESSION"
            regressions += 1
        elif change < -threshold:
            verdict = "faster"
        else:
            verdict = "ok"
        rows.append((name, b, n, change, verdict))
    return rows, regressions


def short(name, width=70):
    name = name.split("::", 1)[-1] if "::" in name else name
    return name if len(name) <= width else "..." + name[-(width - 3):]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline")
    ap.add_argument("new")
    ap.add_argument("--threshold", type=float, default=10.0, help="allowed median growth in percent")
    a = ap.parse_args(argv)
    try:
        base, new = load(a.baseline), load(a.new)
    except (OSError, ValueError) as e:
        print("bench_compare: cannot read benchmark JSON: %s" % e, file=sys.stderr)
        return 2
    rows, regressions = compare(base, new, a.threshold)
    w = max([len(short(r[0])) for r in rows] + [9])
    print("%-*s  %14s  %14s  %9s  %s" % (w, "benchmark", "baseline med", "new med", "change", "verdict"))
    print("-" * (w + 56))
    for name, b, n, ch, verdict in rows:
        print("%-*s  %14s  %14s  %9s  %s" % (w, short(name), fmt_time(b), fmt_time(n),
                                             "-" if ch is None else "%+.1f%%" % ch, verdict))
    print("-" * (w + 56))
    compared = sum(1 for r in rows if r[3] is not None)
    print("%d compared, %d regression(s) beyond %.0f%% (median time per round; higher is slower)"
          % (compared, regressions, a.threshold))
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
