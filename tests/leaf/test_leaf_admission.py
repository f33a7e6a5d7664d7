"""Which leaf nodes a hub admits: `leafnodes { authorization { nkey } }` takes leaf nodes that
sign its nonce with that one user nkey (a remote's `nkey` seed) and binds them to the block's
`account`, refusing another key or none; `leafnodes { min_version }` refuses older servers.
Hub and spoke each natsd or nats-server."""
import nkeys
import pytest

from tests.support.servers import ServerProcess, http_json, server_cmd
from tests.support.waiting import poll

KINDS = [("natsd", "natsd"), ("natsd", "nats-server"), ("nats-server", "natsd")]


def _start(kind, path, text):
    path.write_text(text)
    return ServerProcess(list(server_cmd(kind)) + ["-c", str(path), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()


def _user_key(n):
    seed = nkeys.encode_seed(bytes([n]) * 32, nkeys.PREFIX_BYTE_USER).decode()
    return seed, nkeys.from_seed(bytearray(seed.encode())).public_key.decode()


@pytest.mark.parametrize("hub_kind, spoke_kind", KINDS)
def test_leaf_nkey_authorization(tmp_path, hub_kind, spoke_kind):
    seed, public = _user_key(7)
    other_seed, _ = _user_key(8)
    hub = _start(hub_kind, tmp_path / "hub.conf",
                 "http_port: -1\naccounts { LEAFS {} }\n"
                 f'leafnodes {{ host: 127.0.0.1, port: -1, authorization {{ nkey: "{public}", account: LEAFS }} }}\n')
    leaf_port = int(hub.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))
    spokes = []
    try:
        for name, key in (("good", seed), ("wrong", other_seed), ("none", None)):
            remote = f'url: "nats-leaf://127.0.0.1:{leaf_port}"' + (f', nkey: "{key}"' if key else "")
            spokes.append(_start(spoke_kind, tmp_path / f"{name}.conf",
                                 f'server_name: {name}\nleafnodes {{ reconnect: "200ms", remotes: [ {{ {remote} }} ] }}\n'))
        assert poll(lambda: len(http_json(hub.http_port, "/leafz")["leafs"]) == 1, timeout=15)
        leafs = http_json(hub.http_port, "/leafz")["leafs"]
        assert [(lf["name"], lf["account"]) for lf in leafs] == [("good", "LEAFS")]
        for refused in spokes[1:]:          # refused, and trying again
            refused.wait_log(r"Authorization Violation", timeout=15)
    finally:
        for p in spokes + [hub]:
            p.kill()


@pytest.mark.parametrize("hub_kind", ["natsd", "nats-server"])
@pytest.mark.parametrize("minimum, links", [("2.8.0", True), ("2.99.0", False)])
def test_leafnodes_min_version(tmp_path, hub_kind, minimum, links):
    """`leafnodes { min_version }`: a remote server older than it is refused with
    nats-server's -ERR (natsd spokes are 2.15.1)."""
    hub = _start(hub_kind, tmp_path / "hub.conf",
                 f'http_port: -1\nleafnodes {{ host: 127.0.0.1, port: -1, min_version: "{minimum}" }}\n')
    leaf_port = int(hub.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))
    spoke = _start("natsd", tmp_path / "spoke.conf",
                   f'server_name: spoke\nleafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n')
    try:
        if links:
            assert poll(lambda: len(http_json(hub.http_port, "/leafz")["leafs"]) == 1, timeout=15)
        else:
            spoke.wait_log(r'connection rejected since minimum version required is \\"2\.99\.0\\"|'
                           r'connection rejected since minimum version required is "2\.99\.0"', timeout=15)
            assert http_json(hub.http_port, "/leafz")["leafs"] == []
    finally:
        spoke.kill()
        hub.kill()


def test_leafnodes_min_version_below_2_8_is_refused(natsd, reference, tmp_path):
    conf = tmp_path / "hub.conf"
    conf.write_text('leafnodes { port: -1, min_version: "2.7.0" }\n')
    for start in (natsd, reference):
        srv = start("-c", str(conf), wait=False)
        assert srv.proc.wait(15) == 1
        assert srv.log.strip().endswith("the minimum version should be at least 2.8.0")
