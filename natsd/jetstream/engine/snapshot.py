"""Stream snapshot and restore: `$JS.API.STREAM.SNAPSHOT.<s>` / `$JS.API.STREAM.RESTORE.<s>`,
the natsd archive format, and the chunked transfer with windowed flow control.

Wire protocol (as nats-server's jsStreamSnapshotRequest / streamSnapshot /
processStreamRestore, which the `nats stream backup|restore` CLI drives):

Snapshot: request `{"deliver_subject","no_consumers","chunk_size","window_size","jsck"}` ->
  `stream_snapshot_response {"config","state"}`, then the archive in chunks of `chunk_size`
  (default 128 KiB, clamped to 1 KiB..1 MiB) published to deliver_subject, each full chunk with
  reply `$JS.SNAPSHOT.ACK.<stream>.<id>.<chunk len>.<index>`; at most window_size/chunk_size
  (window default 8 MiB, clamped to 1 KiB..32 MiB) chunks are unacknowledged. The last
  (short) chunk has no reply. The end marker is an empty message with header
  `NATS/1.0 204` — but, exactly as nats-server, a plain empty message (no headers) when the
  archive fitted in one short chunk. Failures end the transfer with `NATS/1.0 408 No Interest`
  (the receiver unsubscribed), `NATS/1.0 408 No Flow Response` (no ack for 5 s) or
  `NATS/1.0 500 <err>`. One snapshot per stream at a time ("snapshot in progress"); while it
  streams the stream's config is frozen (STREAM.UPDATE -> 10069 "stream update not permitted
  while a snapshot is in progress").

Restore: request `{"config","state"}` -> `stream_restore_response
  {"deliver_subject":"$JS.SNAPSHOT.RESTORE.<s>.<id>"}`; the client publishes chunks there, each
  with a reply subject (answered with an empty message once consumed); an empty message ends
  the transfer and is answered with `stream_create_response` (StreamInfo) or an error 10062
  "restore failed: <err>". An existing stream name -> 400/10130; no chunk for 5 s -> the
  restore is abandoned ("stalled").

Archive format: nats-server's (natsd/jetstream/nsfs/archive.py): an S2 stream of its version 2
archive ("NATSARC1": state, consumers, messages) as nats-server 2.15 writes; restore also takes
version 1 (a tar of the stream directory in the file store format, from earlier nats-server),
so backups move between the two servers.
Restore also takes the archives natsd wrote before (a gzip tar: `natsd-snapshot.json`, `msgs.bin`
records `<QqHiII` seq, ts, subject/header/data lengths, crc32; `consumers/<name>.json`).
Restoring replays the records with their original sequences and timestamps (gaps = deleted
messages; trailing deletes/purges keep last_seq), then rebuilds dedup/TTL state and the
consumers with their delivered/ack-floor/pending state.
"""
import json
import logging
import struct
import tarfile
import tempfile
import time
import zlib

from natsd._core.router import publish
from natsd._core.sublist import Subscription
from natsd.gofmt import friendly_bytes
from natsd.ids import random_token
from natsd.jetstream.engine import advisories as A
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine.streamconfig import config_json, decode_stream_config, check_config
from natsd.jetstream.nsfs import archive as nsfs_archive
from natsd.jetstream.nsfs.codec import FormatError
from natsd.jetstream.nsfs.image import StreamImage, image_of_store
from natsd.subject import is_valid_subject, has_wildcard

log = logging.getLogger("natsd")

FORMAT = "natsd-stream-snapshot"
VERSION = 1
META = "natsd-snapshot.json"
MSGS = "msgs.bin"
REC = struct.Struct("<QqHiII")

DEFAULT_CHUNK = 128 * 1024
DEFAULT_WINDOW = 8 * 1024 * 1024
ACK_TIMEOUT = 5.0
INTEREST_WAIT = 2.0
RESTORE_STALL = 5.0
SPOOL_MAX = 8 * 1024 * 1024

_SNAP_REQ = {"deliver_subject": ("string", "str"), "no_consumers": ("bool", "bool"),
             "chunk_size": ("int", "int"), "window_size": ("int", "int"),
             "jsck": ("bool", "bool")}


def _rfc(ns):
    from natsd.gofmt import go_time
    return go_time(ns)


# ---------------------------------------------------------------- archive

