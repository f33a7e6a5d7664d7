"""JetStream engine: enablement, store directory, limits, domain, per-account state, recovery,
group commit of PubAcks, and the data behind /varz `jetstream` and /jsz.

Owns `JetStream` (one per server, `server.jetstream`) and `JsAccount` (one per JetStream-enabled
account: its streams, limits, usage and API counters). Layout on disk:
`<store_dir>/jetstream/<account>/streams/<stream>/meta.json` (config + created) with the
message store in `.../<stream>/msgs/`.
"""
import json
import logging
import os
import shutil
import tempfile
import time

from natsd._core.sublist import Subscription
from natsd.gofmt import friendly_bytes, go_duration
from natsd.subject import subject_is_subset
from natsd.auth import nkey
from natsd.jetstream.engine import errors as E
from natsd.jetstream.engine import api, batch, consumer, jscrypt, persist
from natsd.jetstream.engine.accountpurge import AccountPurge
from natsd.jetstream.engine.store import open_store
from natsd.jetstream.engine.stream import Stream
from natsd.jetstream.engine.apilevel import API_LEVEL
from natsd.jetstream.engine.streamconfig import config_json, check_config, decode_stream_config
from natsd.jetstream.engine.snapshot import restore_image
from natsd.jetstream.nsfs import convert as nsfs_convert
from natsd.jetstream.nsfs.crypt import StoreKeys

log = logging.getLogger("natsd")

DEFAULT_SYNC_INTERVAL = 120.0



def _sys_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _disk_available(path):
    try:
        os.makedirs(path, exist_ok=True)
        st = os.statvfs(path)
        return st.f_bavail * st.f_bsize // 4 * 3       # nats-server's estimate: 75% of it
    except OSError:
        return 1024 ** 4


_LIMIT_KEYS = {
    "max_memory": "max_memory", "max_mem": "max_memory", "mem": "max_memory", "memory": "max_memory",
    "max_store": "max_storage", "max_file": "max_storage", "max_disk": "max_storage",
    "store": "max_storage", "disk": "max_storage",
    "max_streams": "max_streams", "streams": "max_streams",
    "max_consumers": "max_consumers", "consumers": "max_consumers",
    "max_ack_pending": "max_ack_pending",
    "max_bytes_required": "max_bytes_required", "max_stream_bytes": "max_bytes_required",
    "max_bytes": "max_bytes_required",
    "mem_max_stream_bytes": "memory_max_stream_bytes", "memory_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "storage_max_stream_bytes",
    "store_max_stream_bytes": "storage_max_stream_bytes",
}


def api_limits(given: dict) -> dict:
    """JetStream account limits as the API reports them, from a config block's or an account
    JWT's keys (natsd.auth.jwt.accounts.jetstream_limits); what is not given is unlimited."""
    out = {"max_memory": -1, "max_storage": -1, "max_streams": -1, "max_consumers": -1,
           "max_ack_pending": -1, "memory_max_stream_bytes": -1,
           "storage_max_stream_bytes": -1, "max_bytes_required": False}
    for k, v in given.items():
        key = _LIMIT_KEYS.get(k.lower())
        if key is None:
            continue
        if key == "max_bytes_required":
            out[key] = bool(v)
        else:
            try:
                out[key] = int(v)
            except (TypeError, ValueError):
                pass
    return out


