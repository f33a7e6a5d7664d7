"""Operator mode's account resolvers: where account JWTs are kept and found.

MemoryResolver is nats-server's MEMORY resolver: what resolver_preload gives, held in memory.
UrlResolver fetches `<url><account key>` over HTTP(S), off the loop (PendingFetch), keeping
what it fetched.
DirResolver is its FULL and CACHE directory resolvers (DirJWTStore): one
`<account key>.jwt` file per account in `dir`, found again at the next start; an account the
directory lacks is asked of the cluster's other servers (CLAIMS.LOOKUP) while the login waits. Both answer
`fetch(key)`; the directory resolver also keeps a running hash of what it holds (the XOR of
each JWT's SHA-256, for CLAIMS.PACK), a `limit` (FULL refuses past it with "jwt store is
full", CACHE evicts the least recently used JWT), CACHE's `ttl`, and FULL's deletes (renamed to
`.deleted`, or removed with hard_delete). What a JWT means is not this module's business: it
stores text, natsd.auth.jwt.accounts verifies it.
"""
from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict

from natsd.auth.jwt import claims
from natsd.auth import nkey
from natsd.auth.offloop import OffLoop
from natsd.digest import sha256
from natsd.gofmt import go_quote

log = logging.getLogger("natsd")

EXTENSION = ".jwt"


class ResolverError(Exception):
    """A store operation refused; str() is nats-server's reason."""


class MemoryResolver:
    tracks_updates = False          # updates reach accounts through the server, not the store
    kind = "MEMORY"

    def __init__(self):
        self.jwts: dict[str, str] = {}

    def fetch(self, key: str) -> str | None:
        return self.jwts.get(key)

    def store(self, key: str, token: str) -> None:
        self.jwts[key] = token


class PendingFetch(OffLoop):
    """An account JWT the URL resolver must fetch first (natsd.auth.offloop runs it)."""

    def __init__(self, resolver, key):
        super().__init__("account JWT fetch needed")
        self.resolver, self.key = resolver, key

    def work(self):
        return self.resolver.fetch_now(self.key)

    def settle(self, token):
        self.resolver.fetched(self.key, token)


