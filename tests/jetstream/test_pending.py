"""natsd/jetstream/engine/pending.pyx: the compact pending-ack structure of a consumer.

Random operations (seeded) checked against a plain dict model, the size bound (<= 16 bytes per
pending message for 100,000 in-order deliveries, measured on the structure's own allocations),
and the edge cases: out-of-order inserts, delivery sequences that do not fit 32 bits, sparse
(filtered) sequences, empty pages and directory trimming.
"""
import io
import json
import random

import pytest

from natsd.jetstream.engine.pending import Pending


def _same(p, model):
    assert len(p) == len(model)
    assert bool(p) == bool(model)
    want = sorted((s, d, t) for s, (d, t) in model.items())
    assert p.items() == want
    assert p.keys() == [s for s, _, _ in want]
    assert list(p) == [s for s, _, _ in want]
    buf = io.BytesIO()
    p.write_json(buf)                               # state.json's "pending" object
    js = json.loads(buf.getvalue())
    assert js == {str(s): [d, t] for s, d, t in want}
    assert list(js) == [str(s) for s, _, _ in want]
    if want:
        assert p.first() == want[0][0]
        assert p.first_item() == (want[0][0], want[0][1])
    else:
        assert p.first() == 0 and p.first_item() is None
    p.check()


@pytest.mark.parametrize("seed,spread", [(1, 3), (2, 50), (3, 5000), (4, 2), (5, 1 << 40)])
def test_random_ops_match_dict_model(seed, spread):
    rng = random.Random(seed)
    p = Pending()
    model = {}
    nxt = 1                 # next "stream sequence" delivered in order
    dseq = 1
    for step in range(30000):
        op = rng.random()
        if op < 0.40:                               # in-order first delivery
            nxt += rng.randint(1, spread)
            ts = rng.randint(0, 1 << 62)
            assert p.add(nxt, dseq, ts) is (nxt not in model)
            model[nxt] = (dseq, ts)
            dseq += 1
        elif op < 0.47 and model:                   # redelivery: update in place
            s = rng.choice(list(model)) if len(model) < 64 else p.first()
            ts = rng.randint(-(1 << 62), 1 << 62)
            assert p.add(s, dseq, ts) is False
            model[s] = (dseq, ts)
            dseq += 1
        elif op < 0.52:                             # out-of-order insert (restore, reset)
            s = rng.randint(1, nxt + 10)
            d = rng.randint(1, dseq + 10)
            ts = rng.randint(0, 1 << 62)
            assert p.add(s, d, ts) is (s not in model)
            model[s] = (d, ts)
        elif op < 0.72:                             # ack of the oldest (the common case)
            if model:
                s = min(model)
                assert p.pop(s) == model.pop(s)[0]
        elif op < 0.85:                             # ack in the middle / unknown
            s = rng.choice(list(model)) if model and rng.random() < 0.8 else rng.randint(0, nxt + 5)
            want = model.pop(s, (0, 0))[0]
            assert p.pop(s) == want
            assert p.pop(s) == 0
        elif op < 0.90:                             # +WPI / NAK delay
            s = rng.choice(list(model)) if model and rng.random() < 0.8 else rng.randint(0, nxt + 5)
            ts = rng.randint(0, 1 << 62)
            assert p.set_ts(s, ts) is (s in model)
            if s in model:
                model[s] = (model[s][0], ts)
        elif op < 0.93:                             # lookups
            s = rng.choice(list(model)) if model and rng.random() < 0.7 else rng.randint(0, nxt + 5)
            assert (s in p) == (s in model)
            assert p.get(s) == model.get(s)
            assert p.dseq_of(s) == model.get(s, (0,))[0]
        elif op < 0.94:                             # ack-all floor
            if model:
                floor = rng.choice(list(model)) + rng.randint(-2, 2)
                gone = sorted(s for s in model if s <= floor)
                assert p.remove_upto(max(0, floor)) == gone
                for s in gone:
                    del model[s]
        elif op < 0.945:                            # purge below the stream's first
            first = rng.randint(0, nxt + 2)
            gone = sorted(s for s in model if s < first)
            assert p.remove_below(first) == gone
            for s in gone:
                del model[s]
        elif op < 0.95:                             # ack-wait scan
            cutoff = rng.randint(0, 1 << 62)
            exp, nxt_ts = p.expired(cutoff)
            assert exp == sorted(s for s, (_, t) in model.items() if t <= cutoff)
            later = [t for _, t in model.values() if t > cutoff]
            assert nxt_ts == (min(later) if later else None)
        if step % 997 == 0:
            _same(p, model)
    _same(p, model)
    for s in list(model):
        assert p.pop(s) == model.pop(s)[0]
    _same(p, model)
    assert p.nbytes < 256           # everything freed


