"""JetStream encryption at rest: `jetstream { key: "...", cipher: chachapoly|aes,
prev_encryption_key: "..." }`, as nats-server derives its keys.

Keys (the same inputs as nats-server's jsKeyGen / genEncryptionKeys):

  key-encryption key (KEK) = HMAC-SHA256(server key, account name + stream name)
  data key (DK)            = 32 random bytes per stream, sealed with the KEK in
                             `<stream dir>/meta.key`
  AEAD                     = ChaCha20-Poly1305 ("chacha", "chachapoly"; the default) or
                             AES-256-GCM ("aes"), from the `cryptography` package, with
                             12-byte nonces (nats-server uses XChaCha's 24 bytes and a 16-byte
                             GCM nonce: natsd's files are its own format, only the derivation
                             inputs and cipher names are shared)

`meta.key`: b"NKEY" u8 version(1) u8 cipher(0 chacha, 1 aes) u16 key-id, a 12-byte nonce, then
the DK sealed with the KEK (the 8 header bytes are the associated data): 68 bytes.

Everything of the stream is sealed with its DK:
  - message blocks (natsd/_core/log.pyx): the records of an active block in frames
    (`u32 length | nonce | ciphertext | tag`: the records of one loop iteration together, one
    AEAD call per frame), lz4 blocks as one AEAD over their compressed image; the block header
    names the key id;
  - the index snapshot (natsd/_core/logsnap.pyx);
  - whole files written through this module (stream `meta.json`, consumer `meta.json` and
    `state.json`): b"NENC" u8 version(1) u8 0 u16 key-id, a 12-byte nonce, ciphertext + tag;
    the associated data is the header and the file's path relative to the stream directory
    (a file cannot be swapped for another one of the stream).

Opening a stream (`open_stream`) unseals `meta.key` with the configured key and cipher, else
the other cipher, else `prev_encryption_key` with either cipher — nats-server's order. When it
was not the configured key and cipher, the stream is re-keyed: a new DK is sealed with the
configured key into `meta.key.new`, every file is rewritten under it (each names its key id,
so a crash in the middle leaves files readable with one of the two keys), and `commit()`
renames `meta.key.new` over `meta.key`. A stream without `meta.key` while a key is configured
is plaintext and is encrypted the same way. No key unseals -> EncryptionError: the stream is
not loaded and none of its files is touched.
"""
import hashlib
import hmac
import json
import logging
import os
import struct

log = logging.getLogger("natsd")

CHACHA = 0
AES = 1
CIPHER_NAMES = {CHACHA: "ChaCha20-Poly1305", AES: "AES-GCM"}

KEY_FILE = "meta.key"
NEW_KEY_FILE = "meta.key.new"
KEY_MAGIC = b"NKEY"
FILE_MAGIC = b"NENC"
VERSION = 1
NONCE = 12
TAG = 16
KEY_LEN = 8 + NONCE + 32 + TAG
FILE_OVH = 8 + NONCE + TAG

_registry = {}          # stream directory -> StreamCrypt (persist.py finds consumer files' keys)


class EncryptionError(Exception):
    """A stream's keys cannot be recovered (wrong key, no key, damaged key file)."""


def cipher_id(name):
    n = (name or "chacha").lower()
    if n in ("chacha", "chachapoly", "chacha20-poly1305"):
        return CHACHA
    if n in ("aes", "aes-gcm"):
        return AES
    raise ValueError("Unknown cipher type: %r" % name)


def _aead(cipher, key):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    return ChaCha20Poly1305(key) if cipher == CHACHA else AESGCM(key)


def _invalid_tag():
    from cryptography.exceptions import InvalidTag
    return InvalidTag


class ServerKey:
    """The configured key material: `key`, `cipher`, `prev_encryption_key`."""

    def __init__(self, key, cipher="", prev_key=""):
        self.key = key.encode() if isinstance(key, str) else bytes(key)
        self.prev = (prev_key.encode() if isinstance(prev_key, str) else bytes(prev_key)) if prev_key else b""
        self.cipher = cipher_id(cipher)
        self.cipher_name = CIPHER_NAMES[self.cipher]
        self.call_soon = None       # the server loop's call_soon (set by the engine), see below

    @classmethod
    def from_opts(cls, o):
        """None when no key is configured (nats-server: JetStreamKey empty -> no encryption)."""
        key = getattr(o, "key", "") or ""
        if not key:
            return None
        return cls(key, getattr(o, "cipher", "") or "", getattr(o, "prev_key", "") or "")

    @staticmethod
    def prf(secret, account, context):
        """nats-server's jsKeyGen: HMAC-SHA256(key, account name + context)."""
        h = hmac.new(secret, account.encode(), hashlib.sha256)
        h.update(context.encode())
        return h.digest()

    def kek(self, account, context, cipher, prev=False):
        return _aead(cipher, self.prf(self.prev if prev else self.key, account, context))


