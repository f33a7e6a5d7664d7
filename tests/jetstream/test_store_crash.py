"""Crash test for FileStore group commit: every acknowledged message survives kill -9.

A child process appends batches and calls sync_async (fdatasync in a worker thread, completion
back on its loop), printing each seq only from the sync callback — exactly what the stream
layer does before sending a PubAck. The test SIGKILLs it at a random moment, reopens the
store and checks that every printed seq is there exactly once with its payload. The same
directory is reused across runs, so recovery after a crash is itself crashed into.
"""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from natsd.jetstream.engine.store import FileStore

CHILD = textwrap.dedent("""
    import queue, random, sys
    from concurrent.futures import ThreadPoolExecutor
    from natsd.jetstream.engine.store import FileStore

    s = FileStore(sys.argv[1], block_size=64 * 1024, compression=sys.argv[2])
    pool = ThreadPoolExecutor(1)
    done_q = queue.SimpleQueue()

    def submit(fn, done):                 # the loop's run_in_worker(fn, done)
        def run():
            try:
                done_q.put((done, fn(), None))
            except Exception as e:
                done_q.put((done, None, e))
        pool.submit(run)

    def acked(seqs):
        sys.stdout.write("".join("%d\\n" % q for q in seqs))
        sys.stdout.flush()

    print("READY", flush=True)
    while True:
        seqs = [s.store_msg(b"crash.%d" % (q % 7), None, b"p%d" % (s.state()["last_seq"] + 1))[0]
                for q in range(random.randint(1, 30))]
        s.sync_async(submit, lambda seqs=seqs: acked(seqs))
        while True:                       # one loop iteration: run finished completions
            try:
                done, r, e = done_q.get_nowait()
            except queue.Empty:
                break
            done(r, e)
""")


def test_acked_messages_survive_sigkill(tmp_path):
    path = str(tmp_path / "store")
    rng = random.Random(os.getpid())
    acked = set()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    for run in range(20):
        comp = "lz4" if run % 3 == 2 else "none"
        p = subprocess.Popen([sys.executable, "-c", CHILD, path, comp], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        try:
            assert p.stdout.readline().strip() == b"READY", p.stderr.read()
            time.sleep(rng.uniform(0.02, 0.25))
        finally:
            p.send_signal(signal.SIGKILL)
            out, err = p.communicate(timeout=10)
        lines = out.split(b"\n")
        printed = [int(x) for x in lines[:-1] if x.strip()]   # the last piece may be partial
        assert len(printed) == len(set(printed)), "a seq was acknowledged twice"
        acked.update(printed)

        s = FileStore(path, block_size=64 * 1024, compression=comp)
        seen = {}
        m = s.load_next(0)
        while m is not None:
            assert m.msg == b"p%d" % m.seq, (m.seq, m.msg)
            seen[m.msg] = seen.get(m.msg, 0) + 1
            m = s.load_next(m.seq + 1)
        missing = [q for q in acked if s.load(q) is None]
        assert not missing, f"run {run}: acknowledged but lost: {sorted(missing)[:10]}"
        assert all(c == 1 for c in seen.values())
        assert s.state()["messages"] == len(seen) >= len(acked)
        s.close()
    assert len(acked) > 100          # the runs really acknowledged something
