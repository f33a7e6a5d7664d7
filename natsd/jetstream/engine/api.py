"""The JetStream API: `$JS.API.>` (and `$JS.<domain>.API.>`) request dispatch and the
account/stream handlers (INFO, STREAM.*, DIRECT.GET). CONSUMER.* requests are routed to
natsd.jetstream.engine.api_consumer.handle(jsa, op_tokens, subject, reply, hdr, payload).

Replies are JSON exactly as nats-server writes them (errors.api_response); every request is
counted in the account's api.total, every error reply in api.errors.
"""
import base64
import json
import logging

from natsd._core.router import publish
from natsd.gofmt import go_time
from natsd.jetstream.engine import advisories, gojson, snapshot, streamops
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine.apilevel import required_level_too_high
from natsd.jetstream.engine.clustering import CONSUMER_LED
from natsd.jetstream.engine.headers import build_headers
from natsd.protocol import KIND_ROUTE
from natsd.jetstream.engine.streamconfig import (
    STEPDOWN_REQUEST, STREAM_FIELDS, check_config, check_filters_at_create, check_update,
    config_json, decode_optional_request, decode_request, decode_stream_config, is_one_file_name,
    is_utf8, matching)
from natsd.subject import subjects_overlap

log = logging.getLogger("natsd")

NAMES_LIMIT = 1024
LIST_LIMIT = 256
SUBJECTS_LIMIT = 100000

_NAMES_REQ = {"offset": ("int", "int"), "subject": ("string", "str")}
_INFO_REQ = {"deleted_details": ("bool", "bool"), "subjects_filter": ("string", "str"),
             "offset": ("int", "int")}
_PURGE_REQ = {"filter": ("string", "str"), "seq": ("uint64", "uint"), "keep": ("uint64", "uint")}
_DELETE_REQ = {"seq": ("uint64", "uint"), "no_erase": ("bool", "bool")}
_GET_REQ = {"seq": ("uint64", "uint"), "last_by_subj": ("string", "str"),
            "next_by_subj": ("string", "str"), "batch": ("int", "int"), "max_bytes": ("int", "int"),
            "start_time": ("time.Time", "time"), "multi_last": ("[]string", "strlist"),
            "up_to_seq": ("uint64", "uint"), "up_to_time": ("time.Time", "time"),
            "no_hdr": ("bool", "bool")}

_STREAM_STATE = {"messages": ("uint64", "uint"), "bytes": ("uint64", "uint"),
                 "first_seq": ("uint64", "uint"), "first_ts": ("time.Time", "time"),
                 "last_seq": ("uint64", "uint"), "last_ts": ("time.Time", "time"),
                 "num_subjects": ("int", "int"), "subjects": ("map[string]uint64", "uintmap"),
                 "num_deleted": ("int", "int"), "deleted": ("[]uint64", "uintlist"),
                 "lost": ("server.LostStreamData", "obj", {"msgs": ("[]uint64", "uintlist"),
                                                           "bytes": ("uint64", "uint")}),
                 "consumer_count": ("int", "int")}
_RESTORE_REQ = {"config": ("server.StreamConfig", "obj",
                           {k: v for k, v in STREAM_FIELDS.items() if k != "pedantic"}),
                "state": ("server.StreamState", "obj", _STREAM_STATE)}

# op -> response type name
TYPES = {
    "INFO": "account_info_response",
    "STREAM.CREATE": "stream_create_response",
    "STREAM.UPDATE": "stream_update_response",
    "STREAM.DELETE": "stream_delete_response",
    "STREAM.INFO": "stream_info_response",
    "STREAM.LIST": "stream_list_response",
    "STREAM.NAMES": "stream_names_response",
    "STREAM.PURGE": "stream_purge_response",
    "STREAM.MSG.GET": "stream_msg_get_response",
    "STREAM.MSG.DELETE": "stream_msg_delete_response",
    "STREAM.SNAPSHOT": "stream_snapshot_response",
    "STREAM.RESTORE": "stream_restore_response",
    "STREAM.LEADER.STEPDOWN": "stream_leader_stepdown_response",
    "STREAM.PEER.REMOVE": "stream_remove_peer_response",
    "META.LEADER.STEPDOWN": "meta_leader_stepdown_response",
    "SERVER.REMOVE": "meta_server_remove_response",
    "ACCOUNT.PURGE": "account_purge_response",
    "ACCOUNT.STREAM.MOVE": "account_stream_move_response",
    "ACCOUNT.STREAM.CANCEL_MOVE": "account_stream_cancel_move_response",
    "STREAM.CANCEL_MOVE": "stream_cancel_move_response",
    "STREAM.TEMPLATE": "stream_template_response",
    "CONSUMER.CREATE": "consumer_create_response",
    "CONSUMER.DURABLE.CREATE": "consumer_create_response",
    "CONSUMER.INFO": "consumer_info_response",
    "CONSUMER.DELETE": "consumer_delete_response",
    "CONSUMER.NAMES": "consumer_names_response",
    "CONSUMER.LIST": "consumer_list_response",
    "CONSUMER.PAUSE": "consumer_pause_response",
    "CONSUMER.UNPIN": "consumer_unpin_response",
    "CONSUMER.RESET": "consumer_reset_response",
    "CONSUMER.LEADER.STEPDOWN": "consumer_leader_stepdown_response",
}

