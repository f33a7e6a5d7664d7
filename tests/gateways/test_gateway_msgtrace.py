"""Message tracing across a gateway: the publisher's server traces its egress to the gateway
as hop 1 and the other cluster's server sends an event of its own for that hop. natsd alone
and mixed with nats-server (each way once) gives the events two nats-servers give (times, ids
and server info masked)."""
import pytest

from tests.core.test_msgtrace import _traced_between
from tests.support.servers import nats_server_cmd
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def _traced_across(tmp_path, kind_a, kind_b, only):
    from tools.serverproc import free_port
    ga, gb = free_port(), free_port()
    a = start_gateway_server(kind_a, tmp_path / "a", "A", "CA", ga, {"CB": ["nats://127.0.0.1:%d" % gb]})
    b = start_gateway_server(kind_b, tmp_path / "b", "B", "CB", gb, {"CA": ["nats://127.0.0.1:%d" % ga]})
    try:
        wait_gateways([a, b])

        def interest_arrived():
            wait_gateway_interest([a], "CB", "foo")
            wait_gateway_interest([b], "CA", "tr")
        return _traced_between(a.proc.port, b.proc.port, only, interest_arrived)
    finally:
        for s in (a, b):
            s.proc.kill()


@pytest.mark.parametrize("only", [False, True], ids=["delivered", "trace-only"])
def test_a_trace_across_a_gateway(tmp_path, only):
    want = _traced_across(tmp_path / "ref", "nats-server", "nats-server", only)
    # natsd both sides for a delivered trace, natsd on either side of nats-server for both
    pairs = [("natsd", "natsd"), ("natsd", "nats-server")] if not only else [("nats-server", "natsd")]
    for kinds in pairs:
        assert _traced_across(tmp_path / "-".join(kinds), *kinds, only) == want, kinds