def stream_image(st, include_consumers=True):
    """Stream `st` now as a StreamImage (natsd/jetstream/nsfs/image.py): what a snapshot holds."""
    from natsd.jetstream.engine import persist
    from natsd.jetstream.engine import consumerconfig as cc
    consumers = []
    if include_consumers:
        for c in sorted(st.consumers.values(), key=lambda c: c.name):
            if not getattr(c, "internal", False):
                consumers.append({"name": c.name, "created_ns": c.created, "config": cc.to_json(c.cfg),
                                  "state": persist.state_of(c)})
    return image_of_store(st.store, config_json(st.config), st.created, consumers)


def write_archive(st, include_consumers=True, check=False):
    """The archive of stream `st` now, in nats-server's form (nsfs/archive.py), as a rewound
    temporary file; and the state JSON."""
    state = st.state()
    image = stream_image(st, include_consumers)
    if check:
        readable = sum(1 for _ in image.records())
        if readable != st.store.state()["messages"]:
            raise E.error("JSStreamSnapshotErrF", err="snapshot check failed: %d messages readable "
                          "of %d" % (readable, st.store.state()["messages"]))
    return nsfs_archive.write_archive(image, state), state


def read_legacy_archive(fileobj):
    """A StreamImage of an archive natsd wrote before it wrote nats-server's (a gzip tar of
    natsd-snapshot.json, msgs.bin and consumers/*.json). Raises ValueError if it is not one."""
    try:
        tar = tarfile.open(fileobj=fileobj, mode="r:gz")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise ValueError("not a stream backup (%s)" % e)
    meta = None
    consumers = []
    msgs_member = None
    for m in tar.getmembers():
        if m.name == META:
            meta = json.loads(tar.extractfile(m).read())
        elif m.name == MSGS:
            msgs_member = m
        elif m.name.startswith("consumers/") and m.name.endswith(".json"):
            consumers.append(json.loads(tar.extractfile(m).read()))
    if not meta or meta.get("format") != FORMAT:
        raise ValueError("not a stream backup")
    if meta.get("version", 0) > VERSION:
        raise ValueError("unsupported snapshot version %s" % meta.get("version"))

    def records():
        if msgs_member is None:
            return
        f = tar.extractfile(msgs_member)
        while True:
            head = f.read(REC.size)
            if not head:
                return
            if len(head) != REC.size:
                raise ValueError("truncated message record")
            seq, ts, slen, hlen, mlen, crc = REC.unpack(head)
            body = f.read(slen + max(hlen, 0) + mlen)
            if len(body) != slen + max(hlen, 0) + mlen or zlib.crc32(body) != crc:
                raise ValueError("corrupt message record for sequence %d" % seq)
            subj = body[:slen]
            hdr = None if hlen < 0 else body[slen:slen + hlen]
            yield seq, ts, subj, hdr, body[slen + max(hlen, 0):]
    return StreamImage(meta.get("config") or {}, meta.get("created") or 0, meta.get("first_seq", 0),
                       int(meta.get("last_seq") or 0), int(meta.get("last_ts") or 0), records, consumers)


def restore_into(jsa, cfg, fileobj):
    """Create stream `cfg["name"]` from a backup archive (nats-server's, or natsd's older
    form); returns the Stream."""
    head = fileobj.read(len(nsfs_archive.S2_STREAM_ID))
    fileobj.seek(0)
    if nsfs_archive.is_archive(head):
        try:
            opened = nsfs_archive.OpenedArchive(fileobj)
        except (OSError, FormatError) as e:
            raise ValueError(str(e))
        with opened as image:
            try:
                return restore_image(jsa, cfg, image)
            finally:
                for w in image.warnings:
                    log.warning("Restore of stream '%s > %s': %s", jsa.name, cfg["name"], w)
    return restore_image(jsa, cfg, read_legacy_archive(fileobj))


def restore_image(jsa, cfg, image, directory=None):
    """Create stream `cfg["name"]` with the messages, sequences and consumers of a StreamImage;
    returns the Stream (nothing is left behind when it fails). With `directory` the stream is
    made there, without its consumers: it becomes a replicated stream's copy, whose group's
    snapshot carries them."""
    st = jsa.add_stream(cfg, image.created or time.time_ns(), directory=directory)
    try:
        store = st.store
        last = 0
        last_ts = 0
        for seq, ts, subj, hdr, msg in image.records():
            store.store_raw(seq, ts, subj, hdr, msg)
            last, last_ts = seq, ts
        if image.last_seq > last:
            # trailing deleted sequences (or a purge): occupy last_seq, then delete it, so the
            # last sequence and its time stay
            ts = image.last_ts if image.last_ts is not None else last_ts
            store.store_raw(image.last_seq, ts, b"_", None, b"")
            store.remove(image.last_seq)
        st.rebuild_dedup()
        st.rebuild_timers()
        st.enforce_limits()
        if st.file:
            store.sync()
        if directory is None:
            restore_consumers(st, image.consumers)
    except Exception:
        jsa.delete_stream(st.name)
        raise
    return st


