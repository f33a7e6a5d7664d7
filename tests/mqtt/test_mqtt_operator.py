"""MQTT in operator mode, natsd against nats-server with the same operator, accounts and users
(minted by the test): the user JWT travels in CONNECT's password field. A bearer token logs
in (there is no nonce for an MQTT client to sign) and its account's JetStream keeps the
sessions; a JWT that is not a bearer token, a user of an account the resolver does not know,
an expired user and no credentials at all get CONNACK 0x05 and the connection is closed; a user
whose JWT expires while connected is closed then."""
import time

import pytest

from tests.support import mqttraw as M
from tests.support.jwtmint import Mint
from tests.support.mqttservers import on_both
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

JS_LIMITS = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


def operator_setup():
    """-> (the top of the config file, {name: user JWT, "expiring": a function minting one})."""
    m = Mint(seed=53)
    op, op_jwt = m.operator("OP")
    sys_acc, sys_jwt = m.account(op, "SYS")
    acc, acc_jwt = m.account(op, "IOT", limits=JS_LIMITS)
    stranger, _ = m.account(op, "NOWHERE", limits=JS_LIMITS)
    now = int(time.time())
    users = {
        "bearer": m.user(acc, "dev", bearer_token=True)[1],
        "bearer2": m.user(acc, "dev2", bearer_token=True)[1],
        "signed": m.user(acc, "needs-a-signature")[1],
        "stranger": m.user(stranger, "lost", bearer_token=True)[1],
        "expired": m.user(acc, "old", bearer_token=True, registered={"exp": now - 5})[1],
    }

    def expiring():
        """A user whose JWT expires 2-3 s from now (minted when wanted: an exp that passes while
        the server is admitting the client makes that a race)."""
        return m.user(acc, "brief", bearer_token=True, registered={"exp": int(time.time()) + 3})[1]
    users["expiring"] = expiring
    top = ("operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n"
           % (op_jwt, sys_acc.public, sys_acc.public, sys_jwt, acc.public, acc_jwt))
    return top, users


def test_mqtt_clients_log_in_with_user_jwts(starters, tmp_path):
    top, users = operator_setup()

    def scenario(srv):
        port = srv.mqtt_port
        out = {}
        # (the user name is not looked at; MQTT wants one beside a password)
        sub, out["bearer"] = M.connected(port, "sub", user="anything", password=users["bearer"])
        sub.send(M.subscribe(1, [("iot/#", 1)]))
        out["suback"] = sub.read_packet()
        pub, out["bearer2"] = M.connected(port, "pub", user="u", password=users["bearer2"])
        pub.send(M.publish("iot/t1", b"21.5", qos=1, pi=3))
        out["puback"] = pub.read_packet()
        got = sub.read_packet()
        out["delivered"] = got[:10] + b"\0\0" + got[12:]   # its packet identifier zeroed
        for name in ("signed", "stranger", "expired"):
            c, out[name] = M.connected(port, name, user="u", password=users[name])
            out[name + " closed"] = c.closed(3)
        c, out["none"] = M.connected(port, "anon")
        out["none closed"] = c.closed(3)
        brief, out["expiring"] = M.connected(port, "brief", user="u", password=users["expiring"]())
        out["expiring closed"] = brief.closed(10)   # at its exp, a few seconds on
        for c in (sub, pub):
            c.close()
        return out
    ours, theirs = on_both(starters, tmp_path, scenario, top_extra=top)
    assert ours == theirs
    accepted, refused = b"\x20\x02\x00\x00", b"\x20\x02\x00\x05"
    assert ours["bearer"] == ours["bearer2"] == ours["expiring"] == accepted
    assert ours["puback"] == M.pi_packet(0x40, 3)
    assert ours["delivered"] == M.publish("iot/t1", b"21.5", qos=1, pi=0)
    for name in ("signed", "stranger", "expired", "none"):
        assert ours[name] == refused and ours[name + " closed"] is True, name
    assert ours["expiring closed"] is True