# ops nats-server's API dispatch drops for requests from accounts (system-level directives,
# templates are gone): no reply at all
SILENT = ("META.LEADER.STEPDOWN", "SERVER.REMOVE", "ACCOUNT.PURGE", "ACCOUNT.STREAM.MOVE",
          "ACCOUNT.STREAM.CANCEL_MOVE", "STREAM.TEMPLATE")
# name tokens after the op in nats-server's API subjects (CONSUMER.CREATE: one or more)
ARGC = {"INFO": 0, "STREAM.NAMES": 0, "STREAM.LIST": 0, "STREAM.CREATE": 1, "STREAM.UPDATE": 1,
        "STREAM.DELETE": 1, "STREAM.INFO": 1, "STREAM.PURGE": 1, "STREAM.MSG.GET": 1,
        "STREAM.MSG.DELETE": 1, "STREAM.SNAPSHOT": 1, "STREAM.RESTORE": 1,
        "STREAM.LEADER.STEPDOWN": 1, "STREAM.PEER.REMOVE": 1, "STREAM.CANCEL_MOVE": 1,
        "CONSUMER.DURABLE.CREATE": 2, "CONSUMER.INFO": 2, "CONSUMER.DELETE": 2, "CONSUMER.PAUSE": 2,
        "CONSUMER.UNPIN": 2, "CONSUMER.RESET": 2, "CONSUMER.LEADER.STEPDOWN": 2,
        "CONSUMER.NAMES": 1, "CONSUMER.LIST": 1}
# requests whose first argument is a stream name (on a cluster, its server answers them)
PEER_REMOVE_REQUEST = {"peer": ("string", "str")}
STREAM_NAMED = frozenset((
    "STREAM.CREATE", "STREAM.UPDATE", "STREAM.INFO", "STREAM.DELETE", "STREAM.PURGE",
    "STREAM.MSG.GET", "STREAM.MSG.DELETE", "STREAM.SNAPSHOT", "STREAM.RESTORE",
    "STREAM.LEADER.STEPDOWN", "STREAM.PEER.REMOVE", "STREAM.CANCEL_MOVE", "DIRECT.GET", "CONSUMER.CREATE",
    "CONSUMER.DURABLE.CREATE", "CONSUMER.INFO", "CONSUMER.DELETE", "CONSUMER.NAMES",
    "CONSUMER.LIST", "CONSUMER.MSG.NEXT", "CONSUMER.PAUSE", "CONSUMER.UNPIN", "CONSUMER.RESET",
    "CONSUMER.LEADER.STEPDOWN"))
# ops that need clustered JetStream: 10010 on a server without a meta group, before anything
# else; a natsd cluster answers them in natsd/jetstream/replicated/meta.py
CLUSTER_ONLY = ("STREAM.LEADER.STEPDOWN", "STREAM.PEER.REMOVE", "STREAM.CANCEL_MOVE",
                "CONSUMER.LEADER.STEPDOWN")


def _op_of(tokens):
    """The op key (as in TYPES) and the argument tokens after it."""
    if not tokens:
        return None, []
    for n in (3, 2, 1):
        key = ".".join(tokens[:n])
        if key in TYPES or key in ("DIRECT.GET",):
            return key, tokens[n:]
    return None, tokens


