"""Identifiers: base-62 tokens from os.urandom, the one generator behind advisory and event
ids, ephemeral consumer names, reply prefixes, route names and flow-control subjects
(nats-server draws these from its nuid package); and the server's internal clients, which
take connection ids (cids) from the server's count as nats-server's do."""
import os

from natsd.digest import sha256

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def random_token(n=22):
    """n random characters of [0-9A-Za-z] (22 is the length of a nuid)."""
    return "".join(_BASE62[b % 62] for b in os.urandom(n))


def get_hash(name):
    """nats-server's getHash (events.go): 8 characters of the name's sha256 as base-62 digits;
    it names a server (a Raft peer, `$SYS._INBOX.<hash>`) and a stream's origin."""
    b = sha256(name.encode()).digest()
    return "".join(_BASE62[x % 62] for x in b[:8])


class InternalClient:
    """One of the server's own clients, as nats-server has them: the system client, and each
    account's client for its service imports. It takes a cid from the server's count (so the
    first connection is cid 5 on a default server, as on nats-server) and numbers the sids of
    its subscriptions; /subsz lists them under it."""

    __slots__ = ("cid", "sids")

    def __init__(self, cid, first_sid=1):
        self.cid = cid
        self.sids = first_sid - 1

    def next_sid(self):
        self.sids += 1
        return b"%d" % self.sids
