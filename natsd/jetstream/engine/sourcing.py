"""Stream mirrors and sources: the receiving side of `mirror` / `sources[]`.

Owns `Sourcing` (one per stream with a mirror or sources, `stream.sourcing`) and `Link` (one per
mirror or source). As nats-server, a link talks to the origin only through the JetStream API
over subjects, so it works locally (`$JS.API`), across domains (`$JS.<domain>.API` over a leaf
link) and across accounts (an import-renamed prefix such as `JS.acc@hub.API`):

- it subscribes (in the stream's account) to a fresh deliver subject `$JS.M.<rand>` /
  `$JS.S.<rand>` (or `<external.deliver>.M|S.<rand>`) and a reply subject `$JSC.R.<rand>`, then
  publishes a consumer-create request to `<api>.CONSUMER.CREATE.<origin>` (the short form when
  unfiltered; `<api>.CONSUMER.CREATE.<origin>.<name>.<filter>` with one filter) for a direct,
  ack-none, flow-controlled push consumer with 1 s heartbeats;
- messages arrive under their origin subject (the router restores it when a delivery crossed a
  link or an import) with the 9-token `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.
  <pending>` reply (v2 12-token form accepted);
- a mirror stores each message byte-for-byte under the origin's sequence and timestamp; a source
  stores it under a new local sequence with `Nats-Stream-Source: <stream>[:<getHash(api)>]
  <origin seq> <filter|>> <dest|>> <original subject>[ <origin identity>]`; a source sends the
  origin stream's identity (`Nats-Stream-Identity`, API level 5) with its create request and
  starts over from the beginning when the origin answers that the stream was re-created;
- flow-control requests are answered, heartbeats checked against the delivered count, and a
  link with a gap, a stall (no data/heartbeat for STALL seconds, or a flow-control request that
  never gets through, e.g. the seed's FC export that cannot match) or a failed create is
  re-created from the last copied origin sequence + 1 with back-off;
- `lag`, `active` and `error` feed stream info (`mirror`, `sources[]`);
- restarts resume from the stream's last sequence (mirror) or from per-source state kept in
  `<stream dir>/sources.json` and the newest `Nats-Stream-Source` headers (sources).

Stream hooks (natsd/jetstream/engine/stream.py): `attach(stream)` on start, `Sourcing.update()` after a
config update, `Sourcing.stop()` on stop/delete, `Sourcing.info(src)` for stream info; messages
are stored through `stream.store_sourced(...)`.
"""
import json
import logging
import os
import random
import time

from natsd._core.loop import cancel_timer
from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.ids import get_hash, random_token

log = logging.getLogger("natsd")


NS = 1_000_000_000

HEARTBEAT = 1 * NS              # idle heartbeat asked of the origin consumer
INACTIVE = 10 * NS              # origin consumer's inactive threshold
CHECK = 1.0                     # health check tick (s)
STALL = 5.0                     # no data/heartbeat for this long -> re-create
FC_STALL_BEATS = 3              # heartbeats naming the same unanswered FC request -> re-create
CREATE_TIMEOUT = 10.0           # wait for a consumer-create response
RETRY_THRESHOLD = 2.0           # minimum time between two create requests
RETRY_MAX = 15.0


def backoff(fails):
    return min(3.0 * fails, RETRY_MAX)


def api_prefix(src):
    ext = src.get("external") or {}
    if ext.get("api"):
        return ext["api"]
    if src.get("domain"):
        return "$JS.%s.API" % src["domain"]
    return ""


def iname(src):
    """nats-server StreamSource.composeIName: '<name>[:<hash(api)>] <filters> <dests>'."""
    name = src["name"]
    api = api_prefix(src)
    if api:
        name += ":" + get_hash(api)
    trs = src.get("subject_transforms") or []
    if not trs:
        return " ".join([name, src.get("filter_subject") or ">", ">"])
    return " ".join([name, "\f".join(t.get("src") or ">" for t in trs),
                     "\f".join(t.get("dest") or ">" for t in trs)])


