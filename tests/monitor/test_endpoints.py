"""Monitoring endpoints of natsd against nats-server 2.15.1: same workload, same flags, then
key sets and value types (recursively, tests/support/monitoring.py), the values that must agree, query options
and malformed options. test_key_coverage.py covers every endpoint and $SYS service on a
JetStream server with a system account."""
import json

import pytest

from tests.support.monitoring import assert_same_shape
from tests.support.servers import get_json, http_get
from tests.support.waiting import poll

def by_name(connz):
    return {c.get("name"): c for c in connz["connections"]}


COMMON_PATHS = ["/varz", "/connz", "/connz?subs=1", "/connz?subs=detail&auth=1", "/connz?state=closed",
                "/connz?state=any&subs=detail", "/subsz", "/subsz?subs=1", "/subsz?subs=1&test=foo.x",
                "/accountz", "/accountz?acc=$G", "/accstatz", "/accstatz?unused=1", "/routez",
                "/routez?subs=detail", "/gatewayz", "/gatewayz?accs=1", "/leafz", "/leafz?subs=1",
                "/jsz", "/jsz?accounts=1&streams=1&consumers=1&config=1"]


@pytest.mark.parametrize("path", COMMON_PATHS)
def test_key_sets_match_nats_server(pair, path):
    mine, ref = pair.both(path)
    assert_same_shape(ref, mine, what=path)


def test_connz_values(pair):
    mine, ref = pair.both("/connz?subs=detail")
    for z in (mine, ref):
        assert (z["num_connections"], z["total"], z["offset"], z["limit"]) == (3, 3, 0, 1024)
    m, r = by_name(mine), by_name(ref)
    assert set(m) == set(r) == {"alpha", "beta", "charlie"}
    fields = ("kind", "type", "ip", "lang", "version", "subscriptions", "in_msgs", "out_msgs",
              "in_bytes", "out_bytes", "pending_bytes", "uptime")
    for name in m:
        assert {f: m[name][f] for f in fields} == {f: r[name][f] for f in fields}, name
        # "msgs" is excluded: natsd counts deliveries per subscription only with a max (UNSUB n)
        key = lambda d: sorted((s["subject"], s.get("qgroup"), s["sid"], s.get("max"))
                               for s in d["subscriptions_list_detail"])
        assert key(m[name]) == key(r[name])
        assert all(s["cid"] == m[name]["cid"] for s in m[name]["subscriptions_list_detail"])


def test_connz_subs_list(pair):
    mine, ref = pair.both("/connz?subs=1")
    for z in (mine, ref):
        assert sorted(by_name(z)["alpha"]["subscriptions_list"]) == ["bar", "baz", "foo.*"]
        assert "subscriptions_list_detail" not in by_name(z)["alpha"]
    mine, ref = pair.both("/connz")
    for z in (mine, ref):
        assert "subscriptions_list" not in by_name(z)["alpha"]


SORTS = {"cid": ["alpha", "beta", "charlie"], "start": ["alpha", "beta", "charlie"],
         "subs": ["alpha", "charlie", "beta"], "msgs_from": ["beta", "charlie", "alpha"],
         "bytes_from": ["beta", "charlie", "alpha"], "msgs_to": ["alpha", "beta", "charlie"],
         "bytes_to": ["alpha", "beta", "charlie"], "uptime": ["charlie", "beta", "alpha"]}


@pytest.mark.parametrize("sort", sorted(SORTS))
def test_connz_sort_orders(pair, sort):
    mine, ref = pair.both("/connz?sort=" + sort)
    assert [c["name"] for c in mine["connections"]] == SORTS[sort]
    assert [c["name"] for c in ref["connections"]] == SORTS[sort]


@pytest.mark.parametrize("sort", ["last", "idle", "pending", "rtt"])
def test_connz_other_sorts_accepted(pair, sort):
    mine, ref = pair.both("/connz?sort=" + sort)
    assert mine["num_connections"] == ref["num_connections"] == 3
    if sort == "last":
        lasts = [c["last_activity"] for c in mine["connections"]]
        assert lasts == sorted(lasts, reverse=True)


def test_connz_limit_offset(pair):
    mine, ref = pair.both("/connz?limit=1&offset=1")
    for z in (mine, ref):
        assert (z["num_connections"], z["total"], z["limit"], z["offset"]) == (1, 3, 1, 1)
        assert z["connections"][0]["name"] == "beta"
    mine, ref = pair.both("/connz?offset=10")
    for z in (mine, ref):
        assert (z["num_connections"], z["total"], z["connections"]) == (0, 3, [])
    mine, ref = pair.both("/connz?limit=-5&offset=-3")      # both fall back to the defaults
    for z in (mine, ref):
        assert (z["limit"], z["offset"], z["num_connections"]) == (1024, 0, 3)