class ApiHandler:
    def __init__(self, engine):
        self.engine = engine
        self.server = engine.server
        self.domain = engine.domain
        self.dprefix = ("$JS.%s.API." % self.domain).encode() if self.domain else None

    # ---- dispatch ----

    def on_request(self, sub, subject, reply, hdr, payload, origin=None):
        if self.engine.stopped:
            return
        acc, jsa = sub.data
        if subject.startswith(b"$JS.API."):
            rest = subject[8:]
        elif self.dprefix and subject.startswith(self.dprefix):
            rest = subject[len(self.dprefix):]
            if rest.startswith((b"$KV.", b"$OBJ.")):
                # nats-server's domain mapping table: $JS.<domain>.API.$KV.> is $KV.> (and $OBJ),
                # so a KV or object store client with a domain reaches that domain's buckets
                publish(acc.sublist, bytes(rest), reply, hdr, payload)
                return
        else:
            return
        # nats-server matches API subjects on raw bytes: a token that is not UTF-8 is just a
        # name that exists nowhere (surrogateescape keeps it byte-exact); a subject with an
        # empty token matches no API subscription at all
        tokens = rest.decode("utf-8", "surrogateescape").split(".")
        if "" in tokens:
            return
        op, args = _op_of(tokens)
        if op is None and tokens[:3] == ["CONSUMER", "MSG", "NEXT"]:
            self._pull_request_for_nobody(acc, subject, reply, origin)
            return
        if op is None or op in SILENT:
            return
        if (len(args) < 1) if op == "CONSUMER.CREATE" else ARGC.get(op, len(args)) != len(args):
            return          # no nats-server API subscription matches this subject
        cluster = self.engine.cluster
        if (cluster is not None and jsa is not None and args and op in STREAM_NAMED
                and not cluster.answer_here(jsa, args[0], b"$JS.API." + rest, subject, reply,
                                              hdr, payload, origin, op, args)):
            # another server of the cluster has the stream
            self._watch_answer(jsa, origin, op, subject, reply, payload)
            return
        if jsa is not None and args and op in STREAM_NAMED and self._held_for_leader(
                jsa, op, args, sub, subject, reply, hdr, payload, origin):
            return          # a new leader: answered once it has applied what came before it
        if op == "DIRECT.GET":
            if jsa is not None and reply:
                try:
                    if self._direct_stream(jsa, args) is not None:
                        jsa.api_total += 1
                        self.direct_get(jsa, args, reply, hdr, payload)
                    elif origin is not None and getattr(origin, "no_responders", False):
                        # nats-server subscribes DIRECT.GET per stream with direct access:
                        # without one the requester learns at once that nobody answers
                        origin.handler.no_responders(origin, bytes(subject), reply)
                except Exception:
                    log.exception("JetStream direct get %r failed", subject)
                    publish(jsa.sublist, reply, None, b"NATS/1.0 500 Internal Server Error\r\n\r\n", b"")
            return
        ctx = Request(self, acc, jsa, op, args, subject, reply, hdr, payload, origin)
        if jsa is not None:
            self.server.loop.call_soon(_count, jsa)
        if jsa is None:
            if reply:
                ctx.send(E.error("JSNotEnabledForAccountErr"))
            return
        if op in CLUSTER_ONLY and self.engine.meta is None:
            ctx.send(E.error("JSClusterRequiredErr"))
            return
        from natsd.jetstream.engine import api_consumer
        if op != "CONSUMER.RESET" and required_level_too_high(hdr):
            # some consumer requests are checked before the level (as nats-server does)
            early = api_consumer.precheck(op, payload, bool(self.engine.strict)) \
                if op.startswith("CONSUMER.") else None
            ctx.send(early or E.error("JSRequiredApiLevelErr"))
            return
        if op.startswith("CONSUMER."):
            try:
                jsa.last_api_response = None
                api_consumer.handle(jsa, tokens, subject, reply, hdr, payload)
                if jsa.last_api_response is None:
                    self._audit_later(jsa, ctx)     # answered later
                elif advisories.listening(acc.sublist, advisories.API_AUDIT):
                    ctx.audit_consumer()
            except E.ApiError as err:
                ctx.send(err)
            except Exception:
                log.exception("JetStream consumer API request %r failed", subject)
                if op in TYPES and op != "CONSUMER.MSG.NEXT":
                    ctx.send(E.internal_error(op))
            return
        fn = getattr(self, "op_" + op.replace(".", "_").lower(), None)
        try:
            if fn is None:
                raise E.error("JSClusterNotActiveErr")
            result = fn(ctx)
        except E.ApiError as err:
            ctx.send(err)
            return
        except NoReply:
            self._watch_answer(jsa, origin, op, subject, reply, payload)    # answered later, if at all
            return
        except Exception:
            # one place for every unexpected failure: the traceback to the log, the client
            # gets nats-server's error for the op (never a Python text or a store path)
            log.exception("JetStream API request %r failed", subject)
            ctx.send(E.internal_error(op))
            return
        if result is not None:
            ctx.send(result)

    def _pull_request_for_nobody(self, acc, subject, reply, origin):
        """A pull request (MSG.NEXT) that reached only the API's own subscriptions. Each
        consumer subscribes its MSG.NEXT subject, as on nats-server, so a request no consumer
        (here or across a route) and no client subscribes is one nobody serves: the requester
        hears 503 no responders at once, as nats-server's requester does (an ordered
        consumer's client resets on it)."""
        if not reply or origin is None or not getattr(origin, "no_responders", False):
            return
        result = acc.sublist.match(bytes(subject))
        if not result.qsubs and all(s.handler == self.on_request for s in result.psubs):
            origin.handler.no_responders(origin, bytes(subject), reply)

    def _watch_answer(self, jsa, origin, op, subject, reply, payload):
        """A request this server does not answer now: on a cluster, the answer is audited
        when it goes by (natsd/jetstream/replicated/auditwatch.py), unless a route brought the request."""
        if (self.engine.cluster is not None and op in TYPES and op != "CONSUMER.MSG.NEXT"
                and not _from_route(origin)):
            self.engine.cluster.watch_answer(jsa, origin, op, subject, reply, payload)

    def _audit_later(self, jsa, ctx):
        """A consumer request not answered yet (a new consumer's files are being written, a
        replicated one waits for its group): audited with its answer. On a cluster the answer
        is watched as it goes by (natsd/jetstream/replicated/auditwatch.py), unless a route
        brought the request; on one server the consumer API's reply audits it."""
        if ctx.op not in TYPES or ctx.op == "CONSUMER.MSG.NEXT" or _from_route(ctx.origin):
            return
        if self.engine.cluster is not None:
            self._watch_answer(jsa, ctx.origin, ctx.op, ctx.subject, ctx.reply, ctx.payload)
        elif ctx.reply and advisories.listening(ctx.acc.sublist, advisories.API_AUDIT):
            jsa.audits_due[bytes(ctx.reply)] = ctx.detach()

    def _held_for_leader(self, jsa, op, args, *request):
        """A replicated stream's new leader holds requests until it is ready (see
        ReplicatedStream.defer_until_ready), and so does a consumer group's for the requests
        its consumer answers. A failure here is left to the handlers, which answer it."""
        try:
            st = jsa.streams.get(args[0])
            if st is None or st.replica is None:
                return False
            host = st.replica.consumers.hosts.get(args[1]) \
                if op in CONSUMER_LED and len(args) > 1 else None
            return bool((host or st.replica).defer_until_ready(self.on_request, *request))
        except Exception:
            return False

    # ---- account ----

    def op_info(self, r):
        meta = self.engine.meta
        if meta is None:
            return r.jsa.account_info()
        # the whole cluster's totals, as nats-server's meta leader answers them
        if not meta.leader_known():
            if meta.leaderless_too_long():
                raise E.error("JSClusterNotAvailErr")
            raise NoReply()                 # a cluster still electing: as nats-server, silence
        r.detach()
        self.engine.listing.account_usage(r.jsa, lambda totals: r.send(r.jsa.account_info(totals)))
        raise NoReply()

    # ---- streams ----

    def _stream_name(self, r):
        if len(r.args) != 1 or not r.args[0]:
            raise NoReply()
        return r.args[0]

    def _stream(self, r):
        st = r.jsa.streams.get(self._stream_name(r))
        if st is None:
            raise E.error("JSStreamNotFoundErr")
        return st

    def _empty(self, r):
        if not gojson.is_empty_request(r.payload):
            raise E.error("JSNotEmptyRequestErr")

    def op_stream_create(self, r):
        name = self._stream_name(r)
        req = decode_stream_config(r.payload, self.engine.strict)
        if req.get("name", "") != name:
            raise E.error("JSStreamMismatchErr")
        if "/" in name or "\\" in name:
            raise E.error("JSStreamNameContainsPathSeparatorsErr")
        if req.get("sealed"):
            raise E.error("JSStreamInvalidConfigF", err="stream configuration for create can not be sealed")
        if req.get("mirror_direct") and req.get("mirror") is None:
            raise E.error("JSStreamInvalidConfigF", err="stream has no mirror but does have mirror direct")
        pedantic = req.pop("pedantic", False)
        jsa = r.jsa
        cfg = check_config(req, pedantic, self._lookup_cfg(jsa), jsa)
        existing = jsa.streams.get(name)
        clustered = self.engine.meta is not None
        if existing is not None:
            if not _same_config(existing.config, cfg):
                raise E.error("JSStreamNameExistErr")
            # on a cluster the stream's leader answers (the request comes to it,
            # natsd/jetstream/replicated/placement.py), with its cluster block and no did_create
            info = existing.info(with_cluster=clustered)
            if not clustered:
                info["did_create"] = True
            return info
        jsa.check_limits(cfg)           # first, as nats-server's jsNonClusteredStreamLimitsCheck
        if cfg["num_replicas"] <= 1 and self.engine.meta is not None:
            self.engine.meta.check_placed_here(cfg)
        if cfg["num_replicas"] > 1 and self.engine.meta is not None:
            self._check_overlap(jsa, cfg, None)
            check_filters_at_create(cfg)
            self.engine.meta.request("add", jsa, {"cfg": cfg}, r.reply)   # the meta leader answers
            raise NoReply()
        if cfg["num_replicas"] > 1:
            if self.server.cluster is not None:
                # routes, but no replicated JetStream (Raft) yet: no server can hold a replica
                raise E.error("JSInsufficientResourcesErr")
            raise E.error("JSStreamReplicasNotSupportedErr")
        self._check_overlap(jsa, cfg, None)
        check_filters_at_create(cfg)
        if not is_one_file_name(name):   # natsd keeps a directory for memory streams too
            raise _stream_store_failed(jsa, name, "invalid stream directory name")
        try:
            st = jsa.add_stream(cfg)
        except (OSError, ValueError) as e:
            raise _stream_store_failed(jsa, name, e)
        advisories.stream_action(st, "create")
        info = st.info(with_cluster=clustered)
        info["did_create"] = True
        return info

    def op_stream_update(self, r):
        name = self._stream_name(r)
        req = decode_stream_config(r.payload, self.engine.strict)
        pedantic = req.pop("pedantic", False)
        jsa = r.jsa
        # nats-server checks the config itself first, then the name against the subject
        check_config(req, pedantic, self._lookup_cfg(jsa), jsa)
        if req.get("name", "") != name:
            raise E.error("JSStreamMismatchErr")
        st = jsa.streams.get(name)
        if st is None:
            raise E.error("JSStreamNotFoundErr")
        if getattr(st, "snapshotting", False):
            raise E.error("JSStreamUpdateErrF", err="stream update not permitted while a snapshot is in progress")
        cfg = check_update(st.config, req, pedantic, self._lookup_cfg(jsa), jsa,
                           self.engine.meta is not None)
        self._check_overlap(jsa, cfg, st)
        jsa.check_limits(cfg, st)
        moving = bool(cfg.get("placement")) and cfg.get("placement") != st.config.get("placement")
        if moving and cfg["num_replicas"] != st.config["num_replicas"]:
            raise E.error("JSStreamMoveAndScaleErr")
        if st.replica is not None and moving:
            # the meta leader picks servers that meet the new placement; this leader answers
            self.engine.meta.request("peers", jsa, {"name": name, "cfg": cfg, "change": "move"}, r.reply)
            raise NoReply()
        if moving and self.engine.meta is not None and not self.engine.meta.meets_here(cfg):
            # a one-replica stream moves to a server that meets the new placement
            # (natsd/jetstream/replicated/scale.py); its group's first leader, here, answers
            self.engine.meta.request("add", jsa, {"cfg": cfg, "adopt": self.engine.meta.peer, "since": st.created,
                                                  "move_one": {"placement": st.config.get("placement")}},
                                     r.reply)
            raise NoReply()
        if st.replica is not None:
            if cfg["num_replicas"] != st.config["num_replicas"]:
                if cfg["num_replicas"] <= 1:
                    # the meta leader drops the assignment and this server, the leader, keeps
                    # its copy as a one-replica stream; answered at once, as nats-server does
                    if not self.engine.meta.leader_known():
                        raise E.error("JSClusterNotAvailErr")
                    self.engine.meta.request("del", jsa, {"name": name, "keep": self.engine.meta.peer,
                                                          "cfg": cfg}, None)
                    advisories.stream_action(st, "modify")
                    return st.replica.scale_down_answer(cfg)
                # other servers: the meta leader picks them, this leader answers once applied
                self.engine.meta.request("peers", jsa, {"name": name, "cfg": cfg,
                                                        "keep": self.engine.meta.peer}, r.reply)
                raise NoReply()
            st.replica.propose_op("update", {"config": cfg}, r.reply)
            raise NoReply()
        if cfg["num_replicas"] > 1 and st.config.get("num_replicas", 1) <= 1 and self.engine.meta is not None:
            # the meta leader places it with this server first; this server's copy is the
            # group's first state, and its first leader answers
            self.engine.meta.request("add", jsa, {"cfg": cfg, "adopt": self.engine.meta.peer,
                                                  "since": st.created}, r.reply)
            raise NoReply()
        st.update_config(cfg)
        advisories.stream_action(st, "modify")
        return st.info(with_cluster=False)

    def op_stream_delete(self, r):
        self._empty(r)
        st = self._stream(r)
        if st.replica is not None:
            self.engine.meta.request("del", r.jsa, {"name": st.name}, r.reply)
            raise NoReply()
        r.jsa.delete_stream(st.name)
        advisories.stream_action(st, "delete")
        return {"success": True}

    def op_stream_info(self, r):
        req = decode_optional_request(r.payload, _INFO_REQ, "JSApiStreamInfoRequest", self.engine.strict)
        st = self._stream(r)
        sf = req.get("subjects_filter", "")
        info = st.info(req.get("deleted_details", False), None)
        out = {"total": 0, "offset": 0, "limit": 0}
        if sf:
            # stored subjects are bytes (maybe not UTF-8): sorted and paged on the raw bytes
            # like nats-server, keys kept byte-exact (surrogateescape; dumps writes U+FFFD)
            subs = st.store.subjects(sf)
            off = max(req.get("offset", 0), 0)
            keys = sorted(subs)
            if keys:
                out = {"total": len(keys), "offset": off, "limit": SUBJECTS_LIMIT}
            page = keys[off:off + SUBJECTS_LIMIT]
            if page:
                info["state"] = _with_subjects(info["state"], {
                    k.decode("utf-8", "surrogateescape"): subs[k] for k in page})
        meta = self.engine.meta
        alternates = meta.stream_alternates(r.jsa, st.name) if meta is not None else None
        if alternates:
            info["alternates"] = alternates
            info["ts"] = info.pop("ts")         # nats-server's field order: alternates, then ts
        out.update(info)
        return out

    def _names_request(self, r, type_name="JSApiStreamNamesRequest"):
        return decode_optional_request(r.payload, _NAMES_REQ, type_name, self.engine.strict)

    def _filtered_streams(self, jsa, subj):
        return [jsa.streams[n] for n, _ in matching(((s.name, s.config) for s in jsa.streams.values()), subj)]

    def op_stream_names(self, r):
        req = self._names_request(r)
        if self.engine.listing is not None:
            # on a cluster, every server's streams (natsd/jetstream/replicated/listing.py)
            r.detach()
            self.engine.listing.streams(r.jsa, req.get("subject", ""), False,
                                       lambda names, _: r.send(self._names_page(req, names)))
            raise NoReply()
        return self._names_page(req, [s.name for s in self._filtered_streams(r.jsa, req.get("subject", ""))])

    @staticmethod
    def _names_page(req, names):
        off = min(max(req.get("offset", 0), 0), len(names))
        return {"total": len(names), "offset": off, "limit": NAMES_LIMIT,
                "streams": names[off:off + NAMES_LIMIT] or None}      # Go: a nil slice, null

    def op_stream_list(self, r):
        req = self._names_request(r, "JSApiStreamListRequest")
        if self.engine.listing is not None:
            r.detach()
            self.engine.listing.streams(r.jsa, req.get("subject", ""), True,
                                       lambda infos, missing: r.send(self._list_page(req, infos, missing)))
            raise NoReply()
        streams = self._filtered_streams(r.jsa, req.get("subject", ""))
        return self._list_page(req, [s.info(with_cluster=False, dynamic=False) for s in streams], [])

    @staticmethod
    def _list_page(req, infos, missing):
        off = min(max(req.get("offset", 0), 0), len(infos))
        out = {"total": len(infos) + len(missing), "offset": off, "limit": LIST_LIMIT,
               "streams": infos[off:off + LIST_LIMIT]}
        if missing:
            out["missing"] = missing
        return out

    def op_stream_purge(self, r):
        req = decode_optional_request(r.payload, _PURGE_REQ, "JSApiStreamPurgeRequest", self.engine.strict)
        if req.get("seq", 0) and req.get("keep", 0):
            raise E.error("JSBadRequestErr")
        return self._change(r, "purge", req)

    def op_stream_msg_delete(self, r):
        if gojson.is_empty_request(r.payload):
            raise E.error("JSBadRequestErr")
        req = decode_request(r.payload, _DELETE_REQ, "JSApiMsgDeleteRequest", self.engine.strict)
        return self._change(r, "msg_delete", req)

    def _change(self, r, op, req):
        """A purge or message delete: now, or on every replica once its group commits it."""
        st = self._stream(r)
        if st.replica is not None:
            st.replica.propose_op(op, req, r.reply)
            raise NoReply()
        return streamops.OPS[op][0](st, req)

    def op_stream_leader_stepdown(self, r):
        req = decode_optional_request(r.payload, STEPDOWN_REQUEST, "JSApiLeaderStepdownRequest",
                                      self.engine.strict)
        st = self._stream(r)
        if st.replica is None:
            return {"success": True}    # a one-replica stream has no group to hand over
        if not st.replica.is_leader():
            raise NoReply()
        st.replica.step_down(req.get("placement") or {})
        return {"success": True}

    def op_stream_msg_get(self, r):
        if gojson.is_empty_request(r.payload):
            raise E.error("JSBadRequestErr")
        req = decode_request(r.payload, _GET_REQ, "JSApiMsgGetRequest", self.engine.strict)
        if req.get("batch", 0) > 0 or req.get("max_bytes", 0) > 0:
            raise E.error("JSBadRequestErr")
        seq, last, nxt, start = (req.get("seq", 0), req.get("last_by_subj", ""),
                                 req.get("next_by_subj", ""), req.get("start_time"))
        if (seq and last) or (not seq and not last and not nxt and start is None) or \
                (seq and start is not None) or (start is not None and last) or (last and nxt):
            raise E.error("JSBadRequestErr")
        st = self._stream(r)
        if start is not None:
            seq = _seq_from_time(st, start)
        if seq and not nxt:
            sm = st.store.load(seq)
        elif nxt:
            sm = st.store.load_next(seq, nxt)
        else:
            sm = st.store.load_last(last)
        if sm is None:
            raise E.error("JSNoMessageFoundErr")
        # the stored subject is bytes, maybe not UTF-8: nats-server's JSON has U+FFFD there
        msg = {"subject": sm.subject.decode("utf-8", "surrogateescape"), "seq": sm.seq}
        if sm.hdr and not req.get("no_hdr"):
            msg["hdrs"] = base64.b64encode(sm.hdr).decode()
        if sm.msg:
            msg["data"] = base64.b64encode(sm.msg).decode()
        msg["time"] = go_time(sm.ts)
        return {"message": msg}

    def op_stream_snapshot(self, r):
        if gojson.is_empty_request(r.payload):
            raise E.error("JSBadRequestErr")
        if not r.payload.strip():
            r.payload = b"{}"       # blanks decode to a zero request (Go's decoder: EOF)
        return snapshot.handle_snapshot(self, r)

    def op_stream_restore(self, r):
        if gojson.is_empty_request(r.payload):
            raise E.error("JSBadRequestErr")
        # decoded as nats-server decodes JSApiStreamRestoreRequest; the restore goes on with
        # that request (re-encoded), so its own JSON reading never sees what Go would refuse
        req = decode_request(r.payload, _RESTORE_REQ, "JSApiStreamRestoreRequest", self.engine.strict)
        name = (req.get("config") or {}).get("name") or r.args[0]
        if name == r.args[0] and ("\x00" in name or not is_utf8(name)) and not _has_sep(name):
            # a stream name from a subject token that is not UTF-8 (nats-server takes the
            # bytes; natsd's streams need text) or one no directory can have: the restore
            # fails up front, the way a store failure does
            log.warning("Stream restore failed for '%s > %r': invalid stream name", r.acc.name, name)
            raise E.error("JSStreamRestoreErrF", err="error creating store for stream")
        r.payload = json.dumps(req).encode()
        return snapshot.handle_restore(self, r)

    def op_stream_cancel_move(self, r):
        """STREAM.CANCEL_MOVE: a move or scale in progress goes back to where it started (the
        meta leader decides, the stream's leader answers once applied)."""
        st = self._stream(r)
        if st.replica is None or self.engine.meta.reconfiguring((r.jsa.name, st.name)) is None:
            raise E.error("JSStreamReconfigureNotInProgressErr")
        self.engine.meta.request("peers", r.jsa, {"name": st.name, "change": "cancel"}, r.reply)
        raise NoReply()

    def op_stream_peer_remove(self, r):
        """STREAM.PEER.REMOVE {"peer": server name or peer id}: the meta leader replaces that
        server with a spare one (natsd/jetstream/replicated/remap.py) and answers."""
        st = self._stream(r)
        if gojson.is_empty_request(r.payload):
            raise E.error("JSBadRequestErr")
        req = decode_request(r.payload, PEER_REMOVE_REQUEST, "JSApiStreamRemovePeerRequest", self.engine.strict)
        if not req.get("peer"):
            raise E.error("JSBadRequestErr")
        if st.replica is None:
            # a one-replica stream belongs to its server here, outside the meta group
            raise E.error("JSPeerRemapErr")
        self.engine.meta.request("peers", r.jsa, {"name": st.name, "remove": req["peer"]}, r.reply)
        raise NoReply()

    # ---- direct get ----

    @staticmethod
    def _direct_stream(jsa, args):
        """The stream a direct get names if it allows direct gets, else None."""
        st = jsa.streams.get(args[0]) if args else None
        if st is None or not (st.config.get("allow_direct") or st.config.get("mirror_direct")):
            return None
        return st

    def direct_get(self, jsa, args, reply, hdr, payload):
        st = self._direct_stream(jsa, args)
        if st is None:
            return
        send = lambda h, d=b"": publish(jsa.sublist, reply, None, h, d)   # noqa: E731
        if required_level_too_high(hdr):
            send(b"NATS/1.0 412 Required Api Level\r\n\r\n")
            return
        if len(args) > 1 and not payload:           # a KV get: the last message of the key
            sm = st.store.load_last(".".join(args[1:]).encode("utf-8", "surrogateescape"))
            if sm is None:
                send(b"NATS/1.0 404 Message Not Found\r\n\r\n")
            else:
                send(self._hdr(st, sm, {}), sm.msg)
            return
        if not payload:
            send(b"NATS/1.0 408 Empty Request\r\n\r\n")
            return
        try:
            req = decode_request(payload, _GET_REQ, "JSApiMsgGetRequest", False)
        except E.ApiError:
            send(b"NATS/1.0 408 Malformed Request\r\n\r\n")
            return
        if len(args) > 1:
            if any(req.get(k) for k in ("last_by_subj", "next_by_subj", "multi_last", "seq", "batch",
                                        "start_time", "up_to_seq", "up_to_time")):
                send(b"NATS/1.0 408 Bad Request\r\n\r\n")
                return
            req["last_by_subj"] = ".".join(args[1:]).encode("utf-8", "surrogateescape")
        else:
            seq, last, nxt = req.get("seq", 0), req.get("last_by_subj", ""), req.get("next_by_subj", "")
            multi, start, batch = req.get("multi_last") or [], req.get("start_time"), req.get("batch", 0)
            if not seq and not last and not nxt and not multi and start is None:
                send(b"NATS/1.0 408 Empty Request\r\n\r\n")
                return
            if (seq and last) or (seq and start is not None) or (start is not None and last) or \
                    (last and nxt) or (last and batch > 0) or (last and multi) or (nxt and multi) or \
                    (req.get("up_to_seq") and req.get("up_to_time")):
                send(b"NATS/1.0 408 Bad Request\r\n\r\n")
                return
        if req.get("multi_last"):
            self._direct_multi(st, req, send)
        else:
            self._direct_get(st, req, send)

    def _hdr(self, st, sm, req, extra=()):
        if req.get("no_hdr"):
            return None
        if not extra and not sm.hdr:            # a KV get: the four headers alone
            subject = sm.subject if type(sm.subject) is bytes else sm.subject.encode()
            return b"NATS/1.0\r\nNats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\n" \
                b"Nats-Time-Stamp: %s\r\n\r\n" % (st.name.encode(), subject, sm.seq,
                                                    go_time(sm.ts).encode())
        pairs = [("Nats-Stream", st.name), ("Nats-Subject", sm.subject), ("Nats-Sequence", sm.seq),
                 ("Nats-Time-Stamp", go_time(sm.ts))] + list(extra)
        return _build_headers(pairs, sm.hdr)

    def _direct_get(self, st, req, send):
        store = st.store
        seq = req.get("seq", 0)
        if req.get("start_time") is not None:
            seq = _seq_from_time(st, req["start_time"])
        nxt = req.get("next_by_subj", "")
        batch = req.get("batch", 0)
        is_batch = batch > 0
        batch = batch or 1
        np = lseq = 0
        if is_batch:
            np = store.num_pending(max(seq, 1), nxt or None)
        mb = req.get("max_bytes", 0) or self.server.opts.max_pending
        sent = 0
        for i in range(batch):
            if seq > 0 and not nxt:
                if i == 0 and not is_batch:
                    sm = store.load(seq)
                else:
                    sm = store.load_next(seq, None)
                    if sm is not None:
                        seq = sm.seq
                seq += 1
            elif nxt:
                sm = store.load_next(seq, nxt)
                if sm is not None:
                    seq = sm.seq
                seq += 1
            else:
                sm = store.load_last(req.get("last_by_subj", ""))
            if sm is None:
                if is_batch and i > 0:
                    break
                send(b"NATS/1.0 404 Message Not Found\r\n\r\n")
                return
            extra = ()
            if is_batch:
                if np > 0:
                    np -= 1
                extra = (("Nats-Num-Pending", np), ("Nats-Last-Sequence", lseq))
            send(self._hdr(st, sm, req, extra), sm.msg)
            lseq = sm.seq
            sent += len(sm.subject) + len(sm.hdr or b"") + len(sm.msg)
            if sent >= mb:
                break
        if is_batch:
            np = store.num_pending(seq, nxt or None) if seq <= store.state()["last_seq"] else 0
            send(build_headers([("Nats-Num-Pending", np), ("Nats-Last-Sequence", lseq)], status="204 EOB"))

    def _direct_multi(self, st, req, send):
        store = st.store
        up_to = req.get("up_to_seq", 0)
        if req.get("up_to_time"):
            up_to = max(_seq_from_time(st, req["up_to_time"]) - 1, 0)
        last_seq = store.state()["last_seq"]
        if not up_to or up_to > last_seq:
            up_to = last_seq
        found = {}
        for filt in req["multi_last"]:
            for subj in store.subjects(filt):
                sm = store.load_prev(up_to, subj) if up_to > 0 else None
                if sm is not None:
                    found[sm.seq] = sm
        if not found:
            send(b"NATS/1.0 404 No Results\r\n\r\n")
            return
        batch = req.get("batch", 0)
        seqs = sorted(found)
        if batch and len(seqs) > batch:
            send(b"NATS/1.0 413 Too Many Results\r\n\r\n")
            return
        np = len(seqs)
        lseq = 0
        for s in seqs:
            np -= 1
            sm = found[s]
            send(self._hdr(st, sm, req, (("Nats-Num-Pending", np), ("Nats-Last-Sequence", lseq))), sm.msg)
            lseq = s
        send(build_headers([("Nats-Num-Pending", 0), ("Nats-Last-Sequence", lseq),
                            ("Nats-UpTo-Sequence", up_to)], status="204 EOB"))

    # ---- helpers ----

    def _lookup_cfg(self, jsa):
        def lookup(name):
            st = jsa.streams.get(name)
            return st.config if st else None
        return lookup

    def _check_overlap(self, jsa, cfg, existing):
        for other in jsa.streams.values():
            if other is existing or other.name == cfg["name"]:
                continue
            for a in cfg.get("subjects") or []:
                for b in other.config.get("subjects") or []:
                    if subjects_overlap(a, b):
                        raise E.error("JSStreamSubjectOverlapErr")


