"""JetStream, in two rooms:

- engine/      the single-server engine: streams, consumers, the store contract and its two
               stores, the `$JS.API` handlers, KV and object-store semantics (rollups, direct
               get, TTL markers), counters, batches, schedules, mirrors and sources, snapshots,
               encryption at rest, advisories; and JetStream's own Cython (pending acks, the
               delivery fast path, plain acks)
- replicated/  the replicated layer on a cluster: the meta group, replicated streams and
               consumers, consumer groups, placement and peer selection, catch-up, group
               snapshots, forwarding during a hand-off, scaling and moves, listings

The engine knows the replicated layer only through what it declares (engine/clustering.py);
the replicated layer drives the engine through its streams, consumers and stores.
"""
