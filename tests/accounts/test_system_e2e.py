"""The system account end to end: `$SYS.REQ.*` services and `$SYS` events.

Differential: the same config runs on natsd and on nats-server; for every request the reply
(`server`, `data`, recursively) must have the same keys as nats-server's, with values of the
same JSON types (tests/support/monitoring.py). Events: CONNECT /
DISCONNECT with their fields, the periodic `$SYS.SERVER.<id>.STATSZ` (both servers send the
first one after 250ms and double the gap up to 10s, so waiting 2s is enough), auth errors.
A plain account user gets only its own account's data from `$SYS.REQ.USER.INFO`,
`$SYS.REQ.ACCOUNT.PING.CONNZ|STATZ` and `$SYS.REQ.SERVER.PING.CONNZ`; a system user's
`$SYS.REQ.ACCOUNT.PING.CONNZ` is, in both, the CONNZ of an account named "PING": an empty
Connz (`server_id: ""`, `connections: null`).
"""
import asyncio
import json

import nats
import pytest
from nats.errors import NoRespondersError

from tests.support.monitoring import differences

CONF = """
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { users: [{user: a, password: a}] }
  B: { users: [{user: b, password: b}] }
}
system_account: SYS
"""

SYS_REQUESTS = (["$SYS.REQ.SERVER.PING"] +
                ["$SYS.REQ.SERVER.PING." + e for e in
                 "VARZ CONNZ SUBSZ JSZ HEALTHZ ACCOUNTZ LEAFZ ROUTEZ GATEWAYZ STATSZ".split()] +
                ["$SYS.REQ.SERVER.{id}." + e for e in "VARZ CONNZ HEALTHZ STATSZ".split()] +
                ["$SYS.REQ.ACCOUNT.A." + e for e in "CONNZ SUBSZ INFO STATZ CONNS LEAFZ JSZ".split()] +
                ["$SYS.REQ.USER.INFO", "$SYS.REQ.ACCOUNT.PING.STATZ",
                 "$SYS.REQ.ACCOUNT.PING.CONNZ"])
USER_REQUESTS = ["$SYS.REQ.USER.INFO", "$SYS.REQ.ACCOUNT.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.STATZ",
                 "$SYS.REQ.SERVER.PING.CONNZ"]

def keys(o, path=""):
    out = set()
    if isinstance(o, dict):
        for k, v in o.items():
            out.add(path + "." + k)
            out |= keys(v, path + "." + k)
    elif isinstance(o, list):
        for v in o[:1]:
            out |= keys(v, path + "[]")
    return out


def url_for(srv, user):
    return srv.url.replace("nats://", "nats://%s:%s@" % (user, user))


async def _collect(srv):
    res = {}
    sysc = await nats.connect(url_for(srv, "sys"))
    a = await nats.connect(url_for(srv, "a"), name="app")
    await a.subscribe("foo")
    await a.flush()
    r = await sysc.request("$SYS.REQ.SERVER.PING.IDZ", b"", timeout=2)
    idz = json.loads(r.data)
    res["IDZ"] = idz
    for who, nc, subjects in (("sys", sysc, SYS_REQUESTS), ("a", a, USER_REQUESTS)):
        for s in subjects:
            r = await nc.request(s.replace("{id}", idz["id"]), b"", timeout=2)
            res[(who, s)] = json.loads(r.data)
    for bad in ("$SYS.REQ.SERVER.PING.NOPE", "$SYS.REQ.ACCOUNT.A.NOPE"):
        try:
            await sysc.request(bad, b"", timeout=1)
            res[bad] = "answered"
        except NoRespondersError:
            res[bad] = "no responders"
    r = await sysc.request("$SYS.REQ.SERVER.PING.CONNZ", b'{"sort":"bogus"}', timeout=2)
    res["bad sort"] = json.loads(r.data)
    r = await sysc.request("$SYS.REQ.ACCOUNT.NOPE.INFO", b"", timeout=2)
    res["missing INFO"] = json.loads(r.data)
    await sysc.close()
    await a.close()
    return res


@pytest.fixture
def conf(tmp_path):
    p = tmp_path / "sys.conf"
    p.write_text(CONF)
    return str(p)


def test_sys_requests_match_nats_server(natsd, reference, conf):
    ours = asyncio.run(_collect(natsd("-c", conf)))
    ref = asyncio.run(_collect(reference("-c", conf)))
    assert set(ours["IDZ"]) == set(ref["IDZ"]) == {"name", "host", "id"}
    problems = []
    for k in ref:
        if not isinstance(k, tuple):
            continue
        diffs = differences(ref[k], ours[k])
        extra = sorted(keys(ours[k]) - keys(ref[k]))    # and natsd adds none of its own
        if extra:
            diffs.append("natsd only: %s" % extra)
        if diffs:
            problems.append((k, diffs))
    assert problems == []
    assert ours[("sys", "$SYS.REQ.ACCOUNT.PING.CONNZ")]["data"]["connections"] is None
    for bad in ("$SYS.REQ.SERVER.PING.NOPE", "$SYS.REQ.ACCOUNT.A.NOPE"):
        assert ours[bad] == ref[bad] == "no responders"
    for k in ("bad sort", "missing INFO"):
        ours[k].pop("server")
        ref[k].pop("server")
        assert ours[k] == ref[k]
    assert ours["bad sort"] == {"data": None, "error": {"code": 500,
                                                        "description": "invalid sorting option: bogus"}}