class NoReply(Exception):
    """nats-server ignores the request (e.g. a stream name that is not one token)."""


class Request:
    __slots__ = ("h", "acc", "jsa", "op", "args", "subject", "reply", "hdr", "payload", "origin")

    def __init__(self, h, acc, jsa, op, args, subject, reply, hdr, payload, origin=None):
        self.h, self.acc, self.jsa, self.op, self.args = h, acc, jsa, op, args
        self.subject, self.reply, self.hdr, self.payload = subject, reply, hdr, payload
        self.origin = origin

    def audit_consumer(self):
        """API audit for a CONSUMER.* request (api_consumer replies itself and leaves its
        response in jsa.last_api_response)."""
        resp = getattr(self.jsa, "last_api_response", None)
        if resp is None or not self._audited_here():
            return
        advisories.api_audit(self.jsa, self.acc, self.origin, self.subject, self.payload, resp)

    def _audited_here(self):
        """Not when a route brought the request, or a watch audits its answer: the client's
        server does (natsd/jetstream/replicated/auditwatch.py)."""
        return not _from_route(self.origin) and not (
            self.jsa is not None and self.h.engine.cluster is not None
            and self.h.engine.cluster.watched(self.jsa, self.reply))

    def detach(self):
        """For an answer sent after the handler returns: copies of what still points into the
        connection's read buffer. -> self"""
        self.subject, self.reply, self.hdr, self.payload = (
            bytes(x) if isinstance(x, memoryview) else x for x in (self.subject, self.reply, self.hdr, self.payload))
        return self

    def send(self, result):
        try:
            data = self._encode(result)
        except Exception:
            # even encoding the reply failed: still answer, with the op's generic error
            log.exception("JetStream API reply to %r failed", self.subject)
            data = self._encode(E.internal_error(self.op))
        if self.reply:
            publish(self.acc.sublist, self.reply, None, None, data)
        try:
            if self._audited_here():
                advisories.api_audit(self.jsa, self.acc, self.origin, self.subject, self.payload, data)
        except Exception:
            log.exception("JetStream API audit advisory for %r failed", self.subject)

    def _encode(self, result):
        if isinstance(result, E.ApiError):
            if self.jsa is not None:
                self.jsa.api_errors += 1
            if self.h.engine.strict is not None and result.err_code == 10025:
                log.warning("Invalid JetStream request '%s > %s': %s", self.acc.name,
                            self.subject.decode(errors="replace"), result.description)
        return E.api_response(TYPES.get(self.op, "error_response"), result)


