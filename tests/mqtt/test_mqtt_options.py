"""What each `mqtt {}` option changes, observed the same way on natsd and nats-server: the
listener's address (host, net, listen), the block's own authorization and no_auth_user,
max_ack_pending and its aliases, ack_wait's alias, the consumers' storage and inactivity
threshold, the streams' replicas, the JetStream domain, the API timeout, TLS."""
import asyncio
import json
import socket
import ssl

import nats
import pytest

from tests.support import mqttraw as M
from tests.support.mqttservers import MQTT_LISTEN, on_both
from tests.support.servers import http_json, nats_server_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


@pytest.mark.parametrize("block", ["host: 127.0.0.1", "net: 127.0.0.1", 'listen: "127.0.0.1:-1"'])
def test_listener_address(starters, tmp_path, block, monkeypatch):
    def scenario(srv):
        line = srv.proc.wait_log(MQTT_LISTEN).group(0)
        return line.replace(str(srv.mqtt_port), "PORT")
    monkeypatch.setattr("tests.support.mqttservers.mqtt_conf", _conf_without_port)
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block)
    assert natsd == ref == "Listening for MQTT clients on mqtt://127.0.0.1:PORT"


def _conf_without_port(path, store_dir, name="m1", mqtt_extra="", top_extra="", js_extra=""):
    port = "" if "listen" in mqtt_extra else "port: -1"
    path.write_text("server_name: %s\njetstream { store_dir: %s }\n%s\nmqtt {\n  %s\n  %s\n}\n"
                    % (name, store_dir, top_extra, port, mqtt_extra))
    return str(path)


@pytest.mark.parametrize("block,good,bad", [
    ("authorization { username: dev, password: pw }", {"user": "dev", "password": "pw"},
     {"user": "dev", "password": "no"}),
    ("authentication { token: s3cret }", {"user": "x", "password": "s3cret"},
     {"user": "x", "password": "nope"}),
], ids=["user", "token"])
def test_block_authorization(starters, tmp_path, block, good, bad):
    def scenario(srv):
        out = []
        for creds in (good, bad, {}):
            with M.MqttRaw(srv.mqtt_port) as c:
                c.send(M.connect("d", **creds))
                out.append((c.quiet(0.5), c.closed(2)))
        return out
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block)
    assert natsd == ref
    assert natsd[0][0] == b"\x20\x02\x00\x00" and natsd[1] == (b"\x20\x02\x00\x05", True)


def test_no_auth_user_binds_its_account(starters, tmp_path):
    top = ("accounts { A { jetstream: enabled, users: [ {user: a, password: a} ] }\n"
           "  B { jetstream: enabled, users: [ {user: b, password: b} ] } }")

    def scenario(srv):
        async def go():
            nc = await nats.connect(srv.url, user="b", password="b")
            sub = await nc.subscribe("t")
            await nc.flush()
            c, ack = M.connected(srv.mqtt_port, "anon")         # no credentials: user b
            c.send(M.publish("t", b"from-mqtt"))
            msg = await sub.next_msg(timeout=5)
            await nc.close()
            return ack, msg.data
        return asyncio.run(go())
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra="no_auth_user: b", top_extra=top)
    assert natsd == ref == (b"\x20\x02\x00\x00", b"from-mqtt")


@pytest.mark.parametrize("key", ["max_ack_pending", "max_pending", "max_inflight"])
def test_max_ack_pending_limits_messages_in_flight(starters, tmp_path, key):
    def scenario(srv):
        c, _ = M.connected(srv.mqtt_port, "slow")
        c.send(M.subscribe(1, [("f", 1)]))
        c.read_packet()
        pub, _ = M.connected(srv.mqtt_port, "pub")
        for i in range(4):
            pub.send(M.publish("f", b"%d" % i, qos=1, pi=i + 1))
            pub.read_packet()
        first = c.read_packets(2)
        held = c.quiet(0.5)                         # two in flight, no more until a PUBACK
        c.send(M.puback(1))
        more = c.read_packet()
        varz = http_json(srv.http_port, "/varz")["mqtt"]["max_ack_pending"]
        return first, held, more, varz
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra="%s: 2" % key, args=("-m", "-1"))
    assert natsd == ref
    assert natsd[1] == b"" and natsd[3] == 2


@pytest.mark.parametrize("block", ['ackwait: "7s"', 'ack_wait: "7s"'])
def test_ack_wait_alias(starters, tmp_path, block):
    def scenario(srv):
        return http_json(srv.http_port, "/varz")["mqtt"]["ack_wait"]
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block, args=("-m", "-1"))
    assert natsd == ref == 7_000_000_000


