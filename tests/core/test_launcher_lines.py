"""What launchers read off the log, natsd against nats-server 2.15.1: every listener's line
(client, WebSocket, leaf node, route, gateway, monitoring), in nats-server's order and with its host
when none is configured, the lines around them (the node name, the config file with its
digest, "Server is ready"), and the ports a launcher asks for: `-1` (or `port: -1`) for a
random one, `0` for the default one, in every flag style."""
import re
import shutil
import subprocess

import pytest

from tests.support.servers import natsd_cmd, nats_server_cmd

PORT = re.compile(r":\d{2,5}\b")
STAMP = re.compile(r"^\[\d+\] \S+ \S+ ")
KEPT = re.compile(r"Listening for|Starting http|Server is ready|Node:|Using configuration|"
                  r"Store Directory|Gateway name is|Address for gateway|\[FTL\]")

CONFIGS = {
    "no hosts": "port: -1\nhttp_port: -1\nwebsocket { port: -1, no_tls: true }\n"
                "leafnodes { port: -1 }\ncluster { name: G, port: -1 }\ngateway { name: G, port: -1 }\n"
                "accounts { SYS {} }\nsystem_account: SYS\n",
    "hosts": 'listen: 127.0.0.1:-1\nhttp: "127.0.0.1:-1"\n'
             'websocket { listen: "127.0.0.1:-1", no_tls: true }\n'
             'leafnodes { listen: "127.0.0.1:-1" }\ncluster { listen: "127.0.0.1:-1" }\n'
             'gateway { name: G, listen: "127.0.0.1:-1" }\naccounts { SYS {} }\nsystem_account: SYS\n',
    "jetstream": 'server_name: S1\nport: -1\nhttp_port: -1\njetstream { store_dir: "STORE" }\n'
                 "websocket { port: -1, no_tls: true }\nleafnodes { port: -1 }\n",
    "zero ports": "port: -1\nhttp_port: 0\nwebsocket { port: 0, no_tls: true }\n"
                  "leafnodes { port: 0 }\n",
}


def startup_lines(cmd, *args, cwd=None, wait="Server is ready"):
    """The log lines a launcher reads, up to `wait` (and, with a cluster, the route listener's
    line) or the end, with time stamps and ports taken out (random ports differ from run to
    run). nats-server logs its route listener from another goroutine, before or after "Server
    is ready" as they race: `wait`'s line goes last."""
    routes = any("cluster" in open(a).read() for a in args if a.endswith(".conf"))
    p = subprocess.Popen(list(cmd) + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=cwd)
    lines = []
    try:
        for line in p.stdout:
            line = STAMP.sub("", line.rstrip("\n"))
            if KEPT.search(line):
                lines.append(line)
            if "[FTL]" in line or (any(wait in x for x in lines)
                                   and (not routes or any("route connections" in x for x in lines))):
                break
    finally:
        p.kill()
        p.wait(10)
    return [x for x in lines if wait not in x] + [x for x in lines if wait in x]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_listener_lines_are_nats_servers(name, tmp_path):
    conf = tmp_path / "server.conf"         # one file for both: the same name and digest
    conf.write_text(CONFIGS[name].replace("STORE", str(tmp_path / "js")))
    out = {}
    for kind, cmd in (("natsd", natsd_cmd()), ("nats-server", nats_server_cmd())):
        shutil.rmtree(tmp_path / "js", ignore_errors=True)
        out[kind] = [PORT.sub(":PORT", line.replace(str(tmp_path), "TMP"))
                     for line in startup_lines(cmd, "-c", str(conf))]
    assert out["natsd"] == out["nats-server"]
    assert any("Listening for client connections on" in line for line in out["natsd"])


@pytest.mark.alone          # binds the default port 4222: nothing else may hold it meanwhile
@pytest.mark.parametrize("args", [["-p", "0"], ["--port", "0"], ["-p=0"], ["--port=0"], ["-c", "CONF"]])
def test_port_zero_is_the_default_port(args, tmp_path):
    conf = tmp_path / "zero.conf"
    conf.write_text("port: 0\n")
    args = [str(conf) if a == "CONF" else a for a in args]
    got = {kind: startup_lines(cmd, *args, "-a", "127.0.0.1")
           for kind, cmd in (("natsd", natsd_cmd()), ("nats-server", nats_server_cmd()))}
    assert got["natsd"] == got["nats-server"]
    assert "Listening for client connections on 127.0.0.1:4222" in "\n".join(got["natsd"])


@pytest.mark.parametrize("args", [["-p", "-1"], ["--port", "-1"], ["-p=-1"], ["--port=-1"]])
def test_port_minus_one_is_a_random_port(args):
    for cmd in (natsd_cmd(), nats_server_cmd()):
        lines = startup_lines(cmd, *args, "-a", "127.0.0.1")
        ports = [int(m.group(1)) for m in map(re.compile(r"127\.0\.0\.1:(\d+)").search, lines) if m]
        assert ports and ports[0] not in (4222, 0), lines