class JsAccount:
    """JetStream state of one account."""

    def __init__(self, engine, account):
        self.engine = engine
        self.server = engine.server
        self.account = account
        self.name = account.name
        self.sublist = account.sublist
        self.streams = {}
        self.claims = {}                # stream name -> its Claim (on a cluster, clustering.py)
        self.audit_watches = {}         # reply -> auditwatch._Watch (on a cluster)
        self.audit_sweep = None
        self.audits_due = {}            # reply -> api.Request: audited when its answer is sent
        self.api_total = 0
        self.api_errors = 0
        given = getattr(getattr(account, "config", None), "jetstream_limits", None) or {}
        self.limits = api_limits(given)
        # operator mode: tiered limits (by replica count, "R1", "R3", ...) are reported per
        # tier; on one server streams live in the R1 tier, whose limits are `limits`
        self.tiered = bool(given.get("tiered"))
        self.tiers = {name: api_limits(lim) for name, lim in (given.get("tiers") or {}).items()}
        self.dir = os.path.join(engine.store_dir, self.name, "streams") if engine.store_dir else None

    # ---- helpers the consumer side uses ----

    def api_error(self, err):
        """Count an API error (consumer API handlers call this for their failures)."""
        self.api_errors += 1
        return err

    def lookup(self, name):
        return self.streams.get(name)

    def max_bytes_limits(self, cfg):
        key = "memory_max_stream_bytes" if cfg.get("storage") == "memory" else "storage_max_stream_bytes"
        return self.limits["max_bytes_required"], self.limits[key]

    def usage(self):
        """(memory, file) bytes the account's streams hold."""
        return self._by_storage(lambda s: s.store.state()["bytes"])

    def reserved(self):
        """(memory, file) bytes the account's streams reserve (their max_bytes)."""
        return self._by_storage(lambda s: max(s.config.get("max_bytes", -1), 0))

    def _by_storage(self, amount):
        """amount(stream) summed over the streams: (memory streams', file streams')."""
        mem = store = 0
        for s in self.streams.values():
            n = amount(s)
            if s.config.get("storage") == "memory":
                mem += n
            else:
                store += n
        return mem, store

    def num_consumers(self):
        return sum(self.consumers_of(s) for s in self.streams.values())

    @staticmethod
    def consumers_of(stream):
        """The stream's consumers that clients see (not the internal ones): those running
        here, and on a replicated stream's leader those with groups of their own that lead
        elsewhere (natsd/jetstream/replicated/consumergroup.py)."""
        n = sum(1 for c in stream.consumers.values() if not getattr(c, "internal", False))
        if stream.replica is not None and stream.replica.is_leader():
            n += len(stream.replica.consumers.led_elsewhere())
        return n

    def check_limits(self, cfg, existing=None):
        """Resource checks for a new (or updated) stream."""
        replicas = max(1, cfg.get("num_replicas", 1))
        lim = self.limits
        if self.tiered:             # the tier of the stream's replica count (nats-server's selectLimits)
            lim = self.tiers.get("R%d" % replicas)
            if lim is None:
                raise E.error("JSNoLimitsErr")
        in_tier = [s for s in self.streams.values() if s.config.get("name") != cfg.get("name")
                   and (not self.tiered or max(1, s.config.get("num_replicas", 1)) == replicas)]
        if lim["max_streams"] > 0 and len(in_tier) >= lim["max_streams"]:
            raise E.error("JSMaximumStreamsLimitErr")
        mem, store = self.reserved()
        mb = max(cfg.get("max_bytes", -1), 0)
        if existing is not None:
            omb = max(existing.config.get("max_bytes", -1), 0)
            if existing.config.get("storage") == "memory":
                mem -= omb
            else:
                store -= omb
        if cfg.get("storage") == "memory":
            if lim["max_memory"] >= 0 and mem + mb > lim["max_memory"] and (mb or lim["max_memory"] == 0):
                raise E.error("JSMemoryResourcesExceededErr")
            if self.engine.max_memory >= 0 and mem + mb > self.engine.max_memory:
                raise E.error("JSMemoryResourcesExceededErr")
        else:
            if lim["max_storage"] >= 0 and store + mb > lim["max_storage"] and (mb or lim["max_storage"] == 0):
                raise E.error("JSStorageResourcesExceededErr")
            if self.engine.max_store >= 0 and store + mb > self.engine.max_store:
                raise E.error("JSStorageResourcesExceededErr")

    # ---- streams ----

    def stream_dir(self, name):
        return os.path.join(self.dir, name) if self.dir else None

    def add_stream(self, cfg, created=None, recovering=False, crypt=None, replica=None, directory=None):
        """A stream of this account. `replica`: a replicated stream's local copy
        (natsd/jetstream/replicated/streams.py), in the replica's directory, with no meta file: its
        group's log is what survives a restart. `directory`: a one-replica stream made
        elsewhere than the account's directory (to become a replicated stream's copy)."""
        name = cfg["name"]
        d = replica.local_dir if replica is not None else directory or self.stream_dir(name)
        if d and not recovering:
            if os.path.exists(d):
                shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d, exist_ok=True)
        if d and crypt is None and self.engine.server_key is not None:
            crypt = jscrypt.open_stream(self.engine.server_key, self.name, name, d, create=not recovering)
        storage = cfg.get("storage", "file")
        sdir = os.path.join(d, "msgs") if d else None
        if sdir and storage == "file":
            os.makedirs(sdir, exist_ok=True)
        # zero ahead where every PubAck waits for this store's sync (not a replica's copy,
        # whose group's log is synced instead, nor a store synced on a timer)
        store = open_store(storage, sdir, cfg, self.engine.sync_always, crypt, self.engine.write_hook(),
                           zero_ahead=replica is None and (self.engine.group_commit or self.engine.sync_always))
        st = Stream(self, cfg, created or time.time_ns(), store, d)
        st.replica = replica
        if replica is not None:
            st.save_meta = lambda: None
        elif crypt is not None:
            # the stream's meta.json is sealed like the rest of its files
            st.save_meta = lambda: jscrypt.write_stream_meta(st, crypt)
        if not recovering:
            st.save_meta()
        else:
            st.rebuild_dedup()
            st.rebuild_timers()
        self.streams[name] = st
        if self.engine.cluster is not None and replica is None:
            self.claims[name] = self.engine.cluster.claim(self.sublist, name)
        st.start()
        return st

    def claim(self, name, on):
        """Draw (or stop drawing) the API requests about stream `name` to this server."""
        claim = self.claims.pop(name, None)
        if claim is not None:
            claim.release()
        if on:
            self.claims[name] = self.engine.cluster.claim(self.sublist, name)

    def release_stream(self, name):
        """Take a one-replica stream out of the account without deleting its files (it becomes
        a replicated stream's first copy, natsd/jetstream/replicated/streams.py) -> the stopped
        Stream, or None."""
        st = self._take_out(name)
        if st is None:
            return None
        st.stop()
        if st.dir:
            jscrypt.forget(st.dir)
        return st

    def _take_out(self, name):
        """The stream `name` taken out of the account, its name's claim released -> the
        Stream (still running), or None."""
        st = self.streams.pop(name, None)
        if st is not None:
            self.claim(name, False)
        return st

    def delete_stream(self, name):
        st = self._take_out(name)
        if st is None:
            return False
        st.stop(delete=True)
        if st.dir:
            shutil.rmtree(st.dir, ignore_errors=True)
            jscrypt.forget(st.dir)
        return True

    def recover(self):
        if not self.dir or not os.path.isdir(self.dir):
            return
        log.info("  Recovering JetStream state for account \"%s\"", self.name)
        skey = self.engine.server_key
        for name in sorted(os.listdir(self.dir)):
            if name.startswith(".") or nsfs_convert.is_nats_server_stream(os.path.join(self.dir, name)):
                continue                # nats-server's, converted below
            path = os.path.join(self.dir, name, "meta.json")
            crypt = None
            try:
                if skey is not None and os.path.exists(path):
                    # the keys first (nats-server: decryptMeta); a stream without meta.key is
                    # plaintext and gets encrypted now
                    crypt = jscrypt.open_stream(skey, self.name, name, os.path.join(self.dir, name))
                meta = json.loads(jscrypt.read_file(path, crypt))
            except jscrypt.EncryptionError as e:
                log.warning("  Error decrypting our stream metafile: %s (stream '%s > %s' is not "
                            "loaded, its files are left as they are)", e, self.name, name)
                continue
            except (OSError, ValueError) as e:
                log.warning("  Error unmarshalling stream metafile %r: %s", path, e)
                continue
            cfg = meta.get("config") if isinstance(meta, dict) else None
            if not isinstance(cfg, dict) or not cfg.get("name"):
                log.warning("  Error unmarshalling stream metafile %r: no stream configuration", path)
                continue
            t0 = time.monotonic()
            log.info("  Starting restore for stream '%s > %s'", self.name, cfg["name"])
            if crypt is not None and crypt.status == "encrypting":
                log.info("  Encrypting stream '%s > %s'", self.name, cfg["name"])
            elif crypt is not None and crypt.status == "converting":
                log.info("  Converting to %s for stream '%s > %s'", skey.cipher_name, self.name,
                         cfg["name"])
            try:
                st = self.add_stream(cfg, meta.get("created"), recovering=True, crypt=crypt)
            except Exception as e:
                log.warning("  Error recreating stream %r: %s", cfg.get("name"), e)
                continue
            if crypt is not None:
                crypt.commit()          # every file is under the current key (re-keying done)
            lost = st.store.lost_tail
            if lost:
                log.warning("  Stream '%s > %s' lost sequences %d..%d at the tail of its store; "
                            "its last sequence stays %d", self.name, cfg["name"], lost[0], lost[1],
                            lost[1])
            batch.discard_partial(st)
            n = st.store.state()["messages"]
            log.info("  Restored %s messages for stream '%s > %s' in %s", "{:,}".format(n), self.name,
                     cfg["name"], "%.3fms" % ((time.monotonic() - t0) * 1000))
            self.engine.recover_consumers(st)
        self._convert_nats_server_streams()
        log.info("  JetStream state for account \"%s\" recovered", self.name)

    def _convert_nats_server_streams(self):
        """Streams nats-server left here become natsd's (natsd/jetstream/nsfs/convert.py). On a
        cluster, the one-replica ones only: the replicated ones are the cluster layer's
        (natsd/jetstream/replicated/fromnatsserver.py), which also knows their Raft groups."""
        if not nsfs_convert.pending(self.dir):
            return
        keys = self.engine.nats_server_keys()
        clustered = self.engine.clustered()
        nsfs_convert.convert_account(self, restore_image, self.nats_server_config, keys,
                                     replicated_too=not clustered)

    def nats_server_config(self, doc):
        """A stream configuration from nats-server's files, checked as a create would be."""
        req = decode_stream_config(json.dumps(doc).encode(), False)
        req.pop("pedantic", None)
        return check_config(req, False, lambda n: getattr(self.streams.get(n), "config", None), self,
                            api_request=False)

    def account_info(self, totals=None):
        """`$JS.API.INFO`'s answer; `totals` (memory, storage, reserved_memory,
        reserved_storage, streams, consumers, api_total, api_errors): the cluster's
        (natsd/jetstream/replicated/listing.py), this server's when None."""
        if totals is None:
            mem, store = self.usage()
            rmem, rstore = self.reserved()
            totals = {"memory": mem, "storage": store, "reserved_memory": rmem, "reserved_storage": rstore,
                      "streams": len(self.streams), "consumers": self.num_consumers(),
                      "api_total": self.api_total, "api_errors": self.api_errors}
        usage = {k: totals[k] for k in ("memory", "storage", "reserved_memory", "reserved_storage",
                                        "streams", "consumers")}
        out = dict(usage, limits=dict(self.limits))
        if self.tiered:             # the limits are the R1 tier's; the untiered ones are zero
            out["limits"] = {k: False if k == "max_bytes_required" else 0 for k in self.limits}
        if self.engine.domain:
            out["domain"] = self.engine.domain
        out["api"] = {"level": API_LEVEL, "total": totals["api_total"], "errors": totals["api_errors"]}
        if self.tiered:
            idle = {k: 0 for k in usage}
            out["tiers"] = {name: dict(usage if name == "R1" else idle, limits=dict(lim))
                            for name, lim in sorted(self.tiers.items())}
        return out


