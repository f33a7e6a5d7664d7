"""Runtime publish/subscribe permissions of an authenticated user.

Owns ``Permissions``: built once per configured user from the options'
permissions config (``Permissions.from_config``), shared by that user's
connections, and queried by the server on PUB (``can_publish``), SUB
(``can_subscribe``) and, for wildcard/queue subscriptions that overlap a
subscribe deny entry, on delivery (``delivery_denied``).

Semantics follow nats-server (client.go ``setPermissions``,
``canSubscribeInternal``, ``pubAllowedFullCheck``, ``checkDenySub``):

* Entries are matched the way nats-server's sublist ``Match`` does: the
  checked subject is taken literally, token by token, against the wildcard
  entries.  For a wildcard subscription that gives subset-like semantics
  (allow ``foo.>`` admits SUB ``foo.*``; allow ``foo.>`` does not admit
  ``>``) with nats-server's quirk that an entry ``foo.*`` also admits
  ``foo.>``.
* publish: allowed iff (no allow list or an allow entry matches) and no deny
  entry matches.
* subscribe: same, with queue entries ``"<subject> <queue>"``.  When the SUB
  has a queue and queue entries match the subject, the queue decides (a
  queue entry may itself use wildcards, e.g. ``"foo v1.*"``).
* A subscription broader than a deny entry (SUB ``foo.*`` with deny
  ``foo.bar``) is accepted, but messages on denied subjects are not
  delivered to it: ``delivery_denied``.
* ``response`` (allow_responses) is only carried here; tracking which reply
  subjects a responder may publish to is connection state, kept by the
  server.  As in nats-server, configuring it without a publish allow list
  turns publishing off except for those replies.

Results are cached per instance (bounded) because the same few subjects are
checked over and over; the cache is just cleared when it grows too big.
"""

from __future__ import annotations

from natsd.subject import (
    has_wildcard,
    is_valid_subject,
    subject_is_subset,
    subject_matches,
    subjects_overlap,
)

CACHE_MAX = 1024
# nats-server reserves this queue name for its own use; a client queue
# subscription with it is always a permissions violation (client.go processSubEx).
SYS_QUEUE_GROUP = "_sys_"

# nats-server defaults for allow_responses (const.go).
DEFAULT_RESPONSE_MAX_MSGS = 1
DEFAULT_RESPONSE_EXPIRES = 120.0


def _split_subject_queue(entry: str) -> tuple[str, str | None] | None:
    """Parse a subscribe entry ``"<subject>[ <queue>]"``; None if invalid."""
    parts = entry.split() if isinstance(entry, str) else []
    if not 1 <= len(parts) <= 2:
        return None
    subject = parts[0]
    queue = parts[1] if len(parts) == 2 else None
    if not is_valid_subject(subject) or (queue is not None and not is_valid_subject(queue)):
        return None
    return subject, queue


def _queue_matches(queue: str, names: list[str]) -> bool:
    # A configured queue name may be a wildcard pattern; '*' and '>' are also
    # legal literal queue names, hence the equality check first.
    for name in names:
        if queue == name or (has_wildcard(name) and subject_is_subset(queue, name)):
            return True
    return False


class _ResponseDefaults:
    """Stand-in response permission with nats-server's defaults filled in."""

    __slots__ = ("max_msgs", "expires")

    def __init__(self, max_msgs: int, expires: float):
        self.max_msgs = max_msgs
        self.expires = expires

    def __repr__(self) -> str:
        return f"ResponsePermission(max_msgs={self.max_msgs}, expires={self.expires})"


