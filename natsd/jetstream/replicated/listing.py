"""Stream listings (`STREAM.NAMES`, `STREAM.LIST`) and account info (`$JS.API.INFO`) on a
cluster: every stream of the account, wherever it lives, as nats-server's meta leader answers.

Every server knows the replicated streams (the meta group's assignments, natsd/jetstream/replicated/meta.py)
but only its own one-replica streams (natsd/jetstream/replicated/placement.py). The server a listing
reaches asks every JetStream server it has a route to, on `$JSC.LS` in the system account,
for the account's streams that match the request's subject: their one-replica streams, and
for `LIST` the infos of the replicated streams they lead. It answers once every server it
asked has replied, or after GATHER_TIMEOUT; a replicated stream whose leader did not answer
is named in `missing`, as nats-server names it.

For account info each server tells its part of the totals: the bytes of every copy it holds
(a stream with three replicas counts three times, as on nats-server), the reservations and
consumers of the streams it answers for, and the API requests of the account it handled
(nats-server's servers add up each other's counts from their usage updates).
"""
import json
import logging

from natsd.jetstream.engine.streamconfig import matching

log = logging.getLogger("natsd")

GATHER = "$JSC.LS"
GATHER_TIMEOUT = 2.0                    # seconds to wait for the other servers' answers
TOTALS = ("memory", "storage", "reserved_memory", "reserved_storage", "consumers", "api_total", "api_errors")


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

    def usage_here(self, jsa):
        """This server's part of the account's totals (see the module's docstring)."""
        out = dict.fromkeys(TOTALS, 0)
        out["one_replica"] = []
        if jsa is None:
            return out
        out["memory"], out["storage"] = jsa.usage()     # every copy here
        out["api_total"], out["api_errors"] = jsa.api_total, jsa.api_errors
        for st in jsa.streams.values():
            kind = "memory" if st.config.get("storage") == "memory" else "storage"
            if st.replica is None:
                out["one_replica"].append(st.name)
            elif not st.replica.is_leader():
                continue
            if st.config.get("max_bytes", -1) > 0:
                out["reserved_" + kind] += st.config["max_bytes"]
            out["consumers"] += jsa.consumers_of(st)
        return out

    def _part(self, jsa, req):
        """This server's answer to `req`; an empty one where the account has no JetStream."""
        if req.get("usage"):
            return self.usage_here(jsa)
        return self.held(jsa, req.get("subject", ""), bool(req.get("infos"))) if jsa is not None else []

    def _on_request(self, sub, subject, reply, hdr, payload, origin):
        if not reply or origin is None:
            return                      # our own request: gather() counted this server already
        try:
            req = json.loads(bytes(payload))
            jsa = self.engine.jsas.get(req["acc"])
            part = self._part(jsa, req)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Stream listing request dropped: %s", e)
            return
        self.server.system.publish(bytes(reply), json.dumps({"part": part}).encode())

    # ---- asking everyone ----

    def streams(self, jsa, subject, infos, done):
        """done(names or infos of the whole cluster, sorted by name; replicated streams
        nobody answered for)."""
        self._gather(jsa, {"subject": subject, "infos": infos},
                     lambda parts: done(*self._merge(jsa, subject, infos, parts)))

    def account_usage(self, jsa, done):
        """done(the account's totals over the cluster: memory, storage, reserved_memory,
        reserved_storage, streams, consumers, api_total, api_errors)."""
        def merge(parts):
            totals = dict.fromkeys(TOTALS, 0)
            names = {k[1] for k in self.meta.assignments if k[0] == jsa.name}
            for part in parts:
                for k in totals:
                    totals[k] += part.get(k, 0)     # an older natsd tells no api counts
                names.update(part["one_replica"])
            totals["streams"] = len(names)
            done(totals)
        self._gather(jsa, {"usage": True}, merge)

    def _gather(self, jsa, req, done):
        """done(every server's part, this one's first) once every server with a route here
        answered, or at the timeout."""
        asked = len(self.meta.connected)
        got = [self._part(jsa, req)]
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
            done(got)

        def on_answer(sub, subj, reply, hdr, payload, origin):
            try:
                part = json.loads(bytes(payload))["part"]
            except (ValueError, KeyError, TypeError):
                return
            got.append(part)
            if len(got) > asked:
                finish()
        inbox = self.server.system.new_inbox()
        state["sub"] = self.server.system.subscribe(inbox, on_answer)
        if not asked:
            finish()
            return
        state["timer"] = self.server.loop.call_later(GATHER_TIMEOUT, finish)
        self.server.system.publish(GATHER, json.dumps(dict(req, acc=jsa.name)).encode(), reply=inbox)

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
