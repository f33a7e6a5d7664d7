"""The system account: `$SYS.REQ.*` request services and `$SYS` event publishing.

Requests are internal subscriptions in the system account's sublist; replies use
nats-server's envelope `{"server": {...}, "data": {...}}` (STATSZ answers in `statsz`, IDZ
answers bare). The monitoring endpoint functions serve as the data source, so `/connz` and
`$SYS.REQ.SERVER.PING.CONNZ` agree. Every other account gets its own scoped
`$SYS.REQ.USER.INFO`, `$SYS.REQ.ACCOUNT.PING.CONNZ|STATZ` and `$SYS.REQ.SERVER.PING.CONNZ`.
"""
import json
import logging
import os
import time

from natsd import VERSION
from natsd._core.conn import totals
from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.accounts.clientinfo import client_type
from natsd.gofmt import go_json, omitempty, rtt_nanos
from natsd.ids import random_token
from natsd.headers import accept_encoding, encoded, request_info
from natsd.monitor.profiling import Later
from natsd.monitor.jsz import SkipResponse
from natsd.monitor.params import OptionsError
from natsd.monitor.varz import FEATURE_FLAGS, client_traffic, rfc3339
from natsd.output.logger import TRACE
from natsd.protocol import traced_payload
from natsd.system.filters import filtered_out
from natsd.system.remote import RemoteServers, system_error

log = logging.getLogger("natsd")

STATSZ_INTERVAL = 10.0                  # nats-server statsHBInterval
STATSZ_FIRST = 0.25                     # first STATSZ after 250ms, doubling up to the interval
JETSTREAM_ENABLED_FLAG = 1             # ServerInfo.flags capability bits: natsd has only this one
SERVER_ENDPOINTS = ("JSZ", "RAFTZ", "IDZ", "SUBSZ", "ACCOUNTZ", "HEALTHZ", "PROFILEZ", "ROUTEZ",
                    "LEAFZ", "IPQUEUESZ", "STATSZ", "VARZ", "CONNZ", "GATEWAYZ", "EXPVARZ")
# `$SYS.REQ.ACCOUNT.<acc>.<EP>` services (nats-server events.go monAccSrvc)
ACCOUNT_ENDPOINTS = ("CONNZ", "LEAFZ", "JSZ", "INFO", "STATZ", "CONNS", "SUBSZ")


# nats-server's KickClientReq and LDMClientReq
_CLIENT_CONTROL = {"cid": ("uint64", "int")}


def _json(obj):
    return go_json(obj)


