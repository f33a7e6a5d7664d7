"""A NATS client on a raw socket for the JetStream API tests: the exact bytes go out (subjects
that are not UTF-8, NUL, any header block), replies are matched by their reply subject and
returned as bytes (None when none came)."""
import asyncio


class RawClient:
    """A NATS client on a raw socket: exact bytes out, replies matched by reply subject."""

    def __init__(self):
        self.r = self.w = None
        self.replies = {}
        self.reader_task = None
        self.n = 0
        self.closed = False

    async def connect(self, port):
        self.r, self.w = await asyncio.open_connection("127.0.0.1", port)
        await self.r.readline()                       # INFO
        self.w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
                     b'"protocol":1}\r\nSUB _R.> 1\r\n')
        await self.w.drain()
        self.reader_task = asyncio.ensure_future(self._read())

    async def _read(self):
        try:
            while True:
                line = await self.r.readline()
                if not line:
                    break
                parts = line.rstrip(b"\r\n").split(b" ")
                if parts[0] == b"PING":
                    self.w.write(b"PONG\r\n")
                elif parts[0] in (b"MSG", b"HMSG"):
                    size = int(parts[-1])
                    body = await self.r.readexactly(size + 2)
                    fut = self.replies.get(parts[1])
                    if fut is not None and not fut.done():
                        fut.set_result(body[:-2])
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        self.closed = True
        for fut in self.replies.values():
            if not fut.done():
                fut.set_result(None)

    def send(self, subject, payload, hdr=None):
        self.n += 1
        rep = b"_R.%d" % self.n
        fut = asyncio.get_running_loop().create_future()
        self.replies[rep] = fut
        if hdr:
            self.w.write(b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, rep, len(hdr), len(hdr) + len(payload),
                                                           hdr, payload))
        else:
            self.w.write(b"PUB %s %s %d\r\n%s\r\n" % (subject, rep, len(payload), payload))
        return fut

    async def request(self, subject, payload, hdr=None, timeout=2.0):
        fut = self.send(subject, payload, hdr)
        await self.w.drain()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            return None

    async def close(self):
        if self.reader_task is not None:
            self.reader_task.cancel()
        if self.w is not None:
            self.w.close()
