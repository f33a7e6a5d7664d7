"""Publishes and acks that reach a replicated stream's leader while it hands its leadership on.

A leader transferring leadership (lame duck mode, shutdown, a step-down) proposes nothing
until the transfer ends, yet it still holds the stream's subscription, so publishes keep
arriving. Rather than drop them (their publishers would wait out their timeouts), the leader
holds them here, and once the group settles they go on: proposed by this server if the
transfer failed and it still leads, else sent to the new leader over the routes, on its
`$JSC.FWD.<group>.<peer>.<taker>` subject (the taker: the server whose subscription took
them), with their reply subjects, so that it answers their publishers. If no leader turns up
within HOLD_FOR, they are dropped as before (the publishers retry).

Once it has stepped down, the old leader keeps the stream's subscription for GRACE seconds
more: the other servers route publishes to it until they hear it unsubscribed, and those
would otherwise be dropped on arrival. It forwards those that carry a reply (the ones the
new leader can tell apart, below); a publish without one is dropped, as before. They go to
its successor only, the first leader after it: that one may have taken the same publishes
through its own subscription, and only it can tell the two copies apart. If leadership has
moved on again by then (to a third server, or back to this one: a step-down during the grace
second), the successor may have proposed them already, so they are dropped (their publishers
retry, as when nobody leads).

A consumer with a Raft group of its own (natsd/jetstream/replicated/consumergroup.py) hands its acks on
the same way, through a Forwarder of its group's, catching `$JS.ACK.<stream>.<consumer>.>`.

Acks go the same way: the consumers' acks that no state entry carries yet when this server
stops leading (natsd/jetstream/replicated/consumers.py keeps them), and those that reach it in its
grace second, through a subscription to `$JS.ACK.<stream>.>` that takes over from the
consumers' own. When the grace second ends, that subscription gives way to one the routes
are not told of, for LATE seconds more: acks a route sent before it heard this server no
longer listens still arrive, and go on too. They travel on `$JSC.FWDA.<group>.<peer>`; the
next leader's consumers apply them, and an ack applied twice changes nothing (a local
client's ack may reach both: the new leader over a route, and this server's catcher).

For a moment both may have the stream's subscription (the new leader subscribed, the old one
has not yet heard of it), and a server routing a publish then sends it to both. So a new
leader notes the reply subjects of the publishes it takes, per taker, in its first
HOLD_FOR + GRACE seconds and for HOLD_FOR seconds after each forwarded batch (copies keep
coming while an old leader forwards), and drops one whose reply it already took from another
taker: one publish reaches a server's subscription once, so two with one reply from the same
taker are two publishes (nats.go's async publishes draw six random characters per reply, and
a fast publisher repeats one within seconds). A publish without a reply cannot be told apart.

The forwarded payload is natsd's own: per message _FWD_MSG (lengths of subject, reply,
headers + 1 (0: none), payload), then those bytes.
"""
import logging
import struct
import time

from natsd._core.sublist import Subscription

log = logging.getLogger("natsd")

_FWD_MSG = struct.Struct("<IIII")
HOLD_MSGS = 10000                       # messages held at most; later ones are dropped
HOLD_FOR = 2.0                          # seconds held waiting for a leader, at most
GRACE = 1.0                             # seconds a leader that stepped down keeps forwarding
LATE = 2.0                              # seconds after it that it still forwards the acks in flight
RETRY = 0.005                           # seconds between two looks at the group
CHUNK_BYTES = 256 << 10                 # bytes of one forwarded message, about


def subject(group, peer, taker="*"):
    return "$JSC.FWD.%s.%s.%s" % (group, peer, taker)


def ack_subject(group, peer):
    return "$JSC.FWDA.%s.%s" % (group, peer)


def encode(msgs):
    """(subject, reply, headers or None, payload, origin) -> forwarded payloads of about
    CHUNK_BYTES each (a bigger message goes alone)."""
    out, parts, size = [], [], 0
    for subj, reply, hdr, payload, _ in msgs:
        reply = reply or b""
        n = _FWD_MSG.size + len(subj) + len(reply) + len(payload) + (0 if hdr is None else len(hdr))
        if parts and size + n > CHUNK_BYTES:
            out.append(b"".join(parts))
            parts, size = [], 0
        parts.append(_FWD_MSG.pack(len(subj), len(reply), 0 if hdr is None else len(hdr) + 1, len(payload)))
        parts += (subj, reply) if hdr is None else (subj, reply, hdr)
        parts.append(payload)
        size += n
    if parts:
        out.append(b"".join(parts))
    return out


def copied(msgs, taker=None):
    """Messages as the loop hands them over (its buffers are valid during the callback only)
    -> their bytes, kept, with the server whose subscription took them in the last place."""
    return [(bytes(s), r and bytes(r), None if h is None else bytes(h), bytes(p), taker)
            for s, r, h, p, _ in msgs]


