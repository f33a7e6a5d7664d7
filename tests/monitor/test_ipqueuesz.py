"""/ipqueuesz tells the depth of natsd's internal delivery queue: requests to the system
account's services sent in one burst are queued behind each other, and each answer sees
the ones still waiting."""
import json

from tests.support.rawclient import RawClient, parse_msgs


def test_ipqueuesz_sees_the_requests_queued_behind_it(natsd, tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text("accounts { SYS { users: [ {user: s, password: s} ] } }\nsystem_account: SYS\n")
    srv = natsd("-c", str(conf))
    body = b'{"all":true}'
    with RawClient(srv.port) as c:
        c.connect(user="s", **{"pass": "s"})
        c.send(b"SUB r.* 1\r\n" + b"".join(b"PUB $SYS.REQ.SERVER.PING.IPQUEUESZ r.%d %d\r\n%s\r\n" % (i, len(body), body)
                                           for i in range(20)))
        got = b""
        while got.count(b"MSG r.") < 20:
            got += c.read_until(b"\r\n", timeout=10)
        answers = {int(m[0].split(b".")[1]): json.loads(m[3]) for m in parse_msgs(got + c.read_available(0.2))}
    pending = [answers[i]["data"]["Internal deliveries"]["pending"] for i in sorted(answers)]
    assert max(pending) > 0 and pending[-1] == 0, pending
    assert all(a >= b for a, b in zip(pending, pending[1:])), pending
