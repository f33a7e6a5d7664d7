"""Leaf node links over TLS, natsd and nats-server on either side: a hub whose leafnode port
requires TLS (with and without client certificates), remotes with `tls {}` blocks and tls://
URLs, handshake first, and the refusals (unknown CA, pinned certificate mismatch)."""

import pytest

from tests.support.certs import spki_pin
from tests.support.leafnodes import COMBO_IDS, COMBOS, across
from tests.support.servers import ENV, http_json
from tests.support.waiting import poll
from tools.serverproc import free_port


HUB = """server_name: hub
leafnodes {
  port: %(leaf_port)d
  tls { cert_file: "%(cert)s", key_file: "%(key)s", ca_file: "%(ca)s" %(hub_extra)s }
}
"""
LEAF = """server_name: leaf
leafnodes { remotes: [ { url: "%(scheme)s://127.0.0.1:%(leaf_port)d" %(remote_extra)s } ] }
"""


def start(kind, starters, tmp_path, name, text):
    path = tmp_path / (name + ".conf")
    path.write_text(text)
    return starters[kind]("-c", str(path), "-m", str(free_port()), cwd=str(tmp_path), env=ENV)


def pair(starters, tmp_path, pki, hub_kind, leaf_kind, scheme="tls", hub_extra="",
         remote_extra=None, link=True):
    leaf_port = free_port()
    cert, key = pki["server"]
    hub = start(hub_kind, starters, tmp_path, "hub", HUB % dict(
        leaf_port=leaf_port, cert=cert, key=key, ca=pki["ca"], hub_extra=hub_extra))
    if remote_extra is None:
        remote_extra = ', tls: { ca_file: "%s" }' % pki["ca"]
    leaf = start(leaf_kind, starters, tmp_path, "leaf", LEAF % dict(
        scheme=scheme, leaf_port=leaf_port, remote_extra=remote_extra))
    if link:
        for srv in (hub, leaf):
            assert poll(lambda: http_json(srv.http_port, "/varz").get("leafnodes") == 1, 15), srv.log
    return hub, leaf


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_over_tls(starters, tmp_path, pki, hub_kind, leaf_kind):
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind)
    assert across(hub, leaf) == [b"down", b"up"]
    leafz = http_json(hub.http_port, "/leafz")["leafs"]
    assert len(leafz) == 1


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_tls_with_client_certificate(starters, tmp_path, pki, hub_kind, leaf_kind):
    cert, key = pki["leaf"]
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind, hub_extra=", verify: true",
                     remote_extra=', tls: { cert_file: "%s", key_file: "%s", ca_file: "%s" }'
                     % (cert, key, pki["ca"]))
    assert across(hub, leaf) == [b"down", b"up"]


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_hub_requires_tls_plain_url_with_tls_block(starters, tmp_path, pki, hub_kind, leaf_kind):
    """nats-leaf:// with a tls{} block: TLS after the hub's plaintext INFO."""
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind, scheme="nats-leaf")
    assert across(hub, leaf) == [b"down", b"up"]


@pytest.mark.parametrize("hub_kind,leaf_kind", COMBOS, ids=COMBO_IDS)
def test_leaf_handshake_first(starters, tmp_path, pki, hub_kind, leaf_kind):
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind, hub_extra=", handshake_first: true",
                     remote_extra=', tls: { ca_file: "%s", handshake_first: true }' % pki["ca"])
    assert across(hub, leaf) == [b"down", b"up"]


@pytest.mark.parametrize("hub_kind,leaf_kind", [("nats-server", "natsd"), ("natsd", "natsd")])
def test_remote_with_unknown_ca_never_links(starters, tmp_path, pki, hub_kind, leaf_kind):
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind, link=False,
                     remote_extra=', tls: { ca_file: "%s" }' % pki["other_ca"])
    leaf.wait_log(r"TLS leafnode handshake error", 10)
    assert http_json(hub.http_port, "/varz").get("leafnodes") == 0


@pytest.mark.parametrize("hub_kind,leaf_kind", [("nats-server", "natsd"), ("natsd", "natsd")])
def test_remote_pinned_certificate(starters, tmp_path, pki, hub_kind, leaf_kind):
    pin = spki_pin(pki["server"][0])
    hub, leaf = pair(starters, tmp_path, pki, hub_kind, leaf_kind,
                     remote_extra=', tls: { ca_file: "%s", pinned_certs: ["%s"] }' % (pki["ca"], pin))
    assert across(hub, leaf) == [b"down", b"up"]
