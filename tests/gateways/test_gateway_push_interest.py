"""A push consumer in one cluster delivers to a subscriber in another: nats-server counts any
interest the gateway connection knows for the deliver subject (hasGatewayInterest: a plain or
queue subscription of the other cluster that matches it, a wildcard included), where a local
wildcard subscriber does not count. natsd/jetstream/engine/consumer.py `_has_interest`.

Cluster A (two servers with JetStream: stream S, push consumer P delivering on d.x) and
cluster B (one server, no JetStream): messages are stored while nobody listens; a wildcard
subscriber in A gets nothing; a wildcard subscriber in B then gets them all, through the
gateway. The same on an all-nats-server super-cluster, on an all-natsd one and with B a
nats-server: the same messages arrive."""
import json
import time

import pytest

from tests.support.rawclient import RawClient, parse_msgs
from tests.support.servers import nats_server_cmd
from tests.support.supercluster import start_gateway_server, wait_gateway_interest, wait_gateways
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def _take(c, n, timeout):
    data, deadline = b"", time.monotonic() + timeout
    while len(parse_msgs(data)) < n and time.monotonic() < deadline:
        data += c.read_available(quiet=0.05, timeout=max(0.05, deadline - time.monotonic()))
    return [(m[0], m[-1]) for m in parse_msgs(data)]


def _state(servers):
    out = []
    for srv in servers:
        jsz = srv.get("/jsz?consumers=true&accounts=true")
        consumers = [(st["name"], c["name"], c.get("cluster"), c.get("delivered"), c.get("push_bound"))
                     for d in jsz.get("account_details", []) for st in d.get("stream_detail", [])
                     for c in st.get("consumer_detail") or []]
        conns = [(c.get("cid"), c.get("subscriptions_list"), c.get("in_msgs"), c.get("out_msgs"))
                 for c in srv.get("/connz?subs=1").get("connections") or []]
        inbound = {k: [(i.get("connection") or {}).get("in_msgs") for i in v]
                   for k, v in (srv.get("/gatewayz").get("inbound_gateways") or {}).items()}
        out.append((srv.name, consumers, conns, inbound, srv.proc.lines[-15:]))
    return out


def scenario(tmp_path, kind_a, kind_b):
    from tools.serverproc import free_port
    gw = {"A": free_port(), "B": free_port()}
    routes = ["nats://127.0.0.1:%d" % p for p in (free_port(), free_port())]
    servers = []
    try:
        for n, route in enumerate(routes, 1):      # JetStream in cluster A: two servers
            js = "jetstream { store_dir: '%s' }" % (tmp_path / ("js%d" % n))
            servers.append(start_gateway_server(
                kind_a, tmp_path, "A%d" % n, "A", gw["A"] if n == 1 else free_port(),
                {"B": ["nats://127.0.0.1:%d" % gw["B"]]}, route_port=int(route.rsplit(":", 1)[1]),
                routes=routes, extra=js))
        b = start_gateway_server(kind_b, tmp_path, "B1", "B", gw["B"], {"A": ["nats://127.0.0.1:%d" % gw["A"]]})
        servers.append(b)
        a = servers[0]
        wait_gateways(servers, timeout=30)
        assert poll(lambda: a.get("/jsz").get("meta_cluster", {}).get("leader"), 30, 0.05)
        with RawClient(a.proc.port) as ca, RawClient(b.proc.port) as cb:
            ca.connect()
            cb.connect()
            r = ca.request(b"$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s.>"]}', timeout=5)
            assert b'"error"' not in r, r
            cfg = {"durable_name": "P", "ack_policy": "none", "deliver_subject": "d.x"}
            r = ca.request(b"$JS.API.CONSUMER.DURABLE.CREATE.S.P",
                           json.dumps({"stream_name": "S", "config": cfg}).encode(), timeout=5)
            assert b'"error"' not in r, r
            for i in range(3):
                assert b'"seq"' in ca.request(b"s.m", b"m%d" % i, timeout=5)
            ca.send(b"SUB d.* 5\r\n")                  # a local wildcard: no subscriber
            ca.sync()
            local = _take(ca, 1, 1.5)
            ca.send(b"UNSUB 5\r\n")
            ca.sync()
            cb.send(b"SUB d.* 6\r\n")                  # across the gateway: one
            # (the deliveries may come before the PONG: the consumer can answer the
            # subscription before the server reads the PING)
            early = cb.sync()
            wait_gateway_interest(servers, "B", "d.*")
            remote = [(m[0], m[-1]) for m in parse_msgs(early)] + _take(cb, 3 - len(parse_msgs(early)), 10)
            if len(remote) < 3:                 # what the servers knew, for the failure's report
                pytest.fail("%d of 3 arrived; the servers: %s" % (len(remote), json.dumps(_state(servers),
                                                                                        indent=1, default=str)))
            return local, remote
    finally:
        for srv in servers:
            srv.proc.kill()


@pytest.mark.parametrize("kinds", [("nats-server", "nats-server"), ("natsd", "natsd"), ("natsd", "nats-server")],
                         ids=["nats-server", "natsd", "natsd-A+nats-server-B"])
def test_interest_across_a_gateway_counts_for_a_push_consumer(tmp_path, kinds):
    local, remote = scenario(tmp_path, *kinds)
    assert local == []
    assert remote == [(b"s.m", b"m0"), (b"s.m", b"m1"), (b"s.m", b"m2")]     # the stored subjects
