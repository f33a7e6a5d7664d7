"""JetStream on a cluster as the engine sees it: the Clustering the engine declares
(natsd/jetstream/engine/clustering.py), made of this room's parts. The server gives one to
its JetStream once the routes are up (JetStream.start_cluster)."""
import logging

from natsd.ids import get_hash
from natsd.jetstream.replicated import auditwatch, fromnatsserver, placement
from natsd.jetstream.replicated.listing import StreamListing
from natsd.jetstream.replicated.meta import MetaGroup

log = logging.getLogger("natsd")


class ClusterLayer:
    def __init__(self, engine):
        self.engine = engine
        self.meta = None                # MetaGroup, once started (needs the system account)
        self.listing = None             # StreamListing, with it

    def start(self):
        server = self.engine.server
        if server.accounts.system is None or server.system is None:
            log.warning("JetStream cluster needs a system account: no metadata group")
            return
        # a nats-server cluster member's state becomes natsd's before the group starts on it
        if not fromnatsserver.convert(self.engine, get_hash(server.name)):
            return
        self.meta = MetaGroup(self.engine)
        self.meta.start()
        self.listing = StreamListing(self.engine, self.meta)

    def stop(self):
        if self.listing is not None:
            self.listing.stop()
        if self.meta is not None:
            self.meta.stop()

    def claim(self, sublist, stream):
        return placement.Claim(sublist, placement.claimed_subjects(stream))

    def answer_here(self, jsa, stream, api_subject, request_subject, reply, hdr, payload, origin,
                    op=None, args=()):
        return placement.answer_here(jsa, stream, api_subject, request_subject, reply, hdr,
                                     payload, origin, op, args)

    def watch_answer(self, jsa, origin, op, subject, reply, payload):
        auditwatch.watch(jsa, origin, op, subject, reply, payload)

    def watched(self, jsa, reply):
        return auditwatch.watched(jsa, reply)
