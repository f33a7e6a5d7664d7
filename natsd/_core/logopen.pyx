# cython: language_level=3, boundscheck=False, wraparound=True
"""Opening a Log (natsd/_core/log.pyx) on its directory, and what its clean close writes.

open_log builds the Log's state, then reads back what the directory holds: blocks not under
the log's current key are rewritten first (logrecover.convert_blocks), the index comes from
the index snapshot when it matches the blocks (logsnap.load_snapshot) or else from a scan of
every block (logrecover.rebuild), and the log takes up where the blocks end (Log.recovered:
the sequence floor, a configured first sequence). The Log is given the snapshot writer
(logsnap.write_snapshot) that its close() calls.

log.pyx is the log's state and its operations; recovery and the snapshot are how that state
comes from and goes to disk at the edges, so they import the Log and it imports neither.
"""
from natsd._core.log cimport Log
from natsd._core import logrecover, logsnap


def open_log(path, block_size=8 * 1024 * 1024, compression="none", first_seq=0, crypt=None,
             call_soon=None, sync_marks=True, zero_ahead=False):
    """The Log of directory `path`, opened (created when new). The settings are Log's (see
    log.pyx); first_seq: a new log's first sequence."""
    cdef Log lg = Log(path, block_size, compression, crypt, call_soon, sync_marks, zero_ahead)
    converted = logrecover.convert_blocks(lg)
    if not logsnap.load_snapshot(lg, not converted):
        logrecover.rebuild(lg)
    lg.recovered(first_seq)
    lg.snapshot_writer = logsnap.write_snapshot
    return lg
