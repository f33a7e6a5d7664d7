"""Monitoring of leaf node links over TLS and of WebSocket clients, natsd against nats-server.

For each kind: a hub whose leaf node port requires TLS with client certificates and whose
WebSocket port has compression and allowed origins, a leaf that solicits it over TLS with a
certificate, a tls timeout and a deny rule, a WebSocket client on the hub and a plain client
on the leaf. The hub's and the leaf's monitoring endpoints and the hub's `$SYS` services must
have every key nats-server's have, with the same JSON types (monitoring.union over the answers),
and the values that do not depend on timing must be nats-server's.
"""
import asyncio

import nats
import pytest

from tests.support.certs import CA
from tests.support.monitoring import differences, every_answer, union
from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll
from tools.serverproc import free_port

ACCOUNTS = ('accounts { A { users: [{user: a, password: a}] }, SYS { users: [{user: s, password: s}] } }\n'
            'system_account: SYS\n')
HUB = ACCOUNTS + '''server_name: hub
leafnodes { port: %(leaf_port)d, tls { cert_file: "%(cert)s", key_file: "%(key)s", ca_file: "%(ca)s", verify: true } }
websocket { port: %(ws_port)d, no_tls: true, compression: true, allowed_origins: ["http://x"] }
'''
LEAF = ACCOUNTS + '''server_name: leaf
leafnodes { remotes: [ { url: "tls://a:a@127.0.0.1:%(leaf_port)d", account: A, deny_imports: ["no.>"],
  tls: { ca_file: "%(ca)s", cert_file: "%(lcert)s", key_file: "%(lkey)s", timeout: 4 } } ] }
'''
HTTP = ["/varz", "/leafz?subs=1", "/connz?subs=detail&auth=1", "/connz?state=all&auth=1", "/accountz?acc=A",
        "/accstatz", "/subsz?subs=1"]
SYS = [("$SYS.REQ.SERVER.PING.LEAFZ", {"subscriptions": True}), ("$SYS.REQ.ACCOUNT.A.LEAFZ", {"subscriptions": True}),
       ("$SYS.REQ.SERVER.PING.CONNZ", {"auth": True}), ("$SYS.REQ.ACCOUNT.A.CONNZ", {}),
       ("$SYS.REQ.ACCOUNT.A.INFO", {}), ("$SYS.REQ.ACCOUNT.A.SUBSZ", {"subscriptions": True}),
       ("$SYS.REQ.ACCOUNT.PING.STATZ", {"accounts": ["A"]})]


async def _scenario(hub, leaf, ws_port):
    out = {}
    ws = await nats.connect("ws://127.0.0.1:%d" % ws_port, user="a", password="a")
    await ws.subscribe("x.>")
    await ws.flush()
    lc = await nats.connect(leaf.url, user="a", password="a")
    await lc.subscribe("y.>")
    await lc.flush()
    assert poll(lambda: "y.>" in http_json(hub.http_port, "/leafz?subs=1")["leafs"][0].get("subscriptions_list", []), 10)
    for who, server in (("hub", hub), ("leaf", leaf)):
        for path in HTTP:
            out["%s %s" % (who, path)] = [http_json(server.http_port, path)]
    sc = await nats.connect(hub.url, user="s", password="s")
    for subject, body in SYS:
        out["sys " + subject] = await every_answer(sc, subject, body)
    for nc in (ws, lc, sc):
        await nc.close()
    return out


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leafmon")
    ca = CA(str(tmp / "pki"))
    cert, key = ca.server_cert()
    lcert, lkey = ca.issue("leaf", "leaf", server=False)
    out = {}
    for kind in ("nats-server", "natsd"):
        cmd = list(natsd_cmd() if kind == "natsd" else nats_server_cmd())
        names = dict(leaf_port=free_port(), ws_port=free_port(), cert=cert, key=key, ca=ca.ca_file,
                     lcert=lcert, lkey=lkey)
        servers = []
        try:
            for name, text in (("hub", HUB), ("leaf", LEAF)):
                conf = tmp / ("%s-%s.conf" % (kind, name))
                conf.write_text(text % names)
                p = ServerProcess(cmd + ["-c", str(conf), "-p", "-1", "-m", str(free_port())])
                servers.append(p)
                p.wait_ready()
            hub, leaf = servers
            assert poll(lambda: http_json(hub.http_port, "/varz")["leafnodes"] == http_json(leaf.http_port, "/varz")["leafnodes"] == 1, 15), \
                hub.log[-2000:] + leaf.log[-2000:]
            out[kind] = asyncio.run(_scenario(hub, leaf, names["ws_port"]))
        finally:
            for p in servers:
                p.kill()
    return out


QUESTIONS = ["%s %s" % (who, p) for who in ("hub", "leaf") for p in HTTP] + ["sys " + s for s, _ in SYS]


@pytest.mark.parametrize("question", QUESTIONS)
def test_keys_and_types_match_nats_server(answers, question):
    ref, mine = union(answers["nats-server"][question]), union(answers["natsd"][question])
    diffs = differences(ref, mine)
    assert not diffs, "%s: natsd differs from nats-server:\n  %s" % (question, "\n  ".join(diffs))
    assert len(answers["natsd"][question]) == len(answers["nats-server"][question])


def test_leaf_and_websocket_blocks_in_varz(answers):
    def varz(kind, who):
        return answers[kind][who + " /varz"][0]
    for who, block in (("hub", "leaf"), ("hub", "websocket"), ("leaf", "leaf")):
        ref, mine = dict(varz("nats-server", who)[block]), dict(varz("natsd", who)[block])
        ref.pop("port", None)
        mine.pop("port", None)
        for r in ref.get("remotes", []) + mine.get("remotes", []):
            r["urls"] = [u.rsplit(":", 1)[0] for u in r["urls"]]        # host:port, ports differ
        assert mine == ref, (who, block)


def test_connection_types_and_leaf_round_trip(answers):
    def kinds(kind):
        return sorted((c["kind"], c.get("type")) for c in answers[kind]["hub /connz?subs=detail&auth=1"][0]["connections"])
    assert kinds("natsd") == kinds("nats-server") == [("Client", "websocket"), ("Leafnode", None)]
    for who in ("hub", "leaf"):
        link = answers["natsd"][who + " /leafz?subs=1"][0]["leafs"][0]
        assert link["rtt"] != "0s", who          # measured when the link came up, as nats-server does