@pytest.mark.parametrize("block", [
    'consumer_memory_storage: true\n  consumer_inactive_threshold: "1h"',
    'consumer_auto_cleanup: "2h"\n  stream_replicas: 1',
    'js_api_timeout: "3s"', 'api_timeout: "3s"',
])
def test_consumer_and_stream_settings(starters, tmp_path, block):
    def scenario(srv):
        c, _ = M.connected(srv.mqtt_port, "dev")
        c.send(M.subscribe(1, [("k", 1)]))
        c.read_packet()

        async def look():
            nc = await nats.connect(srv.url)
            names = json.loads((await nc.request("$JS.API.CONSUMER.NAMES.$MQTT_msgs", b"", 5)).data)
            info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.$MQTT_msgs.%s"
                                                % names["consumers"][0], b"", 5)).data)
            stream = json.loads((await nc.request("$JS.API.STREAM.INFO.$MQTT_sess", b"", 5)).data)
            await nc.close()
            cfg = info["config"]
            return ({k: cfg.get(k) for k in ("mem_storage", "inactive_threshold", "ack_policy",
                                              "deliver_policy", "max_ack_pending", "ack_wait")},
                    {k: stream["config"].get(k) for k in ("num_replicas", "subjects",
                                                           "max_msgs_per_subject", "retention")})
        return asyncio.run(look())
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block)
    assert natsd == ref


@pytest.mark.parametrize("where", ["mqtt block", "default_js_domain"])
def test_js_domain(starters, tmp_path, where):
    """The domain of the MQTT state's JetStream: the block's js_domain, or the account's
    default_js_domain (nats-server looks there first)."""
    def scenario(srv):
        c, ack = M.connected(srv.mqtt_port, "dev", clean=False)
        srv.proc.wait_log(r'Creating MQTT streams/consumers with replicas 1 for account "\$G" in domain "hub"')

        async def look():
            nc = await nats.connect(srv.url)
            stream = json.loads((await nc.request("$JS.hub.API.STREAM.INFO.$MQTT_sess", b"", 5)).data)
            await nc.close()
            return stream["config"]["subjects"]
        return ack, asyncio.run(look())
    kw = {"mqtt_extra": "js_domain: hub"} if where == "mqtt block" else {"top_extra": "default_js_domain: { $G: hub }"}
    natsd, ref = on_both(starters, tmp_path, scenario, js_extra="domain: hub", **kw)
    assert natsd == ref == (b"\x20\x02\x00\x00", ["$MQTT.sess.hub.>"])


def test_tls(starters, tmp_path, pki):
    cert, key = pki["server"]
    block = 'tls { cert_file: "%s", key_file: "%s" }' % (cert, key)

    def scenario(srv):
        ctx = ssl.create_default_context(cafile=pki["ca"])
        with socket.create_connection(("127.0.0.1", srv.mqtt_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(M.connect("secure"))
                ack = tls.recv(4)
        plain = M.MqttRaw(srv.mqtt_port)
        plain.send(M.connect("plain"))
        return srv.proc.wait_log(MQTT_LISTEN).group(0).split("://")[0], ack, plain.quiet(0.5)[:4] == b"\x20\x02\x00\x00"
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block)
    assert natsd == ref == ("Listening for MQTT clients on tls", b"\x20\x02\x00\x00", False)


def test_tls_verify_and_map(starters, tmp_path, pki):
    """The client certificate names the user (verify_and_map): a device with a certificate
    mapped to a user connects, one whose certificate maps to nobody gets 0x05."""
    cert, key = pki["server"]
    block = ('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify_and_map: true }'
             % (cert, key, pki["ca"]))
    users = 'authorization { users: [ {user: "CN=leaf"} ] }'

    def scenario(srv):
        out = []
        for who in ("leaf", "nobody"):
            ctx = ssl.create_default_context(cafile=pki["ca"])
            ctx.load_cert_chain(*pki[who])
            with socket.create_connection(("127.0.0.1", srv.mqtt_port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                    tls.sendall(M.connect("dev-" + who))
                    out.append(tls.recv(4))
        return out
    natsd, ref = on_both(starters, tmp_path, scenario, mqtt_extra=block, top_extra=users)
    assert natsd == ref == [b"\x20\x02\x00\x00", b"\x20\x02\x00\x05"]
