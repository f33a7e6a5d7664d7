"""Leaf node links over WebSocket (ws:// and wss:// remotes to a hub's websocket port, path
/leafnode), natsd and nats-server on either side, with and without compression and masking."""
import pytest

from tests.support.leafnodes import COMBO_IDS, COMBOS, across
from tests.support.servers import ENV, http_json
from tests.support.waiting import poll
from tools.serverproc import free_port


def start(kind, starters, tmp_path, name, text):
    path = tmp_path / (name + ".conf")
    path.write_text(text)
    return starters[kind]("-c", str(path), "-m", str(free_port()), cwd=str(tmp_path), env=ENV)


def link(starters, tmp_path, hub_kind, leaf_kind, ws_block="no_tls: true", scheme="ws", remote=""):
    ws_port = free_port()
    hub = start(hub_kind, starters, tmp_path, "hub",
                "server_name: hub\nleafnodes { port: %d }\nwebsocket { port: %d\n %s }\n"
                % (free_port(), ws_port, ws_block))
    leaf = start(leaf_kind, starters, tmp_path, "leaf",
                 'server_name: leaf\nleafnodes { remotes: [ { url: "%s://127.0.0.1:%d" %s } ] }\n'
                 % (scheme, ws_port, remote))
    for srv in (hub, leaf):
        assert poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == 1, 15), srv.log
    return hub, leaf


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_over_ws(starters, tmp_path, hub_kind, leaf_kind):
    hub, leaf = link(starters, tmp_path, hub_kind, leaf_kind)
    assert across(hub, leaf) == [b"down", b"up"]


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_over_ws_compressed_unmasked(starters, tmp_path, hub_kind, leaf_kind):
    hub, leaf = link(starters, tmp_path, hub_kind, leaf_kind, "no_tls: true, compression: true",
                     remote=", ws_compression: true, ws_no_masking: true")
    assert across(hub, leaf) == [b"down", b"up"]


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_over_wss(starters, tmp_path, pki, hub_kind, leaf_kind):
    cert, key = pki["server"]
    hub, leaf = link(starters, tmp_path, hub_kind, leaf_kind,
                     'tls { cert_file: "%s", key_file: "%s" }' % (cert, key), scheme="wss",
                     remote=', tls { ca_file: "%s" }' % pki["ca"])
    assert across(hub, leaf) == [b"down", b"up"]
