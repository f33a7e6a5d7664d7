"""Slow parts of authentication run off the event loop.

A bcrypt comparison costs 0.1-0.3 s of CPU, an account JWT fetched from a URL resolver a
network round trip; done on the loop either would stall every connection. When authenticating
a CONNECT needs one (an ``OffLoop`` exception: ``natsd.auth.authenticator.SlowCheck``,
``natsd.auth.jwt.resolver.PendingFetch``), the connection stops being read, the work runs on a small
pool of threads (bcrypt and sockets release the GIL), its result is settled on the loop, and
the authentication is run again. At most PER_SOURCE jobs per client address run at a time;
more from the same address wait their turn, so a login storm from one place cannot take
every worker.
"""
import collections
import logging


log = logging.getLogger("natsd")

WORKERS = 2
PER_SOURCE = 1


class OffLoop(Exception):
    """Authentication must wait for work() (run in a worker thread); settle(result) then runs
    on the loop before the authentication is tried again."""

    def work(self):
        raise NotImplementedError

    def settle(self, result):
        raise NotImplementedError


def compare_hash(configured, given):
    try:
        import bcrypt                   # (loaded when a bcrypt password is checked)
        return bcrypt.checkpw(given.encode(), configured.encode())
    except ValueError:              # e.g. a $2x$ hash the bcrypt package does not support
        return False


class AuthWorkers:
    def __init__(self, loop):
        self.loop = loop
        self.pool = None
        self.running = collections.Counter()        # source address -> comparisons running
        self.waiting = collections.defaultdict(collections.deque)

    def check(self, c, source, slow, then):
        """Run `slow` (an OffLoop) off the loop; then() runs on the loop afterwards unless the
        connection closed meanwhile. The connection is not read until then."""
        c.stalled = True
        job = (c, source, slow, then)
        if self.running[source] >= PER_SOURCE:
            self.waiting[source].append(job)
        else:
            self._start(job)

    def _start(self, job):
        c, source, slow, then = job
        self.running[source] += 1
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="natsd-auth")
        fut = self.pool.submit(slow.work)
        fut.add_done_callback(lambda f: self.loop.call_soon_threadsafe(self._done, job, f))

    def _done(self, job, fut):
        c, source, slow, then = job
        self.running[source] -= 1
        if not self.running[source]:
            del self.running[source]
        queue = self.waiting.get(source)
        if queue:
            self._start(queue.popleft())
            if not queue:
                del self.waiting[source]
        if c.closed or c.closing:
            return
        slow.settle(fut.result() if fut.exception() is None else None)
        try:
            then()
        except Exception:
            log.exception("finishing the authentication of cid:%s failed", c.cid)
            c.schedule_close("Internal Error")
        if not c.closed and not c.closing:
            c.resume_reading()

    def shutdown(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
