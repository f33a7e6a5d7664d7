"""Which servers may hold a replicated stream: nats-server's placement rules, applied by the
meta leader (natsd/jetstream/replicated/meta.py) to what it knows of each JetStream server. Pure
functions of that knowledge, so the choices are testable and the same everywhere.

A server is a candidate when:
- it is in the placement's `cluster` (natsd's servers are all in their routes' one cluster);
- it has a route to the meta leader now (else: "peer offline");
- it is not tagged `!jetstream` (else: "exclude tag set");
- it has every tag the placement lists and none of the `!tag` ones (else: "tags not matched"
  / "tags excluded", naming them);
- for a stream with `max_bytes`, it has that much room left in the stream's storage (its
  `max_memory` / `max_storage` less what it uses or has reserved, whichever is more, as its
  last STATSZ told; a server that told nothing has none; else: "insufficient storage");
- it holds no more HA assets than `jetstream.limits.max_ha_assets` (the meta group counts as
  one; else: "miscellaneous issue");
- with `jetstream.unique_tag` set (and no placement tag of that prefix), it carries a tag of
  that prefix whose value no other chosen server has (else: "server tag not unique").
Among candidates (nats-server's order): for a replicated stream fewer HA assets first; then
more room in the stream's storage (no limit counts as the most, a server that told nothing as
none); then fewer streams; then the meta leader itself, then a rotation by the stream's name
(nats-server shuffles where natsd rotates). Too few candidates: nats-server's
JSClusterNoPeersErrF text, reasons joined as nats-server joins them.
"""
import zlib
from dataclasses import dataclass, field

from natsd.jetstream.engine import errors as E

EXCLUDE_PLACEMENT = "!jetstream"


@dataclass
class Server:
    id: str                             # the peer id (natsd/jetstream/replicated/meta.py)
    tags: frozenset = frozenset()       # lower-cased
    online: bool = True
    ha_assets: int = 0                  # replicated streams it holds, the meta group not counted
    known: bool = True                  # its tags were heard (STATSZ); unknown ones are passed over
    room: dict = None                   # "file"/"memory" -> bytes left (-1: no limit); None: not told
    streams: int = 0                    # streams it holds, replicated or not


def room_of(jetstream):
    """A server's room per storage from the `jetstream` block of its STATSZ (or varz): its
    limit less what it uses or has reserved, whichever is more (nats-server's rule)."""
    cfg, stats = jetstream.get("config") or {}, jetstream.get("stats") or {}
    out = {}
    for kind, limit, used, reserved in (("file", "max_storage", "storage", "reserved_storage"),
                                        ("memory", "max_memory", "memory", "reserved_memory")):
        lim = cfg.get(limit, -1)
        out[kind] = -1 if lim is None or lim < 0 else max(0, lim - max(stats.get(used, 0), stats.get(reserved, 0)))
    return out


@dataclass
class Rules:
    cluster: str = ""                   # this cluster's name
    unique_tag: str = ""                # jetstream.unique_tag (lower-cased)
    max_ha_assets: int = 0              # jetstream.limits.max_ha_assets (0: no limit)


@dataclass
class _Why:
    offline: bool = False
    exclude_tag: bool = False
    unique_tag: bool = False
    no_storage: bool = False
    misc: bool = False
    no_js_cluster: bool = False
    not_matched: set = field(default_factory=set)
    excluded: set = field(default_factory=set)

    def text(self):
        out = "no suitable peers for placement"
        for flag, reason in ((self.offline, "peer offline"), (self.exclude_tag, "exclude tag set"),
                             (self.no_storage, "insufficient storage"),
                             (self.unique_tag, "server tag not unique"), (self.misc, "miscellaneous issue"),
                             (self.no_js_cluster, "jetstream not enabled in cluster")):
            if flag:
                out += ", " + reason
        for tags, label in ((self.not_matched, "tags not matched"), (self.excluded, "tags excluded")):
            if tags:
                out += ", %s [%s]" % (label, ", ".join("'%s'" % t for t in sorted(tags)))
        return out


def _placement_tags(placement):
    return [(t[1:].lower(), True) if t.startswith("!") else (t.lower(), False)
            for t in (placement or {}).get("tags") or []]