class SystemServices:
    def __init__(self, server):
        self.server = server
        self.account = server.accounts.system
        self.seq = 0
        self.subs = []
        self.timer = None
        self.statsz_delay = STATSZ_FIRST
        self.in_progress = 0            # requests being answered now (/ipqueuesz "System recvQ")
        self.client = None              # the system client (cid 1) its subscriptions belong to
        self.remote = RemoteServers(self)

    # ---- setup ----

    def start(self):
        """The system account's services, subscribed in nats-server's order by its system
        client (cid 1); then each account's client for what it imports from the system
        account, the system account's own first (cid 2), the global account's last."""
        from natsd.monitor import expvarz
        expvarz.install()               # EXPVARZ's garbage collection figures from now on
        server = self.server
        # nats-server's first internal subscription (sid 1) is gone once the server is ready
        self.client = server.new_internal_client(first_sid=2)
        self.account.internal_client = server.new_internal_client()
        sid = server.id
        sys_sl = self.account.sublist
        self.remote.subscribe()
        self._sub(sys_sl, "$SYS.REQ.SERVER.PING", self._server_ping)
        # one subscription per known endpoint: anything else finds no responders, as there
        for ep in SERVER_ENDPOINTS:
            self._sub(sys_sl, "$SYS.REQ.SERVER.%s.%s" % (sid, ep), self._server_ping)
            self._sub(sys_sl, "$SYS.REQ.SERVER.PING.%s" % ep, self._server_ping)
        for ep in ACCOUNT_ENDPOINTS:
            self._sub(sys_sl, "$SYS.REQ.ACCOUNT.*.%s" % ep, self._account_request)
        # where each account's USER.INFO import leads on nats-server; asked directly, it
        # answers of the requester itself
        self._sub(sys_sl, "$SYS.REQ.USER.*.INFO", self._user_info_by_account,
                  local_only=True)
        # In the system account itself, ACCOUNT.PING.STATZ covers every account in use
        # (nats-server's accPingReqSubj STATZ service); ACCOUNT.PING.CONNZ is, as there, the
        # ACCOUNT.<acc>.CONNZ service asked about an account named "PING".
        self._sub(sys_sl, "$SYS.REQ.ACCOUNT.PING.STATZ", self._account_ping_statz)
        # answered where it is asked (it asks the others itself), as nats-server's internal-only
        self._sub(sys_sl, "$SYS.DEBUG.SUBSCRIBERS", self._debug_subscribers, local_only=True)
        self._sub(sys_sl, "$SYS.REQ.SERVER.%s.RELOAD" % sid, self._reload)
        self._sub(sys_sl, "$SYS.REQ.SERVER.%s.KICK" % sid, self._client_control)
        self._sub(sys_sl, "$SYS.REQ.SERVER.%s.LDM" % sid, self._client_control)
        self._sub(sys_sl, "$SYS.REQ.USER.INFO", self._user_info, owner=self.account.internal_client)
        others = [a for a in server.accounts if a is not self.account and a is not server.accounts.global_account]
        for acc in others + [server.accounts.global_account]:
            self.account_added(acc)
        server.accounts.on_add.append(self.account_added)
        server.new_internal_client()    # nats-server's send queue: the first connection is cid 5
        self.timer = server.loop.call_later(self.statsz_delay, self._statsz_tick)

    def account_added(self, acc):
        """What nats-server imports into every account from the system account, subscribed by
        the account's own internal client."""
        if acc is self.account:
            return
        if self.client is not None and acc is not self.server.accounts.global_account:
            self.remote.account_added(acc)
        ic = acc.internal_client = self.server.new_internal_client()
        self._sub(acc.sublist, "$SYS.REQ.ACCOUNT.PING.CONNZ", self._scoped_request, acc, owner=ic)
        self._sub(acc.sublist, "$SYS.REQ.SERVER.PING.CONNZ", self._scoped_request, acc, owner=ic)
        self._sub(acc.sublist, "$SYS.REQ.ACCOUNT.PING.STATZ", self._scoped_request, acc, owner=ic)
        self._sub(acc.sublist, "$SYS.REQ.USER.INFO", self._user_info, owner=ic)

    def subscribe(self, subject, handler, queue=None):
        """A service of the system account: handler(sub, subject, reply, hdr, payload, origin).
        -> the subscription, for unsubscribe."""
        return self._sub(self.account.sublist, subject, handler, queue=queue)

    def new_inbox(self):
        """A reply subject of this server's own in the system account."""
        return self.remote.new_inbox()

    def unsubscribe(self, s):
        s.closed = True
        self.account.sublist.remove(s)
        self.subs = [(sl, x) for sl, x in self.subs if x is not s]

    def publish(self, subject, payload, reply=None):
        """A message from the server into the system account (`subject`, `reply` bytes or str)."""
        if isinstance(subject, str):
            subject = subject.encode()
        if isinstance(reply, str):
            reply = reply.encode()
        self.send(self.account.sublist, subject, reply, None, payload)

    def send(self, sublist, subject, reply, hdr, payload):
        """Publish into an account's sublist; what the system account's own client publishes
        is traced at -VV (`trace_verbose`), as nats-server's SYSTEM client is."""
        if sublist is self.account.sublist and self._tracing():
            size = len(payload) + (len(hdr) if hdr else 0)
            log.log(TRACE, "SYSTEM - <<- [PUB %s %s %d]", subject.decode(), (reply or b"").decode(), size)
            text = traced_payload(self.server.opts, (hdr or b"") + payload, len(hdr) if hdr else 0)
            if text is not None:
                log.log(TRACE, "SYSTEM - <<- MSG_PAYLOAD: [%s]", text)
        publish(sublist, subject, reply, hdr, payload)

    def _tracing(self):
        return self.server.opts.trace_verbose and log.isEnabledFor(TRACE)

    def _sub(self, sublist, subject, handler, account=None, queue=None, owner=None, local_only=False):
        def counted(*args):
            self.in_progress += 1
            try:
                handler(*args)
            finally:
                self.in_progress -= 1
        s = Subscription(None, subject.encode(), b"", queue.encode() if queue else None, counted)
        s.owner = owner or self.client
        s.sid = s.owner.next_sid()
        s.data = account
        s.local_only = local_only       # not announced to the routes
        if sublist is self.account.sublist and self._tracing():
            log.log(TRACE, "SYSTEM - <<- [SUB %s %s %s]", subject, queue or "", s.sid.decode())
        sublist.insert(s)
        self.subs.append((sublist, s))
        return s

    def shutdown(self):
        if self.timer is not None:
            self.timer.cancel()
        self.remote.stop()
        self._server_event("SHUTDOWN")

    def lame_duck_event(self):
        self._server_event("LAMEDUCK")

    def _server_event(self, kind):
        """$SYS.SERVER.<id>.SHUTDOWN / LAMEDUCK: the server's info itself is the payload."""
        subject = "$SYS.SERVER.%s.%s" % (self.server.id, kind)
        if self.listening(subject):
            self.send(self.account.sublist, subject.encode(), None, None, _json(self.server_info()))

    # ---- envelope ----

    def server_info(self):
        s = self.server
        self.seq += 1
        info = {"name": s.name, "host": s.opts.host, "id": s.id}
        info.update(omitempty(("cluster", s.cluster_name()), ("domain", s.jetstream_domain())))
        js = s.jetstream_enabled()
        info.update({"ver": VERSION, "feature_flags": dict(FEATURE_FLAGS),
                     "jetstream": js, "flags": JETSTREAM_ENABLED_FLAG if js else 0,
                     "seq": self.seq, "time": rfc3339(time.time())})
        if s.opts.server_tags:
            info["tags"] = list(s.opts.server_tags)
        if s.opts.server_metadata:
            info["metadata"] = dict(s.opts.server_metadata)
        return info

    def reply(self, sublist, reply, key, data, error=None, hdr=None):
        """The answer to a request; `hdr`, the request's headers, may ask for it compressed
        (not an error)."""
        env = {"server": self.server_info()}
        if error is not None:
            if error.get("code") == 500:
                env[key] = None         # nats-server: the endpoint's typed nil result is kept
            env["error"] = error
            self.send(sublist, reply, None, None, _json(env))
            return
        env[key] = data
        out_hdr, body = encoded(accept_encoding(hdr), _json(env))
        self.send(sublist, reply, None, out_hdr, body)

    # ---- request handlers ----

    def _client_control(self, sub, subject, reply, hdr, payload, origin):
        """`$SYS.REQ.SERVER.<id>.KICK` and `.LDM` with `{"cid": n}`, as nats-server's
        kickClient and ldmClient: KICK closes that client or leaf node ("Kicked"), LDM sends
        that client the lame duck INFO. The answer is `{"server": ...}`, or with an error for
        a cid it cannot act on; a body Go cannot decode into the request is logged, not
        answered."""
        from natsd.jetstream.engine import gojson     # (Go's decoder: loaded when asked)
        kick = subject.endswith(b".KICK")
        try:
            req = gojson.unmarshal(gojson.loads_node(payload), _CLIENT_CONTROL,
                                   "KickClientReq" if kick else "LDMClientReq",
                                   strict=False, data=bytes(payload or b""))
        except gojson.JSONError as e:
            system_error("Error unmarshalling kick client request: %s", e)
            return
        if not reply or filtered_out(self.server, payload):
            return
        cid = req.get("cid", 0)
        server = self.server
        if kick:
            c = server.clients.get(cid) or server.leafs.get(cid)
            if c is not None:
                c.schedule_close("Kicked")
            error = None if c is not None else "no such client or leafnode id"
        else:
            c = server.clients.get(cid)
            if c is None:
                error = "no such client id"
            elif server.tell_lame_duck(c):
                error = None
            else:
                error = ("client does not support Lame Duck Mode or is not ready to receive the "
                         "notification")
        self._done(reply, error)

    def _done(self, reply, error, code=500):
        """The answer of a request that acts and returns nothing: `{"server": ...}`, with
        `error` when it failed (nats-server's zReq)."""
        env = {"server": self.server_info()}
        if error is not None:
            env["error"] = {"code": code, **omitempty(("description", error))}
        self.send(self.account.sublist, reply, None, None, _json(env))

    def _server_ping(self, sub, subject, reply, hdr, payload, origin):
        if not reply:
            return
        tokens = subject.decode().split(".")
        endpoint = "STATSZ" if len(tokens) == 4 else tokens[-1]
        if endpoint == "IDZ":
            s = self.server
            self.send(self.account.sublist, reply, None, None,
                    _json({"name": s.name, "host": s.opts.host, "id": s.id}))
            return
        if filtered_out(self.server, payload):
            return
        if endpoint in ("STATSZ", "STATZ"):
            self.reply(self.account.sublist, reply, "statsz", self.statsz())
            return
        try:
            data, error = self.endpoint_data(endpoint, payload, None)
        except SkipResponse:
            return                      # e.g. JSZ leader-only on a non-leader: stay silent
        if isinstance(data, Later):     # a CPU profile: answered once it is taken
            reply, hdr = bytes(reply), bytes(hdr) if hdr else hdr
            data.start(lambda d: self.reply(self.account.sublist, reply, "data", d, None, hdr))
            return
        self.reply(self.account.sublist, reply, "data", data, error, hdr)

    def _account_request(self, sub, subject, reply, hdr, payload, origin):
        if not reply:
            return
        _, _, _, acc_name, endpoint = subject.decode().split(".", 4)
        if acc_name == "PING" and endpoint in ("STATZ", "CONNS"):
            return                      # STATZ: _account_ping_statz; CONNS: only real accounts
        if endpoint != "CONNS" and filtered_out(self.server, payload):
            return
        acc = self.server.accounts.accounts.get(acc_name)
        if acc is None:
            self._unknown_account(acc_name, endpoint, payload, reply, hdr)
            return
        self._answer_for_account(self.account.sublist, acc, endpoint, payload, reply, hdr)

    def _unknown_account(self, name, endpoint, payload, reply, hdr):
        """nats-server treats an unknown account as a filter that matches nothing."""
        sl = self.account.sublist
        if endpoint in ("STATZ", "CONNS"):
            return                      # nothing to report: no reply
        if endpoint == "INFO":
            self.reply(sl, reply, "data", None,
                       {"code": 500, "description": "Account %s does not exist" % name})
            return
        if endpoint == "JSZ" and not self.server.jetstream_enabled():
            self.reply(sl, reply, "data", None, {"code": 500, "description": "jetstream not enabled"})
            return
        if endpoint == "CONNZ":         # nats-server's (empty) Connz for a missing account
            self.reply(sl, reply, "data", {"server_id": "", "now": rfc3339(time.time()),
                                           "num_connections": 0, "total": 0, "offset": 0,
                                           "limit": 1024, "connections": None}, hdr=hdr)
            return
        try:
            data, error = self.endpoint_data(endpoint, payload, name)
        except SkipResponse:
            return
        self.reply(sl, reply, "data", data, error, hdr)

    def _scoped_request(self, sub, subject, reply, hdr, payload, origin):
        if reply and not filtered_out(self.server, payload):
            endpoint = subject.decode().rsplit(".", 1)[1]
            self._answer_for_account(sub.data.sublist, sub.data, endpoint, payload, reply, hdr)

    def _account_ping_statz(self, sub, subject, reply, hdr, payload, origin):
        """Every account in use here, or those the body's `accounts` names (`include_unused`:
        in use or not); no reply when that is none, nor when the body's filter leaves this
        server out."""
        if not reply or filtered_out(self.server, payload):
            return
        data, error = self.endpoint_data("ACCSTATZ", payload, None)
        if error is None and not data["account_statz"] and not _include_unused(payload):
            return
        self.reply(self.account.sublist, reply, "data", data, error, hdr)

    def _answer_for_account(self, sublist, acc, endpoint, payload, reply, hdr):
        if endpoint in ("STATZ", "STATSZ"):
            # nats-server: no reply from a server where the account has no connection
            if acc.clients or _include_unused(payload):
                self.reply(sublist, reply, "data", self.account_statz(acc), hdr=hdr)
            return
        if endpoint == "CONNS":
            # nats-server answers CONNS with the bare account_connections advisory, from a
            # server where the account has connections only
            if not acc.clients:
                return
            ev = self._advisory("account_connections")
            ev.update(self.account_conns(acc))
            self.send(sublist, reply, None, None, _json(ev))
            return
        if endpoint == "INFO":
            from natsd.monitor.accountz import account_info
            self.reply(sublist, reply, "data", self.account_detail(acc, account_info), hdr=hdr)
            return
        if endpoint == "JSZ" and not self.server.jetstream_enabled():
            self.reply(sublist, reply, "data", None,
                       {"code": 500, "description": "jetstream not enabled"})
            return
        if endpoint == "SUBSZ":         # nats-server forces the subscription list on
            try:
                body = json.loads(payload) if payload and payload.strip() else {}
            except ValueError:
                body = None
            if isinstance(body, dict):
                payload = _json(dict(body, subscriptions=True))
        try:
            data, error = self.endpoint_data(endpoint, payload, acc)
        except SkipResponse:
            return
        self.reply(sublist, reply, "data", data, error, hdr)

    def account_detail(self, acc, account_info):
        """`$SYS.REQ.ACCOUNT.<acc>.INFO`: the account detail, as /accountz?acc=<acc> (which
        lists the imports that reach this module's services, natsd/monitor/sysexports.py)."""
        return account_info(self.server, acc)

    def _user_info(self, sub, subject, reply, hdr, payload, origin):
        if not reply or origin is None:
            return
        st = origin.state
        acc = st.account.name if st.account is not None else ""
        data = {"user": st.user, "account": acc, "account_name": acc}
        perms = st.perms
        if perms is not None:
            data["permissions"] = perms_json(perms)
        sublist = st.account.sublist if st.account is not None else self.account.sublist
        self.reply(sublist, reply, "data", data)

    def _user_info_by_account(self, sub, subject, reply, hdr, payload, origin):
        """`$SYS.REQ.USER.<acc>.INFO` asked directly: as nats-server, of the user its
        `Nats-Request-Info` header names (none: empty names), with the requester's
        permissions; a header block without that header is a bad request."""
        if not reply:
            return
        ci = request_info(hdr)
        if ci is None:
            self._done(reply, "", code=400)     # (Go's error is not told)
            return
        acc = self.server.accounts.accounts.get(ci.get("acc") or "")
        data = {"user": ci.get("user", ""), "account": ci.get("acc", "")}
        data.update(omitempty(("account_name", acc.name_tag if acc is not None else ""),
                              ("user_name", ci.get("name_tag", ""))))
        perms = getattr(getattr(origin, "state", None), "perms", None)
        if perms is not None:
            data["permissions"] = perms_json(perms)
        self.reply(self.account.sublist, reply, "data", data)

    def _debug_subscribers(self, sub, subject, reply, hdr, payload, origin):
        """`$SYS.DEBUG.SUBSCRIBERS`: how many client (and hub-side leaf) subscriptions in the
        requester's account match "<subject> [<queue>]", here and on the servers where the
        account has connections (nats-server's debugSubscribers; a wildcard subject counts the
        subscriptions it contains)."""
        if not reply:
            return
        acc = getattr(getattr(origin, "state", None), "account", None) or self.account
        args = (payload or b"").decode("utf-8", "replace").split()
        if not args:
            self.send(self.account.sublist, reply, None, None, _json(0))
            return
        reply = bytes(reply)
        self.remote.count_subscribers(
            acc, args[0], args[1].encode() if len(args) > 1 else None,
            lambda n: self.send(self.account.sublist, reply, None, None, _json(n)))

    def _reload(self, sub, subject, reply, hdr, payload, origin):
        """`$SYS.REQ.SERVER.<id>.RELOAD`: the configuration file read again, as on SIGHUP,
        when the request has a reply subject and its filter names this server."""
        if not reply:
            return
        if payload and payload.strip():
            from natsd.jetstream.engine import gojson
            try:
                gojson.loads_node(payload)
            except gojson.JSONError as e:
                self._done(reply, str(e), code=400)
                return
            if filtered_out(self.server, payload):
                return
        self._done(reply, self.server.reload_config_file())

    def endpoint_data(self, endpoint, payload, account):
        """Run a monitoring endpoint for a $SYS request: (data, error)."""
        from natsd.monitor import endpoints
        try:
            body = json.loads(payload) if payload and payload.strip() else {}
        except ValueError as e:
            return None, {"code": 400, "description": "invalid request: %s" % e}
        fn = endpoints.sys_handler(endpoint.lower()) if hasattr(endpoints, "sys_handler") \
            else _basic_handler(endpoint.lower())
        if fn is None:
            return None, {"code": 404, "description": "endpoint not found"}
        try:
            return fn(self.server, body, account), None
        except OptionsError as e:
            # nats-server (zReq): options that fail to decode are 400; options the endpoint
            # itself rejects (bad sort, unknown account, ...) are 500
            code = 400 if str(e).startswith(("json:", "Error decoding")) else 500
            return None, {"code": code, "description": str(e)}
        except SkipResponse:
            raise
        except Exception as e:
            log.exception("system request %s failed", endpoint)
            return None, {"code": 500, "description": str(e)}

    # ---- statistics ----

    def statsz(self):
        s = self.server
        from natsd.monitor.varz import this_process
        ct = client_traffic()
        out = {
            "start": rfc3339(s.start_time),
            "mem": this_process().memory_info().rss,
            "cores": os.cpu_count(),
            "cpu": this_process().cpu_percent(None),
            "connections": len(s.clients),
            "total_connections": s.total_connections,
            "active_accounts": sum(1 for a in s.accounts if a.clients),
            "subscriptions": sum(a.subscription_count for a in s.accounts),
            "sent": {"msgs": totals.out_msgs, "bytes": totals.out_bytes},
            "received": {"msgs": totals.in_msgs, "bytes": totals.in_bytes},
            "received_from_clients": {"msgs": ct["in_msgs"], "bytes": ct["in_bytes"]},
            "sent_to_clients": {"msgs": ct["out_msgs"], "bytes": ct["out_bytes"]},
            "slow_consumers": totals.slow_consumers,
        }
        if s.routes:
            out["routes"] = [{"rid": c.cid, "name": c.state.remote_name,
                              "sent": {"msgs": c.out_msgs, "bytes": c.out_bytes},
                              "received": {"msgs": c.in_msgs, "bytes": c.in_bytes},
                              "pending": c.pending_bytes()} for c in s.routes.values()]
        # as nats-server: the per-kind figures only once one of them is not 0
        if totals.slow_consumers:
            out["slow_consumer_stats"] = s.slow_consumer_stats()
        if s.stale_connections:
            out["stale_connections"] = s.stale_connections
            out["stale_connection_stats"] = {"clients": s.stale_connections, "routes": 0,
                                             "gateways": 0, "leafs": 0}
        out["active_servers"] = 1 + (len(s.cluster.routes) if s.cluster is not None else 0)
        js = s.jetstream_varz() if s.jetstream_enabled() else None
        if js:
            js = dict(js)
            js["config"] = {k: v for k, v in js.get("config", {}).items() if k != "store_dir"}
            out["jetstream"] = js
        out["gomaxprocs"] = os.cpu_count()
        return out

    def account_statz(self, acc):
        return {"server_id": self.server.id, "now": rfc3339(time.time()),
                "account_statz": [self.account_conns(acc)]}

    def account_conns(self, acc):
        from natsd.monitor.accountz import account_stat
        return account_stat(self.server, acc)

    def announce(self):
        """A STATSZ now, beside the periodic ones: nats-server sends one when it first hears
        of another server, so that a new server learns of it at once."""
        subject = "$SYS.SERVER.%s.STATSZ" % self.server.id
        if self._statsz_wanted(subject):
            self.send_event(subject, None, key="statsz", data=self.statsz())

    def _statsz_wanted(self, subject):
        """nats-server's rule: a server with a route, gateway or leaf node port, or a leaf
        remote of the system account, always sends its STATSZ; another one only when someone
        listens other than its own tracker of the other servers (natsd/system/remote.py).
        Gathering them loads psutil and reads /proc."""
        o = self.server.opts
        if o.cluster.port or o.gateway.port or o.leafnode.port:
            return True
        if any(r.account == self.account.name for r in o.leafnode.remotes):
            return True                 # a leaf remote carries the system account
        r = self.account.sublist.match(subject.encode())
        return r.total > 1 or (r.total == 1 and r.psubs != [self.remote.statsz_sub])

    def _statsz_tick(self):
        self.announce()
        # nats-server sends the first one after 250ms and doubles the gap up to 10s
        self.statsz_delay = min(self.statsz_delay * 2, STATSZ_INTERVAL)
        self.timer = self.server.loop.call_later(self.statsz_delay, self._statsz_tick)

    # ---- events ----

    def listening(self, subject):
        """Is anyone subscribed to this event subject? (events are built only then)"""
        return self.account is not None and self.account.sublist.match(subject.encode()).total > 0

    def send_event(self, subject, event, key=None, data=None):
        if not self.listening(subject):
            return
        if event is None:
            event = {"server": self.server_info()}
            if key is not None:
                event[key] = data
        self.send(self.account.sublist, subject.encode(), None, None, _json(event))

    def _advisory(self, kind):
        return {"type": "io.nats.server.advisory.v1.%s" % kind, "id": random_token(22),
                "timestamp": rfc3339(time.time()), "server": self.server_info()}

    def client_event(self, c, connected):
        acc = c.state.account
        if acc is None:
            return
        self._connect_event(c, acc, connected)
        self.conns_changed(acc)

    def conns_changed(self, acc):
        """The account's connections here, to the other servers (natsd/system/remote.py) and
        whoever listens, on both of nats-server's subjects; not for the global account."""
        if acc is self.server.accounts.global_account:
            return
        subjects = [s for s in ("$SYS.SERVER.ACCOUNT.%s.CONNS" % acc.name,
                                "$SYS.ACCOUNT.%s.SERVER.CONNS" % acc.name) if self.listening(s)]
        if subjects:
            conns = self._advisory("account_connections")
            conns.update(self.account_conns(acc))
            for subject in subjects:
                self.send(self.account.sublist, subject.encode(), None, None, _json(conns))

    def _connect_event(self, c, acc, connected):
        if not self.listening("$SYS.ACCOUNT.%s.CONNECT" % acc.name):
            return                      # nobody listens in $SYS: skip building the events
        st = c.state
        client = {"start": rfc3339(st.start), "host": st.host, "id": c.cid, "acc": acc.name,
                  "user": st.user, "name": st.name, "lang": st.lang, "ver": st.version}
        if not connected:
            if c.rtt:                   # (the CONNECT event has no rtt)
                client["rtt"] = rtt_nanos(c.rtt)
            client["stop"] = rfc3339(st.stop or time.time())
        user = getattr(st, "jwt_user", None)
        if user is not None:
            client["jwt"] = user.claims.token
            client["issuer_key"] = user.claims.issuer
        client["name_tag"] = acc.name_tag
        if user is not None and user.claims.nats.get("tags"):
            client["tags"] = list(user.claims.nats["tags"])
        client.update(kind=st.kind, client_type=client_type(st))
        if connected:
            ev = self._advisory("client_connect")
            ev["client"] = client
            self.send_event("$SYS.ACCOUNT.%s.CONNECT" % acc.name, ev)
        else:
            ev = self._advisory("client_disconnect")
            ev["client"] = client
            # from the client's side, as nats-server reports them: what it sent us, and
            # what we delivered to it
            ev["sent"] = {"msgs": c.in_msgs, "bytes": c.in_bytes}
            ev["received"] = {"msgs": c.out_msgs, "bytes": c.out_bytes}
            ev["reason"] = st.reason
            self.send_event("$SYS.ACCOUNT.%s.DISCONNECT" % acc.name, ev)

    def auth_error(self, host, port, cid, reason):
        if not self.listening("$SYS.SERVER.%s.CLIENT.AUTH.ERR" % self.server.id):
            return
        ev = self._advisory("client_disconnect")
        client = {"host": host, "id": cid}
        c = self.server.clients.get(cid)    # still registered: the close is only scheduled
        st = getattr(c, "state", None)
        if st is not None:
            info = st.connect or {}
            # nats-server reports the failed client as bound to $G, with what CONNECT said
            client = {"start": rfc3339(st.start), "host": host, "id": cid, "acc": "$G",
                      "user": str(info.get("user") or info.get("nkey") or ""),
                      "name": str(info.get("name") or ""), "lang": str(info.get("lang") or ""),
                      "ver": str(info.get("version") or "")}
            client = {k: v for k, v in client.items() if v != ""}
            if getattr(c, "rtt", 0):
                client["rtt"] = rtt_nanos(c.rtt)
            client.update({"stop": rfc3339(time.time()), "name_tag": "$G"})
        client.update({"kind": "Client", "client_type": "nats"})
        ev["client"] = client
        ev["sent"] = {"msgs": 0, "bytes": 0}
        ev["received"] = {"msgs": 0, "bytes": 0}
        ev["reason"] = reason
        self.send_event("$SYS.SERVER.%s.CLIENT.AUTH.ERR" % self.server.id, ev)


def _basic_handler(name):
    from natsd.monitor import healthz, varz
    table = {"varz": lambda server, body, acc: varz.varz(server, {}),
             "healthz": lambda server, body, acc: _healthz_data(healthz.healthz(server, {}))}
    return table.get(name)


def _healthz_data(result):
    if isinstance(result, tuple):
        return result[1]
    return dict(result, status_code=200)


def perms_json(perms):
    out = {}
    if perms.pub_allow is not None or perms.pub_deny:
        out["publish"] = {k: v for k, v in (("allow", list(perms.pub_allow or [])),
                                            ("deny", list(perms.pub_deny))) if v}
    if perms.sub_allow is not None or perms.sub_deny:
        fmt = lambda sq: sq[0] if sq[1] is None else "%s %s" % sq
        out["subscribe"] = {k: v for k, v in (("allow", [fmt(x) for x in perms.sub_allow or []]),
                                              ("deny", [fmt(x) for x in perms.sub_deny])) if v}
    return out


def _include_unused(payload):
    try:
        body = json.loads(payload) if payload and payload.strip() else {}
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("include_unused") is True
