"""`leafnodes { authorization { nkey } }`: a hub takes leaf nodes that sign its nonce with that
one user nkey (a remote's `nkey` seed) and binds them to the block's `account`; a remote with
another key, or none, is refused. Hub and spoke each natsd or nats-server."""
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
