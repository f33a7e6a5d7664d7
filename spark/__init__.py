"""spark/: PySpark jobs over natsd's benchmark results (see spark/throughput.py)."""
