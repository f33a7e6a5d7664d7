"""`$SYS.ACCOUNT.<acc>.LEAFNODE.CONNECT`, natsd against nats-server: a server with a gateway
announces a leaf node connecting for an account on it (the body: the server's info and the
account, as nats-server's accNumConnsReq), a server without one does not; a malformed event
from elsewhere is logged with nats-server's text, as its SYSTEM client logs it, with or
without a gateway. natsd/system/remote.py."""
import json

import pytest

from tests.support.rawclient import RawClient
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

HUB = """server_name: hub
system_account: SYS
accounts {
  SYS: { users: [ { user: sys, password: sys } ] }
  APP: { users: [ { user: app, password: app } ] }
}
leafnodes { port: -1 }
%s
"""


def scenario(start, tmp_path, label, gateway):
    conf = tmp_path / ("%s-hub.conf" % label)
    conf.write_text(HUB % ("gateway { name: G, port: -1 }" if gateway else ""))
    hub = start("-c", str(conf), "-p", "-1")
    port = int(hub.wait_log(r"Listening for leafnode connections on [^ ]*:(\d+)").group(1))
    with RawClient(hub.port) as sysc:
        sysc.connect({"user": "sys", "pass": "sys"})
        sysc.send(b"SUB $SYS.ACCOUNT.*.LEAFNODE.CONNECT 1\r\n")
        sysc.sync()
        leaf_conf = tmp_path / ("%s-leaf.conf" % label)
        leaf_conf.write_text('server_name: leaf\nleafnodes { remotes: [ { url: "nats-leaf://app:app@127.0.0.1:%d" } ] }\n'
                             % port)
        leaf = start("-c", str(leaf_conf), "-p", "-1")
        leaf.wait_log(r"Leafnode connection created", timeout=10)
        got = sysc.read_available(quiet=0.5, timeout=2)
        sysc.send(b"PUB $SYS.ACCOUNT.APP.LEAFNODE.CONNECT 5\r\nnope!\r\n")
        sysc.sync()
    assert poll(lambda: "Error unmarshalling account connections request message" in hub.log, 5, 0.05)
    events = []
    for frame in got.split(b"MSG ")[1:]:
        head, _, body = frame.partition(b"\r\n")
        payload = json.loads(body.split(b"\r\n")[0])
        events.append((head.split()[0].decode(), sorted(payload), payload["acc"], sorted(payload["server"])))
    logged = [line.split("[ERR] ", 1)[1] for line in hub.log.splitlines() if "Error unmarshalling account" in line]
    return events, [text.split(": ", 1)[0] for text in logged]


@pytest.mark.parametrize("gateway", [True, False], ids=["with-gateway", "without"])
def test_leafnode_connect_event_as_nats_server_sends_it(natsd, reference, tmp_path, gateway):
    ours = scenario(natsd, tmp_path, "natsd", gateway)
    theirs = scenario(reference, tmp_path, "ref", gateway)
    assert ours[0] == theirs[0]
    if gateway:
        subject, keys, acc, server_keys = ours[0][0]
        assert subject == "$SYS.ACCOUNT.APP.LEAFNODE.CONNECT" and keys == ["acc", "server"] and acc == "APP"
        assert {"name", "id", "host", "ver", "seq", "time"} <= set(server_keys)
    else:
        assert ours[0] == []
    assert ours[1] == theirs[1] == ["SYSTEM - Error unmarshalling account connections request message"]
