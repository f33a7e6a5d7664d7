"""nats-server's encryption at rest, for reading its stores and writing them (server/filestore.go, jetstream.go):

- prf(context) = HMAC-SHA256(jetstream key, account name + context); the context is the stream
  name for a stream, "<stream>.<consumer>" for a consumer, "<stream>:<index>" for a block;
- an AEAD from a 32-byte key: XChaCha20-Poly1305 (24-byte nonces) for `chacha`/`chachapoly`,
  AES-256-GCM with 16-byte nonces for `aes`;
- `meta.key` (and a consumer's, and `msgs/<n>.key`): nonce + the AEAD of prf(context) sealing a
  32-byte seed; the seed's AEAD seals `meta.inf`, `index.db` and `o.dat` (nonce first);
- a block file is the seed's stream cipher (XChaCha20, or AES-CTR) over the block's bytes, from
  the block key's nonce.

The key that opens `meta.key` is tried as nats-server tries it: the configured key with the
configured cipher, then the other cipher, then `prev_encryption_key` with each.
"""
import hashlib
import hmac
import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

CHACHA, AES = 0, 1
NONCE = {CHACHA: 24, AES: 16}


class NoKeyFits(ValueError):
    """No configured key opens a key file."""


def _rotl(v, n):
    return ((v << n) | (v >> (32 - n))) & 0xffffffff


def hchacha20(key, nonce16):
    """XChaCha20's subkey (draft-irtf-cfrg-xchacha, section 2.2)."""
    s = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]
    s += list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", nonce16))

    def qr(a, b, c, d):
        s[a] = (s[a] + s[b]) & 0xffffffff
        s[d] = _rotl(s[d] ^ s[a], 16)
        s[c] = (s[c] + s[d]) & 0xffffffff
        s[b] = _rotl(s[b] ^ s[c], 12)
        s[a] = (s[a] + s[b]) & 0xffffffff
        s[d] = _rotl(s[d] ^ s[a], 8)
        s[c] = (s[c] + s[d]) & 0xffffffff
        s[b] = _rotl(s[b] ^ s[c], 7)
    for _ in range(10):
        qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15)
        qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))


def open_sealed(cipher, key, sealed):
    """The plaintext of nonce + AEAD ciphertext; InvalidTag when the key does not fit."""
    n = NONCE[cipher]
    nonce, body = bytes(sealed[:n]), bytes(sealed[n:])
    if cipher == CHACHA:
        return ChaCha20Poly1305(hchacha20(key, nonce[:16])).decrypt(b"\0\0\0\0" + nonce[16:], body, None)
    return AESGCM(key).decrypt(nonce, body, None)


def seal(cipher, key, plain):
    """nonce + AEAD ciphertext of `plain` under `key`, with a fresh random nonce."""
    nonce = os.urandom(NONCE[cipher])
    if cipher == CHACHA:
        return nonce + ChaCha20Poly1305(hchacha20(key, nonce[:16])).encrypt(b"\0\0\0\0" + nonce[16:], plain, None)
    return nonce + AESGCM(key).encrypt(nonce, plain, None)


def xor_stream(cipher, seed, nonce, data):
    """A block's bytes under its stream cipher (the same call encrypts and decrypts)."""
    if cipher == CHACHA:
        algo = algorithms.ChaCha20(hchacha20(seed, nonce[:16]), b"\0" * 8 + bytes(nonce[16:24]))
        return Cipher(algo, mode=None).decryptor().update(data)
    return Cipher(algorithms.AES(seed), modes.CTR(bytes(nonce))).decryptor().update(data)


class StoreKeys:
    """The `jetstream { key, cipher, prev_encryption_key }` a nats-server store was written
    with (natsd reads the same settings), for one account."""

    def __init__(self, key, cipher=CHACHA, prev_key=b"", account=""):
        self.key, self.prev, self.cipher, self.account = key, prev_key, cipher, account

    def for_account(self, account):
        return StoreKeys(self.key, self.cipher, self.prev, account)

    def _prf(self, key, context):
        return hmac.new(key, self.account.encode() + context.encode(), hashlib.sha256).digest()

    def new_key(self, context):
        """(AssetKey, key file bytes) of a fresh asset key for `context`, sealed with the
        configured key and cipher, as nats-server's genEncryptionKeys makes them."""
        seed = os.urandom(32)
        sealed = seal(self.cipher, self._prf(self.key, context), seed)
        return AssetKey(self.cipher, seed, sealed[:NONCE[self.cipher]]), sealed

    def open_key_file(self, sealed, context):
        """(cipher, seed, nonce) of a key file sealed for `context`."""
        other = AES if self.cipher == CHACHA else CHACHA
        for key in [k for k in (self.key, self.prev) if k]:
            for cipher in (self.cipher, other):
                try:
                    seed = open_sealed(cipher, self._prf(key, context), sealed)
                except (InvalidTag, ValueError):
                    continue
                return cipher, seed, bytes(sealed[:NONCE[cipher]])
        raise NoKeyFits("no configured JetStream key opens it")


class AssetKey:
    """An opened key file: what it seals (meta.inf, index.db, o.dat) and, for a block, its
    stream cipher."""

    def __init__(self, cipher, seed, nonce):
        self.cipher, self.seed, self.nonce = cipher, seed, nonce

    def open(self, sealed):
        return open_sealed(self.cipher, self.seed, sealed)

    def seal(self, plain):
        return seal(self.cipher, self.seed, plain)

    def xor(self, data):
        return xor_stream(self.cipher, self.seed, self.nonce, data)


def open_key(keys, path, context):
    """The AssetKey in key file `path` (FileNotFoundError when there is none)."""
    with open(path, "rb") as f:
        sealed = f.read()
    return AssetKey(*keys.open_key_file(sealed, context))
