"""Raft: the consensus under replicated JetStream (the meta group, stream and consumer groups).

- node.py      the state machine: elections, appends, commits, snapshots, membership changes;
               clock, transport and disk injected, so tests run it in a simulated world
- messages.py  its messages and their binary form
- storage.py   the storage contract a node writes through, and its in-memory form
- wal.py       the write-ahead log on the Cython segmented log (natsd/_core/log.pyx)
- group.py     one group on the server's loop: `$NRG.` subjects over routes, timers, syncs

What the groups replicate is natsd/jetstream/replicated/'s.
"""
