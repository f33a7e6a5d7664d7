"""Parser micro-benchmarks: buffers of N PUB/HPUB commands fed through the real C parser
(natsd._core.parser.parse, via Loop.read_conn) on a socketpair, using bench.conftest.ParserDriver.
Each round sends the whole buffer and runs the loop until every message was counted; the
socket syscalls are part of the cost (as in the server). extra_info carries msgs/round so
msgs/s = msgs / mean."""
import pytest

from bench.conftest import pub_buffer

N = 10_000


@pytest.mark.parametrize("size", [0, 16, 128, 1024])
def test_parse_pub_no_interest(benchmark, parser_driver, size):
    """PUB to a subject nobody subscribes to: parse + one cached (empty) lookup per message."""
    buf = pub_buffer(N, size=size)
    benchmark.extra_info.update(msgs=N, bytes=len(buf))
    benchmark(parser_driver.feed, buf, N)


def test_parse_pub_with_reply(benchmark, parser_driver):
    buf = pub_buffer(N, size=128, reply=b"_INBOX.abcdefghij.1")
    benchmark.extra_info.update(msgs=N, bytes=len(buf))
    benchmark(parser_driver.feed, buf, N)


def test_parse_hpub(benchmark, parser_driver):
    hdr = b"NATS/1.0\r\nX-Bench: 1\r\n\r\n"
    buf = pub_buffer(N, size=128, hdr=hdr)
    benchmark.extra_info.update(msgs=N, bytes=len(buf))
    benchmark(parser_driver.feed, buf, N)


def test_parse_mixed_subjects(benchmark, parser_driver):
    """Alternating subjects defeat the per-connection last-subject cache (sublist cache still hits)."""
    buf = b"".join(pub_buffer(1, subject=b"bench.s%d" % (i % 16), size=16) for i in range(N))
    benchmark.extra_info.update(msgs=N, bytes=len(buf))
    benchmark(parser_driver.feed, buf, N)


def test_parse_ping(benchmark, parser_driver):
    """PING/PONG: parse in C, PONG queued and flushed back through the socketpair."""
    n = N
    # PINGs are not counted as in_msgs; end each buffer with one PUB so feed() knows it is done.
    buf = b"PING\r\n" * n + pub_buffer(1, size=0)
    sink = []

    def run():
        parser_driver.feed(buf, 1)
        # drain the PONGs so the peer's receive buffer never fills
        while True:
            try:
                d = parser_driver._peer.recv(1 << 20)
            except BlockingIOError:
                break
            if not d:
                break
            sink.append(len(d))

    benchmark.extra_info.update(msgs=n, bytes=len(buf))
    benchmark(run)


@pytest.mark.parametrize("nsubs", [1, 4])
def test_parse_pub_deliver(benchmark, parser_driver, nsubs):
    """PUB parsed and routed to nsubs client subscriptions: MSG framing + flush to their sockets."""
    for _ in range(nsubs):
        parser_driver.add_subscriber(b"bench.sub")
    buf = pub_buffer(N, size=128)
    benchmark.extra_info.update(msgs=N, bytes=len(buf), deliveries=N * nsubs)
    benchmark(parser_driver.feed, buf, N)
    c0 = parser_driver.sinks[0][0]
    assert c0.out_msgs >= N
