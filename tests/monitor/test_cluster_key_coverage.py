"""Monitoring on a JetStream cluster with TLS on every port, natsd against nats-server 2.15.1.

Three servers of each kind, one certificate authority for both (so certificate expiry dates
and the client certificate's hashes are the same), TLS on the client, route, leaf node and
WebSocket ports, a system account, an R3 stream with a mirror and a durable consumer, an R3
KV bucket, a TLS client with a certificate. Every monitoring endpoint, `$SYS` ping and
JetStream info below is asked of all three servers; the answers of a cluster are merged
(monitoring.union: which server leads what changes from run to run) and must have every key
nats-server's have, with the same JSON types. Then the values that do not depend on timing:
TLS and auth timeouts, certificate dates and hashes, leaders counted across the cluster,
stream alternates, the Raft groups an account has, and who answers a filtered ping.
"""
import asyncio
import json
import re
import ssl

import nats
import pytest

from tests.support.certs import CA
from tests.support.cluster import js_cluster
from tests.support.monitoring import differences, every_answer, fold, union
from tests.support.waiting import poll, until
from tests.support.servers import http_status_json

ACCOUNTS = ('accounts { A { jetstream: enabled, users: [{user: a, password: a}] }, '
            'SYS { users: [{user: s, password: s}] } }\nsystem_account: SYS\nserver_tags: ["az:%s"]\n')

HTTP = ["/varz", "/jsz", "/jsz?accounts=1&streams=1&consumers=1&config=1&raft=1",
        "/jsz?acc=A&streams=1&consumers=1&config=1&raft=1", "/healthz?details=1", "/raftz",
        "/raftz?acc=A", "/routez", "/routez?subs=detail", "/leafz", "/connz?subs=detail&auth=1",
        "/accountz?acc=A", "/accstatz"]
SYS = [("$SYS.REQ.SERVER.PING.JSZ", {"accounts": True, "streams": True, "consumers": True, "config": True,
                                     "raft": True}),
       ("$SYS.REQ.SERVER.PING.VARZ", {}), ("$SYS.REQ.SERVER.PING.STATSZ", {}),
       ("$SYS.REQ.SERVER.PING.CONNZ", {"auth": True, "subscriptions_detail": True}),
       ("$SYS.REQ.SERVER.PING.ROUTEZ", {"subscriptions_detail": True}),
       ("$SYS.REQ.SERVER.PING.HEALTHZ", {"details": True}), ("$SYS.REQ.SERVER.PING.RAFTZ", {}),
       ("$SYS.REQ.ACCOUNT.A.JSZ", {"streams": True, "consumers": True, "config": True, "raft": True}),
       ("$SYS.REQ.ACCOUNT.A.CONNZ", {"auth": True}),
       ("$SYS.REQ.ACCOUNT.PING.STATZ", {"accounts": ["A"]})]
JS_API = ["$JS.API.INFO", "$JS.API.STREAM.INFO.S", "$JS.API.STREAM.INFO.M", "$JS.API.CONSUMER.INFO.S.D",
          "$JS.API.CONSUMER.LIST.S", "$JS.API.STREAM.LIST", "$JS.API.STREAM.INFO.KV_K"]
# ($JS.API.ACCOUNT.INFO is left out: nats-server 2.15.1 does not answer it on this cluster,
# whose servers have tags)
# /healthz questions whose answers (status and body) must be nats-server's on every server
HEALTH = ["/healthz", "/healthz?details=true", "/healthz?js-server-only=true", "/healthz?js-meta-only=true",
          "/healthz?account=A", "/healthz?account=A&stream=S", "/healthz?account=A&stream=S&consumer=D",
          "/healthz?account=A&stream=NOPE", "/healthz?account=A&stream=S&consumer=NOPE",
          "/healthz?account=NOPE&details=1", "/healthz?account=A&stream=NOPE&details=1",
          "/healthz?account=A&stream=S&consumer=NOPE&details=true", "/healthz?stream=S",
          "/healthz?stream=S&details=true", "/healthz?consumer=D&account=A"]
# Filtered pings: the body, and which servers answer (by name)
FILTERS = [({"server_name": "B"}, {"B"}), ({"server_name": "b"}, set()), ({"cluster": "C"}, {"A", "B", "C"}),
           ({"cluster": "C", "exact_match": True}, set()), ({"server_name": "C", "exact_match": True}, {"C"}),
           ({"tags": ["az:A"]}, {"A"}), ({"tags": ["AZ:a"]}, {"A"}), ({"tags": ["az:A", "az:B"]}, set()),
           ({"host": "127.0"}, {"A", "B", "C"}), ({"domain": "elsewhere"}, set())]


def _raft_groups_by_kind(answer):
    """/raftz keys its groups by their names, random on both sides: key them by their kind
    (the name's first letters: "_meta_", "S" a stream's) instead. nats-server's consumer groups
    ("C") are left out: natsd's consumers ride in their stream's group."""
    out = {}
    for acc, groups in answer.items():
        kinds = out.setdefault(acc, {})
        for name, group in groups.items():
            kind = name.split("-", 1)[0]
            if kind != "C":
                kinds[kind] = fold(kinds.get(kind), group)
    return out


