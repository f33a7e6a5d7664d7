"""JetStream on a cluster of servers with one-replica streams: which server answers.

Each server keeps its own streams (R1), and a stream lives on the server its creation
request reached. The JetStream API must still answer for the whole cluster: a client on any
server can reach any stream. This works through interest, with no protocol of its own:

- every server's generic `$JS.API.>` subscription stays on that server (`local_only`);
- the server holding a stream subscribes to the API subjects that name it (below), and
  that interest travels over routes, so requests about the stream reach its server;
- a server that does not hold the stream stays silent when the request came over a route,
  or when another server has claimed the subject (it will answer); only when nobody has the
  stream does the server the client is connected to answer (not found, or creating it).
  A server started again whose meta group has not yet applied its log holds such a request
  until a claim arrives rather than say "not found" of a stream it does not know yet.

Requests with a JetStream domain prefix are answered the same way, forwarded on under
`$JS.API.` when another server has the stream. Replicated streams belong to the meta group
(natsd/jetstream/replicated/meta.py). A consumer listing goes to the stream's server like any request
naming the stream; stream listings and account info ask every server
(natsd/jetstream/replicated/listing.py).
"""
import time

from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.cluster.interest import routes_listen
from natsd.protocol import KIND_ROUTE
from natsd.jetstream.engine.clustering import CONSUMER_LED

CLAIM_WAIT = 2.0                # seconds a request about a replicated stream waits for its leader's claim
CLAIM_POLL = 0.05


def claimed_subjects(stream):
    """The API subjects that name `stream`: its server subscribes to them."""
    return ["$JS.API.STREAM.*.%s" % stream,                  # INFO UPDATE DELETE PURGE CREATE...
            "$JS.API.STREAM.MSG.*.%s" % stream,              # GET DELETE
            "$JS.API.STREAM.LEADER.STEPDOWN.%s" % stream,
            "$JS.API.STREAM.PEER.REMOVE.%s" % stream,
            "$JS.API.CONSUMER.*.%s" % stream,                # CREATE NAMES LIST
            "$JS.API.CONSUMER.*.%s.>" % stream,              # CREATE INFO DELETE PAUSE UNPIN RESET
            "$JS.API.CONSUMER.DURABLE.CREATE.%s.*" % stream,
            "$JS.API.CONSUMER.MSG.NEXT.%s.*" % stream,
            "$JS.API.CONSUMER.LEADER.STEPDOWN.%s.*" % stream,
            "$JS.API.DIRECT.GET.%s" % stream,
            "$JS.API.DIRECT.GET.%s.>" % stream]


def _ignore(sub, *args):
    pass                                # interest only: the generic handler answers


class Claim:
    """The subscriptions by which a stream's server (or a consumer's leader,
    natsd/jetstream/replicated/consumergroup.py) draws the requests about it."""

    def __init__(self, sublist, subjects):
        self.sublist = sublist
        self.subs = []
        for subject in subjects:
            s = Subscription(None, subject.encode(), b"", None, _ignore)
            sublist.insert(s)
            self.subs.append(s)

    def release(self):
        for s in self.subs:
            s.closed = True
            self.sublist.remove(s)
        self.subs = []


CREATING = frozenset(("STREAM.CREATE", "STREAM.RESTORE"))   # the meta leader answers them


def answer_here(jsa, stream, api_subject, request_subject, reply, hdr, payload, origin, op=None, args=()):
    """Should this server answer a request about `stream` (op and args: the request's, for
    those a consumer with a group of its own answers)? Forwards a domain-prefixed
    request to the server that has the stream."""
    consumer = args[1] if op in CONSUMER_LED and len(args) > 1 else None
    if _answers(jsa, stream, consumer):
        return True                     # a replica that is not its group's leader is silent
    if origin is not None and origin.kind == KIND_ROUTE:
        return False
    if not routes_listen(jsa.sublist, api_subject):      # nobody else claimed it
        if _leader_elsewhere_soon(jsa, stream) or (op not in CREATING and _meta_unsettled(jsa)):
            _hold(jsa, stream, consumer, api_subject, reply, hdr, payload)
            return False
        return True
    if request_subject != api_subject:
        publish(jsa.sublist, api_subject, reply, hdr, payload)
    return False


def _answers(jsa, stream, consumer=None):
    """Does this server answer for `stream`: it has it with one replica, or leads its group?
    For a request to `consumer` that has a group of its own: does it lead that group?"""
    st = jsa.streams.get(stream) if jsa is not None else None
    if st is None:
        return False
    if st.replica is None:
        return True
    host = st.replica.consumers.hosts.get(consumer) if consumer is not None else None
    return host.is_leader() if host is not None else st.replica.is_leader()


def _leader_elsewhere_soon(jsa, stream):
    """A replicated stream this server does not lead: its leader's claim may not have
    arrived yet (it was just created, or its group is electing)."""
    meta = jsa.engine.meta
    return meta is not None and (jsa.name, stream) in meta.assignments


def _meta_unsettled(jsa):
    """This server's meta group has entries in its log that it has not applied, and knows no
    leader to tell it which are committed (it just started again): the streams it knows of
    may not be all there are, so it does not say that one is not found (nats-server's
    servers answer only for the assignments they know)."""
    meta = jsa.engine.meta
    group = getattr(meta, "group", None)
    return (group is not None and not group.leader
            and group.node.applied < group.storage.last_index())


def _hold(jsa, stream, consumer, api_subject, reply, hdr, payload):
    """Send the request on to the stream's leader once its claim arrives, or to this server
    once it leads (for up to CLAIM_WAIT: a request to a stream that has no leader by then
    goes unanswered)."""
    msg = (bytes(api_subject), bytes(reply) if reply else None, None if hdr is None else bytes(hdr), bytes(payload))
    loop = jsa.engine.server.loop
    deadline = time.monotonic() + CLAIM_WAIT

    def check():
        if routes_listen(jsa.sublist, msg[0]) or _answers(jsa, stream, consumer):
            publish(jsa.sublist, *msg)
        elif time.monotonic() < deadline:
            loop.call_later(CLAIM_POLL, check)
    loop.call_later(CLAIM_POLL, check)
