"""OCSP peer verification of client certificates (`tls { verify: true, ocsp_peer: ... }`),
natsd against nats-server, with a real OCSP responder (`openssl ocsp`) for a CA that has
revoked one of the two client certificates: the good one connects, the revoked one does not
(unless `warn_only`); with the responder unreachable nobody connects unless
`allow_when_ca_unreachable`; `ocsp_peer` without `verify` does not start."""
import asyncio
import datetime
import shutil
import socket
import ssl
import subprocess

import nats
import pytest
from cryptography import x509

from tests.support.certs import CA
from tests.support.servers import ServerProcess, http_json, server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not found")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _index_line(cert_file, revoked):
    cert = x509.load_pem_x509_certificate(open(cert_file, "rb").read())
    exp = cert.not_valid_after_utc.strftime("%y%m%d%H%M%SZ")
    when = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime("%y%m%d%H%M%SZ")
    dn = "/" + "/".join(a.rfc4514_string() for a in cert.subject)
    return "%s\t%s\t%s\t%X\tunknown\t%s\n" % ("R" if revoked else "V", exp, when if revoked else "",
                                             cert.serial_number, dn)


@pytest.fixture
def ocsp_world(tmp_path):
    """A CA, a server certificate, a good and a revoked client certificate naming a
    responder, and that responder running."""
    port = _free_port()
    url = "http://127.0.0.1:%d" % port
    ca = CA(str(tmp_path / "pki"), name="OCSP test CA")
    world = {"ca": ca.ca_file, "server": ca.server_cert(),
             "good": ca.issue("good", "good client", ocsp_url=url),
             "revoked": ca.issue("revoked", "revoked client", ocsp_url=url),
             "down": ca.issue("down", "client of a dead responder", ocsp_url="http://127.0.0.1:%d" % _free_port())}
    index = tmp_path / "index.txt"
    index.write_text(_index_line(world["good"][0], False) + _index_line(world["revoked"][0], True))
    log = tmp_path / "responder.log"
    with open(log, "w") as out:
        responder = subprocess.Popen(
            ["openssl", "ocsp", "-index", str(index), "-port", str(port), "-rsigner", ca.ca_file,
             "-rkey", ca.key_file(), "-CA", ca.ca_file, "-ignore_err"], stdout=out, stderr=out)
    # (not probed with a connection: the responder serves one connection at a time)
    assert poll(lambda: "waiting for OCSP client connections" in log.read_text(), timeout=10)
    yield world
    responder.kill()
    responder.wait(10)


def _start(server, tmp_path, world, peer):
    conf = tmp_path / "ocsp.conf"
    cert, key = world["server"]
    conf.write_text('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true, ocsp_peer: %s }\n'
                    % (cert, key, world["ca"], peer))
    return server("-c", str(conf))


def _connects(srv, world, who):
    ctx = ssl.create_default_context(cafile=world["ca"])
    ctx.load_cert_chain(*world[who])

    async def go():
        try:
            nc = await nats.connect("tls://127.0.0.1:%d" % srv.port, tls=ctx, allow_reconnect=False,
                                    max_reconnect_attempts=0, connect_timeout=5)
        except Exception:
            return False
        try:
            await nc.flush(timeout=5)
            return True
        except Exception:
            return False
        finally:
            await nc.close()
    return asyncio.run(go())


@pytest.mark.parametrize("peer, allowed", [
    ("true", {"good"}),
    ("{ verify: true, warn_only: true }", {"good", "revoked", "down"}),
    ("{ verify: true, allow_when_ca_unreachable: true, ca_timeout: 1 }", {"good", "down"}),
])
def test_ocsp_peer(any_server, tmp_path, ocsp_world, peer, allowed):
    srv = _start(any_server, tmp_path, ocsp_world, peer)
    got = {who for who in ("good", "revoked", "down") if _connects(srv, ocsp_world, who)}
    assert got == allowed


def test_ocsp_peer_needs_client_certificates(any_server, tmp_path, ocsp_world):
    conf = tmp_path / "ocsp.conf"
    cert, key = ocsp_world["server"]
    conf.write_text('tls { cert_file: "%s", key_file: "%s", ca_file: "%s", ocsp_peer: true }\n'
                    % (cert, key, ocsp_world["ca"]))
    srv = any_server("-c", str(conf), wait=False)
    assert srv.proc.wait(15) != 0
    assert "OCSP peer verification for client connections requires TLS verify (mTLS) to be enabled" in srv.log


@pytest.mark.parametrize("hub_kind", ["natsd", "nats-server"])
def test_ocsp_peer_on_the_leaf_node_port(tmp_path, ocsp_world, hub_kind):
    """A hub's `leafnodes { tls { verify, ocsp_peer } }`: the spoke with the good certificate
    links, the one with the revoked certificate does not (natsd spokes)."""
    cert, key = ocsp_world["server"]
    ca = ocsp_world["ca"]
    hub_conf = tmp_path / "hub.conf"
    hub_conf.write_text('http_port: -1\nleafnodes { host: 127.0.0.1, port: -1\n  tls { cert_file: "%s", key_file: "%s", '
                        'ca_file: "%s", verify: true, ocsp_peer: true } }\n' % (cert, key, ca))
    hub = ServerProcess(list(server_cmd(hub_kind)) + ["-c", str(hub_conf), "-p", "-1", "-a", "127.0.0.1"]).wait_ready()
    leaf_port = int(hub.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))
    spokes = []
    try:
        for who in ("good", "revoked"):
            c, k = ocsp_world[who]
            conf = tmp_path / ("%s.conf" % who)
            conf.write_text('server_name: %s\nleafnodes { reconnect: "200ms", remotes: [ { url: "tls://127.0.0.1:%d"\n'
                            '  tls { cert_file: "%s", key_file: "%s", ca_file: "%s" } } ] }\n' % (who, leaf_port, c, k, ca))
            spokes.append(ServerProcess(list(server_cmd("natsd")) + ["-c", str(conf), "-p", "-1", "-a", "127.0.0.1"])
                          .wait_ready())
        assert poll(lambda: len(http_json(hub.http_port, "/leafz")["leafs"]) == 1, timeout=15)
        spokes[1].wait_log(r"(TLS|handshake|closed|EOF|reset)", timeout=15)
        assert [lf["name"] for lf in http_json(hub.http_port, "/leafz")["leafs"]] == ["good"]
    finally:
        for p in spokes + [hub]:
            p.kill()


def test_ocsp_peer_on_the_websocket_port(any_server, tmp_path, ocsp_world):
    """`websocket { tls { verify, ocsp_peer } }`: over wss, the good certificate connects, the
    revoked one does not."""
    from tests.core.test_websocket import ws_server
    cert, key = ocsp_world["server"]
    srv = ws_server(any_server, tmp_path, 'tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true, '
                    'ocsp_peer: true }' % (cert, key, ocsp_world["ca"]))

    async def roundtrip(ctx):
        nc = await nats.connect("wss://localhost:%d" % srv.ws_port, tls=ctx, allow_reconnect=False,
                                max_reconnect_attempts=0, connect_timeout=5)
        try:
            await nc.flush(timeout=5)
        finally:
            await nc.close()

    def connects(who):
        ctx = ssl.create_default_context(cafile=ocsp_world["ca"])
        ctx.load_cert_chain(*ocsp_world[who])
        try:
            asyncio.run(asyncio.wait_for(roundtrip(ctx), 6))    # nats.py may hang on a refused wss
            return True
        except Exception:
            return False
    assert {who: connects(who) for who in ("good", "revoked")} == {"good": True, "revoked": False}
