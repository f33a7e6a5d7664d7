"""MQTT servers for tests: natsd or nats-server with JetStream, a server name and an `mqtt {}`
listener on an ephemeral port, its MQTT port read from the launcher line."""
from __future__ import annotations

MQTT_LISTEN = r"Listening for MQTT clients on (?:mqtt|tls)://[^ ]*:(\d+)"


class MqttServer:
    """A started server and its MQTT port."""

    def __init__(self, proc):
        self.proc = proc
        self.mqtt_port = int(proc.wait_log(MQTT_LISTEN).group(1))

    @property
    def port(self):
        return self.proc.port

    @property
    def url(self):
        return self.proc.url

    @property
    def http_port(self):
        return self.proc.http_port


def mqtt_conf(path, store_dir, name="m1", mqtt_extra="", top_extra="", js_extra="") -> str:
    path.write_text("server_name: %s\njetstream { store_dir: %s\n %s }\n%s\nmqtt {\n  port: -1\n  %s\n}\n"
                    % (name, store_dir, js_extra, top_extra, mqtt_extra))
    return str(path)


def start_mqtt(starter, tmp_path, label="s", mqtt_extra="", top_extra="", args=(), store=None,
               js_extra=""):
    """An MQTT server of `starter`'s kind, stored under tmp_path/label (or `store`)."""
    store = store or tmp_path / (label + "-js")
    conf = mqtt_conf(tmp_path / (label + ".conf"), store, label, mqtt_extra, top_extra, js_extra)
    return MqttServer(starter("-c", conf, "-p", "-1", *args))


def on_both(starters, tmp_path, scenario, **kw):
    """scenario(server) on an MQTT natsd, then on an MQTT nats-server (start_mqtt's keywords,
    each in its own directory) -> [natsd's result, nats-server's]."""
    out = []
    for kind in ("natsd", "nats-server"):
        where = tmp_path / kind
        where.mkdir()
        out.append(scenario(start_mqtt(starters[kind], where, **kw)))
    return out
