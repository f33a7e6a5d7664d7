"""Early writeback (natsd/_core/log.pyx, "Early writeback"): a log that is not synced for every
append starts the writeback of each further WRITEBACK_STEP bytes of its active block with
sync_file_range, so the fdatasync that seals a full block has little left to write on the loop
thread. A log synced for every append (zero_ahead: the Raft WAL, a stream that acknowledges
after its sync) never does.

The system calls are read with strace from a child process that fills the stores.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from natsd.jetstream.engine.store import FileStore

STEP = 1 << 20
RECORD = b"x" * 1000

FILL = r"""
import sys
from natsd.jetstream.engine.store import FileStore
record = b"x" * 1000
for name, zero_ahead, batched in (("lazy", False, False), ("lazy-batched", False, True),
                                  ("synced", True, False)):
    ready = []
    s = FileStore(sys.argv[1] + "/" + name, block_size=4 << 20, zero_ahead=zero_ahead,
                  call_soon=(lambda fn, *a: ready.append((fn, a))) if batched else None)
    for i in range(10000):                  # about 10 MB: two full blocks and part of a third
        s.store_msg(b"w.%d" % (i % 7), None, record)
        for fn, a in ready:
            fn(*a)
        del ready[:]
    s.close()
"""


def test_writeback_bookkeeping_follows_the_active_block(tmp_path):
    """Advanced in steps of at least WRITEBACK_STEP bytes, back to the start of each new block;
    never for a zero_ahead log."""
    lazy = FileStore(tmp_path / "lazy", block_size=2 << 20)
    synced = FileStore(tmp_path / "synced", block_size=2 << 20, zero_ahead=True)
    seen = []
    for i in range(5000):
        lazy.store_msg(b"w", None, RECORD)
        synced.store_msg(b"w", None, RECORD)
        if not seen or lazy.log.writeback_to != seen[-1]:
            seen.append(lazy.log.writeback_to)
    assert synced.log.writeback_to == 0
    steps = [b - a for a, b in zip(seen, seen[1:]) if b > a]
    assert steps and all(STEP <= s < STEP + 2 * len(RECORD) for s in steps), seen
    assert 0 in seen[1:], "a new block starts its writeback from the beginning: %s" % seen
    lazy.close()
    synced.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_lazy_logs_start_writeback_and_synced_logs_do_not(tmp_path):
    trace = tmp_path / "trace"
    subprocess.run(["strace", "-f", "-y", "-e", "trace=sync_file_range", "-o", str(trace),
                    sys.executable, "-c", FILL, str(tmp_path)], check=True, timeout=120,
                   env=dict(os.environ, PYTHONPATH=os.getcwd()))
    calls = {}
    for line in trace.read_text().splitlines():
        m = re.search(r"sync_file_range\(\d+<([^>]+)>, (\d+), (\d+), SYNC_FILE_RANGE_WRITE\) = 0", line)
        if m:
            store = os.path.basename(os.path.dirname(m.group(1)))
            calls.setdefault(store, []).append((os.path.basename(m.group(1)), int(m.group(2)),
                                                int(m.group(3))))
    assert "synced" not in calls, calls
    for store in ("lazy", "lazy-batched"):
        got = calls.get(store, [])
        blocks = sorted({blk for blk, _, _ in got})
        assert len(blocks) == 3, got                # each of the three blocks, full or not
        for blk in blocks:
            ranges = [(off, n) for b, off, n in got if b == blk]
            if blk != "3.blk":              # a full block of 4 MiB: at 1, 2 and 3 MiB
                assert len(ranges) == 3, got
            assert ranges[0][0] == 0 and all(n >= STEP for _, n in ranges), ranges
            # contiguous: each call starts where the last one ended
            assert all(off == prev + n for (prev, n), (off, _) in zip(ranges, ranges[1:])), ranges
