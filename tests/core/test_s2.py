"""The S2 codec (natsd/_core/s2.pyx): blocks and the framing format, round trips of many
shapes of data, feeding in pieces, corrupt streams refused, and Snappy's reference
implementation (cramjam) reading our blocks and frames and writing ones we read."""
import os
import random

import pytest

from natsd._core.s2 import S2Codec, compress_block, decompress_block

LEVELS = ["uncompressed", "fast", "better", "best"]


def shapes(seed):
    rnd = random.Random(seed)
    yield b""
    yield b"x"
    yield os.urandom(rnd.randint(1, 70000))
    yield bytes(rnd.choice(b"ab") for _ in range(rnd.randint(1000, 200000)))
    yield (b"PUB subject.%d 128\r\n" % rnd.randint(0, 9)) * rnd.randint(10, 50000)
    yield b"\x00" * rnd.randint(1, (1 << 20) + 100)          # past one block
    words = [os.urandom(rnd.randint(1, 20)) for _ in range(50)]
    yield b"".join(rnd.choice(words) for _ in range(rnd.randint(1, 30000)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", LEVELS)
def test_round_trip(seed, level):
    for data in shapes(seed):
        if level != "uncompressed":
            assert decompress_block(compress_block(data, level)) == data
        wire = S2Codec(level).encode_bytes(data)
        assert wire[:10] == b"\xff\x06\x00\x00S2sTwO"
        assert S2Codec().decode_bytes(wire) == data


@pytest.mark.parametrize("seed", range(3))
def test_fed_in_pieces(seed):
    rnd = random.Random(seed)
    enc = S2Codec("fast")
    parts = [bytes(rnd.choice(b"abc") for _ in range(rnd.randint(0, 5000))) for _ in range(20)]
    wire = b"".join(enc.encode_bytes(p) for p in parts)
    dec = S2Codec()
    out = b""
    i = 0
    while i < len(wire):
        k = rnd.randint(1, 300)
        out += dec.decode_bytes(wire[i:i + k])
        i += k
    assert out == b"".join(parts)


def test_repetitive_data_compresses():
    data = b"RMSG $G orders.created _INBOX.abc 128\r\n" * 10000
    wire = S2Codec("fast").encode_bytes(data)
    assert len(wire) < len(data) // 10


@pytest.mark.parametrize("bad,why", [
    (b"\xff\x06\x00\x00XXXXXX", "s2: corrupt input"),                   # wrong stream id
    (b"\x00\x08\x00\x00\x00\x00\x00\x00\x05abc", "s2: corrupt input"),  # data before the id
    (b"\xff\x06\x00\x00S2sTwO\x05\x01\x00\x00x", "s2: unsupported input"),   # reserved chunk
    (b"\xff\x06\x00\x00S2sTwO\x01\x05\x00\x00\x00\x00\x00\x00x", "s2: corrupt input, crc mismatch"),
    (b"\xff\x06\x00\x00S2sTwO\x00\x07\x00\x00\x00\x00\x00\x00\x05\x08a", "s2: corrupt input"),
])
def test_corrupt_streams_are_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        S2Codec().decode_bytes(bad)


def test_garbage_never_crashes():
    rnd = random.Random(5)
    good = S2Codec("fast").encode_bytes(b"hello world " * 1000)
    for _ in range(300):
        b = bytearray(good)
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        try:
            S2Codec().decode_bytes(bytes(b))
        except ValueError:
            pass


def test_skippable_chunks_are_skipped():
    wire = S2Codec("fast").encode_bytes(b"abc")
    padded = wire[:10] + b"\xfe\x03\x00\x00\x00\x00\x00" + b"\x99\x02\x00\x00zz" + wire[10:]
    assert S2Codec().decode_bytes(padded) == b"abc"


def test_snappy_reference_reads_ours_and_we_read_it():
    cramjam = pytest.importorskip("cramjam")
    for data in shapes(9):
        ours = compress_block(data, "best")
        assert bytes(cramjam.snappy.decompress_raw(ours)) == data
        theirs = bytes(cramjam.snappy.compress_raw(data))
        assert decompress_block(theirs) == data
        framed = bytes(cramjam.snappy.compress(data))           # "sNaPpY" framing
        assert S2Codec().decode_bytes(framed) == data
