"""bench/fastclient.py: a small raw-socket NATS client for natsd-bench's core modes.

Owns: the core `pub`, `sub`, `service serve` and `service request` workers. nats-py is not used
here: at hundreds of thousands of messages per second its per-message asyncio machinery is the
bottleneck. Instead:

* publishers build PUB frames in large batches (`frame * n`, one bytes object of ~256 KiB) and
  hand them to `socket.sendall`; a PING is written every few MiB and the PONGs are collected
  without blocking, so at most a few MiB are in flight; the run ends with a PING/PONG flush;
* subscribers recv() 1 MiB at a time and walk MSG/HMSG frames with `bytes.find` plus a
  fast path for frames whose control line equals the previous one (a single `startswith`);
* requesters do synchronous request/reply on one wildcard inbox subscription.

Every worker returns a ClientResult (count, bytes, start/end on perf_counter, latency samples in
seconds, error text and `partial` when the connection failed before the expected count).
A payload of >= 10 bytes carries b"NB" + an 8-byte time.time_ns() stamp (one stamp per batch),
so subscribers can sample end-to-end latency when the publisher is natsd-bench.
"""
import json
import os
import select
import socket
import struct
import threading
import time
from urllib.parse import urlparse

STAMP_MAGIC = b"NB"
STAMP = struct.Struct("<Q")
RECV_CHUNK = 1 << 20
BATCH_BYTES = 256 * 1024
PING_EVERY = 4 * 1024 * 1024       # bytes written between two PINGs
MAX_PINGS_OUT = 4                   # at most this many unanswered PINGs (~16 MiB in flight)


class BenchError(Exception):
    """A connection or protocol failure, with a message meant for the user."""


class ClientResult:
    __slots__ = ("client", "expected", "msgs", "bytes", "start", "end", "latencies", "error", "partial")

    def __init__(self, client, expected):
        self.client = client
        self.expected = expected
        self.msgs = 0
        self.bytes = 0
        self.start = None
        self.end = None
        self.latencies = []     # seconds, per message (or per batch, divided by its size)
        self.error = None
        self.partial = False

    @property
    def duration(self):
        if self.start is None or self.end is None:
            return 0.0
        return max(self.end - self.start, 1e-9)

    def fail(self, err):
        self.error = str(err)
        self.partial = self.msgs < self.expected
        if self.end is None:
            self.end = time.perf_counter()
        if self.start is None:
            self.start = self.end


def parse_url(url):
    """nats://[user:pass@|token@]host[:port] (also a bare host:port) -> (host, port, auth dict)."""
    url = url.split(",")[0].strip()
    if "://" not in url:
        url = "nats://" + url
    u = urlparse(url)
    auth = {}
    if u.username and u.password is not None:
        auth = {"user": u.username, "pass": u.password}
    elif u.username:
        auth = {"auth_token": u.username}
    return u.hostname or "127.0.0.1", u.port or 4222, auth


def make_payload(size, stamp=True):
    """size bytes; when >= 10 bytes and stamp, b"NB" + time_ns + filler."""
    if stamp and size >= 10:
        return STAMP_MAGIC + STAMP.pack(time.time_ns()) + b"x" * (size - 10)
    return b"x" * size


def read_stamp(payload_view):
    """The time_ns stamp in a payload or None."""
    if len(payload_view) >= 10 and payload_view[:2] == STAMP_MAGIC:
        return STAMP.unpack_from(payload_view, 2)[0]
    return None


