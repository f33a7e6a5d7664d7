"""The JetStream API level natsd serves (nats-server 2.15's: 5), as INFO's `api_lvl`,
`$JS.API.INFO`'s `api.level` and the `_nats.level` metadata show it, and the check of a
request's `Nats-Required-Api-Level` header against it."""
from natsd.headers import slice_header

API_LEVEL = 5


def required_level_too_high(hdr):
    """nats-server's errorOnRequiredApiLevel: a Nats-Required-Api-Level that is not an int or
    is above the server's level."""
    v = slice_header(hdr, b"Nats-Required-Api-Level")
    if not v:
        return False
    digits = v[1:] if v[:1] in (b"+", b"-") else v
    if not digits or not digits.isdigit():
        return True
    n = int(v)
    return not -(1 << 63) <= n < (1 << 63) or n > API_LEVEL