async def _scenario(members, ctx):
    out = {}
    nc = await nats.connect(members[0].url.replace("nats://", "tls://"), user="a", password="a", tls=ctx)
    js = nc.jetstream(timeout=20)         # an R3 create waits for its group's first election
    await js.add_stream(name="S", subjects=["s.>"], num_replicas=3)
    await js.add_stream(name="M", mirror={"name": "S"}, num_replicas=3)
    for i in range(10):
        await js.publish("s.%d" % i, b"x")
    await js.add_consumer("S", durable_name="D", ack_policy="explicit")
    kv = await js.create_key_value(bucket="K", history=3, replicas=3)
    await kv.put("a", b"1")
    sub = await js.pull_subscribe("s.>", "D", stream="S")
    for m in await sub.fetch(3):
        await m.ack_sync()

    async def mirrored():
        return (await js.stream_info("M")).state.messages >= 10
    await until(mirrored, 10)

    async def caught_up():
        """Every replica of every stream current: `lag` (omitempty) is there only while a
        replica is behind, and the answers below are taken once neither cluster has one."""
        for name in json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=5)).data)["streams"]:
            info = json.loads((await nc.request("$JS.API.STREAM.INFO." + name, b"", timeout=5)).data)
            if any(r.get("lag") or not r.get("current") for r in info.get("cluster", {}).get("replicas") or []):
                return False
        return True
    await until(caught_up, 20)
    for subject in JS_API:
        try:
            out["api " + subject] = [json.loads((await nc.request(subject, b"", timeout=5)).data)]
        except nats.errors.TimeoutError:
            raise AssertionError("%s: no answer to %s" % (members[0].kind, subject))
    sc = await nats.connect(members[1].url.replace("nats://", "tls://"), user="s", password="s", tls=ctx)
    for subject, body in SYS:
        out["sys " + subject] = await every_answer(sc, subject, body, 1.0, most=len(members))
    for body, _ in FILTERS:
        out["filter " + json.dumps(body)] = sorted(
            r["server"]["name"] for r in await every_answer(sc, "$SYS.REQ.SERVER.PING.VARZ", body))
    for path in HTTP:
        out["http " + path] = [m.get(path) for m in members]
    for path in HEALTH:
        out["health " + path] = [http_status_json(m.proc.http_port, path) for m in members]
    out["sys health"] = [r["data"] for r in await every_answer(
        sc, "$SYS.REQ.SERVER.PING.HEALTHZ", {"account": "A", "stream": "NOPE", "details": True},
        most=len(members))]
    await nc.close()
    await sc.close()
    return out


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """kind -> {question: [answers]} from a TLS JetStream cluster of each kind."""
    tmp = tmp_path_factory.mktemp("tlscluster")
    ca = CA(str(tmp / "pki"))
    cert, key = ca.server_cert()
    ccert, ckey = ca.issue("client", "client", server=False)
    verified = 'tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true, timeout: 3 }' % (
        cert, key, ca.ca_file)
    plain = 'tls { cert_file: "%s", key_file: "%s", ca_file: "%s" }' % (cert, key, ca.ca_file)
    ctx = ssl.create_default_context(cafile=ca.ca_file)
    ctx.load_cert_chain(ccert, ckey)
    out = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp / kind, cluster_extra=verified,
                        extra=lambda n: (ACCOUNTS % n + verified + "\nleafnodes { port: -1\n %s }\n" % plain
                                         + "websocket { port: -1\n %s }\n" % plain)) as members:
            assert poll(lambda: all((m.get("/jsz").get("meta_cluster") or {}).get("leader") for m in members),
                        timeout=30), "%s: no meta leader" % kind
            out[kind] = asyncio.run(_scenario(members, ctx))
    return out


QUESTIONS = (["api " + s for s in JS_API] + ["sys " + s for s, _ in SYS] + ["http " + p for p in HTTP])

# Keys that depend on which server leads when the answers were taken, even merged: only a
# group's leader tells when it last heard from a peer and what it replicated to it, so the
# peer that led has neither, on any server.
TIMING = re.compile(r"^missing: .*\.peers\.[^.]+\.(last_replicated_index|last_seen)$")


def _shape(answers, question):
    got = answers[question]
    if "RAFTZ" in question:
        got = [dict(a, data=_raft_groups_by_kind(a.get("data") or {})) for a in got]
    elif "raftz" in question:
        got = [_raft_groups_by_kind(a) for a in got]
    return union(got)


@pytest.mark.parametrize("question", QUESTIONS)
def test_keys_and_types_match_nats_server(answers, question):
    ref, mine = _shape(answers["nats-server"], question), _shape(answers["natsd"], question)
    diffs = [d for d in differences(ref, mine) if not TIMING.match(d)]
    assert not diffs, "%s: natsd differs from nats-server:\n  %s" % (question, "\n  ".join(diffs))