class RawConn:
    """One NATS connection on a blocking socket: handshake, writes, and a receive buffer."""

    def __init__(self, url, name="natsd-bench", timeout=5.0):
        self.url = url
        host, port, auth = parse_url(url)
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise BenchError("cannot connect to %s: %s" % (url, e.strerror or e)) from None
        s = self.sock
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, 4 * 1024 * 1024)
            except OSError:
                pass
        self.buf = b""
        self.pongs = 0
        line = self.read_line(timeout)
        if not line.startswith(b"INFO "):
            raise BenchError("%s: expected INFO, got %r" % (url, line[:80]))
        self.info = json.loads(line[5:])
        connect = {"verbose": False, "pedantic": False, "lang": "python", "version": "natsd-bench",
                   "protocol": 1, "headers": True, "no_responders": True, "name": name, "echo": True}
        connect.update(auth)
        self.sendall(b"CONNECT " + json.dumps(connect, separators=(",", ":")).encode() + b"\r\nPING\r\n")
        self.wait_pong(timeout)

    # -- low level -----------------------------------------------------------------------------
    def sendall(self, data):
        try:
            self.sock.sendall(data)
        except (OSError, socket.timeout) as e:
            raise BenchError("connection to %s lost: %s" % (self.url, e.strerror or e)) from None

    def _recv(self, timeout):
        self.sock.settimeout(timeout)
        try:
            d = self.sock.recv(RECV_CHUNK)
        except socket.timeout:
            raise BenchError("timeout waiting for %s" % self.url) from None
        except OSError as e:
            raise BenchError("connection to %s lost: %s" % (self.url, e.strerror or e)) from None
        if not d:
            raise BenchError("connection to %s closed by the server" % self.url)
        return d

    def read_line(self, timeout=5.0):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self.buf += self._recv(timeout)

    def _control(self, line):
        """Handle a non-MSG control line from the server."""
        if line == b"PONG":
            self.pongs += 1
        elif line == b"PING":
            self.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise BenchError("server error: %s" % line[5:].decode("utf-8", "replace").strip())
        # +OK and INFO are ignored

    def wait_pong(self, timeout=10.0, target=None):
        """Read control lines until pongs reaches target (default: one more than now)."""
        target = self.pongs + 1 if target is None else target
        while self.pongs < target:
            self._control(self.read_line(timeout))

    def poll_control(self):
        """Consume whatever the server sent without blocking (PONGs, PINGs, -ERR)."""
        while True:
            r, _, _ = select.select([self.sock], [], [], 0)
            if not r:
                break
            self.buf += self._recv(1.0)
        while True:
            i = self.buf.find(b"\r\n")
            if i < 0:
                return
            line, self.buf = self.buf[:i], self.buf[i + 2:]
            self._control(line)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def pub_subjects(subject, multisubject, multisubject_max, offset, count):
    """The subject of message offset+i (nats bench: subject.<n % max> with --multisubject)."""
    if not multisubject:
        return None
    m = multisubject_max or 0
    return [("%s.%d" % (subject, (offset + i) % m if m else offset + i)).encode() for i in range(count)]


