"""Ack state of a consumer: the ack protocol, ack floors, ack-wait timers and redelivery.

Owns (as a mixin of Consumer): parsing acks on `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>
.<ts>.<pending>` (+ACK/empty, -NAK [delay as {"delay": ns} or a Go duration], +WPI, +NXT
[batch], +TERM [reason], AckSync replies), explicit/all/none ack policies, moving the ack floor,
the ack-wait / backoff timer that queues expired messages for redelivery, max_deliver with the
MAX_DELIVERIES advisory, MSG_NAKED / MSG_TERMINATED advisories, ack sampling metrics, and
telling the stream about acks (workqueue/interest retention).
"""
import heapq
import json
import logging
import random

from natsd.gofmt import parse_go_duration
from natsd._core.conn import flush_all
from natsd.jetstream.engine.fastack import plain_acks

log = logging.getLogger("natsd")

NS = 1_000_000_000
EARLY_RUN = 32         # acks applied before a push consumer waiting on max_ack_pending delivers again


def now_ns():
    import time
    return time.time_ns()


class AckState:
    # ---- ack wait / redelivery ----

    def _deadline(self, seq):
        bo = self.cfg["backoff"]
        if bo:
            dc = self.rdc.get(seq, 1)
            return bo[min(dc - 1, len(bo) - 1)]
        return self.cfg["ack_wait"]

    def _arm_ptimer(self, delay):
        if self.cfg["ack_wait"] <= 0 and not self.cfg["backoff"]:
            return
        at = self.loop.time() + delay + 0.001
        if self._ptimer is not None and self._ptimer_at is not None and self._ptimer_at <= at:
            return
        if self._ptimer is not None:
            self._ptimer.cancel()
        self._ptimer_at = at
        self._ptimer = self.loop.call_later(max(0.0, at - self.loop.time()), self._check_pending)

    def _check_pending(self):
        self._ptimer = None
        self._ptimer_at = None
        if self.closed or not self.pending:
            return
        now = now_ns()
        first = self.stream.store.first_seq
        nxt = None
        expired = []
        maxdc = self.cfg["max_deliver"]
        pending = self.pending
        for seq in pending.remove_below(first):
            self.rdc.pop(seq, None)
        if self.cfg["backoff"]:
            due = []
            for seq, _, ts in pending.items():
                deadline = self._deadline(seq)
                elapsed = now - ts
                if elapsed >= deadline:
                    due.append(seq)
                else:
                    left = deadline - elapsed
                    if nxt is None or left < nxt:
                        nxt = left
        else:
            # one deadline for all: the scan runs in C (pending.pyx), Python sees the due only
            wait = self.cfg["ack_wait"]
            due, oldest = pending.expired(now - wait)
            if oldest is not None:
                nxt = wait - (now - oldest)
        for seq in due:
            if seq in self.rdq_set:
                continue
            dc = self.rdc.get(seq, 1)
            if maxdc > 0 and dc >= maxdc:
                self._notify_max_deliveries(seq, dc)
                self._drop_pending(seq)
                continue
            expired.append(seq)
        if expired:
            for seq in expired:
                heapq.heappush(self.rdq, seq)
                self.rdq_set.add(seq)
            self.kick()
        if not self.pending:
            self.adflr, self.asflr = self.dseq - 1, max(self.asflr, self.sseq - 1)
            self.schedule_save()
        elif nxt is not None:
            self._arm_ptimer(nxt / NS)
        else:
            self._arm_ptimer(self._deadline(self.pending.first()) / NS)

    def _drop_pending(self, seq):
        d = self.pending.pop(seq)
        self.rdq_set.discard(seq)
        if d:
            self._move_ack_floor(d, seq)
            mp = self.cfg["max_ack_pending"]
            if mp > 0 and len(self.pending) == mp - 1:
                self.kick()
        self.schedule_save()

    def _notify_max_deliveries(self, seq, dc):
        self.advisory("MAX_DELIVERIES", "io.nats.jetstream.advisory.v1.max_deliver",
                      stream_seq=seq, deliveries=dc)

    # ---- acks ----

    def _on_acks(self, sub, msgs):
        """Every ack the loop read for this consumer in one iteration (router batched mode).
        Under the explicit policy on a limits stream, runs of plain +ACKs without a reply (the
        bulk of a consumer's traffic) are applied in C (fastack.pyx, the rules of
        process_ack and _move_ack_floor); anything else goes through _on_ack, in order. A push
        consumer that max_ack_pending held back delivers again every EARLY_RUN acks, its
        output flushed at once, rather than after the whole burst: the client gets its next
        messages while the rest of its acks are applied, so client and server work side by
        side."""
        if self.closed:
            return
        if self.replica is not None:
            self.replica.note_acks(msgs)     # kept for a next leader until proposed
        fast = (self.cfg["ack_policy"] == "explicit" and not self.sample and not self.lss
                and self.stream.config.get("retention", "limits") == "limits")
        mp = self.cfg["max_ack_pending"]
        kick_at = mp - 1 if mp > 0 else -1
        i, total, n = 0, len(msgs), 0
        while i < total:
            if fast:
                most = EARLY_RUN - n % EARLY_RUN
                i, counted, self.adflr, self.asflr, kick = plain_acks(
                    self.pending, msgs, i, most, self.sseq, self.dseq, self.adflr, self.asflr,
                    self.rdc, self.rdq_set, kick_at)
                n += counted
                if kick:
                    self.kick()
                if counted and n % EARLY_RUN == 0 and self._scheduled and self.is_push():
                    self._run()
                    flush_all()
                if self.closed:
                    return
                if i == total or counted == most:
                    continue                    # all applied, or the run's step was reached
            subject, reply, hdr, payload, origin = msgs[i]
            i += 1
            self._on_ack(sub, subject, reply, hdr, payload, origin)
            if self.closed:
                return
        if n:
            self.last_ack_ns = now_ns()
            self.last_activity = self.loop.time()
            self.schedule_save()

    def _on_ack(self, sub, subject, reply, hdr, payload, origin):
        if self.closed:
            return
        toks = subject.split(b".")
        if len(toks) < 9:
            return
        try:
            dc, sseq, dseq = int(toks[4]), int(toks[5]), int(toks[6])
        except ValueError:
            return
        self.last_ack_ns = now_ns()
        self.last_activity = self.loop.time()
        body = payload.strip() if payload else b""
        send_reply = True
        if body == b"" or body == b"+ACK" or body == b"+OK" or body.startswith(b"+ACK "):
            send_reply = self.process_ack(sseq, dseq, dc)
        elif body.startswith(b"+NXT"):
            self.process_ack(sseq, dseq, dc)
            if reply and self.waiting is not None:
                self.waiting.request(reply.decode(), body[4:].strip(), hdr)
            send_reply = False
        elif body.startswith(b"-NAK"):
            self._process_nak(sseq, dseq, dc, body[4:].strip())
        elif body == b"+WPI":
            if self.pending.set_ts(sseq, now_ns()):
                self._arm_ptimer(self._deadline(sseq) / NS)
        elif body.startswith(b"+TERM"):
            reason = body[5:].strip().decode("utf-8", "replace")
            send_reply = self.process_ack(sseq, dseq, dc, sample=False)
            self.advisory("MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated",
                          consumer_seq=dseq, stream_seq=sseq, deliveries=dc,
                          reason=reason or None)
        else:
            send_reply = False
        if reply and send_reply:
            self.answer_ack(reply)

    def process_ack(self, sseq, dseq, dc, sample=True):
        """Apply an ack; False when nats-server would not answer an AckSync (ack policy none,
        a sequence never delivered)."""
        if sseq >= self.sseq and not self.lss:
            return False
        ap = self.cfg["ack_policy"]
        acked = []
        if ap == "explicit":
            d = self.pending.pop(sseq)
            if d:
                if sample and self.sample:
                    self._sample_ack(sseq, d, dc)
                self._move_ack_floor(d, sseq)
                acked.append(sseq)
                mp = self.cfg["max_ack_pending"]
                if mp > 0 and len(self.pending) == mp - 1:
                    self.kick()
            self.rdc.pop(sseq, None)
            self.rdq_set.discard(sseq)
        elif ap in ("all", "flow_control"):
            if dseq <= self.adflr or sseq <= self.asflr:
                return True
            was_full = self.cfg["max_ack_pending"] > 0 and len(self.pending) >= self.cfg["max_ack_pending"]
            self.adflr, self.asflr = dseq, sseq
            for seq in self.pending.remove_upto(sseq):
                self.rdc.pop(seq, None)
                self.rdq_set.discard(seq)
                acked.append(seq)
            if not self.pending:
                self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
            if was_full:
                self.kick()
        else:
            return False
        if acked and self.stream.config.get("retention", "limits") != "limits":
            for seq in acked:
                self._ack_removal(seq)
        self.schedule_save()
        return True

    def _ack_removal(self, seq):
        fn = getattr(self.stream, "ack_removal", None)
        if fn is not None:
            try:
                fn(seq, self)
            except Exception:
                log.exception("stream ack_removal failed")

    def _move_ack_floor(self, dseq, sseq):
        if not self.pending:
            self.adflr = self.dseq - 1
            self.asflr = self.sseq - 1
            if self.lss:
                self.asflr = min(self.asflr, self.lss[0] - 1)
            return
        low, ld = self.pending.first_item()
        if low > sseq:
            nd, ns_ = ld - 1, low - 1
            if dseq == self.adflr + 1 or sseq == self.asflr + 1 or nd >= self.adflr:
                self.adflr = max(self.adflr, min(nd, self.dseq - 1))
                self.asflr = max(self.asflr, ns_)

    def _process_nak(self, sseq, dseq, dc, arg):
        if dseq <= self.adflr or dseq >= self.dseq:
            return
        if sseq not in self.pending:
            return
        self.advisory("MSG_NAKED", "io.nats.jetstream.advisory.v1.nak",
                      consumer_seq=dseq, stream_seq=sseq, deliveries=dc)
        if arg:
            delay = None
            try:
                if arg.startswith(b"{"):
                    delay = int(json.loads(arg).get("delay") or 0)
                else:
                    delay = parse_go_duration(arg.decode())
            except Exception:
                delay = None
            if delay is not None:
                if sseq in self.rdq_set:
                    self.rdq_set.discard(sseq)
                    self.rdq = [s for s in self.rdq if s != sseq]
                    heapq.heapify(self.rdq)
                self.pending.set_ts(sseq, now_ns() - self._deadline(sseq) + delay)
                if self._ptimer is not None:
                    self._ptimer.cancel()
                    self._ptimer = None
                self._arm_ptimer(max(0, delay) / NS if delay < self._deadline(sseq) else 0.01)
                return
        if sseq not in self.rdq_set:
            heapq.heappush(self.rdq, sseq)
            self.rdq_set.add(sseq)
        self.kick()

    def _sample_ack(self, sseq, dseq, dc):
        if random.randint(1, 100) > self.sample:
            return
        p_ts = self.last_delivered_ns or now_ns()
        from natsd.jetstream.engine import advisories      # built only when someone listens
        advisories.send(self.account.sublist,
                        "$JS.EVENT.METRIC.CONSUMER.ACK.%s.%s" % (self.stream.name, self.name),
                        "io.nats.jetstream.metric.v1.consumer_ack", self._domain(),
                        stream=self.stream.name, consumer=self.name, consumer_seq=dseq,
                        stream_seq=sseq, ack_time=max(0, now_ns() - p_ts), deliveries=dc)