def restore_consumers(st, docs):
    """Consumers of a restored stream (or one scaled down to one replica) from documents
    {name, config, created_ns, state}, persisted as a one-replica stream's."""
    from natsd.jetstream.engine import consumerconfig as cc
    from natsd.jetstream.engine import persist
    from natsd.jetstream.engine.consumer import Consumer, consumer_dir
    for doc in docs:
        try:
            cfg = cc.decode_config(doc.get("config") or {})
            name = doc.get("name") or cfg.get("durable_name") or cfg.get("name")
            o = Consumer(st, name, cfg, doc.get("created_ns") or None)
            persistent = (st.config.get("storage", "file") == "file" and not cfg.get("mem_storage")
                          and not cfg.get("direct"))
            d = consumer_dir(st, name) if persistent else None
            if d:
                o.directory = d
                persist.remove_dir(d)
                persist.write_meta(d, o)
            st.consumers[name] = o
            o.start(recovered_state=doc.get("state") or {})
            o.save_now()
        except Exception:
            log.exception("JetStream restore of consumer %r on stream '%s > %s' failed",
                          doc.get("name"), st.jsa.name, st.name)


# ---------------------------------------------------------------- snapshot transfer

def _decode(payload, strict, spec, name):
    from natsd.jetstream.engine.streamconfig import decode_request
    return decode_request(payload, spec, name, strict)


def handle_snapshot(h, r):
    """API handler body for STREAM.SNAPSHOT; returns None (replies itself) or raises ApiError."""
    if not r.payload or not r.payload.strip():
        raise E.error("JSBadRequestErr")
    st = h._stream(r)
    req = _decode(r.payload, h.engine.strict, _SNAP_REQ, "JSApiStreamSnapshotRequest")
    ds = req.get("deliver_subject", "")
    if not ds or not is_valid_subject(ds) or has_wildcard(ds):
        raise E.error("JSSnapshotDeliverSubjectInvalidErr")
    if getattr(st, "snapshotting", False):
        log.warning("Snapshot of stream '%s > %s' failed: snapshot in progress", st.jsa.name, st.name)
        raise E.error("JSStreamSnapshotErrF", err="snapshot in progress")
    jsa = st.jsa
    log.info("Starting %ssnapshot for stream '%s > %s'",
             "health check and " if req.get("jsck") else "", jsa.name, st.name)
    start = time.time_ns()
    try:
        archive, state = write_archive(st, not req.get("no_consumers"), req.get("jsck"))
    except E.ApiError:
        raise
    except Exception as e:
        log.warning("Snapshot of stream '%s > %s' failed: %s", jsa.name, st.name, e)
        raise E.error("JSStreamSnapshotErrF", err=str(e))
    r.send({"config": config_json(st.config), "state": state})
    ci = A.client_info(r.origin, r.acc, h.server)
    A.snapshot_create(jsa, st.name, state, ci)
    _Sender(h, r.acc, st, archive, req, ci, start, state).begin()
    return None


class _Transfer:
    """What a snapshot's sender and a restore share: a subscription in the account for the
    client's messages (acks, chunks), a timer that gives up when they stop, and the teardown."""

    def _listen(self, subject, handler):
        self.sub = Subscription(None, subject.encode(), b"", None, handler)
        self.acc.sublist.insert(self.sub)

    def _rearm(self, delay, callback):
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(delay, callback)

    def _stop(self):
        """Done: the timer cancelled, the subscription removed."""
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.sub is not None:
            self.sub.closed = True
            self.acc.sublist.remove(self.sub)