class DataKey:
    __slots__ = ("kid", "cipher", "raw", "aead")

    def __init__(self, kid, cipher, raw):
        self.kid = kid
        self.cipher = cipher
        self.raw = raw
        self.aead = _aead(cipher, raw)


def _fsync_dir(d):
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data, sync=True):
    """Write `path` through `<path>.tmp` + rename (the old or the new content survives a crash)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


class StreamCrypt:
    """The keys of one stream: the current data key and, while re-keying, the previous one.

    The message log (natsd/_core/log.pyx) reads `kid`, `aead` and calls `aead_for(kid)`;
    `seal`/`open` are the whole-file format (and the index snapshot's)."""

    def __init__(self, server_key, account, stream, directory):
        self.server_key = server_key
        self.account = account
        self.stream = stream
        self.dir = directory
        self.keys = {}              # kid -> DataKey
        self.current = None
        self.status = ""            # "" | "encrypting" (was plaintext) | "converting" (re-keyed)
        self.pending_commit = False

    # ---- the current key, as the log reads it
    @property
    def kid(self):
        return self.current.kid

    @property
    def aead(self):
        return self.current.aead

    @property
    def cipher(self):
        return self.current.cipher

    @property
    def call_soon(self):
        """The loop's call_soon: the log then seals the records of one loop iteration as one
        frame (one AEAD call) instead of one frame per record."""
        return self.server_key.call_soon

    def aead_for(self, kid):
        k = self.keys.get(kid)
        return None if k is None else k.aead

    # ---- key file
    def _new_key(self):
        while True:
            kid = struct.unpack("<H", os.urandom(2))[0]
            if kid not in self.keys:
                break
        k = DataKey(kid, self.server_key.cipher, os.urandom(32))
        self.keys[kid] = k
        return k

    def _write_key(self, k, name):
        sk = self.server_key
        hdr = KEY_MAGIC + bytes([VERSION, k.cipher]) + struct.pack("<H", k.kid)
        nonce = os.urandom(NONCE)
        kek = sk.kek(self.account, self.stream, k.cipher)
        write_atomic(os.path.join(self.dir, name), hdr + nonce + kek.encrypt(nonce, k.raw, hdr))
        _fsync_dir(self.dir)

    def _read_key(self, name):
        """(DataKey, unsealed with the configured key and cipher?) or raise EncryptionError."""
        path = os.path.join(self.dir, name)
        with open(path, "rb") as f:
            buf = f.read()
        if len(buf) != KEY_LEN or buf[:4] != KEY_MAGIC or buf[4] != VERSION or buf[5] not in (CHACHA, AES):
            raise EncryptionError("bad stream key file %s (%d bytes)" % (path, len(buf)))
        hdr, nonce, sealed = buf[:8], buf[8:8 + NONCE], buf[8 + NONCE:]
        cipher = buf[5]
        kid = struct.unpack("<H", buf[6:8])[0]
        sk = self.server_key
        bad = _invalid_tag()
        tries = [(False, cipher)]
        if sk.prev:
            tries.append((True, cipher))
        for prev, c in tries:
            try:
                raw = sk.kek(self.account, self.stream, c, prev).decrypt(nonce, sealed, hdr)
            except bad:
                continue
            return DataKey(kid, cipher, raw), (not prev and cipher == sk.cipher)
        raise EncryptionError("unable to recover keys")

    # ---- whole files
    def seal(self, data, aad=b""):
        """nonce + ciphertext + tag under the current key (the log's index snapshot)."""
        nonce = os.urandom(NONCE)
        return nonce + self.current.aead.encrypt(nonce, bytes(data), aad)

    def open(self, blob, aad=b"", kid=None):
        k = self.current if kid is None else self.keys.get(kid)
        if k is None:
            raise EncryptionError("sealed with an unknown key (id %d)" % kid)
        try:
            return k.aead.decrypt(blob[:NONCE], blob[NONCE:], aad)
        except _invalid_tag():
            raise EncryptionError("message authentication failed")

    def _rel(self, path):
        return os.path.relpath(os.path.abspath(path), os.path.abspath(self.dir)).encode()

    def seal_file(self, path, data):
        k = self.current
        hdr = FILE_MAGIC + bytes([VERSION, 0]) + struct.pack("<H", k.kid)
        nonce = os.urandom(NONCE)
        return hdr + nonce + k.aead.encrypt(nonce, bytes(data), hdr + self._rel(path))

    def open_file(self, path, buf):
        """The plaintext of a file read from `path` (sealed or, before conversion, plain)."""
        if not is_sealed(buf):
            return buf
        hdr = buf[:8]
        if len(buf) < FILE_OVH or buf[4] != VERSION:
            raise EncryptionError("%s: bad encrypted file header" % path)
        return self.open(buf[8:], hdr + self._rel(path), struct.unpack("<H", buf[6:8])[0])

    def file_current(self, buf):
        return is_sealed(buf) and len(buf) >= 8 and struct.unpack("<H", buf[6:8])[0] == self.current.kid

    # ---- conversion
    def convert_files(self):
        """Re-seal the stream's own small files (stream and consumer meta/state) under the
        current key: plaintext ones (a store from before the key) and ones under the old key."""
        paths = [os.path.join(self.dir, "meta.json")]
        cdir = os.path.join(self.dir, "consumers")
        if os.path.isdir(cdir):
            for name in sorted(os.listdir(cdir)):
                for f in ("meta.json", "state.json"):
                    paths.append(os.path.join(cdir, name, f))
        for p in paths:
            try:
                with open(p, "rb") as f:
                    buf = f.read()
            except OSError:
                continue
            if self.file_current(buf):
                continue
            plain = self.open_file(p, buf)
            write_atomic(p, self.seal_file(p, plain))

    def commit(self):
        """Every file of the stream is under the current key: make `meta.key` name it."""
        if not self.pending_commit:
            return
        os.replace(os.path.join(self.dir, NEW_KEY_FILE), os.path.join(self.dir, KEY_FILE))
        _fsync_dir(self.dir)
        self.keys = {self.current.kid: self.current}
        self.pending_commit = False


def is_sealed(buf):
    return buf[:4] == FILE_MAGIC


def open_stream(server_key, account, stream, directory, create=False):
    """The StreamCrypt of a stream directory (registered for persist.py). create: a new stream
    (a new data key). Recovering: unseal `meta.key` (and a `meta.key.new` left by an
    interrupted re-keying); convert the stream's meta/consumer files when re-keying or
    encrypting a plaintext stream. Raises EncryptionError when no configured key fits."""
    sc = StreamCrypt(server_key, account, stream, directory)
    kf = os.path.join(directory, KEY_FILE)
    nf = os.path.join(directory, NEW_KEY_FILE)
    if create or not os.path.exists(kf) and not os.path.exists(nf):
        if not create:
            sc.status = "encrypting"
        sc.current = sc._new_key()
        sc._write_key(sc.current, KEY_FILE)
    else:
        cur_ok = False
        k = None
        err = None
        if os.path.exists(kf):
            try:
                k, cur_ok = sc._read_key(KEY_FILE)
                sc.keys[k.kid] = k
            except EncryptionError as e:
                err = e
        if os.path.exists(nf):
            try:
                k2, ok2 = sc._read_key(NEW_KEY_FILE)
            except EncryptionError:
                k2, ok2 = None, False
            if k2 is not None and ok2:
                # A re-keying was interrupted: finish it with the key it had chosen.
                sc.keys[k2.kid] = k2
                sc.current = k2
                sc.pending_commit = True
                sc.status = "converting"
        if sc.current is None:
            if k is None:
                raise err or EncryptionError("unable to recover keys")
            if cur_ok:
                sc.current = k
            else:
                sc.status = "converting"
                sc.current = sc._new_key()
                sc._write_key(sc.current, NEW_KEY_FILE)
                sc.pending_commit = True
    if not create:
        sc.convert_files()
    _registry[os.path.abspath(directory)] = sc
    return sc


def open_stream_to_read(server_key, account, stream, directory):
    """The StreamCrypt of a sealed stream directory, for reading it offline (natsd-store):
    nothing is written, so a stream whose `meta.key` the configured key (or the previous one)
    does not open, or one being re-keyed, raises EncryptionError instead of converting."""
    sc = StreamCrypt(server_key, account, stream, directory)
    if os.path.exists(os.path.join(directory, NEW_KEY_FILE)):
        raise EncryptionError("%s: a re-keying is not finished (start natsd once to finish it)"
                              % os.path.join(directory, NEW_KEY_FILE))
    k, _ = sc._read_key(KEY_FILE)
    sc.keys[k.kid] = k
    sc.current = k
    _registry[os.path.abspath(directory)] = sc
    return sc


def forget(directory):
    if directory:
        _registry.pop(os.path.abspath(directory), None)


def for_path(path):
    """The StreamCrypt whose stream directory holds `path` (consumer files), or None."""
    if not _registry:
        return None
    d = os.path.abspath(path)
    for _ in range(4):
        d = os.path.dirname(d)
        sc = _registry.get(d)
        if sc is not None:
            return sc
    return None


def read_file(path, crypt=None):
    """A file's plaintext: sealed files need the stream's keys (EncryptionError otherwise)."""
    with open(path, "rb") as f:
        buf = f.read()
    if not is_sealed(buf):
        return buf
    crypt = crypt or for_path(path)
    if crypt is None:
        raise EncryptionError("encryption not enabled")
    return crypt.open_file(path, buf)


def write_stream_meta(st, crypt):
    """Stream.save_meta for an encrypted stream: the same JSON, sealed."""
    if not st.dir:
        return
    path = os.path.join(st.dir, "meta.json")
    data = json.dumps({"config": st.config, "created": st.created}).encode()
    write_atomic(path, crypt.seal_file(path, data))
