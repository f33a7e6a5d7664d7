"""nats-py as the tests use it: flush() keeps its promise.

nats-py 2.16's flush() writes its PING straight to the socket (Client._send_ping) while the
commands before it (SUB, UNSUB, PUB) still wait in the client's pending buffer for its flusher
task: the PING reaches the server first, and its PONG no longer says that those commands were
processed. A subscription made and flushed on one connection can then still be missing when
another connection publishes: nats-server answered a request with "no responders" that way
(tests/accounts/test_service_latency.py under a busy CPU: its trace shows the PING read before
the SUBs). order_flush() queues the PING behind the pending commands (as nats.go's Flush
does), so that a flush() once more means that everything sent before it was processed.
tests/conftest.py installs it for the whole run; tests/core/test_flush_order.py checks it.
"""
import asyncio
import inspect

from nats.aio import client as _client


async def _send_ping_in_order(self, future=None):
    if future is None:
        future = asyncio.Future()
    self._pongs.append(future)
    await self._send_command(_client.PING_PROTO)        # behind what is pending
    await self._flush_pending()


def order_flush():
    """Make nats-py's PING (flush, and the keepalive pings) follow the commands before it;
    nothing to do for a nats-py that already queues it."""
    current = _client.Client._send_ping
    if current is _send_ping_in_order:
        return
    if "_transport.write(PING_PROTO)" not in inspect.getsource(current):
        return
    _client.Client._send_ping = _send_ping_in_order
