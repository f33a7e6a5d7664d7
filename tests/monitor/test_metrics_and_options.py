"""/metrics (Prometheus text format, values agreeing with /varz) and the options API shared by
HTTP queries and $SYS request bodies."""
import pytest
from prometheus_client.parser import text_string_to_metric_families

from natsd.monitor import accountz, connz, endpoints, jsz, leafz, metrics, routez, subsz
from natsd.monitor import params as P
from tests.support.servers import get_json, http_get


def families(port):
    status, ctype, body = http_get(port, "/metrics")
    assert status == 200
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    lines = body.splitlines()
    names = [l.split()[2] for l in lines if l.startswith("# TYPE")]
    assert names == [l.split()[2] for l in lines if l.startswith("# HELP")]
    assert all(n.startswith("natsd_") for n in names)
    return {f.name: f for f in text_string_to_metric_families(body)}


def value(fams, name, **labels):
    for s in fams[name].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created"):
            return s.value
    raise KeyError((name, labels))


def test_metrics_match_varz(pair):
    port = pair.natsd.http_port
    varz = get_json(port, "/varz")
    fams = families(port)
    assert fams["natsd_connections"].type == "gauge"
    assert fams["natsd_in_msgs"].type == "counter"
    for metric, key in (("natsd_connections", "connections"),
                        ("natsd_accepted_connections", "total_connections"),
                        ("natsd_subscriptions", "subscriptions"), ("natsd_in_msgs", "in_msgs"),
                        ("natsd_out_msgs", "out_msgs"), ("natsd_in_bytes", "in_bytes"),
                        ("natsd_out_bytes", "out_bytes"), ("natsd_slow_consumers", "slow_consumers"),
                        ("natsd_stale_connections", "stale_connections")):
        assert value(fams, metric) == varz[key], metric
    info = fams["natsd_info"].samples[0]
    assert info.labels == {"server_id": varz["server_id"], "server_name": varz["server_name"],
                           "version": varz["version"]}
    assert value(fams, "natsd_memory_rss_bytes") > 0
    assert value(fams, "natsd_uptime_seconds") >= 0
    assert value(fams, "natsd_connections_by_kind", kind="Client") == varz["connections"]
    acc = get_json(port, "/accountz?acc=$G")["account_detail"]
    assert value(fams, "natsd_account_connections", account="$G") == acc["client_connections"]
    assert value(fams, "natsd_account_subscriptions", account="$G") == acc["subscriptions"]
    # no JetStream, no leaf nodes: nothing is emitted for them
    assert not any(n.startswith(("natsd_jetstream", "natsd_stream", "natsd_consumer")) for n in fams)
    assert value(fams, "natsd_http_requests", path="/varz") >= 1


def test_metrics_render_escaping():
    f = metrics.Family("natsd_x", "gauge", 'help with \\ and\nnewline').add(
        1.5, account='we"ird\\acc\nname')
    c = metrics.Family("natsd_y", "counter", "a counter").add(3)
    text = metrics.render([f, c]).decode()
    assert '# HELP natsd_x help with \\\\ and\\nnewline' in text
    assert 'natsd_x{account="we\\"ird\\\\acc\\nname"} 1.5' in text
    assert "# TYPE natsd_y_total counter\nnatsd_y_total 3\n" in text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["natsd_x"].samples[0].labels["account"] == 'we"ird\\acc\nname'
    assert fams["natsd_y"].samples[0].value == 3


def test_register_collector_and_absent_features():
    def leaf_collector(server):
        yield metrics.Family("natsd_leaf_test", "gauge", "test").add(7)
    metrics.register_collector(leaf_collector)
    try:
        assert leaf_collector in metrics.COLLECTORS
    finally:
        metrics.COLLECTORS.remove(leaf_collector)


# ---- the same options from a query string and from a $SYS JSON body ----

