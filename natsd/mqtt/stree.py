"""The retained messages' subject tree: a map from subject to value kept in the shape of
nats-server's subject tree (its `stree` package), so that a match yields the subjects in the
order nats-server's does. That order is visible: a new MQTT subscription gets the retained
messages it matches as PUBLISH packets in that order, with packet identifiers given in it.

The shape is an adaptive radix tree over the subject's bytes. An inner node holds a prefix
(path compression) and 4, 10, 16, 48 or 256 children keyed by one byte, and grows into the
next size when full and shrinks back when a deletion leaves it small. A leaf holds the rest of
its subject. The children of the 4-, 10-, 16- and 48-sized nodes are kept in slot order:
appended, and a deleted one's slot takes the last. The 256-sized node keeps them in byte
order, and so do the conversions to and from it. A match walks the tree depth first in that
order; here every branch that cannot lead to a matching subject is skipped, and a leaf is
checked whole (natsd.subject.subject_matches), which gives the same subjects in the same
order.
"""
from natsd.subject import subject_matches

NO_PIVOT = 127      # the key of a leaf whose subject ends where its parent's path does
_GROWS_TO = {4: 10, 10: 16, 16: 48, 48: 256}
_SHRINKS_AT = {10: (4, 4), 16: (10, 10), 48: (16, 16), 256: (48, 48)}   # size: (at most, into)


def _pivot(s, i):
    return ord(s[i]) if i < len(s) else NO_PIVOT


def _common(a, b):
    n, limit = 0, min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


class _Leaf:
    __slots__ = ("suffix", "value")

    def __init__(self, suffix, value):
        self.suffix = suffix
        self.value = value


class _Node:
    """An inner node of `capacity` children: (key, child) in slot order; for 256, by key."""
    __slots__ = ("prefix", "capacity", "keys", "kids")

    def __init__(self, prefix, capacity=4):
        self.prefix = prefix
        self.capacity = capacity
        self.keys = []
        self.kids = []

    def find(self, key):
        try:
            return self.keys.index(key)
        except ValueError:
            return -1

    def add(self, key, child):
        if self.capacity == 256:
            at = 0
            while at < len(self.keys) and self.keys[at] < key:
                at += 1
            self.keys.insert(at, key)
            self.kids.insert(at, child)
        else:
            self.keys.append(key)
            self.kids.append(child)

    def remove(self, key):
        i = self.find(key)
        if self.capacity == 256:
            del self.keys[i], self.kids[i]
            return
        last = len(self.keys) - 1
        if i < last:
            self.keys[i], self.kids[i] = self.keys[last], self.kids[last]
        del self.keys[last], self.kids[last]

    def full(self):
        return self.capacity != 256 and len(self.keys) >= self.capacity

    def grown(self):
        bigger = _Node(self.prefix, _GROWS_TO[self.capacity])
        pairs = zip(self.keys, self.kids)
        for key, child in (sorted(pairs, key=lambda kc: kc[0]) if self.capacity == 48 else pairs):
            bigger.add(key, child)
        return bigger

    def shrunk(self):
        """What replaces this node after a deletion: None (it stays), its one child (a node of
        4 with one left) or a smaller node without a prefix."""
        if self.capacity == 4:
            return self.kids[0] if len(self.kids) == 1 else None
        most, into = _SHRINKS_AT[self.capacity]
        if len(self.keys) > most:
            return None
        smaller = _Node("", into)
        pairs = zip(self.keys, self.kids)
        for key, child in (sorted(pairs, key=lambda kc: kc[0]) if self.capacity == 48 else pairs):
            smaller.add(key, child)
        return smaller