def test_connz_cid(pair):
    for srv in (pair.natsd, pair.ref):
        beta = by_name(get_json(srv.http_port, "/connz"))["beta"]
        z = get_json(srv.http_port, "/connz?cid=%d" % beta["cid"])
        assert z["limit"] == 1 and z["num_connections"] == 1
        assert z["connections"][0]["name"] == "beta"
        z = get_json(srv.http_port, "/connz?cid=99999&state=any")
        assert z["num_connections"] == 0 and z["connections"] == []


def test_connz_closed(pair):
    mine, ref = pair.both("/connz?state=closed&subs=1")
    for z in (mine, ref):
        gamma = by_name(z)["gamma"]
        assert gamma["reason"] == "Client Closed"
        assert "stop" in gamma and gamma["subscriptions"] == 0
    mine, ref = pair.both("/connz?state=any")
    for z in (mine, ref):
        assert z["total"] == 4 and {"alpha", "beta", "charlie", "gamma"} == set(by_name(z))
    for sort in ("stop", "reason"):
        mine, ref = pair.both("/connz?state=closed&sort=" + sort)
        assert mine["num_connections"] == ref["num_connections"] == 1
    # a client that leaves now is listed as closed, most recent first by stop time
    wl = pair.natsd_work

    async def delta():
        nc = await wl._connect("delta")
        await nc.subscribe("d.1")
        await nc.subscribe("d.2", queue="g")
        await nc.publish("nowhere", b"x")
        await nc.flush()
        await nc.close()
    wl.loop.run(delta())
    assert poll(lambda: "delta" in by_name(get_json(pair.natsd.http_port, "/connz?state=closed")))
    z = get_json(pair.natsd.http_port, "/connz?state=closed&sort=stop&subs=detail")
    assert [c["name"] for c in z["connections"]] == ["delta", "gamma"]
    d = z["connections"][0]
    assert d["subscriptions"] == 2 and d["in_msgs"] == 1 and d["reason"] == "Client Closed"
    assert {(s["subject"], s.get("qgroup")) for s in d["subscriptions_list_detail"]} == \
        {("d.1", None), ("d.2", "g")}
    assert all(s["account"] == "$G" for s in d["subscriptions_list_detail"])
    z = get_json(pair.natsd.http_port, "/connz?state=closed&sort=reason")
    assert z["num_connections"] == 2
    assert set(by_name(get_json(pair.natsd.http_port, "/connz"))) == {"alpha", "beta", "charlie"}


MALFORMED = ["/connz?limit=abc", "/connz?offset=1.5", "/connz?sort=foo", "/connz?sort=stop",
             "/connz?sort=reason&state=any", "/connz?state=xx", "/connz?subs=x", "/connz?auth=yes",
             "/connz?cid=-1", "/connz?cid=abc", "/subsz?test=foo.*", "/subsz?limit=x",
             "/subsz?subs=maybe", "/accountz?acc=nope", "/accstatz?unused=x", "/leafz?subs=x",
             "/routez?subs=x", "/gatewayz?accs=x", "/jsz?accounts=x", "/jsz?limit=z",
             "/jsz?leader-only=1"]


@pytest.mark.parametrize("path", MALFORMED)
def test_malformed_options(pair, path):
    ms, _, mb = http_get(pair.natsd.http_port, path)
    rs, _, rb = http_get(pair.ref.http_port, path)
    assert ms == rs == 400
    assert mb == rb


def test_connz_unknown_account_is_empty(pair):
    mine, ref = pair.both("/connz?acc=nope")
    assert mine == dict(ref, now=mine["now"])


def test_subsz_values(pair):
    mine, ref = pair.both("/subsz?subs=1")
    def client_subs(srv, z):
        cids = {c["cid"] for c in get_json(srv.http_port, "/connz")["connections"]}
        return sorted((s["subject"], s.get("qgroup"), s["account"]) for s in z["subscriptions_list"]
                      if s["cid"] in cids)
    assert client_subs(pair.natsd, mine) == client_subs(pair.ref, ref)
    mine, ref = pair.both("/subsz?subs=1&test=foo.x")
    for srv, z in ((pair.natsd, mine), (pair.ref, ref)):
        assert {"foo.*", "foo.x"} <= {s["subject"] for s in z["subscriptions_list"]}
        assert all(s["subject"] in ("foo.*", "foo.x", ">") for s in z["subscriptions_list"])
    z = get_json(pair.natsd.http_port, "/subsz?subs=1&limit=2&offset=1")
    assert z["limit"] == 2 and z["offset"] == 1 and len(z["subscriptions_list"]) <= 2
    assert "subscriptions_list" not in get_json(pair.natsd.http_port, "/subsz")
    assert get_json(pair.natsd.http_port, "/subsz")["total"] == 0     # as nats-server: no list


