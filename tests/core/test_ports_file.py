"""`ports_file_dir`: the listeners' URLs in `<executable>_<pid>.ports` (nats-server's Ports
JSON), written at start and removed at shutdown; natsd and nats-server alike."""
import json
import os

from tests.support.waiting import poll


def test_ports_file(any_server, tmp_path):
    conf = tmp_path / "p.conf"
    conf.write_text(f'ports_file_dir: "{tmp_path}"\nhttp_port: -1\nprof_port: -1\n')
    srv = any_server("-c", str(conf))
    name = "%s_%d.ports" % ("nats-server" if "nats-server" in srv.argv[0] else "natsd", srv.proc.pid)
    path = tmp_path / name
    # nats-server writes the file in place, so a reader may catch it empty: wait for JSON
    assert poll(lambda: _read_json(path), timeout=10)
    ports = _read_json(path)
    assert ports["nats"] == ["nats://127.0.0.1:%d" % srv.port]
    assert ports["monitoring"] == ["http://127.0.0.1:%d" % srv.http_port]
    assert len(ports["profile"]) == 1 and ports["profile"][0].startswith("http://127.0.0.1:")
    assert set(ports) == {"nats", "monitoring", "profile"}
    assert srv.stop() == 0
    assert not os.path.exists(path)


def _read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