class SubjectTree:
    """subject -> value, matched in nats-server's order (match)."""

    def __init__(self):
        self._root = None
        self._size = 0

    def __len__(self):
        return self._size

    def get(self, subject, default=None):
        n, i = self._root, 0
        while n is not None:
            if isinstance(n, _Leaf):
                return n.value if n.suffix == subject[i:] else default
            if n.prefix:
                if subject[i:i + len(n.prefix)] != n.prefix:
                    return default
                i += len(n.prefix)
            k = n.find(_pivot(subject, i))
            n = n.kids[k] if k >= 0 else None
        return default

    def __setitem__(self, subject, value):
        if chr(NO_PIVOT) in subject:
            raise ValueError("a subject with byte 127 cannot be kept: %r" % subject)
        self._root, added = self._insert(self._root, subject, value, 0)
        self._size += added

    def _insert(self, n, subject, value, i):
        """(the node that takes n's place, 1 if a subject was added else 0)"""
        if n is None:
            return _Leaf(subject[i:], value), 1
        if isinstance(n, _Leaf):
            if n.suffix == subject[i:]:
                n.value = value
                return n, 0
            cpi = _common(n.suffix, subject[i:])
            node = _Node(subject[i:i + cpi])
            n.suffix = n.suffix[cpi:]
            i += cpi
            p = _pivot(n.suffix, 0)
            if cpi > 0 and i < len(subject) and p == ord(subject[i]):
                split, _ = self._insert(n, subject, value, i)
                node.add(p, split)
            else:
                new = _Leaf(subject[i:], value)
                node.add(_pivot(new.suffix, 0), new)
                node.add(p, n)
            return node, 1
        if n.prefix:
            cpi = _common(n.prefix, subject[i:])
            if cpi < len(n.prefix):
                node = _Node(subject[i:i + cpi])
                i += cpi
                n.prefix = n.prefix[cpi:]
                node.add(_pivot(n.prefix, 0), n)
                node.add(_pivot(subject, i), _Leaf(subject[i:], value))
                return node, 1
            i += len(n.prefix)
        key = _pivot(subject, i)
        k = n.find(key)
        if k >= 0:
            n.kids[k], added = self._insert(n.kids[k], subject, value, i)
            return n, added
        if n.full():
            n = n.grown()
        n.add(key, _Leaf(subject[i:], value))
        return n, 1

    def pop(self, subject, default=None):
        if self._root is None or not subject:
            return default
        if isinstance(self._root, _Leaf):
            if self._root.suffix != subject:
                return default
            value, self._root = self._root.value, None
            self._size -= 1
            return value
        found = self._delete(self._root, subject, 0, lambda replacement: setattr(self, "_root", replacement))
        if found is None:
            return default
        self._size -= 1
        return found[0]

    def _delete(self, n, subject, i, replace):
        """(value,) if subject was found below inner node n, else None; replace(node) puts a
        shrunk node in n's place."""
        if n.prefix:
            if subject[i:i + len(n.prefix)] != n.prefix:
                return None
            i += len(n.prefix)
        key = _pivot(subject, i)
        k = n.find(key)
        if k < 0:
            return None
        child = n.kids[k]
        if not isinstance(child, _Leaf):
            return self._delete(child, subject, i, lambda node: n.kids.__setitem__(k, node))
        if child.suffix != subject[i:]:
            return None
        n.remove(key)
        smaller = n.shrunk()
        if smaller is not None:
            if isinstance(smaller, _Leaf):
                smaller.suffix = n.prefix + smaller.suffix
            else:
                smaller.prefix = n.prefix + smaller.prefix
            replace(smaller)
        return (child.value,)

    def match(self, filter_subject):
        """[(subject, value)] of every subject the filter matches, in nats-server's order."""
        out = []
        if self._root is not None and filter_subject:
            self._match(self._root, "", filter_subject, filter_subject.split("."), out)
        return out

    def _match(self, n, path, filt, ftokens, out):
        if isinstance(n, _Leaf):
            subject = path + n.suffix
            if subject_matches(filt, subject):
                out.append((subject, n.value))
            return
        path += n.prefix
        if not _may_lead_to(path, ftokens):
            return
        for child in n.kids:
            self._match(child, path, filt, ftokens, out)


def _may_lead_to(path, ftokens):
    """Whether a subject that begins with `path` may match the filter's tokens."""
    tokens = path.split(".")
    for at, token in enumerate(tokens):
        if at >= len(ftokens):
            return False
        want = ftokens[at]
        if want == ">":
            return True
        if want == "*":
            continue
        if at < len(tokens) - 1:
            if token != want:
                return False
        elif not want.startswith(token):
            return False
    return True