def test_accountz_values(pair):
    mine, ref = pair.both("/accountz")
    assert sorted(mine["accounts"]) == sorted(ref["accounts"]) == ["$G", "$SYS"]
    assert mine["system_account"] == ref["system_account"] == "$SYS"
    mine, ref = pair.both("/accountz?acc=$G")
    m, r = mine["account_detail"], ref["account_detail"]
    for k in ("account_name", "expired", "complete", "jetstream_enabled",
              "leafnode_connections", "client_connections", "name_tag"):
        assert m[k] == r[k], k


def test_accstatz_values(pair):
    mine, ref = pair.both("/accstatz")
    assert [a["acc"] for a in mine["account_statz"]] == [a["acc"] for a in ref["account_statz"]]
    m, r = mine["account_statz"][0], ref["account_statz"][0]
    # natsd sums open and remembered closed connections; nats-server counts per account
    for k in ("conns", "leafnodes", "total_conns"):
        assert m[k] == r[k], k
    assert m["received"]["msgs"] >= r["received"]["msgs"]
    mine, ref = pair.both("/accstatz?unused=1")
    assert {a["acc"] for a in mine["account_statz"]} == {a["acc"] for a in ref["account_statz"]}


def test_empty_subsystems(pair):
    for path, keys in (("/routez", {"num_routes": 0, "routes": []}),
                       ("/gatewayz", {"outbound_gateways": {}, "inbound_gateways": {}}),
                       ("/leafz", {"leafnodes": 0, "leafs": []})):
        mine, ref = pair.both(path)
        assert set(mine) == set(ref), path
        for k, v in keys.items():
            assert mine[k] == ref[k] == v
    mine, ref = pair.both("/jsz")
    assert {k: v for k, v in mine.items() if k not in ("server_id", "now")} == \
        {k: v for k, v in ref.items() if k not in ("server_id", "now")}
    assert mine["server_id"] == get_json(pair.natsd.http_port, "/varz")["server_id"]


# ---- accounts and auth ----

@pytest.mark.parametrize("path", ["/connz?auth=1&subs=detail", "/connz?acc=A&auth=1",
                                  "/connz?state=closed&auth=1&subs=detail", "/accountz?acc=A",
                                  "/accountz?acc=B", "/accstatz?unused=1", "/subsz?subs=1&acc=A"])
def test_accounts_key_sets(acc_pair, path):
    mine, ref = acc_pair.both(path)
    assert_same_shape(ref, mine, what=path)


def test_connz_auth_fields(acc_pair):
    mine, ref = acc_pair.both("/connz?auth=1")
    for z in (mine, ref):
        conns = by_name(z)
        assert (conns["alpha"]["authorized_user"], conns["alpha"]["account"]) == ("a", "A")
        assert (conns["beta"]["authorized_user"], conns["beta"]["account"]) == ("b", "B")
        assert conns["alpha"]["name_tag"] == "A"
    mine, ref = acc_pair.both("/connz")
    for z in (mine, ref):
        assert "authorized_user" not in by_name(z)["alpha"]
        assert "account" not in by_name(z)["alpha"]
    for q, names in (("acc=A", {"alpha", "charlie"}), ("acc=B", {"beta"}),
                     ("user=a2&auth=1", {"charlie"})):
        mine, ref = acc_pair.both("/connz?" + q)
        assert set(by_name(mine)) == set(by_name(ref)) == names, q
    mine, ref = acc_pair.both("/connz?state=closed&acc=A&auth=1")
    for z in (mine, ref):
        assert by_name(z)["gamma"]["account"] == "A"


def test_accountz_detail_values(acc_pair):
    mine, ref = acc_pair.both("/accountz?acc=A")
    m, r = mine["account_detail"], ref["account_detail"]
    assert (m["client_connections"], m["name_tag"]) == (r["client_connections"], r["name_tag"])
    assert sorted(json.dumps(e, sort_keys=True) for e in m["exports"]) == \
        sorted(json.dumps(e, sort_keys=True) for e in r["exports"])
    assert m["mappings"] == r["mappings"]
    mine, ref = acc_pair.both("/accountz?acc=B")
    user_imports = lambda d: sorted(json.dumps(i, sort_keys=True) for i in d["imports"]
                                    if i["account"] != "$SYS")
    assert user_imports(mine["account_detail"]) == user_imports(ref["account_detail"])


def test_accstatz_accounts(acc_pair):
    mine, ref = acc_pair.both("/accstatz")
    m = {a["acc"]: a for a in mine["account_statz"]}
    r = {a["acc"]: a for a in ref["account_statz"]}
    assert set(m) == set(r) == {"A", "B"}
    for acc in m:
        assert (m[acc]["conns"], m[acc]["total_conns"]) == (r[acc]["conns"], r[acc]["total_conns"])
    z = get_json(acc_pair.natsd.http_port, "/accstatz?accs=B")       # natsd extension
    assert [a["acc"] for a in z["account_statz"]] == ["B"]