def test_user_sees_only_its_account(natsd, conf):
    srv = natsd("-c", conf)

    async def main():
        a = await nats.connect(url_for(srv, "a"), name="app-a")
        b = await nats.connect(url_for(srv, "b"), name="app-b")
        sysc = await nats.connect(url_for(srv, "sys"))
        await b.subscribe("b.only")
        await b.flush()
        info = json.loads((await a.request("$SYS.REQ.USER.INFO", b"", timeout=2)).data)["data"]
        assert info["user"] == "a" and info["account"] == "A"
        connz = json.loads((await a.request("$SYS.REQ.ACCOUNT.PING.CONNZ", b"", timeout=2)).data)
        assert [c["name"] for c in connz["data"]["connections"]] == ["app-a"]
        connz = json.loads((await a.request("$SYS.REQ.SERVER.PING.CONNZ", b"", timeout=2)).data)
        assert [c["name"] for c in connz["data"]["connections"]] == ["app-a"]
        statz = json.loads((await a.request("$SYS.REQ.ACCOUNT.PING.STATZ", b"", timeout=2)).data)
        assert [s["acc"] for s in statz["data"]["account_statz"]] == ["A"]
        # the system user's ACCOUNT.PING.STATZ covers every account in use
        statz = json.loads((await sysc.request("$SYS.REQ.ACCOUNT.PING.STATZ", b"", timeout=2)).data)
        assert sorted(s["acc"] for s in statz["data"]["account_statz"]) == ["A", "B", "SYS"]
        # a plain user cannot reach the system account's own services
        with pytest.raises(NoRespondersError):
            await a.request("$SYS.REQ.SERVER.PING.VARZ", b"", timeout=1)
        for c in (a, b, sysc):
            await c.close()
    asyncio.run(main())


async def _events(srv):
    sysc = await nats.connect(url_for(srv, "sys"))
    events = {}

    async def cb(m):
        kind = "STATSZ" if m.subject.endswith(".STATSZ") else m.subject.split(".")[-1]
        events.setdefault(kind, []).append(json.loads(m.data))
    for subj in ("$SYS.ACCOUNT.A.CONNECT", "$SYS.ACCOUNT.A.DISCONNECT",
                 "$SYS.SERVER.*.CLIENT.AUTH.ERR", "$SYS.SERVER.*.STATSZ"):
        await sysc.subscribe(subj, cb=cb)
    await sysc.flush()
    a = await nats.connect(url_for(srv, "a"), name="evt")
    await a.subscribe("in")
    await a.publish("in", b"hello")
    await a.flush()
    await asyncio.sleep(0.1)
    await a.close()
    try:
        await nats.connect(srv.url.replace("nats://", "nats://a:wrong@"), allow_reconnect=False,
                           max_reconnect_attempts=0, connect_timeout=1)
    except Exception:
        pass
    for _ in range(40):        # STATSZ: the first after 250ms, then 500ms, 1s, ... up to 10s
        if all(events.get(k) for k in ("CONNECT", "DISCONNECT", "ERR", "STATSZ")):
            break
        await asyncio.sleep(0.1)
    await sysc.close()
    return events


def test_events_match_nats_server(natsd, reference, conf):
    """CONNECT/DISCONNECT/AUTH.ERR/STATSZ events arrive on both, with the same fields."""
    ours = asyncio.run(_events(natsd("-c", conf)))
    ref = asyncio.run(_events(reference("-c", conf)))
    for ev in (ours, ref):
        con, dis, err = ev["CONNECT"][0], ev["DISCONNECT"][0], ev["ERR"][0]
        assert con["type"] == "io.nats.server.advisory.v1.client_connect"
        assert dis["type"] == "io.nats.server.advisory.v1.client_disconnect"
        for e in (con, dis):
            c = e["client"]
            assert (c["acc"], c["user"], c["name"]) == ("A", "a", "evt")
        assert dis["reason"] == "Client Closed"
        assert dis["sent"] == {"msgs": 1, "bytes": 5}          # what the client published
        assert dis["received"] == {"msgs": 1, "bytes": 5}      # what it was delivered
        assert err["type"] == "io.nats.server.advisory.v1.client_disconnect"
        assert err["reason"] == "Authentication Failure"
        assert set(ev["STATSZ"][0]) == {"server", "statsz"}
    strip = set()
    for kind in ("CONNECT", "DISCONNECT", "STATSZ"):
        assert keys(ours[kind][0]) - strip == keys(ref[kind][0]) - strip, kind
    assert keys(ours["ERR"][0]) - strip == keys(ref["ERR"][0]) - strip
    assert ours["ERR"][0]["client"]["acc"] == ref["ERR"][0]["client"]["acc"] == "$G"
    assert ours["ERR"][0]["client"]["user"] == ref["ERR"][0]["client"]["user"] == "a"


async def _websocket_connect_event(srv, ws_port):
    """The CONNECT event of a WebSocket client."""
    from tests.support.wsclient import WsClient
    sysc = await nats.connect(url_for(srv, "sys"))
    sub = await sysc.subscribe("$SYS.ACCOUNT.A.CONNECT")
    await sysc.flush()
    ws = await asyncio.to_thread(WsClient, ws_port)
    await asyncio.to_thread(ws.send, b'CONNECT {"user":"a","pass":"a","name":"browser"}\r\nPING\r\n')
    ev = json.loads((await sub.next_msg(timeout=5)).data)
    ws.sock.close()
    await sysc.close()
    return {k: ev["client"].get(k) for k in ("kind", "client_type", "name")}


def test_a_websocket_clients_connect_event_names_its_type(natsd, reference, tmp_path):
    from tools.serverproc import free_port
    got = []
    for start in (natsd, reference):
        port = free_port()
        p = tmp_path / ("ws%d.conf" % port)
        p.write_text(CONF + "\nwebsocket { port: %d, no_tls: true }\n" % port)
        got.append(asyncio.run(_websocket_connect_event(start("-c", str(p)), port)))
    assert got[0] == got[1] == {"kind": "Client", "client_type": "websocket", "name": "browser"}
