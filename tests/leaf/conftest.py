"""The leaf tests' `pair` fixture: a hub and a leaf of the kinds a test names, linked
(tests/support/leafnodes.py)."""
import pytest

from tests.support.leafnodes import Pair, js_available


@pytest.fixture
def pair(tmp_path, natsd, request):
    """pair(hub_kind, leaf_kind, js=False) -> a linked Pair ("natsd" or "nats-server")."""
    # the reference is asked for only when a test starts one (a natsd-only pair runs without it)
    starters = {"natsd": natsd,
                "nats-server": lambda *args, **kw: request.getfixturevalue("reference")(*args, **kw)}

    def factory(hub_kind, leaf_kind, js=False, link=True, tls=False):
        if js and "natsd" in (hub_kind, leaf_kind) and not js_available():
            pytest.skip("natsd JetStream (natsd.jetstream.engine.jetstream) is not available")
        p = Pair(tmp_path, starters)
        p.write(js=js, tls=tls)
        p.start_hub(hub_kind)
        p.start_leaf(leaf_kind)
        if link:
            p.wait_linked()
        return p
    return factory