def _https_context(cfg):
    """`resolver_tls` as the HTTPS client's settings (nats-server: its ca_file becomes the
    root CAs, its certificate the client certificate; without a ca_file the system's roots)."""
    import ssl                          # (here: ssl and urllib weigh 7 MB, for URL resolvers only)
    ctx = ssl.create_default_context(cafile=cfg.get("ca_file") or None)
    if cfg.get("cert_file"):
        ctx.load_cert_chain(cfg["cert_file"], cfg.get("key_file") or None)
    if cfg.get("insecure"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class UrlResolver:
    """nats-server's URLAccResolver: GET <url><key>; a 200 answer's body is the JWT."""
    tracks_updates = False
    kind = "URL"

    def __init__(self, url, timeout, tls=None):
        self.url = url if url.endswith("/") else url + "/"
        self.timeout = timeout
        self.https = _https_context(tls) if tls is not None else None
        self.jwts: dict[str, str] = {}
        self._failed: set[str] = set()      # fetched and not found: the login retrying sees it

    def fetch(self, key: str) -> str | None:
        if key in self.jwts:
            return self.jwts[key]
        if key in self._failed:
            self._failed.discard(key)
            return None
        raise PendingFetch(self, key)

    def _get(self, key: str) -> str:
        """GET <url><key>; ResolverError with nats-server's "could not fetch" text."""
        import urllib.error
        import urllib.request
        url = self.url + key
        try:
            with urllib.request.urlopen(url, timeout=self.timeout, context=self.https) as resp:
                return resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            raise ResolverError("could not fetch <%s>: %d %s" % (go_quote(url), e.code, e.reason)) from None
        except (OSError, ValueError) as e:
            raise ResolverError("could not fetch <%s>: %s" % (go_quote(url), e)) from None

    def check(self) -> str | None:
        """nats-server's start-up test: the base URL must answer 200."""
        try:
            self._get("")
        except ResolverError as e:
            return str(e)
        return None

    def fetch_now(self, key: str) -> str | None:
        """The JWT from the URL (blocking, at most `timeout`), None when there is none."""
        t0 = time.monotonic()
        try:
            token = self._get(key)
        except ResolverError as e:
            log.warning("Account fetch failed: %s", e)
            return None
        log.debug("Account [%s] fetch took %.3fms", key, (time.monotonic() - t0) * 1000)
        return token

    def fetched(self, key: str, token: str | None) -> None:
        if token:
            self.jwts[key] = token
        else:
            self._failed.add(key)

    def store(self, key: str, token: str) -> None:
        self.jwts[key] = token


class DirResolver:
    """FULL or CACHE: JWT files in one directory, an index of them in memory (LRU order)."""
    tracks_updates = True

    def __init__(self, ropts, on_change=None, on_delete=None):
        self.kind = ropts.kind
        self.dir = os.path.abspath(ropts.dir)
        self.delete_mode = ropts.delete             # "", "rename" or "hard"
        self.limit = ropts.limit if ropts.limit > 0 else None
        self.ttl = ropts.ttl if self.kind == "CACHE" else 0.0
        self.interval = ropts.interval or 60.0
        self.on_change = on_change or (lambda key: None)
        self.on_delete = on_delete or (lambda key: None)
        self.timeout = ropts.timeout
        self.ask_others = None          # (key, timeout) -> JWT or None: natsd.system.claims
        self._failed: set[str] = set()  # asked and not found: the login retrying sees it
        self.index: OrderedDict[str, tuple[bytes, float]] = OrderedDict()   # key -> (sha256, written)
        self._hash = bytearray(32)
        os.makedirs(self.dir, exist_ok=True)
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(EXTENSION):
                token = self._read(name[:-len(EXTENSION)])
                if token:
                    self._track(name[:-len(EXTENSION)], token)

    # -- the index --

    def _path(self, key: str) -> str:
        return os.path.join(self.dir, key + EXTENSION)

    def _track(self, key: str, token: str) -> None:
        self._untrack(key)
        digest = sha256(token.encode()).digest()
        self.index[key] = (digest, time.time())
        self._xor(digest)

    def _untrack(self, key: str) -> None:
        old = self.index.pop(key, None)
        if old is not None:
            self._xor(old[0])

    def _xor(self, digest: bytes) -> None:
        for i, b in enumerate(digest):
            self._hash[i] ^= b

    def hash(self) -> bytes:
        """What CLAIMS.PACK compares: all zeroes for an empty store."""
        return bytes(self._hash)

    def _read(self, key: str) -> str | None:
        try:
            with open(self._path(key), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def _expired(self, key: str) -> bool:
        entry = self.index.get(key)
        return bool(self.ttl and entry is not None and time.time() - entry[1] > self.ttl)

    # -- reading --

    def fetch(self, key: str) -> str | None:
        """The JWT held for `key`; one the directory lacks is asked of the other servers
        (PendingFetch) when `ask_others` is set, as nats-server's DirAccResolver.Fetch."""
        token = self.held(key)
        if token is not None or not nkey.is_valid_public(key, nkey.ACCOUNT):
            return token
        if key in self._failed:
            self._failed.discard(key)
            return None
        if self.ask_others is not None:
            raise PendingFetch(self, key)
        return None

    def held(self, key: str) -> str | None:
        """The JWT this directory holds for `key` (never asking anyone)."""
        if not nkey.is_valid_public(key, nkey.ACCOUNT):
            return None
        if self._expired(key):
            self._remove(key)
        token = self._read(key) if key in self.index else None
        if token is not None:
            self.index.move_to_end(key)             # most recently used
        return token

    def fetch_now(self, key: str) -> str | None:
        """Blocking, in a worker thread: the first JWT another server has for `key`."""
        return self.ask_others(key, self.timeout) if self.ask_others is not None else None

    def fetched(self, key: str, token: str | None) -> None:
        if token:
            try:
                self.store(key, token)
                return
            except ResolverError as e:
                log.error("DirResolver - Could not store the fetched JWT of %s: %s", key, e)
        self._failed.add(key)

    def keys(self) -> list[str]:
        return [k for k in sorted(self.index) if not self._expired(k)]

    def pack(self):
        """Each held JWT as nats-server's pack line `<key>|<jwt>`, skipping expired claims."""
        now = int(time.time())
        for key in self.keys():
            token = self._read(key)
            if not token:
                continue
            try:
                exp = claims.decode(token).expires
            except claims.JwtError:
                exp = 0
            if not (exp and exp < now):
                yield "%s|%s" % (key, token)

    # -- writing --

    def _write(self, key: str, token: str) -> bool:
        """Write unless the same JWT is held; False when nothing changed."""
        if not token:
            raise ResolverError("invalid JWT")
        digest = sha256(token.encode()).digest()
        held = self.index.get(key)
        if held is not None and held[0] == digest:
            self.index.move_to_end(key)
            return False
        if held is None and self.limit is not None and len(self.index) >= self.limit:
            if self.kind != "CACHE":
                raise ResolverError("jwt store is full")
            self._remove(next(iter(self.index)))    # the least recently used goes
        tmp = self._path(key) + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(token)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(key))
        except OSError as e:
            raise ResolverError(str(e)) from None
        self._track(key, token)
        return True

    def _remove(self, key: str) -> None:
        try:
            os.remove(self._path(key))
        except OSError:
            pass
        self._untrack(key)

    def save(self, key: str, token: str) -> None:
        """An update (CLAIMS.UPDATE): written whatever its age, then on_change(key)."""
        if not nkey.is_valid_public(key, nkey.ACCOUNT):
            raise ResolverError("invalid public key")
        if self._write(key, token):
            self.on_change(key)

    def store(self, key: str, token: str) -> None:
        """A preload or a merge: written only when newer than what is held (by `iat`), as
        nats-server's saveIfNewer."""
        if not nkey.is_valid_public(key, nkey.ACCOUNT):
            raise ResolverError("invalid public key")
        held = self._read(key) if key in self.index else None
        if held is not None:
            try:
                new = claims.decode(token)
            except claims.JwtError as e:
                raise ResolverError(str(e)) from None
            try:
                old = claims.decode(held)
            except claims.JwtError:
                old = None
            if old is not None:
                if old.jti == new.jti or old.issued_at > new.issued_at:
                    return
                if new.subject != key:
                    raise ResolverError("jwt subject nkey and provided nkey do not match")
                if old.subject != new.subject:
                    raise ResolverError("subject of existing and new jwt do not match")
        if self._write(key, token):
            self.on_change(key)

    def merge(self, pack: str) -> None:
        """A CLAIMS.PACK answer: `<key>|<jwt>` lines, each stored when newer (as `store`)."""
        for line in pack.split("\n"):
            if not line:
                continue
            parts = line.split("|")
            if len(parts) != 2:
                raise ResolverError("line in package didn't contain 2 entries: %r" % line)
            if not nkey.is_valid_public(parts[0], nkey.ACCOUNT):
                raise ResolverError("key to merge is not a valid public account key")
            self.store(parts[0], parts[1])

    def delete(self, key: str) -> None:
        if self.kind != "FULL" or not self.delete_mode:
            raise ResolverError("store is not set up to for delete")
        path = self._path(key)
        try:
            if self.delete_mode == "rename":
                os.replace(path, path + ".deleted")
            else:
                os.remove(path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise ResolverError(str(e)) from None
        self._untrack(key)
        self.on_delete(key)


def make_resolver(ropts, on_change=None, on_delete=None):
    """The resolver the options ask for."""
    if ropts.kind in ("FULL", "CACHE"):
        return DirResolver(ropts, on_change, on_delete)
    if ropts.kind == "URL":
        return UrlResolver(ropts.url, ropts.timeout, ropts.tls)
    return MemoryResolver()
