"""Routes over TLS (`cluster { tls {} }`): both sides present certificates from the test CA
and verify the other's, TLS before INFO/CONNECT, as nats-server does it, in mixed clusters.
A peer with a certificate from another CA, or speaking plaintext, never becomes a route."""
import asyncio
import time

import nats
import pytest

from tests.support.certs import CA
from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.servers import nats_server_cmd

need_ref = pytest.mark.skipif(nats_server_cmd() is None, reason="nats-server not installed")


def _tls(cert, key, ca, extra=""):
    return 'tls { cert_file: "%s"\n key_file: "%s"\n ca_file: "%s"\n timeout: 2\n %s }' % (cert, key, ca, extra)


@pytest.fixture
def certs(tmp_path):
    ca = CA(str(tmp_path / "ca"))
    cert, key = ca.server_cert("route")
    other = CA(str(tmp_path / "other"), name="other CA")
    ocert, okey = other.server_cert("intruder")
    return {"ok": _tls(cert, key, ca.ca_file), "foreign": _tls(ocert, okey, other.ca_file),
            "insecure": _tls(cert, key, ca.ca_file, "insecure: true")}


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd", "natsd"), ("nats-server", "natsd", "natsd"),
                                   ("natsd", "nats-server", "natsd")],
                         ids=["natsd", "ref-seed", "mixed"])
def test_tls_routes_mesh_and_carry_traffic(tmp_path, certs, kinds):
    members = [start_member(kinds[0], tmp_path, "A", cluster_extra=certs["ok"])]
    try:
        for name, kind in zip("BC", kinds[1:]):
            # "localhost" in the URL: the certificate's name is checked
            members.append(start_member(kind, tmp_path, name, cluster_extra=certs["ok"],
                                        routes=["nats://localhost:%d" % members[0].route_port]))
        wait_mesh(members)
        assert members[0].get("/varz")["cluster"].get("tls_required") is True

        async def run():
            a, c = await nats.connect(members[0].url), await nats.connect(members[2].url)
            sub = await c.subscribe("secure.>")
            await c.flush()
            wait_interest(members[:1], "secure.>")
            await a.publish("secure.x", b"s", headers={"K": "v"})
            await a.flush()
            msg = await sub.next_msg(5)
            await a.close()
            await c.close()
            return msg.subject, msg.data, dict(msg.headers)
        assert asyncio.run(run()) == ("secure.x", b"s", {"K": "v"})
    finally:
        for m in members:
            m.proc.kill()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
@pytest.mark.parametrize("intruder", ["natsd", "nats-server"])
def test_foreign_certificate_never_becomes_a_route(tmp_path, certs, kind, intruder):
    a = start_member(kind, tmp_path, "A", cluster_extra=certs["ok"])
    b = start_member(intruder, tmp_path, "B", cluster_extra=certs["foreign"],
                     routes=["nats://localhost:%d" % a.route_port])
    try:
        a.proc.wait_log(r"rid:\d+ - TLS route handshake error: ", 10)
        time.sleep(0.5)
        assert a.get("/routez")["num_routes"] == 0 and b.get("/routez")["num_routes"] == 0
    finally:
        a.proc.kill()
        b.proc.kill()


@need_ref
@pytest.mark.parametrize("kind", ["natsd", "nats-server"])
def test_plaintext_peer_on_a_tls_route_port(tmp_path, certs, kind):
    a = start_member(kind, tmp_path, "A", cluster_extra=certs["ok"])
    b = start_member("natsd", tmp_path, "B", routes=[a.route_url])
    try:
        a.proc.wait_log(r"rid:\d+ - Router connection closed: TLS Handshake Failure", 10)
        assert a.get("/routez")["num_routes"] == 0
    finally:
        a.proc.kill()
        b.proc.kill()


def test_insecure_warns_and_skips_the_host_check(tmp_path, certs):
    a = start_member("natsd", tmp_path, "A", cluster_extra=certs["insecure"])
    try:
        a.proc.wait_log(r"\[WRN\] TLS certificate chain and hostname of solicited routes will not be "
                        r"verified\. DO NOT USE IN PRODUCTION!")
        # an IP the certificate does not name (it has 127.0.0.1, not 127.0.0.2): fine when insecure
        b = start_member("natsd", tmp_path, "B", cluster_extra=certs["insecure"],
                         routes=["nats://127.0.0.2:%d" % a.route_port])
        try:
            wait_mesh([a, b])
        finally:
            b.proc.kill()
    finally:
        a.proc.kill()


@need_ref
@pytest.mark.parametrize("kinds", [("natsd", "natsd"), ("nats-server", "natsd"), ("natsd", "nats-server")],
                         ids=["natsd", "ref-A", "ref-B"])
def test_verify_cert_and_check_known_urls(tmp_path, kinds):
    """A route is admitted only when a DNS name of its certificate is the host of a configured
    route; a certificate from the same CA naming another host is refused as nats-server
    refuses it (authentication error)."""
    from tools.serverproc import free_port
    ca = CA(str(tmp_path / "ca"))
    good = ca.issue("good", "good", dns=["localhost"])
    odd = ca.issue("odd", "odd", dns=["elsewhere.example.com"])
    ports = [free_port() for _ in range(2)]
    block = lambda c: _tls(c[0], c[1], ca.ca_file, "verify_cert_and_check_known_urls: true")
    routes = ["nats://localhost:%d" % p for p in ports]
    a = start_member(kinds[0], tmp_path, "A", routes=routes, route_port=ports[0], cluster_extra=block(good))
    b = start_member(kinds[1], tmp_path, "B", routes=routes, route_port=ports[1], cluster_extra=block(good))
    c = None
    try:
        wait_mesh([a, b])
        c = start_member("natsd", tmp_path, "C", routes=["nats://localhost:%d" % ports[0]],
                         cluster_extra=block(odd))
        a.proc.wait_log(r"rid:\d+ - authentication error", 10)
        time.sleep(0.3)
        assert a.remote_names() == {"B"}
    finally:
        for m in (a, b, c):
            if m is not None:
                m.proc.kill()
