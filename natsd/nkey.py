"""Public nkeys: decoding and checking them, and verifying their Ed25519 signatures.

An encoded public nkey is base32 (no padding) of prefix byte + 32-byte Ed25519 key + CRC16
(little endian) of the first 33 bytes; the prefix byte says what it names (operator 'O',
account 'A', user 'U', server 'N', cluster 'C'). The nkeys package signs (it holds seeds);
this module only reads public keys, as nats-server's nkeys.FromPublicKey/IsValidPublic*Key do.
"""
import base64
import binascii

import nacl.exceptions
import nacl.signing
import nkeys

OPERATOR, ACCOUNT, USER, SERVER = (nkeys.PREFIX_BYTE_OPERATOR, nkeys.PREFIX_BYTE_ACCOUNT,
                                   nkeys.PREFIX_BYTE_USER, nkeys.PREFIX_BYTE_SERVER)


def public_key_bytes(public, prefix=None):
    """The raw 32-byte Ed25519 key of an encoded public nkey, or None when it is not one
    (bad base32, length, prefix byte (`prefix` when given) or checksum)."""
    if not isinstance(public, str) or not public:
        return None
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or not nkeys.valid_public_prefix_byte(raw[0]):
        return None
    if prefix is not None and raw[0] != prefix:
        return None
    if nkeys.crc16(bytearray(raw[:33])) != int.from_bytes(raw[33:], "little"):
        return None
    return raw[1:33]


def is_valid_public(public, prefix=None):
    return public_key_bytes(public, prefix) is not None


def verify(public, data, sig):
    """Is `sig` (raw bytes) an Ed25519 signature of `data` by the public nkey `public`?"""
    key = public_key_bytes(public)
    if key is None or not isinstance(sig, (bytes, bytearray)):
        return False
    try:
        nacl.signing.VerifyKey(key).verify(bytes(data), bytes(sig))
        return True
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
