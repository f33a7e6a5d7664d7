"""The loop's polling window (`Loop._wait` in natsd/_core/loop.pyx): after an iteration with
events the loop polls for a while before it sleeps. The window grows while the next event
comes within the longest window, shrinks to nothing when the gaps are longer, and stays shut
when polling is off (NATSD_POLL_US=0). The longest window is set far above or far below the
gaps used, so a loaded machine cannot flip an outcome. A bad NATSD_POLL_US stops natsd from
starting, with a clear refusal."""
import contextlib
import os
import socket
import subprocess
import sys
import threading

import pytest

from natsd._core.loop import Loop
from tests.support.rawclient import RawClient

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.got = 0

    def on_event(self, events):
        self.got += len(self.sock.recv(100))


def serve_one(loop, reader, sender, delay):
    """Send one byte `delay` seconds from now and step the loop until it has been read."""
    before = reader.got
    t = threading.Timer(delay, sender.send, (b"x",))
    t.start()
    while reader.got == before:
        loop.run_one()
    t.join()


@contextlib.contextmanager
def loop_with_reader(poll_us=None):
    """A loop (default or given longest window) watching one end of a socket pair:
    -> (loop, the other end to send on, the Reader)."""
    loop = Loop() if poll_us is None else Loop(poll_us)
    a, b = socket.socketpair()
    reader = Reader(a)
    loop.add_handler(a.fileno(), reader)
    try:
        yield loop, b, reader
    finally:
        loop.remove_handler(a.fileno())
        a.close()
        b.close()
        loop.close()


def test_window_grows_with_short_gaps_and_shuts_with_long_ones():
    with loop_with_reader() as (loop, b, reader):
        loop.poll_max = 10.0                # every gap below counts as short
        assert loop.poll_window == 0
        windows = []
        for _ in range(5):
            serve_one(loop, reader, b, 0.002)
            windows.append(loop.poll_window)
        assert windows[-1] > 0
        assert windows == sorted(windows)   # it never shrank on a short gap
        loop.poll_max = 1e-4                # now every gap below is long
        for _ in range(12):
            serve_one(loop, reader, b, 0.02)
        assert loop.poll_window == 0
        assert reader.got == 17             # polling or sleeping, every event was handled


def test_polling_off():
    with loop_with_reader(0) as (loop, b, reader):
        assert loop.poll_max == 0
        for _ in range(4):
            serve_one(loop, reader, b, 0.002)
        assert loop.poll_window == 0
        assert reader.got == 4


def test_default_longest_window():
    loop = Loop()
    try:
        assert loop.poll_max == 200e-6
    finally:
        loop.close()


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError):
        Loop(-1)


def natsd_env(poll):
    return dict(os.environ, NATSD_POLL_US=poll,
                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("bad", ["abc", "-5", "1.5", "", "2000000"])
def test_a_bad_environment_value_stops_natsd(bad):
    r = subprocess.run([sys.executable, "-m", "natsd", "-p", "-1"], env=natsd_env(bad),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == "natsd: NATSD_POLL_US=%r: want whole microseconds from 0 to 1000000\n" % bad


def test_polling_off_from_the_environment_serves(natsd):
    srv = natsd(env=natsd_env("0"))
    c = RawClient(srv.port).connect()
    assert c.sync() == b""
    c.close()
