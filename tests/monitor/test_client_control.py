"""`$SYS.REQ.SERVER.<id>.KICK` and `.LDM` with `{"cid": n}` from a system account user, on
natsd and on nats-server: LDM sends that client the lame duck INFO (`"ldm": true`), KICK
closes it (closed connections list it as "Kicked"); a cid the server does not have is
answered with nats-server's error, and a body Go cannot decode is not answered at all.
"""
import asyncio
import json

import nats
import nats.errors
import pytest

from tests.support.rawclient import RawClient
from tests.support.servers import http_json, nats_server_cmd, natsd_cmd, start_server

CONF = """accounts {
  SYS: { users: [{user: sys, password: pass}] }
  APP: { users: [{user: app, password: pass}] }
}
system_account: SYS
"""


def _scenario(cmd, tmp_path):
    conf = tmp_path / "control.conf"
    conf.write_text(CONF)
    server = start_server(cmd, "-c", str(conf), "-m", "-1", cwd=str(tmp_path))
    try:
        target = RawClient(server.port).connect({"user": "app", "pass": "pass"}, protocol=1)
        cid = target.info["client_id"]
        sid = http_json(server.http_port, "/varz")["server_id"]
        heard = []

        async def ask(what, body):
            nc = await nats.connect(server.url, user="sys", password="pass")
            try:
                msg = await nc.request("$SYS.REQ.SERVER.%s.%s" % (sid, what), body, timeout=1)
                answer = json.loads(msg.data)
                answer.pop("server")
                return answer
            except nats.errors.TimeoutError:
                return "no answer"
            finally:
                await nc.close()

        heard.append(asyncio.run(ask("LDM", json.dumps({"cid": cid}).encode())))
        infos = []                      # the INFO after the first PONG, then the lame duck one
        while len(infos) < 2:
            line = target.read_line(timeout=2)
            if line.startswith(b"INFO "):
                infos.append(json.loads(line[5:]))
        heard.append(("ldm INFO", infos[-1].get("ldm"), infos[-1].get("client_id") == cid))
        heard.append(asyncio.run(ask("LDM", b'{"cid": 999}')))
        heard.append(asyncio.run(ask("KICK", b'{"cid": 999}')))
        heard.append(asyncio.run(ask("KICK", b'{"cid": -1}')))
        heard.append(asyncio.run(ask("KICK", b"not json")))
        heard.append(asyncio.run(ask("KICK", json.dumps({"cid": cid}).encode())))
        heard.append(("closed", target.is_closed(5)))
        closed = http_json(server.http_port, "/connz?state=closed")["connections"]
        heard.append([c["reason"] for c in closed if c["cid"] == cid])
        return heard
    finally:
        server.kill()


@pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")
def test_kick_and_ldm_requests_as_on_nats_server(tmp_path):
    (tmp_path / "natsd").mkdir()
    (tmp_path / "ref").mkdir()
    ours = _scenario(natsd_cmd(), tmp_path / "natsd")
    theirs = _scenario(nats_server_cmd(), tmp_path / "ref")
    assert ours == theirs
    assert ours[1] == ("ldm INFO", True, True) and ours[-1] == ["Kicked"]
