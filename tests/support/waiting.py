"""Waiting with a deadline, never with a fixed sleep: `poll` (a plain function, from plain
code), `until` (a plain or async function, from a coroutine) and `run` (a coroutine on a
fresh event loop, cut off after a timeout: the suite has no pytest-asyncio).

poll and until call their condition until it returns a truthy value or the deadline passes,
and return its last value: the caller asserts on it (`assert poll(...)`, or a message built
from the value). Exceptions named in `ignore` count as a falsy answer (a server still
starting, a leader being elected). named_after gives a test made of a scenario (the kit's
on_js_server, compared_on_both, on_linked_pair) the scenario's name."""
import asyncio
import functools
import time


def poll(fn, timeout=5.0, interval=0.01, ignore=()):
    """Call fn until it returns a truthy value or the deadline passes; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except ignore:
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


async def until(cond, timeout=5.0, interval=0.02, ignore=()):
    """Await cond (a function, plain or async) until it is truthy or the deadline passes;
    its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            v = cond()
            if asyncio.iscoroutine(v):
                v = await v
        except ignore:
            v = None
        if v:
            return v
        if loop.time() > deadline:
            return v
        await asyncio.sleep(interval)


def run(target, timeout=90):
    """Run a coroutine on a fresh event loop, failing after `timeout` seconds: `run(coro())`
    runs it now and returns its result; `@run` on an async function (a test, a helper) makes
    a plain function of it that does so on each call."""
    if asyncio.iscoroutine(target):
        return asyncio.run(asyncio.wait_for(target, timeout))

    @functools.wraps(target)
    def wrapper(*args, **kw):
        return asyncio.run(asyncio.wait_for(target(*args, **kw), timeout))
    return wrapper


def named_after(scenario):
    """Decorator: the test function it decorates takes the name, docstring and module of
    `scenario` (not functools.wraps: pytest would read the scenario's arguments as fixtures)."""
    def name(test):
        test.__name__, test.__qualname__ = scenario.__name__, scenario.__qualname__
        test.__doc__, test.__module__ = scenario.__doc__, scenario.__module__
        return test
    return name