class JetStreamStartError(Exception):
    """JetStream cannot start; str() is nats-server's fatal error text."""


def _check_store_dir(path):
    """nats-server's enableJetStream checks of the store directory: its error text, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            msg = e.strerror or str(e)
            return "could not create storage directory - mkdir %s: %s" % (
                e.filename or path, msg[:1].lower() + msg[1:])
        return None
    except OSError:
        st = None
    if st is None or not os.path.isdir(path):
        return "storage directory is not a directory"
    try:
        fd, tmp = tempfile.mkstemp(prefix="_test_", dir=path)
        os.close(fd)
        os.remove(tmp)
    except OSError:
        return "storage directory is not writable"
    return None


class JetStream:
    # on a cluster (what each is: natsd/jetstream/engine/clustering.py), None on a single server
    cluster = None                      # Clustering: given by the server once the routes are up
    meta = None                         # MetaGroup: the meta group
    listing = None                      # Listing: listings gathered from every server

    def __init__(self, server):
        self.server = server
        self.opts = server.opts.jetstream
        persist.set_new_files_inline_max(server.opts.new_files_us / 1e6)
        self.api_subs = {}              # account name -> its $JS.API subscriptions
        o = self.opts
        self.temp_dir = not o.store_dir
        base = o.store_dir or os.path.join(tempfile.gettempdir(), "nats")
        self.store_dir = os.path.join(base, "jetstream")
        self.domain = o.domain or ""
        self.strict = o.strict
        self.sync_always = bool(o.sync_always) or o.sync_interval == "always"
        # natsd acks only durable writes (group commit) unless the config asks for
        # nats-server's lazy mode by setting sync_interval explicitly
        explicit = (not self.sync_always and isinstance(o.sync_interval, (int, float))
                    and (getattr(o, "sync_interval_set", False)
                         or o.sync_interval != DEFAULT_SYNC_INTERVAL))
        # group commit (ack after fsync) unless a sync interval was chosen explicitly
        self.group_commit = not self.sync_always and not explicit
        self.sync_interval = o.sync_interval if explicit else DEFAULT_SYNC_INTERVAL
        self.max_memory = o.max_memory if o.max_memory is not None and o.max_memory >= 0 else -1
        self.max_store = o.max_store if o.max_store is not None and o.max_store >= 0 else -1
        self.server_key = jscrypt.ServerKey.from_opts(o)    # None: no encryption at rest
        if self.server_key is not None:
            # encrypted logs seal the records of one loop iteration together
            self.server_key.call_soon = getattr(getattr(server, "loop", None), "call_soon", None)
        self.jsas = {}                  # name -> JsAccount
        self.sync_wanted = set()
        self.flush_scheduled = False
        self.sync_timer = None
        self.stopped = False
        self.started = time.time()
        self.api_handler = None

    def write_hook(self):
        """The loop's call_soon for logs that may write a loop iteration's messages together:
        only under group commit, where nothing is acknowledged before the sync that follows
        (with a sync interval, a PubAck leaves before the sync and the kernel must already
        have the message)."""
        return self.server.loop.call_soon if self.group_commit and hasattr(self.server, "loop") else None

    def clustered(self):
        """Whether this server is configured to be a member of a JetStream cluster."""
        return bool(self.server.opts.cluster.port)

    def nats_server_keys(self):
        """The keys that open nats-server's encrypted files (crypt.StoreKeys), None without."""
        skey = self.server_key
        return StoreKeys(skey.key, skey.cipher, skey.prev) if skey is not None else None

    def cluster_name(self):
        f = getattr(self.server, "cluster_name", None)
        return f() if f else ""

    # ---- lifecycle ----

    def start(self):
        log.info("Starting JetStream")
        t_start = time.monotonic()
        if self.temp_dir:
            log.warning("Temporary storage directory used, data could be lost on system reboot")
        err = _check_store_dir(self.store_dir)
        if err:
            log.info("Took %s to start JetStream", go_duration((time.monotonic() - t_start) * 1e9))
            raise JetStreamStartError("Can't start JetStream: " + err)
        if self.max_memory < 0:
            sm = _sys_memory()
            self.max_memory = sm // 4 * 3 if sm else 256 * 1024 * 1024
        if self.max_store < 0:
            self.max_store = _disk_available(self.store_dir)
        for line in ("    _ ___ _____ ___ _____ ___ ___   _   __  __",
                     " _ | | __|_   _/ __|_   _| _ \\ __| /_\\ |  \\/  |",
                     "| || | _|  | | \\__ \\ | | |   / _| / _ \\| |\\/| |",
                     " \\__/|___| |_| |___/ |_| |_|_\\___/_/ \\_\\_|  |_|",
                     "",
                     "         https://docs.nats.io/jetstream",
                     ""):
            log.info(line)
        log.info("---------------- JETSTREAM ----------------")
        log.info("  Strict:          %s", "true" if self.strict else "false")
        log.info("  Max Memory:      %s", friendly_bytes(self.max_memory))
        log.info("  Max Storage:     %s", friendly_bytes(self.max_store))
        log.info("  Store Directory: \"%s\"", self.store_dir)
        if self.domain:
            log.info("  Domain:          %s", self.domain)
        if self.server_key is not None:
            log.info("  Encryption:      %s", self.server_key.cipher_name)
        log.info("  API Level:       %d", API_LEVEL)
        log.info("-------------------------------------------")
        t0 = time.monotonic()
        self.api_handler = api.ApiHandler(self)
        for acc in self._js_accounts():
            self.jsas[acc.name] = JsAccount(self, acc)
        for acc in self.server.accounts:
            jsa = self.jsas.get(acc.name)
            self._install_api(acc, jsa)
        for jsa in self.jsas.values():
            jsa.recover()
        # operator mode makes accounts, and enables JetStream in them, as their JWTs say
        self.server.accounts.on_add.append(lambda acc: self._install_api(acc, None))
        self.server.accounts.on_update.append(self.account_updated)
        self._load_stored_accounts()
        if self.server.system is not None:
            AccountPurge(self).start()
        if not self.group_commit and not self.sync_always:
            self.sync_timer = self.server.loop.call_later(self.sync_interval, self._sync_tick)
        err = None
        if self.server.opts.cluster.port or self.server.opts.gateway.port:
            # not stand-alone (nats-server's standAloneMode: a cluster or a gateway port)
            log.info("Starting JetStream cluster")
            err = self._cluster_config_error()
        log.info("Took %s to start JetStream", go_duration((time.monotonic() - t0) * 1e9))
        if err:
            raise JetStreamStartError("Can't start JetStream: " + err)

    def _cluster_config_error(self):
        """nats-server's enableJetStreamClustering check (a cluster without a name was refused
        with the options): configured routes, unless a leafnode remote binds the system account
        and lets Raft traffic ($NRG.>) in."""
        o = self.server.opts
        sys_name = self.server.accounts.system_name
        leaf_share = any(r.account == sys_name and not any(subject_is_subset(d, "$NRG.>") for d in r.deny_imports)
                         for r in o.leafnode.remotes) if sys_name else False
        if not o.cluster.routes and not leaf_share:
            return "JetStream cluster requires configured routes or solicited leafnode for the system account"
        return None

    def _js_accounts(self):
        accs = list(self.server.accounts)
        configured = [a for a in accs if a.config is not None]
        sysacc = self.server.accounts.system
        if not configured and not self.server.opts.operator_mode:
            return [self.server.accounts.global_account]
        out = [a for a in accs if a.jetstream and a is not sysacc]
        return out

    def _install_api(self, acc, jsa):
        prefixes = ["$JS.API.>"]
        if self.domain:
            prefixes.append("$JS.%s.API.>" % self.domain)
        subs = self.api_subs.setdefault(acc.name, [])
        for p in prefixes:
            s = Subscription(None, p.encode(), b"", None, self.api_handler.on_request)
            s.local_only = True         # on a cluster, streams claim their requests (placement.py)
            s.data = (acc, jsa)
            # as on nats-server: an account imports the API (its internal client subscribes),
            # the system account's is the system client's own
            owner = self.server.system.client if acc.is_system and self.server.system else acc.internal_client
            if owner is not None:
                s.owner = owner
                s.sid = owner.next_sid()
            acc.sublist.insert(s)
            subs.append(s)

    def _load_stored_accounts(self):
        """Operator mode: accounts with streams on disk are looked up now (their JWTs enable
        JetStream and their streams recover), as nats-server does at start."""
        accounts = self.server.jwt_accounts
        if accounts is None or not self.store_dir or not os.path.isdir(self.store_dir):
            return
        for name in sorted(os.listdir(self.store_dir)):
            if nkey.is_valid_public(name, nkey.ACCOUNT) and name not in self.jsas:
                accounts.lookup(name)

    def account_updated(self, acc):
        """An account's JetStream settings changed (operator mode: a new account JWT): enable
        it, with its streams from disk, or apply its new limits; an account whose JWT no
        longer enables JetStream keeps its streams on disk but answers as not enabled."""
        jsa = self.jsas.get(acc.name)
        if acc.jetstream and jsa is None and not self.stopped:
            jsa = self.jsas[acc.name] = JsAccount(self, acc)
            jsa.recover()
        elif acc.jetstream and jsa is not None:
            fresh = JsAccount(self, acc)
            jsa.limits, jsa.tiered, jsa.tiers = fresh.limits, fresh.tiered, fresh.tiers
        elif not acc.jetstream and jsa is not None:
            for st in list(jsa.streams.values()):
                st.stop()
            del self.jsas[acc.name]
            jsa = None
        for s in self.api_subs.get(acc.name, []):
            s.data = (acc, jsa)

    def hand_off_leaders(self):
        """Leadership of the Raft groups led here handed to other members (meta.py) -> whether
        any was."""
        return self.meta is not None and not self.stopped and self.meta.hand_off_leaders()

    def tell_pulls_of_shutdown(self):
        """The server shuts down (not after lame duck mode, which stopped JetStream first): as
        nats-server, the consumers of one replica (`num_replicas` 0 or 1) led here tell their
        waiting pull requests `409 Server Shutdown`, before the clients are closed."""
        if self.stopped:
            return
        for jsa in self.jsas.values():
            for st in jsa.streams.values():
                for o in st.consumers.values():
                    waiting = getattr(o, "waiting", None)
                    if waiting is not None and not o.closed and o.cfg.get("num_replicas", 0) <= 1:
                        waiting.server_shutdown()

    def shutdown(self):
        """Stop every stream (lame duck mode and server shutdown; the second call is a no-op).
        The API subscriptions stay: as with nats-server, requests to a JetStream that has shut
        down go unanswered (no 503 "no responders")."""
        if self.stopped:
            return
        self.stopped = True
        log.info("Initiating JetStream Shutdown...")
        if self.cluster is not None:
            self.cluster.stop()
        self._stop_streams()
        log.info("JetStream Shutdown")

    def _stop_streams(self):
        if self.sync_timer is not None:
            self.sync_timer.cancel()
        for jsa in self.jsas.values():
            for st in list(jsa.streams.values()):
                try:
                    st.stop()
                except Exception:
                    log.exception("stopping stream %s failed", st.name)

    def start_cluster(self, cluster):
        """The routes are up, and `cluster` is JetStream on them (a Clustering,
        natsd/jetstream/engine/clustering.py): the one-replica streams recovered before draw
        the requests about them to this server, and the server joins (or founds) the
        cluster's meta group, which needs the system account that carries its traffic."""
        self.cluster = cluster
        for jsa in self.jsas.values():
            for name, st in jsa.streams.items():
                if st.replica is None and name not in jsa.claims:
                    jsa.claim(name, True)
        cluster.start()
        self.meta, self.listing = cluster.meta, cluster.listing

    def enabled_for(self, account):
        return account.name in self.jsas

    # ---- durability ----

    def want_sync(self, stream):
        self.sync_wanted.add(stream)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.loop.call_soon(self._flush)

    def _flush(self):
        self.flush_scheduled = False
        streams, self.sync_wanted = self.sync_wanted, set()
        for st in streams:
            if not st.closed:
                st.flush_acks()

    def _sync_tick(self):
        for jsa in self.jsas.values():
            for st in jsa.streams.values():
                if st.file:
                    try:
                        st.store.sync()
                    except Exception:
                        log.exception("sync of stream %s failed", st.name)
        self.sync_timer = self.server.loop.call_later(self.sync_interval, self._sync_tick)

    # ---- consumers ----

    def recover_consumers(self, stream):
        try:
            consumer.recover_consumers(stream)
        except Exception:
            log.exception("recovering consumers of %s failed", stream.name)

    # ---- monitoring ----

    def totals(self):
        mem = store = streams = consumers = msgs = nbytes = 0
        total = errors = 0
        for jsa in self.jsas.values():
            m, s = jsa.usage()
            mem += m
            store += s
            streams += len(jsa.streams)
            consumers += jsa.num_consumers()
            total += jsa.api_total
            errors += jsa.api_errors
            for st in jsa.streams.values():
                state = st.store.state()
                msgs += state["messages"]
                nbytes += state["bytes"]
        return dict(memory=mem, storage=store, streams=streams, consumers=consumers, messages=msgs,
                    bytes=nbytes, api_total=total, api_errors=errors)

    def config_dict(self):
        d = {"max_memory": self.max_memory, "max_storage": self.max_store,
             "store_dir": self.store_dir, "sync_interval": int(self.sync_interval * 1e9)}
        if self.sync_always:
            d["sync_always"] = True
        if self.domain:
            d["domain"] = self.domain
        d["strict"] = self.strict
        return d

    def stats_dict(self):
        t = self.totals()
        mem_r = store_r = 0
        for jsa in self.jsas.values():
            m, s = jsa.reserved()
            mem_r += m
            store_r += s
        return {"memory": t["memory"], "storage": t["storage"], "reserved_memory": mem_r,
                "reserved_storage": store_r, "accounts": len(self.jsas),
                # Raft groups here: the meta group and each replicated stream's (its consumers
                # ride in the stream's group)
                "ha_assets": 1 + len(self.meta.replicas) if self.meta is not None else 0,
                "api": {"level": API_LEVEL, "total": t["api_total"], "errors": t["api_errors"]}}

    def varz(self):
        out = {"config": self.config_dict(), "stats": self.stats_dict()}
        if self.meta is not None:
            out["meta"] = self.meta.cluster_info()
        out["limits"] = {"default_max_consumers": 1000}
        return out

    # ---- the interface natsd/monitor/jsz.py (and /metrics) reads ----

    enabled = True

    def is_leader(self):
        return self.meta.is_leader() if self.meta is not None else True

    def config(self):
        return self.config_dict()

    def limits(self):
        return {"default_max_consumers": 1000}

    def usage(self):
        return self.stats_dict()

    def meta_cluster(self):
        return self.meta.cluster_info() if self.meta is not None else None

    def accounts(self):
        return [_JszAccount(j) for j in self.jsas.values()]

    def account(self, name):
        return self.jsas.get(name)

    def assigned_streams(self, account):
        """The replicated streams of `account` the meta group assigned (to any servers)."""
        return [] if self.meta is None else [n for (a, n) in self.meta.assignments if a == account]

    def health_errors(self, query=None):
        """The meta group without a leader (on a cluster), streams whose store reported a disk
        error (Stream.store_error)."""
        out = self.meta.health_errors() if self.meta is not None else []
        for jsa in self.jsas.values():
            for st in jsa.streams.values():
                se = getattr(st, "store_error", None)
                if se:
                    out.append({"type": "STREAM", "account": jsa.name, "stream": st.name,
                                "error": "JetStream stream '%s > %s' store failure at %s: %s"
                                         % (jsa.name, st.name, se[0], se[1])})
        return out