def test_100k_pending_take_at_most_16_bytes_each():
    p = Pending()
    for s in range(1, 100_001):
        p.add(s, s, 1_700_000_000_000_000_000 + s)
    assert len(p) == 100_000
    assert p.nbytes / 100_000 <= 16, p.nbytes
    # a consumer that started deep into the stream, with redeliveries renumbering some
    q = Pending()
    base = 10_000_000_000
    for i in range(100_000):
        q.add(base + i, 5 + i, 1_700_000_000_000_000_000 + i)
    for i in range(0, 100_000, 7):
        q.add(base + i, 200_000 + i, 1)
    assert q.nbytes / 100_000 <= 16, q.nbytes
    q.check()
    # acking everything gives the memory back
    for s in range(1, 100_001):
        assert p.pop(s) == s
    assert len(p) == 0 and p.nbytes < 256


def test_sparse_sequences_stay_small():
    # a filtered consumer: one pending message every 100 stream sequences
    p = Pending()
    for i in range(10_000):
        p.add(1 + 100 * i, i + 1, i)
    assert p.nbytes / 10_000 <= 32, p.nbytes
    p.check()


def test_wide_delivery_sequences_and_rebase():
    p = Pending()
    p.add(10, 5, 1)
    p.add(11, 5 + (1 << 33), 2)                     # does not fit 32 bits: the page goes wide
    p.add(12, 3, 3)
    assert p.items() == [(10, 5, 1), (11, 5 + (1 << 33), 2), (12, 3, 3)]
    p.check()
    q = Pending()
    q.add(20, 1000, 1)
    q.add(21, 999, 2)                               # below the page's base: rebased
    q.add(19, 1, 3)
    assert q.items() == [(19, 1, 3), (20, 1000, 1), (21, 999, 2)]
    assert q.pop(20) == 1000 and q.get(21) == (999, 2)
    q.check()
    with pytest.raises(ValueError):
        q.add(30, 0, 1)


def test_poison_message_far_behind():
    # one message never acked while the consumer moves a million sequences on: the pages in
    # between are freed
    p = Pending()
    p.add(1, 1, 1)
    for s in range(2, 1_000_001):
        p.add(s, s, s)
        if s > 101:
            p.pop(s - 100)
    assert len(p) == 101
    assert p.first() == 1
    assert p.nbytes < 8 * 1024, p.nbytes
    p.check()
    assert p.remove_upto(1_000_000 - 50) == [1] + list(range(999_901, 999_951))
    p.check()


def test_out_of_range_keys_are_not_pending():
    # ack subjects and state files can carry any integer: never an error, never pending
    p = Pending()
    p.add(5, 1, 10)
    for bad in (-1, -(1 << 70), 1 << 64, 1 << 80):
        assert bad not in p
        assert p.pop(bad) == 0 and p.get(bad) is None and p.dseq_of(bad) == 0
        assert p.set_ts(bad, 1) is False
    assert p.remove_upto(-3) == [] and p.remove_below(0) == [] and p.remove_below(-9) == []
    assert p.set_ts(5, 1 << 80) and p.get(5) == (1, (1 << 63) - 1)      # NAK delay clamped
    assert p.set_ts(5, -(1 << 80)) and p.get(5) == (1, -(1 << 63))
    p.add(6, 2, 1 << 90)
    assert p.get(6) == (2, (1 << 63) - 1)
    assert p.remove_upto(1 << 70) == [5, 6] and len(p) == 0
    p.check()