def by_taker(msgs):
    """Kept messages -> [(taker, its messages in order)]."""
    groups = {}
    for m in msgs:
        groups.setdefault(m[4], []).append(m)
    return list(groups.items())


def decode(data, taker=None):
    """A forwarded payload -> [(subject, reply or None, headers or None, payload, taker)]."""
    msgs, off, end = [], 0, len(data)
    while off < end:
        slen, rlen, hl, plen = _FWD_MSG.unpack_from(data, off)
        off += _FWD_MSG.size
        subj = data[off:off + slen]
        off += slen
        reply = data[off:off + rlen] or None
        off += rlen
        hdr = None
        if hl:
            hdr = data[off:off + hl - 1]
            off += hl - 1
        if off + plen > end:
            raise ValueError("a forwarded message runs past its payload's %d bytes" % end)
        msgs.append((subj, reply, hdr, data[off:off + plen], taker))
        off += plen
    return msgs


class Forwarder:
    """One replicated stream's held publishes (ReplicatedStream.on_publish gives them here
    while its group transfers leadership) and acks, and its forwarding subscriptions."""

    def __init__(self, replica):
        self.replica = replica
        self.held = []                  # handing leadership on: publishes for whoever leads next
        self.grace_held = []            # stepped down: publishes for the successor only
        self.successor = None           # stepped down: the first leader since ("" unknown yet)
        self.acks = []                  # acks held for the next leader, as messages
        self.since = 0.0
        self.timer = None
        self.taken = {}                 # a new leader: taker -> replies of the publishes it took
        self.taking_until = 0.0         # while noting them (monotonic)
        self.forward_until = 0.0        # a leader that stepped down: forwarding until (monotonic)
        self.unsubscribe_timer = None
        self.late_acks = None           # a leader that stepped down: its `$JS.ACK.<stream>.>`
        self.late_timer = None          # when the routes no longer hear of it: its end
        r = replica
        system = r.server.system
        self.subs = [system.subscribe(subject(r.group_name, r.meta.peer), self._forwarded),
                     system.subscribe(ack_subject(r.group_name, r.meta.peer), self._forwarded_acks)]

    def stop(self):
        self._drop_late_acks()
        for t in (self.timer, self.unsubscribe_timer):
            if t is not None:
                t.cancel()
        self.timer = self.unsubscribe_timer = None
        self.held, self.grace_held, self.acks = [], [], []
        for sub in self.subs:
            self.replica.server.system.unsubscribe(sub)

    def stepped_down(self):
        """This server led the group until now: it forwards for GRACE seconds. Called before
        its consumers unsubscribe, so that the routes never hear the stream's acks have
        nobody here."""
        self.forward_until = time.monotonic() + GRACE
        self.successor = ""
        if self.unsubscribe_timer is not None:
            self.unsubscribe_timer.cancel()
        self.unsubscribe_timer = self.replica.server.loop.call_later(GRACE, self._grace_over)
        if self.late_acks is None or self.late_acks.local_only:
            self._catch_late_acks(local_only=False)

    def leader_now(self, leader):
        """The group has a leader again (this server's stream heard of each change)."""
        if leader and self.successor == "":
            self.successor = leader

    def forwarding(self):
        return time.monotonic() < self.forward_until

    def _grace_over(self):
        self.unsubscribe_timer = None
        self.forward_until = 0.0
        if self.late_acks is not None:  # the routes hear it unsubscribed; what they sent comes
            self._catch_late_acks(local_only=True)
            self.late_timer = self.replica.server.loop.call_later(LATE, self._late_over)
        self.replica.resubscribe()      # unsubscribes, unless it leads again

    def _late_over(self):
        self.late_timer = None
        self._drop_late_acks()

    def _catch_late_acks(self, local_only):
        """Catch the stream's acks from now on, announced to the routes or not (in place of the
        catcher there was, which gives what it read but did not hand over yet)."""
        r = self.replica
        s = Subscription(None, r.ack_filter().encode(), b"", None, self._late)
        s.batched = True
        s.local_only = local_only
        r.jsa.sublist.insert(s)         # before the old one goes: never a moment without
        self._drop_late_acks()
        self.late_acks = s

    def _drop_late_acks(self):
        if self.late_timer is not None:
            self.late_timer.cancel()
            self.late_timer = None
        s = self.late_acks
        if s is not None:
            self.replica.jsa.sublist.remove(s)
            self.late_acks = None
            if s.batch:                 # read, not yet handed over: they go on all the same
                msgs, s.batch = s.batch, None
                self.hold_acks(msgs)

    def _late(self, sub, msgs):
        """Acks that reached this server in its grace second: they go to the next leader."""
        self.hold_acks(msgs)

    def refused(self, msgs, taker):
        """Publishes the group would not take from this server (it is not the leader)."""
        if self.replica.group.node.transfer_to:
            self.hold(msgs, taker)
        elif self.forwarding():
            self._keep(self.grace_held, [m for m in msgs if m[1]], "publishes", taker)

    def leading(self):
        """This server just became the group's leader."""
        self._drop_late_acks()          # its consumers subscribe again
        self.taken = {}
        self.taking_until = time.monotonic() + HOLD_FOR + GRACE

    def fresh(self, msgs, taker):
        """A new leader's publishes that `taker`'s subscription took -> those no other taker
        gave it already (all of them once it stopped noting: see the module's text)."""
        now = time.monotonic()
        if taker != self.replica.meta.peer:
            self.taking_until = max(self.taking_until, now + HOLD_FOR)
        elif now >= self.taking_until:
            self.taking_until, self.taken = 0.0, {}
            return msgs
        others = [seen for who, seen in self.taken.items() if who != taker]
        mine = self.taken.setdefault(taker, set())
        out = []
        for m in msgs:
            if m[1]:
                reply = bytes(m[1])
                if others and any(reply in seen for seen in others):
                    continue
                mine.add(reply)
            out.append(m)
        return out

    def hold(self, msgs, taker):
        """Publishes this server could not propose: it is handing leadership on, or just did."""
        self._keep(self.held, msgs, "publishes", taker)

    def hold_acks(self, acks):
        """Acks for the next leader (replconsumers.py's, or the grace second's)."""
        self._keep(self.acks, acks, "acks")

    def _keep(self, into, msgs, what, taker=None):
        if not msgs:
            return
        room = HOLD_MSGS - len(into)
        if room < len(msgs):
            log.warning("JetStream stream '%s > %s': dropped %d %s that arrived while its "
                        "leadership was handed on", self.replica.jsa.name, self.replica.stream.name,
                        len(msgs) - max(room, 0), what)
        into += copied(msgs[:max(room, 0)], taker)
        self._settle_soon()

    def _settle_soon(self):
        if self.timer is None:
            self.since = time.monotonic()
            self.timer = self.replica.server.loop.call_later(RETRY, self._settle)

    def _settle(self):
        """Where the held messages and acks go, once the group says."""
        self.timer = None
        r = self.replica
        node = r.group.node
        if r.group.stopped or not (self.held or self.grace_held or self.acks):
            self.held, self.grace_held, self.acks = [], [], []
            return
        self.leader_now(node.leader)    # (the stream may not have heard of it yet)
        if self.grace_held and node.leader and node.leader != self.successor:
            log.debug("JetStream stream '%s > %s': dropped %d publishes its grace second took: "
                      "%s leads, not %s", r.jsa.name, r.stream.name, len(self.grace_held), node.leader,
                      self.successor)
            self.grace_held = []
        if r.is_leader() and not node.transfer_to:
            held = self.held + self.grace_held     # grace_held: nobody else led since
            acks, self.held, self.grace_held, self.acks = self.acks, [], [], []
            for taker, msgs in by_taker(held):
                r.on_publish(None, msgs, taker)
            if acks:
                r.consumers.take_acks(acks)
            return
        leader = node.leader if not r.is_leader() else ""
        if leader and leader != r.meta.peer:
            for taker, msgs in by_taker(self.held + self.grace_held):
                for payload in encode(msgs):
                    r.server.system.publish(subject(r.group_name, leader, taker), payload)
            for payload in encode(self.acks):
                r.server.system.publish(ack_subject(r.group_name, leader), payload)
            self.held, self.grace_held, self.acks = [], [], []
            return
        if time.monotonic() - self.since > HOLD_FOR:
            log.warning("JetStream stream '%s > %s': dropped %d publishes and %d acks held while "
                        "no leader took over", r.jsa.name, r.stream.name,
                        len(self.held) + len(self.grace_held), len(self.acks))
            self.held, self.grace_held, self.acks = [], [], []
            return
        self.timer = r.server.loop.call_later(RETRY, self._settle)

    def _forwarded(self, sub, subj, reply, hdr, payload, origin):
        """Publishes the previous leader held while it handed leadership to this server."""
        taker = bytes(subj).rsplit(b".", 1)[-1].decode()
        msgs = self._decoded(payload, "publishes", taker)
        if msgs is not None:             # a leader proposes them, one handing on holds them
            self.replica.on_publish(None, msgs, taker)

    def _forwarded_acks(self, sub, subj, reply, hdr, payload, origin):
        """Acks the previous leader's consumers took but never proposed, or that reached it
        after it handed on."""
        acks = self._decoded(payload, "acks")
        if acks is not None:
            self.replica.consumers.take_acks(acks)

    def _decoded(self, payload, what, taker=None):
        try:
            return decode(bytes(payload), taker)
        except (ValueError, struct.error) as e:
            log.warning("JetStream stream '%s > %s': dropped malformed forwarded %s: %s",
                        self.replica.jsa.name, self.replica.stream.name, what, e)
            return None
