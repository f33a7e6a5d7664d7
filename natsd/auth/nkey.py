"""nkeys: decoding and checking public keys, verifying their Ed25519 signatures, and the
server's own keys.

An encoded public nkey is base32 (no padding) of prefix byte + 32-byte key + CRC16 (little
endian) of the first 33 bytes; the prefix byte says what it names (operator 'O', account 'A',
user 'U', server 'N', cluster 'C', and 'X' for the curve25519 "xkeys" that encrypt). Reading
public keys follows nats-server's nkeys.FromPublicKey/IsValidPublic*Key. The server has a
signing key (its id is the public key, as nats-server's) and an xkey; new_user_key() makes
the one-off user keys of auth callout requests. `seal`/`open_sealed` are nkeys' xkey boxes:
"xkv1", a 24-byte nonce, then the NaCl box of the message.
"""
import base64
import binascii
import os
import struct

from natsd.auth import ed25519

# nkeys' prefix bytes (PyNaCl, behind the `nkeys` package, is imported only when a signature
# is made or checked: its 2 MB stay out of a server that never does)
OPERATOR, ACCOUNT, USER, SERVER, CLUSTER = 14 << 3, 0, 20 << 3, 13 << 3, 2 << 3
_PUBLIC_PREFIXES = (OPERATOR, ACCOUNT, USER, SERVER, CLUSTER)
CURVE = 23 << 3
XKEY_VERSION = b"xkv1"
_NONCE_LEN = 24


def public_key_bytes(public, prefix=None):
    """The raw 32-byte Ed25519 key of an encoded public nkey, or None when it is not one
    (bad base32, length, prefix byte (`prefix` when given) or checksum)."""
    if not isinstance(public, str) or not public:
        return None
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or not (raw[0] in _PUBLIC_PREFIXES or raw[0] == CURVE):
        return None
    if prefix is not None and raw[0] != prefix:
        return None
    if binascii.crc_hqx(raw[:33], 0) != int.from_bytes(raw[33:], "little"):
        return None
    return raw[1:33]


def is_valid_public(public, prefix=None):
    return public_key_bytes(public, prefix) is not None


def verify(public, data, sig):
    """Is `sig` (raw bytes) an Ed25519 signature of `data` by the public nkey `public`?"""
    key = public_key_bytes(public)
    if key is None or not isinstance(sig, (bytes, bytearray)):
        return False
    import nacl.exceptions
    import nacl.signing
    try:
        nacl.signing.VerifyKey(key).verify(bytes(data), bytes(sig))
        return True
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False


def encode_public(prefix, raw):
    """The encoded public nkey of a raw 32-byte key."""
    body = bytes([prefix]) + bytes(raw)
    return base64.b32encode(body + struct.pack("<H", binascii.crc_hqx(body, 0))).decode().rstrip("=")


class KeyPair:
    """An Ed25519 key pair of one kind (as nkeys.KeyPair: `public_key`, the encoded public
    nkey as bytes, and sign()). The public key is derived here (natsd/auth/ed25519.py);
    PyNaCl signs, loaded at the first signature."""

    def __init__(self, prefix, seed):
        self.seed = bytes(seed)
        self.public_key = encode_public(prefix, ed25519.public_key(self.seed)).encode()
        self._signer = None

    def sign(self, data):
        if self._signer is None:
            import nacl.signing
            self._signer = nacl.signing.SigningKey(self.seed)
        return self._signer.sign(bytes(data)).signature


def new_key(prefix):
    """A fresh Ed25519 key pair of the given kind."""
    return KeyPair(prefix, os.urandom(32))


def public_of(kp):
    return kp.public_key.decode()


class XKey:
    """A curve25519 key pair: the server's, for encrypted auth callouts."""

    def __init__(self, private=None):
        import nacl.public
        self.private = private or nacl.public.PrivateKey.generate()
        self.public = encode_public(CURVE, bytes(self.private.public_key))

    def seal(self, data, recipient):
        """nkeys' Seal: encrypt `data` for the public xkey `recipient`."""
        import nacl.public
        box = nacl.public.Box(self.private, nacl.public.PublicKey(public_key_bytes(recipient, CURVE)))
        nonce = os.urandom(_NONCE_LEN)
        return XKEY_VERSION + box.encrypt(bytes(data), nonce)

    def open(self, data, sender):
        """nkeys' Open: decrypt what `sender` sealed for us; ValueError when it cannot."""
        data = bytes(data)
        if len(data) <= len(XKEY_VERSION) + _NONCE_LEN:
            raise ValueError("nkeys: invalid encrypted data")
        if not data.startswith(XKEY_VERSION):
            raise ValueError("nkeys: encrypted input is not a recognized version")
        key = public_key_bytes(sender, CURVE)
        if key is None:
            raise ValueError("nkeys: invalid public key")
        import nacl.exceptions
        import nacl.public
        box = nacl.public.Box(self.private, nacl.public.PublicKey(key))
        try:
            return box.decrypt(data[len(XKEY_VERSION) + _NONCE_LEN:],
                               data[len(XKEY_VERSION):len(XKEY_VERSION) + _NONCE_LEN])
        except nacl.exceptions.CryptoError:
            raise ValueError("nkeys: message could not be decrypted") from None
