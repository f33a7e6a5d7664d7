"""Random identifiers: base-62 tokens from os.urandom, the one generator behind advisory and
event ids, ephemeral consumer names, reply prefixes, route names and flow-control subjects
(nats-server draws these from its nuid package)."""
import os

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def random_token(n=22):
    """n random characters of [0-9A-Za-z] (22 is the length of a nuid)."""
    return "".join(_BASE62[b % 62] for b in os.urandom(n))