class _Sender(_Transfer):
    def __init__(self, h, acc, st, archive, req, ci, start, state):
        self.h, self.acc, self.st, self.f, self.ci, self.start = h, acc, st, archive, ci, start
        self.state = state
        self.loop = st.loop
        self.deliver = req["deliver_subject"].encode()
        chunk = req.get("chunk_size") or DEFAULT_CHUNK
        wnd = req.get("window_size") or DEFAULT_WINDOW
        self.chunk = min(max(1024, chunk), 1024 * 1024)
        wnd = max(min(max(1024, wnd), 32 * 1024 * 1024), self.chunk)
        self.slots = wnd // self.chunk
        self.index = 1
        self.hdr = None
        self.done = False
        self.ack_subj = "$JS.SNAPSHOT.ACK.%s.%s" % (st.name, random_token())
        self.sub = None
        self.timer = None
        self.waited = 0.0
        self.sent_bytes = 0

    def begin(self):
        self.st.snapshotting = True
        self._listen(self.ack_subj + ".>", self._on_ack)
        self._wait_interest()

    def _interest(self):
        return self.acc.sublist.match(self.deliver).total > 0

    def _wait_interest(self):
        if self.done:
            return
        if self._interest() or self.waited >= INTEREST_WAIT:
            self._arm()
            self._pump()
            return
        self.waited += 0.02
        self.loop.call_later(0.02, self._wait_interest)

    def _arm(self):
        self._rearm(ACK_TIMEOUT, self._ack_timeout)

    def _on_ack(self, sub, subject, reply, hdr, payload, origin=None):
        if self.done:
            return
        self.slots += 1
        self._arm()
        self._pump()

    def _ack_timeout(self):
        self.timer = None
        if not self.done:
            self._finish(b"NATS/1.0 408 No Flow Response\r\n\r\n", "no flow response")

    def _pump(self):
        while not self.done and self.slots > 0:
            if self.st.closed:
                self._finish(b"NATS/1.0 500 stream closed\r\n\r\n", "stream closed")
                return
            if not self._interest():
                self._finish(b"NATS/1.0 408 No Interest\r\n\r\n", "no interest")
                return
            try:
                data = self.f.read(self.chunk)
            except Exception as e:
                self._finish(("NATS/1.0 500 %s\r\n\r\n" % e).encode(), str(e))
                return
            if len(data) < self.chunk:
                if data:
                    publish(self.acc.sublist, self.deliver, None, None, data)
                    self.sent_bytes += len(data)
                self._finish(self.hdr, None)
                return
            reply = ("%s.%d.%d" % (self.ack_subj, len(data), self.index)).encode()
            if self.hdr is None:
                self.hdr = b"NATS/1.0 204\r\n\r\n"
            publish(self.acc.sublist, self.deliver, reply, None, data)
            self.sent_bytes += len(data)
            self.slots -= 1
            self.index += 1

    def _finish(self, hdr, err):
        self._stop()
        self.st.snapshotting = False
        try:
            self.f.close()
        except Exception:
            pass
        publish(self.acc.sublist, self.deliver, None, hdr, b"")
        end = time.time_ns()
        jsa = self.st.jsa
        A.snapshot_complete(jsa, self.st.name, self.start, end, self.ci, err or "")
        if err:
            log.warning("Snapshot for stream '%s > %s' failed after %.3fs: %s", jsa.name,
                        self.st.name, (end - self.start) / 1e9, err)
        else:
            log.info("Completed snapshot of %s for stream '%s > %s' in %.3fs",
                     friendly_bytes(self.state.get("bytes", 0)), jsa.name, self.st.name,
                     (end - self.start) / 1e9)


# ---------------------------------------------------------------- restore transfer

