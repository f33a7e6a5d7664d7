"""What may cross one leaf node link, seen from this server.

Owns ``LinkFilter`` (an allow list or none, and a deny list, of subjects) and ``LinkPerms``,
the two filters of one leaf connection:

- ``send``: what we may send to the remote: messages we deliver to it, and the interest
  (LS+) of the remote that we honour;
- ``recv``: what we may take from the remote: messages it sends (LMSG), and the interest of
  ours that we advertise to it.

Where they come from (nats-server leafnode.go, client.go ``setPermissions``):

- hub side (we accepted the link): the authenticated user's permissions, reversed, because data
  flows the other way: what the leaf user may *subscribe* to is what we may send it, what it may
  *publish* is what we take from it. The remote's ``deny_pub`` from its CONNECT adds to ``send``.
  We tell the leaf its permissions in the INFO after CONNECT (``import`` = its subscribe,
  ``export`` = its publish), so a nats-server leaf enforces them on its side too.
- spoke side (we solicited): ``export`` / ``import`` from the hub's INFO, plus the remote's
  ``deny_exports`` / ``deny_imports``.
- both: the JetStream domain denies (natsd/leafnodes/leafnode.py ``_domain_denies``).

A violation of the *user's* permissions on the hub side closes the link with nats-server's
``-ERR 'Permissions Violation for ...'``; anything else (domain denies, deny_imports, a spoke's
own filters) is dropped without a word, as nats-server does.
"""
from __future__ import annotations

from natsd.subject import has_wildcard, subject_is_subset, subject_matches, subjects_overlap

# Interest and replies the links use internally; never filtered (nats-server: $LDS., $GR.,
# _GR_. for interest; _R_. and $JS.ACK. for messages).
INTERNAL_INTEREST = ("$LDS.", "$GR.", "_GR_.")
INTERNAL_MESSAGES = ("_R_.", "$JS.ACK.")
CACHE_MAX = 4096


class LinkFilter:
    """Subjects allowed by an allow list (None: every subject) minus a deny list, matched as
    nats-server matches permissions: the checked subject taken literally against the entries."""

    __slots__ = ("allow", "deny", "_cache")

    def __init__(self, allow=None, deny=()):
        self.allow = None if allow is None else list(allow)
        self.deny = list(deny)
        self._cache = {}

    @property
    def open(self):
        return self.allow is None and not self.deny

    def add_deny(self, subjects):
        for s in subjects:
            if s not in self.deny:
                self.deny.append(s)
        self._cache.clear()

    def allows(self, subject):
        """May a message on (literal) `subject` pass?"""
        ok = self._cache.get(subject)
        if ok is None:
            ok = ((self.allow is None or any(subject_matches(a, subject) for a in self.allow))
                  and not any(subject_matches(d, subject) for d in self.deny))
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[subject] = ok
        return ok

    def allows_all_of(self, subject):
        """Does every message a subscription on `subject` can match pass (no per-delivery
        check needed)?"""
        if self.allow is not None and not any(subject_is_subset(subject, a) for a in self.allow):
            return False
        return not any(subjects_overlap(subject, d) for d in self.deny)

    def may_subscribe(self, subject):
        """May interest on `subject` be advertised? nats-server's canSubscribe for leaf links:
        the subject checked literally against the entries, and a wildcard also when some allow
        entry lies within it (`>` with allow `a.>`: deliveries are pruned per message)."""
        if self.allows(subject):
            return True
        if self.allow is None or not has_wildcard(subject):
            return False
        return (any(subject_matches(subject, a) for a in self.allow)
                and not any(subject_matches(d, subject) for d in self.deny))

    def as_info(self):
        """The SubjectPermission JSON nats-server puts in INFO `import`/`export`."""
        out = {}
        if self.allow is not None:
            out["allow"] = list(self.allow)
        if self.deny:
            out["deny"] = list(self.deny)
        return out

    def __repr__(self):
        return "LinkFilter(allow=%r, deny=%r)" % (self.allow, self.deny)


def _subjects(entries):
    """Subjects of permission entries (subscribe entries may carry a queue: `subj queue`)."""
    out = []
    for e in entries or ():
        if isinstance(e, tuple):
            out.append(e[0])
        else:
            out.append(str(e).split()[0] if str(e).strip() else str(e))
    return out


class LinkPerms:
    """The send/recv filters of one leaf connection, and what is enforced strictly."""

    __slots__ = ("send", "recv", "user_send", "user_recv", "response", "announced")

    def __init__(self):
        self.send = LinkFilter()
        self.recv = LinkFilter()
        # hub side only: the user's own permissions, whose violation closes the link
        self.user_send = None
        self.user_recv = None
        self.response = None            # the user's allow_responses (hub side)
        self.announced = {}             # hub side: INFO import/export for the leaf

    @classmethod
    def for_user(cls, perms):
        """Hub side: a leaf authenticated as a user with `perms` (natsd.auth.permissions)."""
        lp = cls()
        if perms is None:
            return lp
        sub_allow = None if perms.sub_allow is None else _subjects(perms.sub_allow)
        pub_allow = None if perms.pub_allow is None else list(perms.pub_allow)
        lp.user_send = LinkFilter(sub_allow, _subjects(perms.sub_deny))
        lp.user_recv = LinkFilter(pub_allow, perms.pub_deny)
        lp.send = LinkFilter(lp.user_send.allow, lp.user_send.deny)
        lp.recv = LinkFilter(lp.user_recv.allow, lp.user_recv.deny)
        lp.response = perms.response
        # as configured (allow_responses' implied empty publish allow list is not announced)
        if not lp.user_send.open:
            lp.announced["import"] = lp.user_send.as_info()
        export = LinkFilter(pub_allow if perms.pub_allow_configured else None, perms.pub_deny)
        if not export.open:
            lp.announced["export"] = export.as_info()
        return lp

    def user_key(self):
        """What identifies the user's own permissions (to see if a reload changed them)."""
        def f(flt):
            return None if flt is None else (flt.allow, flt.deny)
        return f(self.user_send), f(self.user_recv), self.response is not None, self.announced

    def apply_info(self, info, deny_exports=(), deny_imports=()):
        """Spoke side: the hub's INFO `export`/`import` plus our remote's own denies."""
        exp = info.get("export")
        imp = info.get("import")
        if isinstance(exp, dict):
            self.send = LinkFilter(_str_list(exp.get("allow")), _str_list(exp.get("deny")) or ())
        if isinstance(imp, dict):
            self.recv = LinkFilter(_str_list(imp.get("allow")), _str_list(imp.get("deny")) or ())
        self.send.add_deny(deny_exports)
        self.recv.add_deny(deny_imports)

    def info_fields(self):
        """INFO fields telling a soliciting leaf its permissions (hub side)."""
        return dict(self.announced)

    def deny_both(self, subjects):
        self.send.add_deny(subjects)
        self.recv.add_deny(subjects)

    def needs_delivery_check(self, subject):
        """A subscription of the remote on `subject` may get messages `send` withholds."""
        return not self.send.open and not self.send.allows_all_of(subject)


def _str_list(v):
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [str(x) for x in v]
    return None


def internal_interest(subject):
    return subject.startswith(INTERNAL_INTEREST)


def internal_message(subject):
    return subject.startswith(INTERNAL_MESSAGES)


def is_literal(subject):
    return not has_wildcard(subject)
