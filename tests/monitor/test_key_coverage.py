"""Every monitoring endpoint and `$SYS.REQ` service of natsd against nats-server 2.15.1, on a
JetStream server with a system account, a stream, a consumer, a client with subscriptions, a
closed connection and a leaf node (`full_pair`): every key nats-server returns must be there,
and every value both return must have the same JSON type (see tests/support/monitoring.py).

Nothing is left out except the keys in ALLOW (each with its reason)."""
import json
import time

import pytest

from tests.support.monitoring import assert_same_shape, differences
from tests.support.servers import get_json

# Paths nats-server returns that natsd may leave out, each with its reason. Only keys that
# nats-server returns in a clustered or TLS configuration may be listed; this configuration has
# neither, so there are none.
ALLOW = frozenset()

SORTS = ["cid", "start", "subs", "pending", "msgs_to", "msgs_from", "bytes_to", "bytes_from",
         "last", "idle", "uptime", "rtt"]

HTTP_PATHS = (
    ["/varz",
     "/connz", "/connz?subs=1", "/connz?subs=detail", "/connz?auth=1", "/connz?auth=1&subs=detail",
     "/connz?state=closed", "/connz?state=closed&subs=detail&auth=1", "/connz?state=all",
     "/connz?state=any&subs=1&auth=1", "/connz?state=closed&sort=stop",
     "/connz?state=closed&sort=reason", "/connz?acc=A&auth=1", "/connz?user=a&auth=1",
     "/connz?limit=1&offset=1"] +
    ["/connz?sort=" + s for s in SORTS] +
    ["/routez", "/routez?subs=1", "/routez?subs=detail",
     "/gatewayz", "/gatewayz?accs=1", "/gatewayz?subs=1",
     "/leafz", "/leafz?subs=1", "/leafz?acc=A",
     "/subsz", "/subsz?subs=1", "/subsz?subs=1&test=foo.x", "/subsz?subs=1&acc=A", "/subsz?acc=A",
     "/subscriptionsz?subs=1",
     "/accountz", "/accountz?acc=A", "/accountz?acc=SYS",
     "/accstatz", "/accstatz?unused=1",
     "/jsz", "/jsz?accounts=1", "/jsz?streams=1", "/jsz?consumers=1", "/jsz?config=1",
     "/jsz?accounts=1&streams=1&consumers=1&config=1", "/jsz?acc=A",
     "/jsz?acc=A&streams=1&consumers=1&config=1", "/jsz?direct-consumers=1&consumers=1",
     "/healthz", "/healthz?js-enabled-only=true", "/healthz?js-server-only=true",
     "/healthz?details=true", "/healthz?js-enabled-only=true&details=true",
     "/healthz?account=A&stream=S&consumer=C",
     "/ipqueuesz", "/debug/vars"])


def settled(fetch, what, tries=5):
    """Compare fetch() -> (natsd, nats-server); /ipqueuesz lists the queues busy at that very
    instant (nats-server's send queue, say, while a STATSZ goes out), so such answers are asked
    again a few times before a difference counts."""
    for i in range(tries if "ipqueuesz" in what.lower() else 1):
        mine, ref = fetch()
        if not differences(ref, mine, ALLOW):
            break
        time.sleep(0.1)
    assert_same_shape(ref, mine, ALLOW, what)
    return mine, ref


@pytest.mark.parametrize("path", HTTP_PATHS)
def test_http_endpoint_keys_and_types(full_pair, path):
    settled(lambda: full_pair.both(path), path)


def test_connz_by_cid(full_pair):
    got = []
    for srv in (full_pair.natsd, full_pair.ref):
        cid = [c for c in get_json(srv.http_port, "/connz")["connections"]
               if c.get("name") == "app"][0]["cid"]
        got.append(get_json(srv.http_port, "/connz?cid=%d&subs=detail&auth=1" % cid))
    assert got[0]["num_connections"] == got[1]["num_connections"] == 1
    assert_same_shape(got[1], got[0], ALLOW, "/connz?cid=")


# Answers that are not a JSON object: status, content type and (where fixed) the body.
@pytest.mark.parametrize("path,same_body", [("/raftz", True), ("/expvarz", True),
                                            ("/stacksz", False)])
def test_http_non_json_endpoints(full_pair, path, same_body):
    (ms, mct, mb), (rs, rct, rb) = full_pair.raw(path)
    assert (ms, mct) == (rs, rct), path
    if same_body:
        assert mb == rb
    else:
        assert mb


def test_ipqueuesz_all_lists_queues_like_nats_server(full_pair):
    """Queue names are the server's own; every entry has nats-server's entry shape."""
    mine, ref = full_pair.both("/ipqueuesz?all=1")
    assert mine and ref
    sample = next(iter(ref.values()))
    for name, q in mine.items():
        assert not differences(sample, q), name


SERVER_SERVICES = ["VARZ", "CONNZ", "SUBSZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ", "JSZ",
                   "HEALTHZ", "STATSZ", "IDZ", "PROFILEZ", "EXPVARZ", "IPQUEUESZ", "RAFTZ"]
ACCOUNT_SERVICES = ["CONNZ", "LEAFZ", "SUBSZ", "JSZ", "INFO", "CONNS", "STATZ"]

