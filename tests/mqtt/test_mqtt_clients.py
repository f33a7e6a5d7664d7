"""Real MQTT client libraries against natsd: paho-mqtt over TCP (QoS 0/1/2, a retained
message, a will) with a NATS service answering on the other side, paho over WebSocket
(`websocket {}`'s `/mqtt` path, the `mqtt` subprotocol), and aiomqtt on asyncio."""
import asyncio
import queue
import threading

import nats
import paho.mqtt.client as mqtt

from tests.support.mqttservers import start_mqtt


def _client(client_id, transport="tcp", clean=True):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, transport=transport,
                    clean_session=clean)
    got = queue.Queue()
    c.on_message = lambda cl, userdata, m: got.put((m.topic, m.payload, m.qos, m.retain))
    connected = threading.Event()
    c.on_connect = lambda cl, userdata, flags, rc, props=None: connected.set()
    c.subscribed = threading.Event()
    c.on_subscribe = lambda cl, userdata, mid, codes, props=None: c.subscribed.set()
    return c, got, connected


def test_paho_talks_to_a_nats_service(natsd, tmp_path):
    srv = start_mqtt(natsd, tmp_path)

    async def service(ready, stop):
        nc = await nats.connect(srv.url)

        async def on_cmd(msg):
            await nc.publish("devices.reply", b"ack:" + msg.data)
        await nc.subscribe("devices.*.cmd", cb=on_cmd)
        await nc.flush()
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.02)
        await nc.close()

    ready, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: asyncio.run(service(ready, stop)))
    t.start()
    try:
        assert ready.wait(10)
        watcher, wgot, wconn = _client("watcher")
        watcher.connect("127.0.0.1", srv.mqtt_port, 30)
        watcher.loop_start()
        assert wconn.wait(10)
        watcher.subscribe([("devices/reply", 2), ("status/#", 1)])
        assert watcher.subscribed.wait(10)
        dev, got, conn = _client("dev-1")
        dev.will_set("status/dev-1", b"offline", qos=1, retain=True)
        dev.connect("127.0.0.1", srv.mqtt_port, 30)
        dev.loop_start()
        assert conn.wait(10)
        for qos in (0, 1, 2):
            dev.publish("devices/dev-1/cmd", b"q%d" % qos, qos=qos).wait_for_publish(10)
        replies = sorted(wgot.get(timeout=10) for _ in range(3))
        assert replies == [("devices/reply", b"ack:q%d" % q, 0, False) for q in (0, 1, 2)]
        dev._sock.close()                   # vanishes: the will (retained) goes out
        assert wgot.get(timeout=15) == ("status/dev-1", b"offline", 1, False)
        late, lgot, lconn = _client("late")
        late.connect("127.0.0.1", srv.mqtt_port, 30)
        late.loop_start()
        assert lconn.wait(10)
        late.subscribe("status/+", 1)
        assert late.subscribed.wait(10)
        assert lgot.get(timeout=10) == ("status/dev-1", b"offline", 1, True)
        for c in (watcher, late):
            c.disconnect()
            c.loop_stop()
        dev.loop_stop()
    finally:
        stop.set()
        t.join(10)


def test_paho_over_websocket(natsd, tmp_path):
    srv = start_mqtt(natsd, tmp_path, top_extra="websocket { port: -1, no_tls: true }")
    ws_port = int(srv.proc.wait_log(r"Listening for websocket clients on ws://[^ ]*:(\d+)").group(1))
    sub, got, conn = _client("ws-sub", transport="websockets")
    sub.ws_set_options(path="/mqtt")
    sub.connect("127.0.0.1", ws_port, 30)
    sub.loop_start()
    assert conn.wait(10)
    sub.subscribe("w/#", 1)
    assert sub.subscribed.wait(10)
    pub, _, pconn = _client("tcp-pub")
    pub.connect("127.0.0.1", srv.mqtt_port, 30)
    pub.loop_start()
    assert pconn.wait(10)
    pub.publish("w/x", b"over-ws", qos=1).wait_for_publish(10)
    assert got.get(timeout=10) == ("w/x", b"over-ws", 1, False)
    for c in (sub, pub):
        c.disconnect()
        c.loop_stop()


def test_aiomqtt_asyncio_client(natsd, tmp_path):
    """aiomqtt (asyncio): a QoS 2 publish reaches a NATS subscriber, a NATS publish reaches
    its QoS 1 subscription."""
    import aiomqtt
    srv = start_mqtt(natsd, tmp_path)

    async def scenario():
        nc = await nats.connect(srv.url)
        inbox = await nc.subscribe("sensors.>")
        await nc.flush()
        async with aiomqtt.Client("127.0.0.1", port=srv.mqtt_port, identifier="aio-1") as client:
            await client.subscribe("alerts/#", qos=1)
            await client.publish("sensors/t1", b"20.5", qos=2)
            got = await inbox.next_msg(timeout=5)
            await nc.publish("alerts.fire", b"now")
            async for message in client.messages:
                alert = (str(message.topic), message.payload, message.qos)
                break
        await nc.close()
        return (got.subject, got.data, got.headers), alert
    nats_side, mqtt_side = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert nats_side == ("sensors.t1", b"20.5", {"Nmqtt-Pub": "2"})
    assert mqtt_side == ("alerts/fire", b"now", 0)
