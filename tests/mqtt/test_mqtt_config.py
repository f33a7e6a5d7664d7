"""The `mqtt {}` block's start-up errors are nats-server's (same stderr, exit 1), and a block
natsd accepts starts a listener with nats-server's launcher line."""
import pytest

from tests.conf.test_cli_errors import NATS_SERVER, both, same

pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="reference nats-server not found")

CONFIGS = {
    "standalone_without_jetstream": "mqtt { port: -1 }\n",
    "cluster_without_server_name": "cluster { port: -1, name: c }\njetstream: true\nmqtt { port: -1 }\n",
    "username_with_users": "server_name: a\njetstream: true\n"
                           "authorization { users: [ {user: a, password: b} ] }\n"
                           "mqtt { port: -1, authorization { username: x, password: y } }\n",
    "token_with_users": "server_name: a\njetstream: true\n"
                        "authorization { users: [ {user: a, password: b} ] }\n"
                        "mqtt { port: -1, authorization { token: t } }\n",
    "unknown_field": "server_name: a\njetstream: true\nmqtt { port: -1, bogus: 1 }\n",
    "not_a_map": "server_name: a\njetstream: true\nmqtt: 5\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mqtt_config_errors(name, tmp_path):
    (tmp_path / "s.conf").write_text(CONFIGS[name])
    want, got = both("-c", "s.conf", "-p", "-1", cwd=tmp_path)
    assert want.returncode == 1, want.stderr
    same(want, got)


def test_consumer_replicas_is_a_warning(tmp_path):
    """nats-server ignores consumer_replicas with a warning, which fails a -t check."""
    (tmp_path / "s.conf").write_text("server_name: a\njetstream: true\nmqtt { port: -1, consumer_replicas: 3 }\n")
    want, got = both("-t", "-c", "s.conf", cwd=tmp_path)
    assert want.returncode == 1 and "consumer replicas setting ignored" in want.stderr
    same(want, got)
