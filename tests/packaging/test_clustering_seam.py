"""The seam between JetStream's engine and its replicated layer (natsd/jetstream/engine/
clustering.py): the replicated layer's classes provide every name the engine declares, and the
engine uses no name of theirs it has not declared. Read from the code, so a method added on
one side alone fails here."""
import inspect
import os
import re

import pytest

from natsd.jetstream.engine import clustering
from natsd.jetstream.replicated.consumers import ReplicatedConsumers
from natsd.jetstream.replicated.layer import ClusterLayer
from natsd.jetstream.replicated.listing import StreamListing
from natsd.jetstream.replicated.meta import MetaGroup
from natsd.jetstream.replicated.streams import ReplicatedStream

ENGINE = os.path.join(os.path.dirname(clustering.__file__))


def declared(protocol):
    """The names a Protocol declares: its annotated attributes and its methods."""
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")}
    return names


def provided(cls, name):
    """Whether instances of `cls` have `name`: a method or class attribute, or an attribute
    its methods assign."""
    if hasattr(cls, name):
        return True
    return re.search(r"\bself\.%s\s*(=|,[^=]*=)" % re.escape(name), inspect.getsource(cls)) is not None


SIDES = [
    (clustering.Clustering, ClusterLayer),
    (clustering.MetaGroup, MetaGroup),
    (clustering.Listing, StreamListing),
    (clustering.StreamReplica, ReplicatedStream),
    (clustering.ConsumerTable, ReplicatedConsumers),
    (clustering.ConsumerReplica, ReplicatedConsumers),
]


@pytest.mark.parametrize("protocol,cls", SIDES, ids=[p.__name__ for p, _ in SIDES])
def test_the_replicated_layer_provides_what_the_engine_declares(protocol, cls):
    assert declared(protocol), protocol
    assert sorted(n for n in declared(protocol) if not provided(cls, n)) == []


def _engine_sources():
    for f in sorted(os.listdir(ENGINE)):
        if f.endswith(".py") and f != "clustering.py":
            yield f, open(os.path.join(ENGINE, f), encoding="utf-8").read()


# what the engine calls each side by, and the Protocol that declares it
USES = [
    (r"(?:engine|self)\.cluster\.(\w+)", clustering.Clustering),
    (r"(?:engine\.|self\.|^\s+|\(|not )meta\.(\w+)", clustering.MetaGroup),
    (r"\.listing\.(\w+)", clustering.Listing),
    (r"replica\.consumers\.(\w+)", clustering.ConsumerTable),
    (r"(?:st|stream|rs)\.replica\.(\w+)", clustering.StreamReplica),
    (r"(?<!st)(?<!stream)\b(?:self|o)\.replica\.(\w+)", None),      # a stream's or a consumer's
]


def test_the_engine_uses_only_what_it_declares():
    stream_or_consumer = declared(clustering.StreamReplica) | declared(clustering.ConsumerReplica)
    undeclared = []
    for f, src in _engine_sources():
        code = "\n".join(line.split("#")[0] for line in src.splitlines())
        if f != "api.py":       # the one module that calls the meta group by a local name
            code = re.sub(r"(?<![.\w])meta\.", "stream_meta.", code)
        for pattern, protocol in USES:
            names = declared(protocol) if protocol is not None else stream_or_consumer
            for m in re.finditer(pattern, code, re.M):
                name = m.group(1)
                if name not in names:
                    undeclared.append("%s: %s" % (f, m.group(0)))
    assert undeclared == []


def test_the_reader_sees_the_engine_use_the_replicated_layer():
    # the patterns above find real uses (a broken pattern would find nothing and pass)
    found = set()
    for _, src in _engine_sources():
        for pattern, _protocol in USES:
            found |= {pattern for _ in re.finditer(pattern, src, re.M)}
    assert found == {p for p, _ in USES}
