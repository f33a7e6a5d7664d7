"""MQTT clients through an auth callout (config mode), natsd against nats-server with the same
config and the same callout service (tests/auth/test_auth_callout.py's, on nats-py): CONNECT's
user name and password go to the service in `connect_opts` (the password as the token too),
`client_info` says `mqtt` and the client id; the user the service issues lands in its
account with its permissions applied to the converted subjects; a refusal, a wrong password
and a silent service (the auth timeout) get CONNACK 0x05 and a closed connection."""
import asyncio
import threading

import nats
import pytest

from tests.auth.test_auth_callout import Service, _shape
from tests.support import mqttraw as M
from tests.support.jwtmint import Mint
from tests.support.mqttservers import MqttServer
from tests.support.servers import nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def conf(tmp_path, label, issuer):
    path = tmp_path / (label + ".conf")
    path.write_text("""server_name: %s
jetstream { store_dir: "%s" }
accounts {
  AUTH { users: [ { user: auth, password: pwd } ] }
  APP { jetstream: enabled }
}
authorization {
  timeout: 1
  auth_callout { issuer: %s, account: AUTH, auth_users: [ auth ] }
}
mqtt { port: -1 }
""" % (label, tmp_path / (label + "-js"), issuer))
    return str(path)


class RunningService:
    """The callout service on its own thread and event loop, answering while the test's MQTT
    clients (plain sockets) run on the main thread."""

    def __init__(self, url, service, **login):
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve():
            self.nc = await nats.connect(url, **(login or {"user": "auth", "password": "pwd"}))

            async def handle(msg):
                out = service.answer(msg)
                if out is not None:
                    await self.nc.publish(msg.reply, out)
            await self.nc.subscribe("$SYS.REQ.USER.AUTH", cb=handle)
            await self.nc.flush()
            ready.set()
        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()
        assert ready.wait(10), "the callout service did not start"

    def _run(self, serve):
        self.loop.run_until_complete(serve())
        self.loop.run_forever()

    def stop(self):
        asyncio.run_coroutine_threadsafe(self.nc.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def login(srv, user, password, client_id):
    """What an MQTT client sees: its CONNACK and whether it was closed, and once admitted what
    reaches it of a publish to app/x (allowed) and to other/x (denied by the issued user)."""
    c, connack = M.connected(srv.mqtt_port, client_id, user=user, password=password)
    if connack != b"\x20\x02\x00\x00":
        return connack, c.closed(3)
    c.send(M.subscribe(1, [("app/#", 0), ("other/#", 0)]))
    suback = c.read_packet()
    c.send(M.publish("other/x", b"denied") + M.publish("app/x", b"allowed"))
    got = c.read_packet()
    quiet = c.quiet(0.5)
    c.close()
    return connack, suback, got, quiet


def scenario(start, tmp_path, label, m, issuer):
    service = Service(m, issuer)
    srv = MqttServer(start("-c", conf(tmp_path, label, issuer.public)))
    running = RunningService(srv.url, service)
    try:
        out = {
            "alice": login(srv, "alice", "secret", "dev-a"),
            "alice, wrong password": login(srv, "alice", "nope", "dev-b"),
            "bob (refused)": login(srv, "bob", "secret", "dev-c"),
            "silent (timeout)": login(srv, "silent", "secret", "dev-d"),
        }
    finally:
        running.stop()
    return out, [(_shape(r), r.nats["client_info"].get("mqtt_id"),
                  r.nats["connect_opts"].get("pass"), r.nats["connect_opts"].get("auth_token"))
                 for r in service.requests]


def test_mqtt_clients_through_an_auth_callout_as_on_nats_server(natsd, reference, tmp_path):
    m = Mint(seed=59)
    issuer = m.key("account")
    theirs = scenario(reference, tmp_path, "ref", m, issuer)
    ours = scenario(natsd, tmp_path, "natsd", m, issuer)
    assert ours == theirs
    out, requests = ours
    assert out["alice"] == (b"\x20\x02\x00\x00", b"\x90\x04\x00\x01\x00\x00",
                            M.publish("app/x", b"allowed"), b"")
    for refused in ("alice, wrong password", "bob (refused)", "silent (timeout)"):
        assert out[refused] == (b"\x20\x02\x00\x05", True)
    shape, mqtt_id, password, token = requests[0]
    assert shape["type_"] == "mqtt" and mqtt_id == "dev-a" and password == token == "secret"