def parse_ack_reply(reply):
    """$JS.ACK reply -> (stream, consumer, dc, sseq, dseq, ts, pending)."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    t = reply.split(".")
    if len(t) < 9 or t[0] != "$JS" or t[1] != "ACK":
        return None
    off = 2 if len(t) == 9 else 4
    if len(t) != 9 and len(t) < 11:
        return None
    try:
        return (t[off], t[off + 1], int(t[off + 2]), int(t[off + 3]), int(t[off + 4]),
                int(t[off + 5]), int(t[off + 6]))
    except (ValueError, IndexError):
        return None


def header_value(hdr, key):
    if not hdr:
        return None
    k = key.lower().encode() + b":"
    for line in hdr.split(b"\r\n")[1:]:
        if line.lower().startswith(k):
            return line[len(k):].strip().decode("utf-8", "replace")
    return None


def strip_headers(hdr, names=(), prefixes=()):
    """Remove header lines by name or name prefix (case-insensitive); None when nothing is left
    and the block had no status."""
    if not hdr:
        return hdr
    lines = hdr.split(b"\r\n")
    keep = [lines[0]]
    changed = False
    lnames = [n.lower().encode() + b":" for n in names]
    lpref = [p.lower().encode() for p in prefixes]
    for line in lines[1:]:
        if not line:
            continue
        low = line.lower()
        if any(low.startswith(n) for n in lnames) or any(low.startswith(p) for p in lpref):
            changed = True
            continue
        keep.append(line)
    if not changed:
        return hdr
    return b"\r\n".join(keep) + b"\r\n\r\n"


def add_header(hdr, key, value):
    """nats-server genHeader: append `key: value` (a new NATS/1.0 block when hdr is empty)."""
    line = ("%s: %s\r\n" % (key, value)).encode()
    if not hdr:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    if hdr.endswith(b"\r\n\r\n"):
        return hdr[:-2] + line + b"\r\n"
    return hdr + b"\r\n" + line + b"\r\n"


class Link:
    """One mirror or source: the origin consumer, its subscriptions and copy state."""

    def __init__(self, mgr, src, mirror):
        self.mgr = mgr
        self.stream = mgr.stream
        self.src = src
        self.mirror = mirror
        self.iname = iname(src)
        self.hname = self.iname.split(" ")[0]       # header stream part: name[:hash]
        self.api = api_prefix(src) or "$JS.API"
        self.sseq = 0                   # last origin sequence copied
        self.dseq = 0                   # last delivery sequence of the current consumer
        self.cname = ""
        self.ident = ""                 # the origin stream's identity (sources, API level 5)
        self.recreated = False          # the origin refused our identity: start over
        self.lag = 0
        self.last = 0                   # ns of the last contact (0: never)
        self.err = None
        self.fails = 0
        self.lreq = None                # monotonic time of the last create request
        self.sip = False                # setup in progress
        self.dsub = None
        self.rsub = None
        self.buffer = None              # messages received before the create response
        self.timer = None               # retry / response timeout
        self.closed = False
        self.fc_seen = None             # (stalled FC subject, count)
        self.transforms = []
        from natsd.accounts.transform import SubjectTransform
        for tr in src.get("subject_transforms") or []:
            if tr.get("dest"):
                try:
                    self.transforms.append(SubjectTransform.compile(tr.get("src") or ">", tr["dest"]))
                except Exception:
                    log.warning("invalid subject transform %r in %s", tr, self.stream.name)

    # ---- subscriptions ----

    def _sub(self, subject, cb):
        s = Subscription(None, subject.encode(), b"", None, cb)
        self.stream.jsa.sublist.insert(s)
        return s

    def _unsub(self, s):
        if s is not None:
            s.closed = True
            try:
                self.stream.jsa.sublist.remove(s)
            except Exception:
                pass

    def _publish(self, subject, reply=None, hdr=None, payload=b""):
        return publish(self.stream.jsa.sublist, subject.encode(),
                       reply.encode() if isinstance(reply, str) else reply, hdr, payload)

    # ---- lifecycle ----

    def cancel(self):
        self._unsub(self.dsub)
        self._unsub(self.rsub)
        self.dsub = self.rsub = None
        self.buffer = None
        self.cname = ""
        self.sip = False
        self.fc_seen = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def stop(self):
        self.closed = True
        self.cancel()

    def schedule(self, delay=None):
        """Schedule a (re-)create, throttled like nats-server (threshold + back-off + jitter)."""
        if self.closed:
            return
        self.cancel()
        if delay is None:
            delay = 0.0
            if self.lreq is not None:
                delay = max(0.0, RETRY_THRESHOLD - (time.monotonic() - self.lreq))
            if self.fails:
                delay += backoff(self.fails)
        delay += 0.1 + random.random() * 0.1
        self.timer = self.stream.loop.call_later(delay, self.setup)

    def retry(self):
        log.debug("Retrying %s consumer for '%s > %s'", "mirror" if self.mirror else "source",
                  self.stream.jsa.name, self.stream.name)
        self.schedule()

    def _fail(self, err):
        self.err = err
        self.fails += 1
        self.schedule()

    def setup(self):
        self.timer = None
        if self.closed or self.stream.closed:
            return
        self.cancel()
        self.lreq = time.monotonic()
        src = self.src
        ext = src.get("external") or {}
        kind = "M" if self.mirror else "S"
        if ext.get("deliver"):
            dsubj = ("%s.%s.%s" % (ext["deliver"], kind, random_token(8))).replace("..", ".")
        else:
            dsubj = "$JS.%s.%s" % (kind, random_token(8))
        st = self.stream.store.state()
        cfg = {"deliver_subject": dsubj, "ack_policy": "none", "ack_wait": 22 * 3600 * NS,
               "max_deliver": 1, "idle_heartbeat": HEARTBEAT, "flow_control": True,
               "direct": True, "inactive_threshold": INACTIVE}
        if self.mirror:
            cfg["name"] = "JS_MIRROR_%s_%s" % (self.mgr.hash_id, random_token(8))
            cfg["metadata"] = self.mgr.metadata("mirror")
            if st["messages"] == 0 and st["first_seq"] == 0 and st["last_seq"] == 0:
                self.sseq = 0
                self._start_from_config(cfg)
            else:
                self.sseq = st["last_seq"]
                cfg["deliver_policy"] = "by_start_sequence"
                cfg["opt_start_seq"] = st["last_seq"] + 1
        else:
            cfg["name"] = "JS_SRC_%s_%s" % (self.mgr.hash_id, random_token(8))
            cfg["metadata"] = self.mgr.metadata("src")
            if self.sseq > 0:
                cfg["deliver_policy"] = "by_start_sequence"
                cfg["opt_start_seq"] = self.sseq + 1
            else:
                self._start_from_config(cfg)
        filters = [t.get("src") or ">" for t in src.get("subject_transforms") or []]
        if src.get("filter_subject"):
            cfg["filter_subject"] = src["filter_subject"]
        elif len(filters) == 1:
            cfg["filter_subject"] = filters[0]
        elif filters:
            cfg["filter_subjects"] = filters
        if cfg.get("filter_subject"):
            subject = "%s.CONSUMER.CREATE.%s.%s.%s" % (self.api, src["name"], cfg["name"],
                                                      cfg["filter_subject"])
        else:
            subject = "%s.CONSUMER.CREATE.%s" % (self.api, src["name"])
        subject = subject.replace("..", ".")
        reply = "$JSC.R.%s" % random_token(8)
        self.buffer = []
        self.dseq = 0
        self.sip = True
        self.dsub = self._sub(dsubj, self._on_msg)
        self.rsub = self._sub(reply, self._on_reply)
        body = json.dumps({"stream_name": src["name"], "config": cfg}).encode()
        self.timer = self.stream.loop.call_later(CREATE_TIMEOUT, self._timeout)
        hdr = None
        if not self.mirror and self.ident:
            hdr = b"NATS/1.0\r\nNats-Stream-Identity: %s\r\n\r\n" % self.ident.encode()
        try:
            n = self._publish(subject, reply, hdr, body)
        except Exception as exc:
            log.exception("sending the consumer create request for %s failed", self.stream.name)
            n = 0
            self.err = {"code": 500, "err_code": 10029, "description": str(exc)}
        if not n and self.sip and self.rsub is not None:
            # nobody listens (e.g. the leaf link is down): no responders, retry later
            self.cancel()
            self._fail({"code": 503, "err_code": 10029 if self.mirror else 10141,
                        "description": "%s consumer setup failed: no responders"
                                       % ("mirror" if self.mirror else "source")})

    def _start_from_config(self, cfg):
        src = self.src
        if src.get("opt_start_seq"):
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = src["opt_start_seq"]
        elif src.get("opt_start_time"):
            cfg["deliver_policy"] = "by_start_time"
            cfg["opt_start_time"] = src["opt_start_time"]
        else:
            cfg["deliver_policy"] = "all"

    def _timeout(self):
        self.timer = None
        if self.closed or not self.sip:
            return
        self.cancel()
        self._fail({"code": 503, "err_code": 10029 if self.mirror else 10141,
                    "description": "%s consumer setup failed: timeout"
                                   % ("mirror" if self.mirror else "source")})

    def _on_reply(self, sub, subject, reply, hdr, payload, origin=None):
        if self.closed or sub is not self.rsub or not self.sip:
            return
        self._unsub(self.rsub)
        self.rsub = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        try:
            resp = json.loads(payload or b"{}")
        except ValueError:
            resp = {"error": {"code": 500, "err_code": 10025, "description": "invalid JSON"}}
        ci_cfg = resp.get("config") if isinstance(resp, dict) else None
        if not isinstance(resp, dict) or resp.get("error") or not isinstance(ci_cfg, dict):
            err = (resp or {}).get("error") if isinstance(resp, dict) else None
            if not err:
                err = {"code": 500, "err_code": 10029 if self.mirror else 10141,
                       "description": "invalid consumer create response"}
            if err.get("err_code") == 10225 and not self.mirror:
                # JSConsumerStreamIdentityMismatch: the origin stream was re-created
                self.cancel()
                self.sseq, self.dseq, self.ident, self.recreated = 0, 0, "", True
                self.schedule()
                return
            log.warning("JetStream error response for stream %s create %s consumer %s: %s",
                        self.stream.name, "mirror" if self.mirror else "source", self.src["name"],
                        err.get("description"))
            self.cancel()
            self._fail(err)
            return
        self.sip = False
        self.err = None
        self.fails = 0
        self.cname = resp.get("name", "")
        self.last = time.time_ns()
        delivered = int((resp.get("delivered") or {}).get("stream_seq") or 0)
        if self.mirror:
            last = self.stream.store.state()["last_seq"]
            self.sseq = max(delivered, last)
        else:
            ident = header_value(hdr, "Nats-Stream-Identity") or ""
            if self.recreated or (ident and self.ident and ident != self.ident):
                log.warning("JetStream source stream %r for stream '%s > %s' was recreated, "
                            "resetting source state", self.src["name"], self.stream.jsa.name,
                            self.stream.name)
                self.sseq = 0
            self.ident, self.recreated = ident, False
            if self.sseq < delivered:
                self.sseq = delivered
        self.dseq = 0
        buffered, self.buffer = self.buffer or [], None
        for m in buffered:
            if self.closed or self.dsub is None:
                break
            self._handle(*m)

    # ---- inbound ----

    def _on_msg(self, sub, subject, reply, hdr, payload, origin=None):
        if self.closed or sub is not self.dsub:
            return
        self.last = time.time_ns()
        if self.buffer is not None:
            self.buffer.append((bytes(subject), bytes(reply) if reply else None,
                                bytes(hdr) if hdr else None, bytes(payload)))
            return
        self._handle(subject, reply, hdr, payload)

    def _handle(self, subject, reply, hdr, payload):
        if hdr and hdr.startswith(b"NATS/1.0 100"):
            self._control(reply, hdr)
            return
        r = parse_ack_reply(reply) if reply else None
        if r is None:
            return
        _stream, cname, dc, sseq, dseq, ts, pending = r
        if self.cname and cname != self.cname:
            return                      # an older consumer
        if dc > 1:
            return
        subj = bytes(subject)
        if self.mirror:
            self._mirror_msg(cname, subj, hdr, payload, sseq, dseq, ts, pending)
        else:
            self._source_msg(cname, subj, hdr, payload, sseq, dseq, pending)

    def _control(self, reply, hdr):
        if reply:                       # flow control request
            h = ("NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n"
                 % (self.dseq, self.sseq)).encode()
            self._publish(reply.decode() if isinstance(reply, bytes) else reply, None, h, b"")
            return
        ldseq = header_value(hdr, "Nats-Last-Consumer")
        try:
            ld = int(ldseq) if ldseq else 0
        except ValueError:
            ld = 0
        if ld > 0 and ld != self.dseq:
            self.retry()                # we missed something
            return
        fc = header_value(hdr, "Nats-Consumer-Stalled")
        if fc:
            seen = self.fc_seen
            cnt = seen[1] + 1 if seen and seen[0] == fc else 1
            self.fc_seen = (fc, cnt)
            if cnt >= FC_STALL_BEATS:
                # our flow-control replies never arrive (e.g. no matching FC export): start over
                self.retry()
                return
            self._publish(fc, None, None, b"")
        else:
            self.fc_seen = None

    def _mirror_msg(self, cname, subj, hdr, payload, sseq, dseq, ts, pending):
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq += 1
            return
        if sseq == self.sseq + 1 or not self.cname or dseq == self.dseq + 1:
            if not self.cname:
                self.cname = cname
            # a jump with consecutive delivery: the origin deleted/expired messages in between
        else:
            self.retry()
            return
        self.lag = pending - 1 if pending else 0
        if self.transforms:
            subj = self._transform(subj)
        if hdr:
            hdr = strip_headers(hdr, prefixes=("Nats-Expected-", "Nats-Batch-"))
        try:
            ok = self.stream.store_sourced(subj, hdr, payload, seq=sseq, ts=ts)
        except Exception:
            log.exception("Error processing inbound mirror message for '%s' > '%s'",
                          self.stream.jsa.name, self.stream.name)
            ok = False
        if not ok:
            self.retry()
            return
        self.sseq = sseq
        self.dseq = dseq

    def _source_msg(self, cname, subj, hdr, payload, sseq, dseq, pending):
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq += 1
            return
        if dseq == self.dseq + 1:
            pass
        elif dseq > self.dseq and not self.cname:
            self.cname = cname
        else:
            self.retry()
            return
        self.lag = pending - 1 if pending else 0
        if hdr:
            hdr = strip_headers(hdr, names=("Nats-Stream-Source",),
                                prefixes=("Nats-Expected-", "Nats-Batch-"))
            if hdr == b"NATS/1.0\r\n\r\n":
                hdr = None
        parts = self.iname.split(" ")
        value = "%s %d %s %s %s" % (self.hname, sseq, parts[1], parts[2], subj.decode())
        if self.ident:
            value += " " + self.ident
        hdr = add_header(hdr, "Nats-Stream-Source", value)
        if self.transforms:
            subj = self._transform(subj)
        try:
            ok = self.stream.store_sourced(subj, hdr, payload)
        except Exception:
            log.exception("Error processing inbound source %r for '%s' > '%s'", self.iname,
                          self.stream.jsa.name, self.stream.name)
            ok = False
        if not ok:
            self.schedule()             # re-create from the sequence we could not store
            return
        self.sseq = sseq
        self.dseq = dseq
        self.mgr.dirty = True

    def _transform(self, subj):
        s = subj.decode()
        for tr in self.transforms:
            try:
                out = tr.apply(s)
            except Exception:
                out = None
            if out:
                return out.encode()
        return subj

    # ---- health ----

    def check(self, now_ns):
        if self.closed or self.sip or self.timer is not None:
            return
        if self.dsub is None:
            self.schedule()
            return
        if now_ns - self.last > STALL * NS:
            self.retry()

    def info(self):
        si = {"name": self.src["name"]}
        ext = self.src.get("external")
        api = api_prefix(self.src)
        if ext or api:
            si["external"] = {"api": api, "deliver": (ext or {}).get("deliver", "")}
        si["lag"] = self.lag
        if not self.mirror and self.sseq:
            si["seq"] = self.sseq       # nats-server 2.15: last copied origin sequence (sources)
        si["active"] = (time.time_ns() - self.last) if self.last else -1
        if self.err:
            si["error"] = self.err
        if self.src.get("filter_subject"):
            si["filter_subject"] = self.src["filter_subject"]
        trs = self.src.get("subject_transforms")
        if trs:
            si["subject_transforms"] = [{"src": t.get("src", ""), "dest": t.get("dest", "")}
                                        for t in trs]
        return si


class Sourcing:
    """All links of one stream."""

    def __init__(self, stream):
        self.stream = stream
        self.links = {}                 # iname -> Link (sources); "" -> mirror
        self.mirror = None
        self.timer = None
        self.dirty = False
        self.closed = False
        acc = stream.jsa.name
        ident = "%s %s" % (stream.name, acc)
        dom = stream.engine.domain
        if dom:
            ident += " " + dom
        self.hash_id = get_hash(ident)

    def metadata(self, kind):
        md = {"_nats.%s.stream" % kind: self.stream.name, "_nats.%s.acc" % kind: self.stream.jsa.name}
        if self.stream.engine.domain:
            md["_nats.%s.domain" % kind] = self.stream.engine.domain
        return md

    # ---- lifecycle ----

    def start(self):
        cfg = self.stream.config
        if cfg.get("mirror"):
            self.mirror = Link(self, cfg["mirror"], True)
            self.mirror.schedule(0.0)
        if cfg.get("sources"):
            state = self._load_state()
            for src in cfg["sources"]:
                ln = Link(self, src, False)
                ln.sseq = state.get(ln.iname, 0)
                self.links[ln.iname] = ln
            self._scan_headers()
            for ln in self.links.values():
                ln.schedule(0.0)
        self.timer = self.stream.loop.call_later(CHECK, self._tick)

    def stop(self):
        if self.closed:
            return
        self.closed = True
        self.timer = cancel_timer(self.timer)
        for ln in self._all():
            ln.stop()
        self._save_state()

    def update(self):
        """After a config update: keep links whose config is unchanged, start new ones."""
        cfg = self.stream.config
        m = cfg.get("mirror")
        if self.mirror is not None and (not m or m != self.mirror.src):
            self.mirror.stop()
            self.mirror = None
        if m and self.mirror is None:
            self.mirror = Link(self, m, True)
            self.mirror.schedule(0.0)
        want = {iname(s): s for s in cfg.get("sources") or []}
        for name in list(self.links):
            ln = self.links[name]
            if name not in want or want[name] != ln.src:
                ln.stop()
                del self.links[name]
        state = self._load_state()
        for name, src in want.items():
            if name not in self.links:
                ln = Link(self, src, False)
                ln.sseq = state.get(name, 0)
                self.links[name] = ln
                ln.schedule(0.0)
        self._save_state()

    def _all(self):
        return ([self.mirror] if self.mirror else []) + list(self.links.values())

    def _tick(self):
        self.timer = None
        if self.closed or self.stream.closed:
            return
        now = time.time_ns()
        for ln in self._all():
            try:
                ln.check(now)
            except Exception:
                log.exception("mirror/source health check failed for %s", self.stream.name)
        if self.dirty:
            self._save_state()
        self.timer = self.stream.loop.call_later(CHECK, self._tick)

    # ---- info ----

    def info(self, src, mirror=False):
        if mirror:
            ln = self.mirror
        else:
            ln = self.links.get(iname(src))
        if ln is None:
            return None
        return ln.info()

    # ---- persistence of source positions ----

    def _state_path(self):
        d = self.stream.dir
        return os.path.join(d, "sources.json") if d else None

    def _load_state(self):
        p = self._state_path()
        if not p:
            return {}
        try:
            with open(p) as f:
                data = json.load(f)
            return {k: int(v) for k, v in data.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def _save_state(self):
        self.dirty = False
        p = self._state_path()
        if not p or not self.links or not os.path.isdir(os.path.dirname(p)):
            return
        try:
            tmp = p + ".tmp"
            with open(tmp, "w") as f:
                json.dump({k: ln.sseq for k, ln in self.links.items()}, f)
            os.replace(tmp, p)
        except OSError:
            log.warning("saving source positions of %s failed", self.stream.name)

    def _scan_headers(self):
        """nats-server startingSequenceForSources: the newest Nats-Stream-Source header per
        source gives its last copied origin sequence."""
        store = self.stream.store
        st = store.state()
        if not st["messages"]:
            return
        todo = set(self.links)
        by_name = {}
        for ln in self.links.values():
            by_name.setdefault(ln.hname, []).append(ln)
        seq = st["last_seq"]
        scanned = 0
        while todo and seq >= st["first_seq"] and scanned < 1_000_000:
            sm = store.load_prev(seq)
            if sm is None:
                break
            hdr = sm.hdr
            seq = sm.seq - 1
            scanned += 1
            v = header_value(hdr, "Nats-Stream-Source") if hdr else None
            if not v:
                continue
            f = v.split(" ")
            try:
                oseq = int(f[1])
            except (IndexError, ValueError):
                continue
            if len(f) >= 4:
                key = " ".join([f[0], f[2], f[3]])
                cands = [self.links[key]] if key in self.links else []
            else:                       # pre-2.10 two-field header: any source of that stream
                cands = by_name.get(f[0], [])
            for ln in cands:
                if ln.iname in todo:
                    todo.discard(ln.iname)
                    if oseq > ln.sseq:
                        ln.sseq = oseq
                    if len(f) >= 6:
                        ln.ident = f[5]


def attach(stream):
    """Stream hook: start copying when the stream has a mirror or sources."""
    cfg = stream.config
    if not cfg.get("mirror") and not cfg.get("sources"):
        return None
    s = Sourcing(stream)
    s.start()
    return s
