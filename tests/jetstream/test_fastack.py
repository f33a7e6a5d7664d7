"""Plain acks applied in C (natsd/jetstream/engine/fastack.pyx) against the Python rules they stand
for (AckState.process_ack and _move_ack_floor): seeded random deliveries, redeliveries and
ack orders, the same pending set, ack floors, redelivery records and max_ack_pending wake-ups
afterwards. Malformed ack subjects are ignored, and anything but a plain ack stops the run."""
import random
import types

from natsd.jetstream.engine.ackstate import AckState
from natsd.jetstream.engine.fastack import plain_acks
from natsd.jetstream.engine.pending import Pending


class Rules(AckState):
    """A consumer's ack state alone, for AckState's Python rules."""

    def __init__(self, mp):
        self.cfg = {"ack_policy": "explicit", "max_ack_pending": mp}
        self.pending = Pending()
        self.rdc, self.rdq_set = {}, set()
        self.adflr = self.asflr = 0
        self.sseq = self.dseq = 1
        self.lss = None
        self.sample = 0
        self.stream = types.SimpleNamespace(config={"retention": "limits"})
        self.kicks = 0

    def kick(self):
        self.kicks += 1

    def schedule_save(self):
        pass

    def deliver(self, sseq):
        self.pending.add(sseq, self.dseq, 0)
        self.dseq += 1

    def state(self):
        return (sorted(self.pending.items()), self.adflr, self.asflr, sorted(self.rdc),
                sorted(self.rdq_set))


def ack(sseq, dseq, body=b"+ACK", reply=None):
    return (b"$JS.ACK.S.C.1.%d.%d.1700000000000000000.0" % (sseq, dseq), reply, None, body, None)


def test_plain_acks_follow_the_python_rules():
    rnd = random.Random(1127)
    for _round in range(200):
        mp = rnd.choice([0, 5, 20])
        py, c = Rules(mp), Rules(mp)
        top = rnd.randint(1, 60)
        for seq in range(1, top + 1):
            if rnd.random() < 0.8:
                py.deliver(seq)
                c.deliver(seq)
        py.sseq = c.sseq = top + 1
        for seq, _d, _ts in list(py.pending.items()):
            if rnd.random() < 0.2:                      # a redelivery under a new sequence
                for r in (py, c):
                    r.pending.pop(seq)
                    r.pending.add(seq, r.dseq, 0)
                    r.dseq += 1
                    r.rdc[seq] = 2
                    r.rdq_set.add(seq)
        acks = [(seq, d) for seq, d, _ts in py.pending.items()]
        acks += [(rnd.randint(1, top + 5), rnd.randint(1, 99)) for _ in range(rnd.randint(0, 5))]
        rnd.shuffle(acks)
        acks = acks[:rnd.randint(0, len(acks))]
        msgs = [ack(s, d, rnd.choice([b"+ACK", b""])) for s, d in acks]
        for s, d in acks:
            py.process_ack(s, d, 1)
        i, counted, c.adflr, c.asflr, kick = plain_acks(
            c.pending, msgs, 0, len(msgs) + 1, c.sseq, c.dseq, c.adflr, c.asflr, c.rdc,
            c.rdq_set, mp - 1 if mp > 0 else -1)
        assert (i, counted) == (len(msgs), len(msgs))
        assert c.state() == py.state()
        assert kick == (py.kicks > 0)


def test_a_run_stops_at_its_limit_and_at_anything_but_a_plain_ack():
    r = Rules(0)
    for seq in range(1, 11):
        r.deliver(seq)
    r.sseq = 11
    msgs = [ack(1, 1), ack(2, 2), ack(3, 3), ack(4, 4, b"-NAK"), ack(5, 5, reply=b"_INBOX.x"),
            ack(6, 6)]
    i, counted, r.adflr, r.asflr, _ = plain_acks(r.pending, msgs, 0, 2, r.sseq, r.dseq,
                                                 r.adflr, r.asflr, r.rdc, r.rdq_set, -1)
    assert (i, counted, r.adflr, r.asflr) == (2, 2, 2, 2)
    i, counted, r.adflr, r.asflr, _ = plain_acks(r.pending, msgs, i, 32, r.sseq, r.dseq,
                                                 r.adflr, r.asflr, r.rdc, r.rdq_set, -1)
    assert (i, counted, r.asflr) == (3, 1, 3)           # stopped at the NAK
    i, counted, *_ = plain_acks(r.pending, msgs, 4, 32, r.sseq, r.dseq, r.adflr, r.asflr,
                                r.rdc, r.rdq_set, -1)
    assert (i, counted) == (4, 0)                       # stopped at the ack that wants a reply
    assert r.pending.first() == 4


def test_malformed_ack_subjects_are_ignored():
    r = Rules(0)
    for seq in range(1, 4):
        r.deliver(seq)
    r.sseq = 4
    bad = [(b"$JS.ACK.S.C.1.1.1.0", None, None, b"+ACK", None),            # eight tokens
           (b"$JS.ACK.S.C.1.+1.1.0.0", None, None, b"+ACK", None),         # not digits
           (b"$JS.ACK.S.C.1.1.x.0.0", None, None, b"+ACK", None),
           (b"$JS.ACK.S.C.1..1.0.0", None, None, b"+ACK", None),
           (b"$JS.ACK.S.C.1.12345678901234567890.1.0.0", None, None, b"+ACK", None),
           ack(2, 2)]
    i, counted, adflr, asflr, _ = plain_acks(r.pending, bad, 0, 32, r.sseq, r.dseq, 0, 0,
                                             r.rdc, r.rdq_set, -1)
    assert (i, counted, adflr, asflr) == (len(bad), 1, 0, 0)
    assert [seq for seq, _d, _ts in r.pending.items()] == [1, 3]