def handle_restore(h, r):
    """API handler body for STREAM.RESTORE."""
    if not r.payload or not r.payload.strip():
        raise E.error("JSBadRequestErr")
    name = h._stream_name(r)
    try:
        doc = json.loads(r.payload)
    except ValueError as e:
        raise E.error("JSInvalidJSONErr", err=str(e))
    if not isinstance(doc, dict):
        raise E.error("JSInvalidJSONErr", err="json: cannot unmarshal into Go value of type "
                                     "server.JSApiStreamRestoreRequest")
    unknown = [k for k in doc if k not in ("config", "state")]
    if unknown and h.engine.strict:
        raise E.error("JSInvalidJSONErr", err='json: unknown field "%s"' % unknown[0])
    cfg_in = doc.get("config") or {}
    if not isinstance(cfg_in, dict):
        raise E.error("JSInvalidJSONErr", err="json: cannot unmarshal config")
    if not cfg_in.get("name"):
        cfg_in = dict(cfg_in, name=name)
    if cfg_in.get("name") != name:
        raise E.error("JSStreamMismatchErr")
    if "/" in name or "\\" in name:
        raise E.error("JSStreamNameContainsPathSeparatorsErr")
    req = decode_stream_config(json.dumps(cfg_in).encode(), h.engine.strict)
    pedantic = req.pop("pedantic", False)
    jsa = r.jsa
    cfg = check_config(req, pedantic, h._lookup_cfg(jsa), jsa, api_request=False)
    jsa.check_limits(cfg)
    if name in jsa.streams or name in _restoring(jsa):
        raise E.error("JSStreamNameExistRestoreFailedErr")
    log.info("Starting restore for stream '%s > %s'", jsa.name, name)
    ci = A.client_info(r.origin, r.acc, h.server)
    start = time.time_ns()
    A.restore_create(jsa, name, ci)
    rc = _Restore(h, r.acc, jsa, cfg, ci, start)
    rc.begin()
    r.send({"deliver_subject": rc.subject})
    return None


def _restoring(jsa):
    d = getattr(jsa, "_restores", None)
    if d is None:
        d = jsa._restores = {}
    return d


class _Restore(_Transfer):
    def __init__(self, h, acc, jsa, cfg, ci, start):
        self.h, self.acc, self.jsa, self.cfg, self.ci, self.start = h, acc, jsa, cfg, ci, start
        self.name = cfg["name"]
        self.loop = h.server.loop
        self.subject = "$JS.SNAPSHOT.RESTORE.%s.%s" % (self.name, random_token())
        self.spool = tempfile.SpooledTemporaryFile(SPOOL_MAX)
        self.total = 0
        self.sub = None
        self.timer = None
        self.done = False

    def begin(self):
        _restoring(self.jsa)[self.name] = self
        self._listen(self.subject, self._on_chunk)
        self._arm()

    def _arm(self):
        self._rearm(RESTORE_STALL, self._stalled)

    def _stalled(self):
        self.timer = None
        if not self.done:
            log.warning("restore for stream '%s > %s' is stalled", self.jsa.name, self.name)
            self._end()

    def _end(self):
        self._stop()
        _restoring(self.jsa).pop(self.name, None)

    def _reply(self, reply, data):
        publish(self.acc.sublist, reply, None, None, data)

    def _on_chunk(self, sub, subject, reply, hdr, payload, origin=None):
        if self.done:
            return
        if not reply:
            log.warning("restore for stream '%s > %s' requires reply subject for each chunk",
                        self.jsa.name, self.name)
            self._end()
            return
        if payload:
            try:
                self.spool.write(payload)
            except OSError as e:
                self._end()
                self._complete(reply, None, E.error("JSStreamRestoreErrF", err=str(e)))
                return
            self.total += len(payload)
            self._arm()
            self._reply(reply, b"")
            return
        self._end()
        self.spool.seek(0)
        st, err = None, None
        try:
            if self.name in self.jsa.streams:
                raise E.error("JSStreamNameExistRestoreFailedErr")
            st = restore_into(self.jsa, self.cfg, self.spool)
        except E.ApiError as e:
            err = e
        except Exception as e:
            err = E.error("JSStreamRestoreErrF", err=str(e))
        finally:
            self.spool.close()
        self._complete(reply, st, err)

    def _complete(self, reply, st, err):
        end = time.time_ns()
        A.restore_complete(self.jsa, self.name, self.start, end, self.total, self.ci)
        if err is not None:
            self.jsa.api_errors += 1
            log.warning("Restore failed for %s for stream '%s > %s' in %.3fs: %s",
                        friendly_bytes(self.total), self.jsa.name, self.name, (end - self.start) / 1e9,
                        err.description)
            data = E.dumps({"type": "io.nats.jetstream.api.v1.stream_create_response",
                            "error": err.to_dict()})
        else:
            info = {"config": config_json(st.config), "created": _rfc(st.created),
                    "state": st.state(), "ts": _rfc(time.time_ns())}
            if st.engine.domain:
                info["domain"] = st.engine.domain
            data = E.api_response("stream_create_response", info)
            log.info("Completed restore of %s for stream '%s > %s' in %.3fs",
                     friendly_bytes(self.total), self.jsa.name, self.name, (end - self.start) / 1e9)
            A.stream_action(st, "create")
        if reply:
            self._reply(reply, data)
