"""Gateways over TLS (`gateway { tls {} }`): both sides present certificates from the test CA
and verify the other's, TLS before INFO/CONNECT, as nats-server does it, natsd and
nats-server mixed. A peer with a certificate from another CA, or speaking plaintext, never
becomes a gateway."""
import asyncio

import nats
import pytest

from tests.support.certs import CA
from tests.support.servers import nats_server_cmd
from tests.support.supercluster import (outbound_names, start_gateway_server,
                                        wait_gateway_interest, wait_gateways, wait_outbound)

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


def _tls(cert, key, ca):
    return '  tls { cert_file: "%s", key_file: "%s", ca_file: "%s", timeout: 2 }' % (cert, key, ca)


@pytest.fixture
def certs(tmp_path):
    ca = CA(str(tmp_path / "ca"))
    cert, key = ca.server_cert("gateway")
    other = CA(str(tmp_path / "other"), name="other CA")
    ocert, okey = other.server_cert("intruder")
    return {"ok": _tls(cert, key, ca.ca_file), "foreign": _tls(ocert, okey, other.ca_file)}


async def _a_to_b(a, b):
    """A message with a header from a client of A reaches a subscriber on B, once B's
    interest reached A."""
    ac, bc = await nats.connect(a.url), await nats.connect(b.url)
    sub = await bc.subscribe("secure.>")
    await bc.flush()
    await asyncio.to_thread(wait_gateway_interest, [a], "B", "secure.>")
    await ac.publish("secure.x", b"s", headers={"K": "v"})
    await ac.flush()
    m = await sub.next_msg(timeout=5)
    assert (m.subject, m.data, m.headers) == ("secure.x", b"s", {"K": "v"})
    await ac.close()
    await bc.close()


@pytest.mark.parametrize("kinds", [("natsd", "nats-server"), ("nats-server", "natsd")],
                         ids=lambda k: "%s+%s" % k)
def test_tls_gateways_form_and_carry_traffic(tmp_path, certs, kinds):
    from tools.serverproc import free_port
    gw = {n: free_port() for n in ("A1", "B1")}
    # "localhost" in the URLs: the certificate's name is checked
    url = {n: "nats://localhost:%d" % p for n, p in gw.items()}
    a = start_gateway_server(kinds[0], tmp_path, "A1", "A", gw["A1"], {"B": [url["B1"]]},
                             gateway_extra=certs["ok"])
    b = start_gateway_server(kinds[1], tmp_path, "B1", "B", gw["B1"], {"A": [url["A1"]]},
                             gateway_extra=certs["ok"])
    try:
        wait_gateways([a, b])
        for s in (a, b):
            v = s.get("/varz")["gateway"]
            assert v.get("tls_required") is True and v.get("tls_verify") is True, s.kind
            conn = s.get("/gatewayz")["outbound_gateways"][{"A1": "B", "B1": "A"}[s.name]]["connection"]
            assert conn.get("tls_version") == "1.3", (s.kind, conn)

        asyncio.run(_a_to_b(a, b))
    finally:
        a.proc.kill()
        b.proc.kill()


@pytest.mark.parametrize("target", ["natsd", "nats-server"])
def test_foreign_certificates_and_plaintext_never_join(tmp_path, certs, target):
    from tools.serverproc import free_port
    tport = free_port()
    t = start_gateway_server(target, tmp_path / "t", "T", "T", tport, gateway_extra=certs["ok"])
    turl = {"T": ["nats://localhost:%d" % tport]}
    foreign = start_gateway_server("natsd", tmp_path / "f", "F", "F", free_port(), turl,
                                   gateway_extra=certs["foreign"])
    plain = start_gateway_server("natsd", tmp_path / "p", "P", "P", free_port(), turl)
    try:
        foreign.proc.wait_log(r"gid:\d+ - TLS gateway handshake error")
        t.proc.wait_log(r"gid:\d+ - TLS gateway handshake error")
        plain.proc.wait_log(r'Creating outbound gateway connection to "T"')
        t.proc.wait_log(r"Gateway connection closed: (TLS Handshake Failure|Read Error)")
        assert not outbound_names(foreign) and not outbound_names(plain)
        assert not t.get("/gatewayz")["inbound_gateways"]
    finally:
        for s in (t, foreign, plain):
            s.proc.kill()


@pytest.mark.parametrize("entry", ["ok", "foreign"])
@pytest.mark.parametrize("kinds", [("natsd", "nats-server"), ("nats-server", "natsd")],
                         ids=lambda k: "%s+%s" % k)
def test_a_remote_entry_with_its_own_tls_is_dialed_with_it(tmp_path, certs, kinds, entry):
    """`gateways: [ { name: B, url: ..., tls {} } ]` on a gateway without TLS of its own: A
    dials B with that entry's certificates (B requires TLS). With the test CA's, A's
    outbound link is TLS 1.3 and A's messages reach B's subscriber (B's interest comes back
    over B's inbound); with another CA's, A's handshake fails and no link forms. The same on
    nats-server and natsd as A."""
    from tools.serverproc import free_port
    gw = {n: free_port() for n in ("A1", "B1")}
    b = start_gateway_server(kinds[1], tmp_path, "B1", "B", gw["B1"], gateway_extra=certs["ok"])
    a = start_gateway_server(kinds[0], tmp_path, "A1", "A", gw["A1"],
                             {"B": ["nats://localhost:%d" % gw["B1"]]}, remote_extra={"B": certs[entry]})
    try:
        if entry == "foreign":
            a.proc.wait_log(r"gid:\d+ - TLS gateway handshake error")
            assert "B" not in outbound_names(a)
            return
        wait_outbound(a, {"B"})
        conn = a.get("/gatewayz")["outbound_gateways"]["B"]["connection"]
        assert conn.get("tls_version") == "1.3", (a.kind, conn)
        assert not a.get("/varz")["gateway"].get("tls_required"), a.kind

        asyncio.run(_a_to_b(a, b))
    finally:
        a.proc.kill()
        b.proc.kill()
