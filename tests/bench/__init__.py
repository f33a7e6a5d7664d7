"""tests/bench: natsd-bench (bench/), the corpus writer (tools/corpus.py), tools/bench_compare.py and the Spark job (spark/throughput.py)."""
