"""nats-server's stream backup archive, what `$JS.API.STREAM.SNAPSHOT` sends and
`$JS.API.STREAM.RESTORE` takes (and `nats stream backup|restore` keep in `stream.tar.s2`): one
S2 stream holding a tar (PAX, mode 0600, owner "nats") of the stream directory — `meta.inf`,
`meta.sum`, `msgs/<n>.blk` (plain), optionally `msgs/index.db`, and `obs/<consumer>/{meta.inf,
meta.sum,o.dat}`.
"""
import io
import os
import shutil
import tarfile
import tempfile
import time

from natsd._core.s2 import decode_stream, encode_stream
from natsd.jetstream.nsfs import codec as C
from natsd.jetstream.nsfs.reader import read_stream_dir
from natsd.jetstream.nsfs.writer import stream_files

S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
SPOOL_MAX = 8 * 1024 * 1024


def is_archive(head):
    """Whether bytes start like a nats-server backup (an S2 stream)."""
    return head.startswith(S2_STREAM_ID)


def write_archive(image):
    """The archive of a StreamImage, as a rewound temporary file."""
    raw = tempfile.SpooledTemporaryFile(SPOOL_MAX)
    mtime = time.time()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in stream_files(image):
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o600, mtime
            info.uname = info.gname = "nats"
            tar.addfile(info, io.BytesIO(data))
    raw.seek(0)
    out = tempfile.SpooledTemporaryFile(SPOOL_MAX)
    out.write(encode_stream(raw.read()))
    raw.close()
    out.seek(0)
    return out


class UnpackedArchive:
    """An archive unpacked into a temporary directory, read as a StreamImage; `close()` (or
    leaving the `with`) removes the directory."""

    def __init__(self, fileobj):
        self.dir = tempfile.mkdtemp(prefix="natsd-restore-")
        try:
            _unpack(fileobj, self.dir)
            self.image = read_stream_dir(self.dir)
        except BaseException:
            self.close()
            raise

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.image

    def __exit__(self, *exc):
        self.close()


def _unpack(fileobj, directory):
    try:
        plain = decode_stream(fileobj.read())
    except ValueError as e:
        raise C.FormatError("not a nats-server stream backup (%s)" % e)
    try:
        tar = tarfile.open(fileobj=io.BytesIO(plain), mode="r:")
        members = tar.getmembers()
    except tarfile.TarError as e:
        raise C.FormatError("not a nats-server stream backup (%s)" % e)
    for m in members:
        name = os.path.normpath(m.name)
        if m.isdir():
            continue
        if not m.isfile() or name.startswith(("..", "/")) or os.path.isabs(name):
            raise C.FormatError("stream backup member %r is not a file of a stream directory" % m.name)
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            shutil.copyfileobj(tar.extractfile(m), f)
