"""Route pooling: which of the pooled connections to a server carries an account.

nats-server opens `pool_size` routes (3 by default) to every other server and gives each
account one of them by a hash of its name, the same on every server; accounts listed in
`cluster { accounts }` (and the system account) get a route of their own instead.
"""

DEFAULT_POOL_SIZE = 3


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def pool_index(account: str, pool_size: int) -> int:
    """nats-server's computeRoutePoolIdx: 0 without pooling, else fnv32a(name) % size."""
    if pool_size <= 1:
        return 0
    return fnv32a(account.encode()) % pool_size
