"""The Ed25519 public key of a 32-byte seed (RFC 8032, section 5.1.5), in plain Python.

The server makes its own nkey at every start (its id is the public key). Deriving that key
here keeps PyNaCl (libsodium, about 2 MB resident) unloaded until something is signed or
checked. A derivation costs a few milliseconds, once per start; signatures are PyNaCl's.

Points are kept in extended coordinates (X, Y, Z, T) with x = X/Z, y = Y/Z, x*y = T/Z on
the twisted Edwards curve -x^2 + y^2 = 1 + d x^2 y^2 over the field of p = 2^255 - 19.
"""
from _sha512 import sha512

P = 2 ** 255 - 19
D = -121665 * pow(121666, P - 2, P) % P
_SQRT_M1 = pow(2, (P - 1) // 4, P)


def _x_of(y: int, sign: int) -> int:
    """The x with the given low bit on the curve at y (RFC 8032 5.1.3)."""
    xx = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(xx, (P + 3) // 8, P)
    if (x * x - xx) % P:
        x = x * _SQRT_M1 % P
    if x & 1 != sign:
        x = P - x
    return x


_BY = 4 * pow(5, P - 2, P) % P
_BX = _x_of(_BY, 0)
BASE = (_BX, _BY, 1, _BX * _BY % P)
_ZERO = (0, 1, 1, 0)


def _add(p, q):
    """Point addition in extended coordinates (RFC 8032 5.1.4)."""
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = 2 * t1 * t2 * D % P
    d = 2 * z1 * z2 % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % P, g * h % P, f * g % P, e * h % P


def _times(n: int, p):
    out = _ZERO
    while n:
        if n & 1:
            out = _add(out, p)
        p = _add(p, p)
        n >>= 1
    return out


def _encode(p) -> bytes:
    x, y, z, _ = p
    zi = pow(z, P - 2, P)
    x, y = x * zi % P, y * zi % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def public_key(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte Ed25519 seed (private key)."""
    if len(seed) != 32:
        raise ValueError("an Ed25519 seed is 32 bytes")
    h = sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return _encode(_times(a, BASE))