def test_as_many_servers_answer(answers):
    for question in ("sys " + s for s, _ in SYS):
        assert len(answers["natsd"][question]) == len(answers["nats-server"][question]), question


def _varz(answers, kind):
    return answers[kind]["http /varz"][0]


def test_tls_and_auth_figures_in_varz(answers):
    ref, mine = _varz(answers, "nats-server"), _varz(answers, "natsd")
    for key in ("tls_required", "tls_verify", "auth_timeout", "tls_timeout", "tls_cert_not_after"):
        assert mine.get(key) == ref.get(key), key
    assert ref["auth_timeout"] == 4                     # TLS timeout 3 s + 1 s
    for block, keys in (("cluster", ("auth_timeout", "tls_timeout", "tls_required", "tls_verify",
                                     "tls_cert_not_after")),
                        ("leaf", ("host", "auth_timeout", "tls_timeout", "tls_required", "tls_verify",
                                  "tls_cert_not_after")),
                        ("websocket", ("host", "tls_cert_not_after", "no_tls", "compression"))):
        for key in keys:
            assert mine[block].get(key) == ref[block].get(key), (block, key)
    # the client URLs of all three servers, ours first
    assert len(mine["connect_urls"]) == len(ref["connect_urls"]) == 3
    assert mine["connect_urls"][0].endswith(":%d" % mine["port"])
    assert len(mine["ws_connect_urls"]) == len(ref["ws_connect_urls"])


def test_client_certificates_in_connz(answers):
    def tls(kind):
        for server in answers[kind]["http /connz?subs=detail&auth=1"]:
            for c in server["connections"]:
                if c.get("authorized_user") == "a":
                    return c["tls_version"], c["tls_cipher_suite"], c["tls_peer_certs"]
    assert tls("natsd") == tls("nats-server")
    assert [c["subject"] for c in tls("natsd")[2]] == ["CN=client", "CN=natsd test CA"]


def test_leaders_counted_across_the_cluster(answers):
    def total(kind, key):
        return sum(s.get(key, 0) for s in answers[kind]["http /jsz?accounts=1&streams=1&consumers=1&config=1&raft=1"])
    for key in ("streams_leader", "consumers_leader"):
        assert total("natsd", key) == total("nats-server", key) > 0, key


def test_stream_alternates_name_the_mirror(answers):
    def alternates(kind, stream):
        info = answers[kind]["api $JS.API.STREAM.INFO." + stream][0]
        return sorted((a["name"], a["cluster"]) for a in info.get("alternates") or ())
    assert alternates("natsd", "S") == alternates("nats-server", "S") == [("M", "C1"), ("S", "C1")]
    assert alternates("natsd", "M") == alternates("nats-server", "M") == []


def test_raft_groups_by_account(answers):
    def groups(kind, path):
        out = {}
        for server in answers[kind]["http " + path]:
            for acc, gs in server.items():
                out.setdefault(acc, set()).update(g.split("-", 1)[0] for g in gs)
        return out
    # the stream's group ("S-...") and its durable consumer's own ("C-...",
    # natsd/jetstream/replicated/consumergroup.py), in the stream's account
    assert groups("natsd", "/raftz?acc=A") == groups("nats-server", "/raftz?acc=A") == {"A": {"S", "C"}}
    assert groups("natsd", "/raftz") == groups("nats-server", "/raftz") == {"SYS": {"_meta_"}}


@pytest.mark.parametrize("body,servers", FILTERS, ids=[json.dumps(b) for b, _ in FILTERS])
def test_filtered_pings(answers, body, servers):
    key = "filter " + json.dumps(body)
    assert answers["nats-server"][key] == sorted(servers)
    assert answers["natsd"][key] == sorted(servers)


def test_every_replica_shows_the_consumer(answers):
    """nats-server's followers count and show their replicas of a consumer; natsd's, which do
    not run it, show it as its last committed state has it."""
    for kind in ("nats-server", "natsd"):
        assert [s["consumers"] for s in answers[kind]["http /jsz"]] == [1, 1, 1], kind
        for server in answers[kind]["http /jsz?accounts=1&streams=1&consumers=1&config=1&raft=1"]:
            stream = next(s for s in server["account_details"][0]["stream_detail"] if s["name"] == "S")
            assert [(c["name"], c["delivered"]["consumer_seq"], c["ack_floor"]["consumer_seq"])
                    for c in stream["consumer_detail"]] == [("D", 3, 3)], kind


@pytest.mark.parametrize("path", HEALTH)
def test_health_checks_answer_as_nats_server(answers, path):
    assert answers["natsd"]["health " + path] == answers["nats-server"]["health " + path]


def test_health_check_by_sys_request(answers):
    assert answers["natsd"]["sys health"] == answers["nats-server"]["sys health"]
    assert answers["natsd"]["sys health"][0]["status_code"] == 404