class _JszAccount:
    """A JsAccount as natsd/monitor/jsz.py reads it."""

    def __init__(self, jsa):
        self.jsa = jsa
        self.name = jsa.name

    def usage(self):
        mem, store = self.jsa.usage()
        rmem, rstore = self.jsa.reserved()
        return {"memory": mem, "storage": store, "reserved_memory": rmem, "reserved_storage": rstore,
                "accounts": 0, "ha_assets": 0,
                "api": {"level": 0, "total": self.jsa.api_total, "errors": self.jsa.api_errors}}

    def streams(self):
        return [_JszStream(s) for s in sorted(self.jsa.streams.values(), key=lambda s: s.name)]


class _JszStream:
    """A Stream as natsd/monitor/jsz.py reads it (created in unix seconds, config() a method)."""

    def __init__(self, st):
        self.st = st
        self.name = st.name
        self.created = st.created / 1e9

    def config(self):
        return config_json(self.st.config)

    def state(self):
        return self.st.state()

    def cluster_info(self):
        return self.st.cluster_info()

    def mirror_info(self):
        mirror = self.st.config.get("mirror")
        return self.st.source_info(mirror, True) if mirror else None

    def sources_info(self):
        return [self.st.source_info(s) for s in self.st.config.get("sources") or []]

    @property
    def raft_group(self):
        """The stream's Raft group ("" for a one-replica stream); its consumers' state rides in
        the same group (natsd/jetstream/replicated/consumers.py), so it is theirs too."""
        return self.st.replica.group_name if self.st.replica is not None else ""

    def consumers(self):
        if not self.is_leader():
            return self.st.replica.consumers.views()
        return self.st.client_consumers()

    def is_leader(self):
        return self.st.replica is None or self.st.replica.is_leader()
