"""Stream listings on a cluster (`STREAM.NAMES`, `STREAM.LIST`) that name every stream of the
account, wherever it lives, as nats-server's meta leader answers them.

Every server knows the replicated streams (the meta group's assignments, natsd/jetstream/meta.py)
but only its own one-replica streams (natsd/jetstream/placement.py). The server a listing
reaches asks every JetStream server it has a route to, on `$JSC.LS` in the system account,
for the account's streams that match the request's subject: their one-replica streams, and
for `LIST` the infos of the replicated streams they lead. It answers once every server it
asked has replied, or after GATHER_TIMEOUT; a replicated stream whose leader did not answer
is named in `missing`, as nats-server names it.
"""
import json
import logging

from natsd.subject import subjects_overlap

log = logging.getLogger("natsd")

GATHER = "$JSC.LS"
GATHER_TIMEOUT = 2.0                    # seconds to wait for the other servers' answers


def matching(configs, subject):
    """The (name, config) pairs whose subjects overlap `subject` (all when it is empty),
    sorted by name."""
    out = sorted(configs, key=lambda nc: nc[0])
    if subject:
        out = [(n, c) for n, c in out if any(subjects_overlap(subject, x) for x in c.get("subjects") or [])]
    return out


class StreamListing:
    def __init__(self, engine, meta):
        self.engine = engine
        self.meta = meta
        self.server = engine.server
        self.sub = self.server.system.subscribe(GATHER, self._on_request)

    def stop(self):
        self.server.system.unsubscribe(self.sub)

    # ---- what this server holds ----

    def held(self, jsa, subject, infos):
        """The account's streams this server answers for: one-replica ones, and with `infos`
        the replicated ones it leads. -> names, or infos."""
        out = []
        for name, _ in matching(((s.name, s.config) for s in jsa.streams.values()), subject):
            st = jsa.streams[name]
            if st.replica is None:
                out.append(st.info(dynamic=False) if infos else name)
            elif infos and st.replica.is_leader():
                out.append(st.info(dynamic=False))
        return out

    def _on_request(self, sub, subject, reply, hdr, payload, origin):
        if not reply or origin is None:
            return                      # our own request: gather() counted this server already
        try:
            req = json.loads(bytes(payload))
            jsa = self.engine.jsas.get(req["acc"])
            held = self.held(jsa, req.get("subject", ""), bool(req.get("infos"))) if jsa is not None else []
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Stream listing request dropped: %s", e)
            return
        self.server.system.publish(bytes(reply), json.dumps({"streams": held}).encode())

    # ---- asking everyone ----

    def gather(self, jsa, subject, infos, done):
        """done(names or infos of the whole cluster, sorted by name; replicated streams
        nobody answered for) once every server with a route here answered, or at the timeout."""
        asked = len(self.meta.connected)
        got = [self.held(jsa, subject, infos)]
        state = {"timer": None, "sub": None}

        def finish():
            if state["sub"] is None:
                return
            self.server.system.unsubscribe(state["sub"])
            state["sub"] = None
            if state["timer"] is not None:
                state["timer"].cancel()
            if len(got) <= asked:
                log.warning("Did not receive all stream info results for %r", jsa.name)
            done(*self._merge(jsa, subject, infos, got))

        def on_answer(sub, subj, reply, hdr, payload, origin):
            try:
                got.append(json.loads(bytes(payload))["streams"])
            except (ValueError, KeyError, TypeError):
                return
            if len(got) > asked:
                finish()
        inbox = self.server.system.new_inbox()
        state["sub"] = self.server.system.subscribe(inbox, on_answer)
        if not asked:
            finish()
            return
        state["timer"] = self.server.loop.call_later(GATHER_TIMEOUT, finish)
        self.server.system.publish(GATHER, json.dumps({"acc": jsa.name, "subject": subject,
                                                       "infos": infos}).encode(), reply=inbox)

    def _merge(self, jsa, subject, infos, got):
        assigned = [name for name, _ in matching(((k[1], a["cfg"]) for k, a in self.meta.assignments.items()
                                                  if k[0] == jsa.name), subject)]
        if not infos:
            names = set(assigned)
            for part in got:
                names.update(part)
            return sorted(names), []
        by_name = {}
        for part in got:
            for info in part:
                by_name.setdefault(info["config"]["name"], info)
        missing = [n for n in assigned if n not in by_name]
        return [by_name[n] for n in sorted(by_name)], missing