EQUIVALENT = [
    (connz, {"sort": "msgs_to", "auth": "1", "subs": "detail", "offset": "2", "limit": "5",
             "cid": "7", "state": "closed", "user": "u", "acc": "A"},
     {"sort": "msgs_to", "auth": True, "subscriptions_detail": True, "offset": 2, "limit": 5,
      "cid": 7, "state": 1, "user": "u", "acc": "A", "server_name": "ignored"}),
    (connz, {"subs": "true", "state": "any"}, {"subscriptions": True, "state": 2}),
    (subsz, {"subs": "1", "offset": "1", "limit": "3", "test": "a.b", "acc": "A"},
     {"subscriptions": True, "offset": 1, "limit": 3, "test": "a.b", "account": "A"}),
    (leafz, {"subs": "true", "acc": "A"}, {"subscriptions": True, "account": "A"}),
    (routez, {"subs": "detail"}, {"subscriptions_detail": True}),
    (accountz, {"acc": "A"}, {"account": "A"}),
    (jsz, {"acc": "A", "accounts": "1", "streams": "1", "consumers": "1", "direct-consumers": "1",
           "config": "1", "leader-only": "1", "offset": "2", "limit": "9", "raft": "1",
           "stream-leader-only": "1"},
     {"account": "A", "accounts": True, "streams": True, "consumer": True, "direct_consumer": True,
      "config": True, "leader_only": True, "offset": 2, "limit": 9, "raft": True,
      "stream_leader_only": True}),
]


@pytest.mark.parametrize("mod,query,body", EQUIVALENT)
def test_query_and_json_give_same_options(mod, query, body):
    assert mod.options_from_query(query) == mod.options_from_json(body)


def test_other_endpoint_options():
    assert accountz.accstatz_options_from_query({"accs": "A,B", "unused": "1"}) == \
        accountz.accstatz_options_from_json({"accounts": ["A", "B"], "include_unused": True})
    assert routez.gatewayz_options_from_query({"gw_name": "g", "acc_name": "A", "subs": "1"}) == \
        routez.gatewayz_options_from_json({"name": "g", "accounts": True, "account_name": "A",
                                           "subscriptions": True})


@pytest.mark.parametrize("mod,body", [(connz, {"limit": "ten"}), (connz, {"auth": 1}),
                                      (subsz, {"subscriptions": "yes"}), (jsz, {"offset": 1.5}),
                                      (connz, {"cid": -1})])
def test_json_type_errors(mod, body):
    with pytest.raises(P.OptionsError) as e:
        mod.options_from_json(body)
    assert e.value.status == 400 and e.value.message.startswith("json: cannot unmarshal")


def test_sys_handler_scopes_accounts():
    # endpoints.sys_handler runs in-process; check the wiring on a stub server
    class Acc:
        def __init__(self, name):
            self.name = name
    seen = {}
    ep = endpoints.get("connz")
    orig = ep.handler
    object.__setattr__(ep, "handler", lambda server, opts: seen.setdefault("opts", opts) and {})
    try:
        endpoints.sys_handler("CONNZ")(None, {"subscriptions": True}, Acc("A"))
    finally:
        object.__setattr__(ep, "handler", orig)
    assert seen["opts"].account == "A" and seen["opts"].subscriptions
    assert endpoints.sys_handler("NOPE") is None
    assert {e.name for e in endpoints.ENDPOINTS} >= {"varz", "connz", "subsz", "routez", "gatewayz",
                                                     "leafz", "accountz", "accstatz", "jsz",
                                                     "healthz", "metrics"}


def test_landing_page_and_alias(pair):
    status, ctype, body = http_get(pair.natsd.http_port, "/")
    assert status == 200
    for p in ("connz", "subsz", "accountz", "accstatz", "routez", "gatewayz", "leafz", "jsz",
              "healthz", "varz", "metrics"):
        assert p in body
    assert get_json(pair.natsd.http_port, "/subscriptionsz")["server_id"]


@pytest.mark.parametrize("nanos,text", [(0, "0s"), (999, "999ns"), (487000, "487µs"),
                                        (1500, "1.5µs"), (1227311, "1.227311ms"),
                                        (1500000000, "1.5s"), (62500000000, "1m2.5s"),
                                        (3600 * 10 ** 9, "1h0m0s"), (-2000, "-2µs")])
def test_go_duration(nanos, text):
    assert P.go_duration(nanos) == text


@pytest.mark.parametrize("secs,text", [(0, "0s"), (59.9, "59s"), (61, "1m1s"), (3661, "1h1m1s"),
                                       (90061, "1d1h1m1s"), (365 * 86400 + 1, "1y0d0h0m1s")])
def test_my_uptime(secs, text):
    assert P.my_uptime(secs) == text


def test_rfc3339_trims_like_go():
    assert P.now_rfc3339(0) == "1970-01-01T00:00:00Z"
    assert P.now_rfc3339(1.5) == "1970-01-01T00:00:01.5Z"
