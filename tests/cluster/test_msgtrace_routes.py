"""Message tracing across a route: the server the client published to traces its egress to
the route as hop 1 (`Nats-Trace-Hop`, `hops` in its event) and the other server sends an event
of its own for that hop. Every pairing of natsd and nats-server (both ways mixed) gives the
events nats-server gives between two nats-servers (times, ids and server info masked)."""

import pytest

from tests.core.test_msgtrace import _hdr, _traced_between
from tests.support.cluster import start_member, wait_interest, wait_mesh

PAIRS = [("nats-server", "nats-server"), ("natsd", "natsd"), ("natsd", "nats-server"),
         ("nats-server", "natsd")]


def _traced_across(tmp_path, kind_a, kind_b, only):
    a = start_member(kind_a, tmp_path, "A")
    b = start_member(kind_b, tmp_path, "B", routes=[a.route_url])
    try:
        wait_mesh([a, b])

        def interest_arrived():
            wait_interest([a], "foo")
            wait_interest([b], "tr")
        return _traced_between(a.proc.port, b.proc.port, only, interest_arrived)
    finally:
        for m in (a, b):
            m.proc.kill()


@pytest.mark.parametrize("only", [False, True], ids=["delivered", "trace-only"])
@pytest.mark.parametrize("kind_a,kind_b", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_a_trace_across_a_route(tmp_path, kind_a, kind_b, only):
    events, delivered = _traced_across(tmp_path, kind_a, kind_b, only)
    header = {"Nats-Trace-Dest": ["tr"]}
    if only:
        header["Nats-Trace-Only"] = ["true"]
    assert events == [
        {"request": {"header": header, "msgsize": len(_hdr(*[(k, v[0]) for k, v in header.items()])) + 5},
         "hops": 1,
         "events": [{"type": "in", "kind": 0, "name": "pubber", "acc": "$G", "subj": "foo"},
                    {"type": "eg", "kind": 1, "name": "B", "hop": "1"}]},
        {"request": {"header": dict(header, **{"Nats-Trace-Hop": ["1"]}),
                     "msgsize": len(_hdr(*[(k, v[0]) for k, v in header.items()], ("Nats-Trace-Hop", "1"))) + 5},
         "events": [{"type": "in", "kind": 1, "name": "A", "acc": "$G", "subj": "foo"},
                    {"type": "eg", "kind": 0, "name": "subber", "sub": "foo"}]}]
    assert delivered == ([] if only else [_hdr(*[(k, v[0]) for k, v in header.items()], ("Nats-Trace-Hop", "1"))])
