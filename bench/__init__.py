"""natsd micro-benchmarks (pytest-benchmark): the C parser driven through a socketpair, the
sublist, and router.publish() fan-out. Owned by bench/; run with `make bench`. Not collected by
the normal `pytest` run (testpaths = ["tests"])."""