SYS_REQUESTS = (
    [("$SYS.REQ.SERVER.PING", "")] +
    [("$SYS.REQ.SERVER.PING." + s, "") for s in SERVER_SERVICES] +
    [("$SYS.REQ.SERVER.{id}." + s, "") for s in SERVER_SERVICES] +
    [("$SYS.REQ.ACCOUNT.A." + s, "") for s in ACCOUNT_SERVICES] +
    [("$SYS.REQ.SERVER.PING.CONNZ", '{"subscriptions": true}'),
     ("$SYS.REQ.SERVER.PING.CONNZ", '{"subscriptions_detail": true, "auth": true}'),
     ("$SYS.REQ.SERVER.PING.CONNZ", '{"state": 1, "subscriptions_detail": true, "auth": true}'),
     ("$SYS.REQ.SERVER.PING.CONNZ", '{"acc": "A", "sort": "msgs_to"}'),
     ("$SYS.REQ.SERVER.PING.SUBSZ", '{"subscriptions": true}'),
     ("$SYS.REQ.SERVER.PING.SUBSZ", '{"subscriptions": true, "account": "A", "test": "foo.x"}'),
     ("$SYS.REQ.SERVER.PING.ROUTEZ", '{"subscriptions": true}'),
     ("$SYS.REQ.SERVER.PING.GATEWAYZ", '{"accounts": true}'),
     ("$SYS.REQ.SERVER.PING.LEAFZ", '{"subscriptions": true}'),
     ("$SYS.REQ.SERVER.PING.ACCOUNTZ", '{"account": "A"}'),
     ("$SYS.REQ.SERVER.PING.JSZ",
      '{"accounts": true, "streams": true, "consumer": true, "config": true}'),
     ("$SYS.REQ.SERVER.PING.HEALTHZ", '{"js-enabled-only": true, "details": true}'),
     ("$SYS.REQ.SERVER.PING.HEALTHZ", '{"account": "A", "stream": "S", "consumer": "C"}'),
     ("$SYS.REQ.SERVER.PING.PROFILEZ", '{"name": "nope"}'),
     ("$SYS.REQ.SERVER.PING.RAFTZ", '{"account": "A"}'),
     ("$SYS.REQ.ACCOUNT.A.JSZ", '{"streams": true, "consumer": true, "config": true}'),
     ("$SYS.REQ.ACCOUNT.A.CONNZ", '{"subscriptions_detail": true, "auth": true}'),
     ("$SYS.REQ.ACCOUNT.PING.STATZ", ""), ("$SYS.REQ.ACCOUNT.PING.CONNZ", ""),
     ("$SYS.REQ.USER.INFO", ""), ("$SYS.REQ.USER.A.INFO", "")])


@pytest.mark.parametrize("subject,body", SYS_REQUESTS)
def test_sys_service_keys_and_types(full_pair, subject, body):
    settled(lambda: full_pair.sys_both(subject, body.encode()), "%s %s" % (subject, body))


@pytest.mark.parametrize("subject", ["$SYS.REQ.USER.INFO", "$SYS.REQ.USER.A.INFO", "$SYS.REQ.USER.NONE.INFO"])
def test_user_info_asked_directly_tells_of_the_requester(full_pair, subject):
    mine, ref = full_pair.sys_both(subject)
    assert mine["data"] == ref["data"]


def test_ipqueuesz_sys_lists_the_request_in_progress(full_pair):
    mine, ref = settled(lambda: full_pair.sys_both("$SYS.REQ.SERVER.PING.IPQUEUESZ"), "IPQUEUESZ")
    assert mine["data"] == {"System recvQ": {"pending": 0, "in_progress": 1}}
    assert ref["data"]["System recvQ"] == {"pending": 0, "in_progress": 1}


def test_varz_new_keys_values(full_pair):
    mine, ref = full_pair.both("/varz")
    assert mine["feature_flags"] == ref["feature_flags"]
    assert mine["disk_io_wait_stats"] == {"waiters": 0, "waits": 0, "wait_time": 0,
                                          "max_wait_time": 0}
    assert len(mine["git_commit"]) == 7 and int(mine["git_commit"], 16) >= 0
    # the same requests were made to both: the same endpoints are counted
    assert set(mine["http_req_stats"]) == set(ref["http_req_stats"])
    env, ref_env = full_pair.sys_both("$SYS.REQ.SERVER.PING.VARZ")
    assert env["server"]["flags"] == 1 and env["server"]["jetstream"] is True
    assert env["server"]["feature_flags"] == ref_env["server"]["feature_flags"]


def test_jsz_shows_stored_configs(full_pair):
    mine, ref = full_pair.both("/jsz?acc=A&streams=1&consumers=1&config=1")
    m, r = (z["account_details"][0]["stream_detail"][0] for z in (mine, ref))
    assert m["config"]["metadata"] == r["config"]["metadata"]
    assert m["consumer_detail"][0]["config"]["metadata"] == \
        r["consumer_detail"][0]["config"]["metadata"]


@pytest.mark.parametrize("body,count", [("dbg.x", 1), ("dbg.*", 2), ("dbg.q g", 1),
                                        ("dbg.q", 1), ("dbg.q other", 0), ("nothing", 0)])
def test_debug_subscribers(full_pair, body, count):
    """$SYS.DEBUG.SUBSCRIBERS, the system account export /accountz lists."""
    assert full_pair.sys_both("$SYS.DEBUG.SUBSCRIBERS", body.encode()) == (count, count)


def test_system_account_exports_and_imports(full_pair):
    for acc in ("A", "SYS"):
        mine, ref = full_pair.both("/accountz?acc=" + acc)
        m, r = mine["account_detail"], ref["account_detail"]
        key = lambda d: sorted(json.dumps(x, sort_keys=True) for x in d)
        assert key(m.get("exports", [])) == key(r.get("exports", [])), acc
        assert key(m["imports"]) == key(r["imports"]), acc