def _unique_value(server, prefix):
    return next((t for t in sorted(server.tags) if t.startswith(prefix)), None)


@dataclass
class Pool:
    """What the meta leader knows when it chooses: the JetStream servers of the meta group,
    its own peer id, the rules from its config, and the stream's storage kind and the room a
    new server must have for it (storage kind, max_bytes), or None (file storage, any room)."""
    servers: list
    me: str
    rules: Rules
    need: tuple = None

    def select(self, key, n, placement, existing=()):
        return select(key, n, placement, self.servers, self.me, self.rules, existing, self.need)

    def only(self, peer):
        return Pool([s for s in self.servers if s.id == peer], self.me, self.rules, self.need)

    def without(self, peer):
        return Pool([s for s in self.servers if s.id != peer], self.me, self.rules, self.need)


def select(key, n, placement, servers, me, rules, existing=(), need=None):
    """-> `n` peer ids: the `existing` ones (kept, in order) and new ones. Raises ApiError
    (JSClusterNoPeersErrF) when the placement cannot be met. `servers` are the JetStream
    servers of the meta group, `me` the meta leader's id, `key` (account, stream), `need`
    (storage kind, max_bytes) the room a new server must have."""
    existing = list(existing)
    if len(existing) >= n:
        return existing[:n]
    if placement and placement.get("cluster") and placement["cluster"] != rules.cluster:
        raise E.error("JSClusterNoPeersErrF", err=_Why().text())
    wanted = _placement_tags(placement)
    unique = rules.unique_tag
    if unique and any(t.startswith(unique) for t, _ in wanted):
        unique = ""                     # the placement names the unique tag itself
    by_id = {s.id: s for s in servers}
    taken = {_unique_value(by_id[p], unique) for p in existing if p in by_id} if unique else set()
    why = _Why(no_js_cluster=not servers)
    chosen = []
    for s in _order(key, servers, me, need[0] if need else "file", n > 1):
        if s.id in existing or not _fits(s, wanted, why):
            continue
        if need and need[1] > 0 and not _has_room(s, need):
            why.no_storage = True
            continue
        if rules.max_ha_assets > 0 and s.ha_assets + 1 > rules.max_ha_assets:
            why.misc = True
            continue
        if unique:
            value = _unique_value(s, unique)
            if value is None or value in taken:
                why.unique_tag = True
                continue
            taken.add(value)
        chosen.append(s.id)
    if len(chosen) < n - len(existing):
        raise E.error("JSClusterNoPeersErrF", err=why.text())
    return existing + chosen[:n - len(existing)]


def meets(server, placement, rules):
    """Does `server` meet `placement` (its cluster and tags; not capacity or uniqueness)?"""
    if placement and placement.get("cluster") and placement["cluster"] != rules.cluster:
        return False
    return _fits(server, _placement_tags(placement), _Why())


def _fits(s, wanted, why):
    """Is `s` known, online, not excluded and tagged as `wanted` asks? Notes why not."""
    if not s.known:
        why.misc = True
        return False
    if not s.online:
        why.offline = True
        return False
    if EXCLUDE_PLACEMENT in s.tags:
        why.exclude_tag = True
        return False
    missing = [t for t, exclude in wanted if not exclude and t not in s.tags]
    present = [t for t, exclude in wanted if exclude and t in s.tags]
    if present:
        why.excluded.add(present[0])
    elif missing:
        why.not_matched.add(missing[0])
    return not (present or missing)


def _has_room(s, need):
    kind, max_bytes = need
    return max_bytes <= _room_left(s, kind)


def _room_left(s, kind):
    left = (s.room or {}).get(kind, 0)
    return float("inf") if left < 0 else left


def _order(key, servers, me, kind, replicated):
    ids = sorted(s.id for s in servers)
    k = zlib.crc32(("%s.%s" % key).encode()) % len(ids) if ids else 0
    rotation = {p: i for i, p in enumerate(ids[k:] + ids[:k])}
    return sorted(servers, key=lambda s: (s.ha_assets if replicated else 0, -_room_left(s, kind), s.streams,
                                          s.id != me, rotation[s.id]))
