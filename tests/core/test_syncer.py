"""natsd/_core/syncer.pyx: group-commit fdatasyncs on GIL-free threads, their results back on
the loop thread through an eventfd and drain(); or run at once (run_here) when the loop is idle.
Real files and real fdatasyncs; a pipe stands in for a file whose sync fails (EINVAL)."""
import errno
import os
import select
import socket
import time

import pytest

from natsd._core import syncer
from natsd._core.loop import Loop


@pytest.fixture
def wake():
    fd = os.eventfd(0, os.EFD_NONBLOCK)
    syncer.set_wake_fd(fd)
    yield fd
    os.close(fd)


def job_on(path):
    """A SyncJob over a dup of a file that has unsynced data, as Log._start_sync makes one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, b"x" * 100)
    job = syncer.SyncJob(os.dup(fd), -1)
    os.close(fd)
    return job


def drain_until(wake, results, n, timeout=10):
    deadline = time.monotonic() + timeout
    while len(results) < n:
        left = deadline - time.monotonic()
        assert left > 0, "sync callbacks did not come: %r" % results
        waiter = select.poll()                  # not select(): descriptors may be past 1024
        waiter.register(wake, select.POLLIN)
        waiter.poll(left * 1000)
        try:
            os.eventfd_read(wake)
        except BlockingIOError:
            pass
        syncer.drain()


def test_threads_sync_and_report_back_through_drain(tmp_path, wake):
    results = []
    for i in range(20):
        syncer.submit(job_on(tmp_path / ("f%d" % (i % 3))), lambda r, exc, i=i: results.append((i, r, exc)))
    assert syncer.in_flight() == 20 - len(results)
    drain_until(wake, results, 20)
    assert sorted(results) == [(i, None, None) for i in range(20)]
    assert syncer.in_flight() == 0
    assert syncer.average_ns() > 0


def test_a_failing_sync_reports_its_errno(tmp_path, wake):
    r, w = os.pipe()
    results = []
    syncer.submit(syncer.SyncJob(r, w), lambda res, exc: results.append(exc))
    drain_until(wake, results, 1)
    assert isinstance(results[0], OSError) and results[0].errno == errno.EINVAL
    for fd in (r, w):                   # the job closed both descriptors
        with pytest.raises(OSError):
            os.fstat(fd)


def test_run_here_and_direct_call(tmp_path, wake):
    got = []
    syncer.run_here(job_on(tmp_path / "a"), lambda r, exc: got.append(exc))
    assert got == [None]
    r, w = os.pipe()
    syncer.run_here(syncer.SyncJob(r, w), lambda res, exc: got.append(exc))
    assert got[1].errno == errno.EINVAL
    job = job_on(tmp_path / "b")
    job()                               # what a plain executor does with it
    with pytest.raises(RuntimeError):
        job()                           # its descriptors are gone: never twice
    with pytest.raises(RuntimeError):
        syncer.submit(job, lambda r, exc: None)


class Reader:
    def on_event(self, events):
        pass


def test_loop_runs_a_sync_inline_only_when_idle(tmp_path):
    loop = Loop()                       # sets the syncer's wake fd to its eventfd
    got = []
    quick = syncer.average_ns() < 500_000
    loop.submit(job_on(tmp_path / "a"), lambda r, exc: got.append(("first", exc)))
    if quick:                           # idle loop, quick disk: done before submit returned
        assert got == [("first", None)]
    else:                               # a slow disk: a thread's job, the loop stays free
        assert got == [] and syncer.in_flight() == 1
        while not got:
            time.sleep(0.001)
            syncer.drain()
    # a socket with input waiting: the loop is not idle, the sync goes to a thread
    a, b = socket.socketpair()
    loop.add_handler(a.fileno(), Reader())
    b.send(b"ping")
    loop.submit(job_on(tmp_path / "b"), lambda r, exc: got.append(("second", exc)))
    assert ("second", None) not in got
    assert syncer.in_flight() == 1
    deadline = time.monotonic() + 10
    while ("second", None) not in got:  # what the loop does each iteration
        assert time.monotonic() < deadline
        time.sleep(0.001)
        syncer.drain()
    assert syncer.in_flight() == 0
    a.close()
    b.close()