def _from_route(origin):
    return origin is not None and origin.kind == KIND_ROUTE


def _count(jsa):
    jsa.api_total += 1


def _has_sep(name):
    return "/" in name or "\\" in name


def _stream_store_failed(jsa, name, why):
    """nats-server logs "Stream create failed" and answers errStreamStoreFailed (no path)."""
    log.warning("Stream create failed for '%s > %s': %s", getattr(jsa, "name", "?"), name, why)
    return E.error("JSStreamCreateErrF", err="error creating store for stream")


def _with_subjects(state, subjects):
    """StreamState with "subjects" where nats-server's struct has it (after num_subjects)."""
    out = {}
    for k, v in state.items():
        if k in ("num_deleted", "deleted", "lost", "consumer_count") and "subjects" not in out:
            out["subjects"] = subjects
        out[k] = v
    out.setdefault("subjects", subjects)
    return out


def _build_headers(pairs, base=None):
    """stream.build_headers for values that may be bytes (a stored subject, byte-exact)."""
    if base:
        head = base[:-2] if base.endswith(b"\r\n\r\n") else base + b"\r\n"
        if not head.endswith(b"\r\n"):
            head += b"\r\n"
    else:
        head = b"NATS/1.0\r\n"
    for k, v in pairs:
        head += k.encode() + b": " + (v if isinstance(v, bytes) else str(v).encode()) + b"\r\n"
    return head + b"\r\n"


def _seq_from_time(st, t):
    try:
        ns = gojson.go_parse_rfc3339(t)
    except ValueError:
        raise E.error("JSBadRequestErr")
    # Go's time.UnixNano wraps around outside 1678-2262: a start time in the year 2999 is a
    # negative instant to nats-server, before every message
    ns = (ns + (1 << 63)) % (1 << 64) - (1 << 63)
    for sm in st.store.messages_from(st.store.first_seq):
        if sm.ts >= ns:
            return sm.seq
    return st.store.last_seq + 1


def _same_config(a, b):
    ca, cb = dict(a), dict(b)
    for c in (ca, cb):
        md = dict(c.get("metadata") or {})
        for k in ("_nats.req.level", "_nats.ver", "_nats.level"):
            md.pop(k, None)
        c["metadata"] = md
    return config_json(ca, False) == config_json(cb, False)