class Permissions:
    """Compiled permissions of one user; see the module docstring."""

    def __init__(self, pub_allow=None, pub_deny=(), sub_allow=None, sub_deny=(), response=None):
        # None means "no allow list" (everything allowed); an empty tuple
        # means nothing is allowed.
        self.pub_allow: tuple[str, ...] | None = None if pub_allow is None else tuple(pub_allow)
        self.pub_deny: tuple[str, ...] = tuple(pub_deny)
        self.sub_allow: tuple[tuple[str, str | None], ...] | None = (
            None if sub_allow is None else tuple(sub_allow))
        self.sub_deny: tuple[tuple[str, str | None], ...] = tuple(sub_deny)
        self.response = response
        # False when pub_allow is only what allow_responses implies (not what was configured)
        self.pub_allow_configured = pub_allow is not None
        self._pub_cache: dict[str, bool] = {}
        self._sub_cache: dict[tuple[str, str | None], bool] = {}
        self._deliver_cache: dict[tuple[str, str | None], bool] = {}

    # -- construction -----------------------------------------------------

    @classmethod
    def from_config(cls, cfg) -> "Permissions | None":
        """Build from an options permissions object (``publish``,
        ``subscribe``, ``response``); None when ``cfg`` is None or grants
        everything."""
        if cfg is None:
            return None
        pub = getattr(cfg, "publish", None)
        sub = getattr(cfg, "subscribe", None)
        response = getattr(cfg, "response", None)

        pub_allow_cfg = list(getattr(pub, "allow", None) or ()) if pub is not None else []
        pub_deny_cfg = list(getattr(pub, "deny", None) or ()) if pub is not None else []
        sub_allow_cfg = list(getattr(sub, "allow", None) or ()) if sub is not None else []
        sub_deny_cfg = list(getattr(sub, "deny", None) or ()) if sub is not None else []

        # Invalid entries are skipped (nats-server logs and skips them); an
        # allow list whose entries were all invalid still allows nothing.
        pub_allow = [s for s in pub_allow_cfg if is_valid_subject(s)] if pub_allow_cfg else None
        pub_deny = []
        for s in pub_deny_cfg:
            if is_valid_subject(s):
                pub_deny.append(s)
            elif (sq := _split_subject_queue(s)) is not None:
                # A queue qualifier means nothing for publish; keep the subject scope.
                pub_deny.append(sq[0])
        sub_allow = ([sq for s in sub_allow_cfg if (sq := _split_subject_queue(s)) is not None]
                     if sub_allow_cfg else None)
        sub_deny = [sq for s in sub_deny_cfg if (sq := _split_subject_queue(s)) is not None]

        if response is not None:
            # allow_responses replaces the blanket publish allow (auth.go
            # validateResponsePermissions), and 0 means "use the default".
            if pub_allow is None:
                pub_allow = []
            max_msgs = getattr(response, "max_msgs", 0)
            expires = getattr(response, "expires", 0)
            if not max_msgs or not expires:
                response = _ResponseDefaults(max_msgs or DEFAULT_RESPONSE_MAX_MSGS,
                                             expires or DEFAULT_RESPONSE_EXPIRES)

        if (pub_allow is None and not pub_deny and sub_allow is None
                and not sub_deny and response is None):
            return None
        perms = cls(pub_allow, pub_deny, sub_allow, sub_deny, response)
        perms.pub_allow_configured = bool(pub_allow_cfg)
        return perms

    @classmethod
    def with_pub_deny(cls, perms: "Permissions | None", subject: str) -> "Permissions":
        """`perms` (None: everything allowed) with publishing to `subject` denied as well."""
        if perms is None:
            return cls(pub_deny=[subject])
        out = cls(perms.pub_allow, perms.pub_deny + (subject,), perms.sub_allow, perms.sub_deny,
                  perms.response)
        out.pub_allow_configured = perms.pub_allow_configured
        return out

    # -- checks -----------------------------------------------------------

    def can_publish(self, subject: str) -> bool:
        """Static publish check.  When it says False and ``response`` is set,
        the server must still check its tracked reply subjects."""
        cached = self._pub_cache.get(subject)
        if cached is not None:
            return cached
        allowed = self.pub_allow is None or any(subject_matches(p, subject) for p in self.pub_allow)
        if allowed and self.pub_deny:
            allowed = not any(subject_matches(p, subject) for p in self.pub_deny)
        _store(self._pub_cache, subject, allowed)
        return allowed

    def can_subscribe(self, subject: str, queue: str | None = None) -> bool:
        """May this user SUB to ``subject`` (optionally in ``queue``)?

        Does not reject the reserved ``_sys_`` queue: nats-server does that
        for every client, with or without permissions (see SYS_QUEUE_GROUP).
        """
        queue = queue or None
        key = (subject, queue)
        cached = self._sub_cache.get(key)
        if cached is not None:
            return cached
        allowed = True
        if self.sub_allow is not None:
            plain, queues = _match_entries(self.sub_allow, subject)
            allowed = plain
            if queue is not None and queues:
                # Queue entries for this subject decide for queue subscriptions:
                # allow ["foo", "foo v1"] admits plain SUB foo but only queue v1.
                allowed = _queue_matches(queue, queues)
        if allowed and self.sub_deny:
            plain, queues = _match_entries(self.sub_deny, subject)
            allowed = not plain
            if allowed and queue is not None and queues:
                allowed = not _queue_matches(queue, queues)
        _store(self._sub_cache, key, allowed)
        return allowed

    def needs_delivery_filter(self, subject: str, queue: str | None = None) -> bool:
        """True if an (allowed) subscription could receive messages that the
        subscribe deny list forbids, so deliveries to this client must go
        through ``delivery_denied``.  nats-server switches the filter on for
        the whole connection the first time such a subscription is made."""
        if not self.sub_deny or not (queue or has_wildcard(subject)):
            return False
        return any(subjects_overlap(d, subject) for d, _ in self.sub_deny)

    def delivery_denied(self, subject: str, queue: str | None = None) -> bool:
        """Must a message on ``subject`` be withheld from a subscription of
        this user (in ``queue``, if it is a queue subscription)?"""
        if not self.sub_deny:
            return False
        queue = queue or None
        key = (subject, queue)
        cached = self._deliver_cache.get(key)
        if cached is not None:
            return cached
        plain, queues = _match_entries(self.sub_deny, subject)
        denied = plain or (queue is not None and bool(queues) and _queue_matches(queue, queues))
        _store(self._deliver_cache, key, denied)
        return denied

    @property
    def has_sub_deny(self) -> bool:
        return bool(self.sub_deny)

    def __repr__(self) -> str:
        return (f"Permissions(pub_allow={self.pub_allow!r}, pub_deny={self.pub_deny!r}, "
                f"sub_allow={self.sub_allow!r}, sub_deny={self.sub_deny!r}, response={self.response!r})")


def _match_entries(entries, subject: str) -> tuple[bool, list[str]]:
    """Entries matching ``subject``: (any plain entry?, queue names of queue entries)."""
    plain = False
    queues: list[str] = []
    for pattern, queue in entries:
        if subject_matches(pattern, subject):
            if queue is None:
                plain = True
            else:
                queues.append(queue)
    return plain, queues


def _store(cache: dict, key, value: bool) -> None:
    # Crude bound: drop everything when full; hot subjects refill at once.
    if len(cache) >= CACHE_MAX:
        cache.clear()
    cache[key] = value
