"""The profiling port (`prof_port`, `--profile`) and PROFILEZ: natsd's own profiles in
Python's formats (monitor/profiling.py). The CPU profile is a pstats file of the event loop
taken while clients work; the listener logs its port as nats-server does; a second CPU profile
while one runs is refused as Go's pprof refuses it."""
import asyncio
import base64
import json
import marshal
import pstats
import threading
import urllib.error
import urllib.request

import nats

from tests.support.rawclient import RawClient


def _get(port, path, timeout=20):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def _load_pstats(data, tmp_path):
    path = tmp_path / "cpu.pstats"
    path.write_bytes(data)
    return pstats.Stats(str(path))


def test_prof_port_serves_a_cpu_profile_of_the_loop(natsd, tmp_path):
    srv = natsd("--profile", "-1", "-D")
    port = int(srv.wait_log(r"\[INF\] profiling port: (\d+)").group(1))
    assert _get(port, "/debug/pprof/")[0] == 200
    got = {}
    t = threading.Thread(target=lambda: got.update(r=_get(port, "/debug/pprof/profile?seconds=3")))
    t.start()
    srv.wait_log(r"\[DBG\] CPU profile of the event loop started for 3s")
    with RawClient(srv.port).connect() as c:       # work for the profile to see
        for _ in range(200):
            c.send(b"SUB p.x 1\r\nPUB p.x 5\r\nhello\r\nUNSUB 1\r\n")
        c.sync()
    # a second CPU profile while the first runs: refused
    try:
        _get(port, "/debug/pprof/profile?seconds=1")
        raise AssertionError("a second profile was started")
    except urllib.error.HTTPError as e:
        assert e.code == 500 and b"cpu profiling already in use" in e.read()
    t.join(30)
    status, ctype, data = got["r"]
    assert (status, ctype) == (200, "application/octet-stream")
    stats = _load_pstats(data, tmp_path)
    assert stats.total_calls > 0
    assert any("natsd" in filename for filename, _, _ in stats.stats)
    status, ctype, text = _get(port, "/debug/pprof/goroutine?debug=2")
    assert status == 200 and b"thread " in text
    assert "memstats" in json.loads(_get(port, "/debug/vars")[2])


def test_profilez_cpu_over_the_system_account(natsd, tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text("accounts { SYS { users: [ {user: s, password: s} ] } }\nsystem_account: SYS\n")
    srv = natsd("-c", str(conf))

    async def ask():
        nc = await nats.connect(srv.url, user="s", password="s")
        try:
            sid = (await nc.request("$SYS.REQ.SERVER.PING.IDZ", b"", timeout=5)).data
            server_id = json.loads(sid)["id"]
            msg = await nc.request("$SYS.REQ.SERVER.%s.PROFILEZ" % server_id,
                                   json.dumps({"name": "cpu", "duration": 1_000_000_000}).encode(), timeout=10)
            return json.loads(msg.data)
        finally:
            await nc.close()
    answer = asyncio.run(ask())
    data = answer["data"]
    assert data.get("error", "") == ""
    stats = marshal.loads(base64.b64decode(data["profile"]))
    assert isinstance(stats, dict) and stats
