"""What JetStream's engine asks of its replicated layer, declared here so that the engine
imports nothing of it (natsd/jetstream/replicated/ implements these; tests/packaging holds
both sides to them).

On a single server there is none of it: `JetStream.cluster`, `JetStream.meta`,
`JetStream.listing`, `Stream.replica` and `Consumer.replica` are None. On a cluster the server
gives the engine a `Clustering` once the routes are up (JetStream.start_cluster); the meta group
and the listings come with it, and the replicated layer sets the `replica` of the streams and
consumers it keeps.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

# The consumer API requests a consumer's own leader answers (a consumer with a Raft group of
# its own leads apart from its stream), by the op names of natsd/jetstream/engine/api.py.
CONSUMER_LED = frozenset(("CONSUMER.INFO", "CONSUMER.PAUSE", "CONSUMER.UNPIN", "CONSUMER.RESET",
                          "CONSUMER.MSG.NEXT", "CONSUMER.LEADER.STEPDOWN"))


class Claim(Protocol):
    """The subscriptions that draw the API requests about one stream to its server."""

    def release(self) -> None: ...


class Clustering(Protocol):
    """JetStream on a cluster (natsd/jetstream/replicated/layer.py's ClusterLayer)."""

    meta: MetaGroup | None          # None when the cluster has no system account
    listing: Listing | None

    def start(self) -> None:
        """Join (or found) the meta group; start the listings."""

    def stop(self) -> None: ...

    def claim(self, sublist, stream: str) -> Claim:
        """Draw the requests about a one-replica stream of this server to it."""

    def answer_here(self, jsa, stream: str, api_subject: bytes, request_subject: bytes, reply,
                    hdr, payload, origin, op: str | None = None, args=()) -> bool:
        """Whether this server answers a request about `stream` (else another server does,
        or it is held until its leader is known)."""

    def watch_answer(self, jsa, origin, op: str, subject, reply, payload) -> None:
        """Audit the answer to a request another server (or a later step) gives."""

    def watched(self, jsa, reply) -> bool:
        """Whether the answer to `reply` is audited as it goes by."""


class MetaGroup(Protocol):
    """The meta group (natsd/jetstream/replicated/meta.py), as the engine uses it."""

    peer: str                       # this server's peer id
    replicas: dict                  # (account, stream) -> the ReplicatedStream run here
    assignments: dict               # (account, stream) -> assignment

    def request(self, op: str, jsa, data: dict, reply) -> None:
        """Propose an assignment change ("add", "del", "peers") for the meta leader; the
        answer goes to `reply` once it is applied."""

    def purge_account(self, account: str, reply) -> None:
        """ACCOUNT.PURGE asked here: the meta leader drops the account's streams everywhere
        and answers."""

    def leader_known(self) -> bool: ...
    def leaderless_too_long(self) -> bool: ...
    def is_leader(self) -> bool: ...
    def check_placed_here(self, cfg: dict) -> None: ...
    def meets_here(self, cfg: dict) -> bool: ...
    def reconfiguring(self, key: tuple) -> Any: ...
    def stream_alternates(self, jsa, name: str) -> Any: ...
    def hand_off_leaders(self) -> bool: ...
    def cluster_info(self) -> dict: ...
    def health_errors(self) -> list: ...


class Listing(Protocol):
    """Listings and account info gathered from every server (replicated/listing.py)."""

    def streams(self, jsa, subject: str, infos: bool, answer: Callable) -> None: ...
    def account_usage(self, jsa, answer: Callable) -> None: ...


class ConsumerTable(Protocol):
    """A replicated stream's consumers (replicated/consumers.py), seen from the stream."""

    hosts: dict                     # name -> the host of a consumer with a group of its own
    rows: dict                      # name -> its committed row
    live: bool                      # this server leads the stream and runs its consumers

    def wants(self, cfg: dict, stream) -> bool: ...
    def propose_create(self, cfg: dict, name: str, created: int, action: str, reply) -> None: ...
    def propose_delete(self, name: str, reply) -> None: ...
    def hosted_view(self, name: str) -> Any: ...
    def views(self) -> list: ...
    def led_elsewhere(self) -> list: ...
    def retention_consumers(self) -> list: ...
    def retention_removed(self, seq: int) -> None: ...


class StreamReplica(Protocol):
    """A replicated stream's Raft side (replicated/streams.py's ReplicatedStream), as
    `Stream.replica`: every change of the stream's store goes through its group."""

    group_name: str
    consumers: ConsumerTable

    def is_leader(self) -> bool: ...
    def takes_publishes(self) -> bool: ...
    def copies_here(self) -> bool:
        """Whether this server does what the stream does on its own (mirrors, sources,
        schedules, markers): its leader, for every copy."""

    def on_publish(self, sub, msgs, taker=None) -> None: ...
    def propose_sourced(self, subject: bytes, hdr, payload: bytes, seq: int, ts) -> bool: ...
    def propose_op(self, op: str, req: dict, reply) -> None: ...
    def defer_until_ready(self, handler: Callable, *request) -> bool: ...
    def cluster_info(self) -> dict: ...
    def step_down(self, placement: dict) -> None: ...
    def scale_down_answer(self, cfg: dict) -> dict: ...


class ConsumerReplica(Protocol):
    """What keeps a replicated consumer's state in a Raft group (replicated/consumers.py's
    ReplicatedConsumers), as `Consumer.replica`."""

    holding: bool                   # handing leadership on: deliver nothing
    rs: Any                         # the group's host (it has step_down)

    def note_acks(self, msgs) -> None: ...
    def answer_after_commit(self, consumer, reply) -> None: ...
    def pulls_changed(self, consumer) -> None: ...
    def changed(self, consumer, config: bool = False) -> None: ...
    def cluster_info(self, consumer=None) -> dict: ...
    def propose_delete(self, name: str, reply) -> None: ...