def run_publisher(url, client, subject, count, size, sleep=0.0, multisubject=False, multisubject_max=100_000,
                  offset=0, start_event=None, progress=None, name="natsd-bench", stop=None):
    """Publish `count` messages of `size` bytes; returns a ClientResult."""
    res = ClientResult(client, count)
    try:
        conn = RawConn(url, name=name)
    except BenchError as e:
        res.fail(e)
        return res
    try:
        if start_event is not None:
            start_event.wait()
        subj = subject.encode()
        per = max(1, min(count or 1, BATCH_BYTES // (size + len(subj) + 24)))
        if sleep > 0:
            per = 1
        res.start = time.perf_counter()
        sent = 0
        since_ping = 0
        pings_out_base = conn.pongs
        pings_sent = 0
        frame_len = 0
        while sent < count:
            if stop is not None and stop.is_set():
                raise BenchError("interrupted")
            n = min(per, count - sent)
            payload = make_payload(size)
            if multisubject:
                subs = pub_subjects(subject, True, multisubject_max, offset + sent, n)
                buf = b"".join(b"PUB %s %d\r\n%s\r\n" % (s, size, payload) for s in subs)
            else:
                frame = b"PUB %s %d\r\n%s\r\n" % (subj, size, payload)
                frame_len = len(frame)
                buf = frame * n
            t0 = time.perf_counter()
            conn.sendall(buf)
            t1 = time.perf_counter()
            res.latencies.append((t1 - t0) / n)
            sent += n
            res.msgs = sent
            res.bytes = sent * size
            since_ping += len(buf)
            if since_ping >= PING_EVERY:
                since_ping = 0
                conn.sendall(b"PING\r\n")
                pings_sent += 1
                conn.poll_control()
                # bound the data in flight: wait for the oldest outstanding PONG
                if pings_sent - (conn.pongs - pings_out_base) > MAX_PINGS_OUT:
                    conn.wait_pong(timeout=30.0, target=pings_out_base + pings_sent - MAX_PINGS_OUT)
            if progress is not None:
                progress(client, sent)
            if sleep > 0:
                time.sleep(sleep)
        # flush: every PUB is processed by the server once this PONG arrives
        conn.sendall(b"PING\r\n")
        pings_sent += 1
        conn.wait_pong(timeout=60.0, target=pings_out_base + pings_sent)
        res.end = time.perf_counter()
        del frame_len
    except BenchError as e:
        res.fail(e)
    finally:
        conn.close()
    return res


class _Sub:
    """A subscription reading MSG/HMSG frames off a RawConn."""

    def __init__(self, conn, subject, sid=b"1", queue=None):
        self.conn = conn
        self.sid = sid
        q = b" " + queue.encode() if queue else b""
        conn.sendall(b"SUB %s%s %s\r\nPING\r\n" % (subject.encode(), q, sid))
        conn.wait_pong()

    def frames(self, timeout):
        """Yield lists of (subject, reply, payload) for every complete message in the next recv."""
        raise NotImplementedError


def scan_msgs(buf, pos, on_msg=None, on_control=None):
    """Walk complete MSG/HMSG frames in buf from pos.

    Returns (new_pos, count, payload_bytes, last_payload_slice_bounds). on_msg(subject, reply, payload)
    is called per message when given (slow path); otherwise only counted. on_control(line) for
    anything else."""
    n = 0
    nbytes = 0
    last = None
    end_all = len(buf)
    prev_line = None
    prev_len = 0
    prev_psize = 0
    prev_pstart = 0
    while pos < end_all:
        if prev_line is not None and on_msg is None and buf.startswith(prev_line, pos):
            end = pos + prev_len
            if end > end_all:
                break
            last = (pos + prev_pstart, pos + prev_pstart + prev_psize)
            pos = end
            n += 1
            nbytes += prev_psize
            continue
        i = buf.find(b"\r\n", pos)
        if i < 0:
            break
        c0 = buf[pos]
        if c0 == 77 or c0 == 109:                       # MSG
            parts = buf[pos + 4:i].split()
            psize = int(parts[-1])
            hdr = 0
            pstart = i + 2
            end = pstart + psize + 2
            if end > end_all:
                break
            if on_msg is not None:
                reply = parts[2] if len(parts) == 4 else None
                on_msg(parts[0], reply, buf[pstart:pstart + psize])
            prev_line = buf[pos:i + 2]
            prev_len = end - pos
            prev_psize = psize
            prev_pstart = pstart - pos
            last = (pstart, pstart + psize)
            pos = end
            n += 1
            nbytes += psize - hdr
        elif c0 == 72 or c0 == 104:                     # HMSG subj sid [reply] hdrlen total
            parts = buf[pos + 5:i].split()
            total = int(parts[-1])
            hlen = int(parts[-2])
            pstart = i + 2
            end = pstart + total + 2
            if end > end_all:
                break
            if on_msg is not None:
                reply = parts[2] if len(parts) == 5 else None
                on_msg(parts[0], reply, buf[pstart + hlen:pstart + total])
            prev_line = None
            last = (pstart + hlen, pstart + total)
            pos = end
            n += 1
            nbytes += total - hlen
        else:
            if on_control is not None:
                on_control(buf[pos:i])
            prev_line = None
            pos = i + 2
    return pos, n, nbytes, last


def _subscribed(url, client, subject, queue, name, ready, res):
    """Connect and subscribe for a receiving client, then signal `ready`; on a connection
    failure record it in `res`, signal `ready` anyway (the run must not wait) and return None."""
    try:
        conn = RawConn(url, name=name)
    except BenchError as e:
        res.fail(e)
        if ready is not None:
            ready(client)
        return None
    try:
        _Sub(conn, subject, queue=queue)
    except (BenchError, OSError) as e:
        res.fail(e)
        conn.close()
        conn = None
    if ready is not None:
        ready(client)
    return conn


def run_subscriber(url, client, subject, count, ready=None, progress=None, idle_timeout=None, name="natsd-bench",
                   stop=None, queue=None):
    """Receive `count` messages on subject; timing starts at the first message."""
    res = ClientResult(client, count)
    conn = _subscribed(url, client, subject, queue, name, ready, res)
    if conn is None:
        return res
    try:
        buf = conn.buf
        conn.buf = b""
        got = 0
        nbytes = 0
        sock = conn.sock
        lat = res.latencies
        while got < count:
            if stop is not None and stop.is_set():
                raise BenchError("interrupted")
            if buf:
                pos, n, b, last = scan_msgs(buf, 0, on_control=conn._control)
                if n:
                    now = time.perf_counter()
                    if res.start is None:
                        res.start = now
                    got += n
                    nbytes += b
                    res.msgs = got
                    res.bytes = nbytes
                    if last is not None:
                        ts = read_stamp(memoryview(buf)[last[0]:last[1]])
                        if ts is not None:
                            lat.append(max(0, time.time_ns() - ts) / 1e9)
                    if progress is not None:
                        progress(client, got)
                buf = buf[pos:]
                if got >= count:
                    break
            timeout = idle_timeout if (idle_timeout and res.start is not None) else None
            if timeout is None and res.start is None and idle_timeout:
                timeout = None      # wait for the first message as long as needed
            sock.settimeout(timeout if timeout is not None else 1.0)
            try:
                d = sock.recv(RECV_CHUNK)
            except socket.timeout:
                if timeout is not None:
                    raise BenchError("no message for %.1fs (got %d of %d)" % (timeout, got, count)) from None
                continue
            except OSError as e:
                raise BenchError("connection to %s lost: %s" % (url, e.strerror or e)) from None
            if not d:
                raise BenchError("connection to %s closed by the server" % url)
            buf = buf + d if buf else d
        res.end = time.perf_counter()
    except BenchError as e:
        res.fail(e)
    finally:
        conn.close()
    return res


def run_requester(url, client, subject, count, size, sleep=0.0, start_event=None, progress=None,
                  name="natsd-bench", stop=None, timeout=5.0):
    """Synchronous request/reply: one request in flight; latency = round-trip per request."""
    res = ClientResult(client, count)
    try:
        conn = RawConn(url, name=name)
    except BenchError as e:
        res.fail(e)
        return res
    try:
        inbox = "_INBOX.%s" % os.urandom(8).hex()
        _Sub(conn, inbox + ".*", sid=b"1")
        if start_event is not None:
            start_event.wait()
        subj = subject.encode()
        ib = inbox.encode()
        payload = b"x" * size
        buf = b""
        sock = conn.sock
        sock.settimeout(timeout)
        res.start = time.perf_counter()
        got_reply = [False]

        def on_msg(_s, _r, _p):
            got_reply[0] = True

        for i in range(count):
            if stop is not None and stop.is_set():
                raise BenchError("interrupted")
            t0 = time.perf_counter()
            conn.sendall(b"PUB %s %s.%d %d\r\n%s\r\n" % (subj, ib, i, size, payload))
            got_reply[0] = False
            while not got_reply[0]:
                try:
                    d = sock.recv(RECV_CHUNK)
                except socket.timeout:
                    raise BenchError("request %d timed out after %.0fs (is a service running on %r?)"
                                     % (i + 1, timeout, subject)) from None
                except OSError as e:
                    raise BenchError("connection to %s lost: %s" % (url, e.strerror or e)) from None
                if not d:
                    raise BenchError("connection to %s closed by the server" % url)
                buf += d
                pos, _n, _b, _l = scan_msgs(buf, 0, on_msg=on_msg, on_control=conn._control)
                buf = buf[pos:]
            res.latencies.append(time.perf_counter() - t0)
            res.msgs = i + 1
            res.bytes += size
            if progress is not None:
                progress(client, i + 1)
            if sleep > 0:
                time.sleep(sleep)
        res.end = time.perf_counter()
    except BenchError as e:
        res.fail(e)
    finally:
        conn.close()
    return res


def run_server(url, client, subject, size=None, ready=None, stop=None, name="natsd-bench",
               queue="bench-service", sleep=0.0):
    """A queue-group responder: answers every request on subject until stop is set or the
    connection ends. Replies echo the request payload (or `size` bytes when given)."""
    res = ClientResult(client, 0)
    conn = _subscribed(url, client, subject, queue, name, ready, res)
    if conn is None:
        return res
    try:
        sock = conn.sock
        buf = conn.buf
        conn.buf = b""
        fixed = b"x" * size if size is not None else None
        out = []

        def on_msg(_s, reply, payload):
            if reply:
                p = fixed if fixed is not None else payload
                out.append(b"PUB %s %d\r\n%s\r\n" % (reply, len(p), p))

        sock.settimeout(0.2)
        while stop is None or not stop.is_set():
            if buf:
                pos, n, b, _ = scan_msgs(buf, 0, on_msg=on_msg, on_control=conn._control)
                buf = buf[pos:]
                if n:
                    if res.start is None:
                        res.start = time.perf_counter()
                    res.msgs += n
                    res.bytes += b
                    if sleep > 0:
                        time.sleep(sleep)
                if out:
                    conn.sendall(b"".join(out))
                    out.clear()
            try:
                d = sock.recv(RECV_CHUNK)
            except socket.timeout:
                continue
            except OSError as e:
                raise BenchError("connection to %s lost: %s" % (url, e.strerror or e)) from None
            if not d:
                raise BenchError("connection to %s closed by the server" % url)
            buf += d
        res.end = time.perf_counter()
    except BenchError as e:
        res.fail(e)
        res.partial = False
    finally:
        conn.close()
    return res


def run_threads(target, argsets):
    """Run target(**kw) for each kw in argsets on its own thread; returns the results in order."""
    results = [None] * len(argsets)

    def wrap(i, kw):
        try:
            results[i] = target(**kw)
        except BaseException as e:        # never lose a client's result
            r = ClientResult(kw.get("client", i + 1), kw.get("count", 0))
            r.fail("%s: %s" % (type(e).__name__, e))
            results[i] = r

    threads = [threading.Thread(target=wrap, args=(i, kw), daemon=True) for i, kw in enumerate(argsets)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return results
