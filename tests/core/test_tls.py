"""TLS on the client port, natsd and nats-server side by side with nats-py and raw sockets:
server-only TLS, client certificates (verify), certificate identities mapped to users
(verify_and_map), handshake first (on and auto), allow_non_tls, pinned certificates, the
--tls flags, /connz, reload without dropping connections, and the bad cases (plaintext on a
TLS port, unknown CA, expired certificate, a handshake that stalls). Certificates are made by
the test (tests/support/certs.py)."""
import asyncio
import json
import os
import signal
import socket
import ssl
import time
import urllib.request

import nats
import pytest

from tests.support.certs import CA, spki_pin
from tests.support.rawclient import RawClient
from tests.support.servers import recv_until_quiet


def tls_block(pki, extra=""):
    cert, key = pki["server"]
    return 'tls { cert_file: "%s", key_file: "%s", ca_file: "%s"\n%s }\n' % (cert, key, pki["ca"], extra)


def start(factory, tmp_path, text, name="tls.conf", *args):
    p = tmp_path / name
    p.write_text(text)
    return factory("-c", str(p), "-m", "-1", *args)


def client_ctx(pki, cert=None, cafile=None):
    ctx = ssl.create_default_context(cafile=cafile or pki["ca"])
    if cert is not None:
        ctx.load_cert_chain(*pki[cert])
    return ctx


def roundtrip(srv, ctx, **kw):
    async def go():
        nc = await nats.connect("tls://127.0.0.1:%d" % srv.port, tls=ctx, allow_reconnect=False,
                                max_reconnect_attempts=0, **kw)
        sub = await nc.subscribe("t.x")
        await nc.publish("t.x", b"secret payload")
        msg = await sub.next_msg(timeout=5)
        info = dict(nc._server_info)
        await nc.close()
        return msg.data, info
    return asyncio.run(go())


def tls_raw(port, ctx, server_hostname="localhost"):
    """A raw socket that reads the plaintext INFO, then does TLS as nats clients do."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    buf = b""
    while b"\r\n" not in buf:
        buf += s.recv(4096)
    return ctx.wrap_socket(s, server_hostname=server_hostname), buf


def test_tls_pubsub(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki))
    data, info = roundtrip(srv, client_ctx(pki))
    assert data == b"secret payload"
    assert info.get("tls_required") is True and "tls_verify" not in info


def test_plaintext_client_on_tls_port_is_closed(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki))
    with RawClient(srv.port) as c:
        assert c.info["tls_required"] is True
        c.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert c.read_until_eof(5) == b""


def test_client_certificates_required(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki, "verify: true"))
    data, info = roundtrip(srv, client_ctx(pki, "alice"))
    assert data == b"secret payload" and info.get("tls_verify") is True
    for cert in (None, "stranger", "expired"):
        with pytest.raises(Exception):
            roundtrip(srv, client_ctx(pki, cert))
    assert srv.proc.poll() is None


def test_the_server_presents_its_cert_files_certificates_alone(natsd, reference, tmp_path, pki):
    """Go sends the certificates of cert_file, nothing else: a client that does not trust the
    CA sees an unverifiable first certificate, not a self-signed CA in the chain (OpenSSL
    would complete the chain from ca_file unless told not to)."""
    chains = []
    for factory in (reference, natsd):
        srv = start(factory, tmp_path, tls_block(pki, "verify: true"), "chain-%d.conf" % len(chains))
        ctx = client_ctx(pki, "alice")
        s, _ = tls_raw(srv.port, ctx)
        chains.append([c.public_bytes() for c in s._sslobj.get_unverified_chain()])
        s.close()
    with open(pki["server"][0]) as f:
        server_pem = f.read()
    assert chains[0] == chains[1] == [server_pem]


def test_unknown_server_ca_is_refused_by_the_client(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki))
    with pytest.raises(Exception):
        roundtrip(srv, client_ctx(pki, cafile=pki["other_ca"]))


@pytest.mark.parametrize("cert,user", [("alice", "alice@example.com"), ("svc", "svc.example.com"),
                                       ("dn", "CN=dnuser,OU=NATS.io,O=Example"),
                                       ("dn", "O=Example,OU=NATS.io,CN=dnuser")])
def test_verify_and_map(any_server, tmp_path, pki, cert, user):
    conf = tls_block(pki, "verify_and_map: true") + (
        'authorization { users: [ {user: "%s", permissions: {publish: "t.>", subscribe: "t.>"}} ] }\n'
        % user)
    srv = start(any_server, tmp_path, conf)
    data, _ = roundtrip(srv, client_ctx(pki, cert))
    assert data == b"secret payload"
    with pytest.raises(Exception):
        roundtrip(srv, client_ctx(pki, "nobody"))


def test_handshake_first(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki, "handshake_first: true"))
    data, info = roundtrip(srv, client_ctx(pki), tls_handshake_first=True)
    assert data == b"secret payload" and info.get("tls_required") is True
    # a client that waits for the INFO first gets nothing and times out
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=1)
    s.settimeout(1)
    with pytest.raises(socket.timeout):
        s.recv(100)
    s.close()


def test_handshake_first_auto_takes_both(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki, "handshake_first: auto"))
    assert roundtrip(srv, client_ctx(pki), tls_handshake_first=True)[0] == b"secret payload"
    assert roundtrip(srv, client_ctx(pki))[0] == b"secret payload"


def test_allow_non_tls(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki) + "allow_non_tls: true\n")
    with RawClient(srv.port) as c:
        assert c.info.get("tls_available") is True and "tls_required" not in c.info
        c.connect()
        c.send(b"SUB p 1\r\nPUB p 2\r\nok\r\n")
        assert c.sync() == b"MSG p 1 2\r\nok\r\n"
    assert roundtrip(srv, client_ctx(pki))[0] == b"secret payload"


def test_pinned_certs(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki, 'verify: true\npinned_certs: ["%s"]'
                                              % spki_pin(pki["alice"][0])))
    assert roundtrip(srv, client_ctx(pki, "alice"))[0] == b"secret payload"
    with pytest.raises(Exception):
        roundtrip(srv, client_ctx(pki, "svc"))


def test_stalled_handshake_times_out(any_server, tmp_path, pki):
    srv = start(any_server, tmp_path, tls_block(pki, "timeout: 0.5"))
    with RawClient(srv.port) as c:
        t0 = time.monotonic()
        assert c.read_until_eof(5) == b""
        assert time.monotonic() - t0 < 3


def test_tls_flags(any_server, tmp_path, pki):
    cert, key = pki["server"]
    srv = any_server("--tls", "--tlscert", cert, "--tlskey", key)
    assert roundtrip(srv, client_ctx(pki))[0] == b"secret payload"


def test_connz_shows_tls(natsd, tmp_path, pki):
    srv = start(natsd, tmp_path, tls_block(pki))
    ctx = client_ctx(pki)
    s, _ = tls_raw(srv.port, ctx)
    s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    assert s.recv(100).startswith(b"PONG")
    with urllib.request.urlopen("http://127.0.0.1:%d/connz" % srv.http_port) as r:
        conn = json.loads(r.read())["connections"][0]
    assert conn["tls_version"] == "1.3" and conn["tls_cipher_suite"].startswith("TLS_")
    s.close()


def test_reload_certificates_keeps_connections(natsd, tmp_path, pki):
    """A reload with a certificate from another CA: the open connection goes on, new clients
    must trust the new CA."""
    srv = start(natsd, tmp_path, tls_block(pki))
    s, _ = tls_raw(srv.port, client_ctx(pki))
    s.sendall(b'CONNECT {"verbose":false}\r\nSUB r 1\r\nPING\r\n')
    assert s.recv(100).startswith(b"PONG")
    cert, key = pki["other_server"]
    (tmp_path / "tls.conf").write_text('tls { cert_file: "%s", key_file: "%s" }\n' % (cert, key))
    srv.signal(signal.SIGHUP)
    srv.wait_log("Reloaded server configuration", 10)
    s.sendall(b"PUB r 2\r\nok\r\nPING\r\n")
    got = b""
    while b"PONG" not in got:
        got += s.recv(100)
    assert got.startswith(b"MSG r 1 2\r\nok\r\n")
    assert roundtrip(srv, client_ctx(pki, cafile=pki["other_ca"]))[0] == b"secret payload"
    with pytest.raises(Exception):
        roundtrip(srv, client_ctx(pki))
    s.close()


def test_https_monitoring(any_server, tmp_path, pki):
    """https_port serves the monitoring endpoints over the server's TLS, without client
    certificates even where clients must present one."""
    port = __import__("tools.serverproc", fromlist=["free_port"]).free_port()
    p = tmp_path / "https.conf"
    p.write_text(tls_block(pki, "verify: true") + "https_port: %d\n" % port)
    srv = any_server("-c", str(p))
    srv.wait_log(r"Starting https monitor on .*:%d" % port, 5)
    ctx = ssl.create_default_context(cafile=pki["ca"])
    with urllib.request.urlopen("https://localhost:%d/varz" % port, context=ctx, timeout=5) as r:
        varz = json.loads(r.read())
    assert varz["https_port"] == port and varz["server_id"]


def test_https_needs_tls(any_server, tmp_path):
    p = tmp_path / "https.conf"
    p.write_text("https_port: 48222\n")
    srv = any_server("-c", str(p), wait=False)
    assert srv.proc.wait(10) == 1
    assert "Can't start monitoring: TLS cert and key required for HTTPS" in srv.log


def _served_certificate(port, server_name):
    """The DER certificate a server presents to a client asking for `server_name` (SNI)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    s.recv(4096)                                      # the plaintext INFO first
    t = ctx.wrap_socket(s, server_hostname=server_name)
    der = t.getpeercert(binary_form=True)
    t.close()
    return der


@pytest.mark.parametrize("key", ["certs", "certificates"])
def test_certificates_chosen_by_server_name(any_server, tmp_path, pki, key):
    """`certs: [...]` (or `certificates`): the certificate whose names match the client's SNI,
    the first one otherwise (Go's crypto/tls choice)."""
    ca = CA(os.path.join(pki["dir"], "sni-%s" % tmp_path.name))
    a = ca.issue("a", "a.example.com", dns=["a.example.com"])
    b = ca.issue("b", "b", dns=["b.example.com", "*.wild.example.com"])
    block = ('tls { %s: [ {cert_file: "%s", key_file: "%s"}, {cert_file: "%s", key_file: "%s"} ]\n'
             ' timeout: 2 }\n' % (key, a[0], a[1], b[0], b[1]))
    srv = start(any_server, tmp_path, block)
    from cryptography import x509
    der = {name: x509.load_der_x509_certificate(_served_certificate(srv.port, name)).subject.rfc4514_string()
           for name in ("a.example.com", "b.example.com", "x.wild.example.com", "other.example.com")}
    assert der == {"a.example.com": "CN=a.example.com", "b.example.com": "CN=b",
                   "x.wild.example.com": "CN=b", "other.example.com": "CN=a.example.com"}


def test_connection_rate_limit(any_server, tmp_path, pki):
    """tls `connection_rate_limit: 2`: in one second two TLS clients are served, the others
    get the INFO, then nats-server's throttling -ERR, and are closed; the server then warns
    how many it rejected."""
    srv = start(any_server, tmp_path, tls_block(pki, "connection_rate_limit: 2"))
    answers = []
    socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(6)]
    for s in socks:
        data = b""
        while b"\r\n" not in data:
            data += s.recv(4096)
        # a served client hears nothing more until it does TLS
        answers.append(data.split(b"\r\n", 1)[1] + recv_until_quiet(s, 0.5))
        s.close()
    throttled = b"-ERR 'Connection throttling is active. Please try again later.'\r\n"
    # which two are served is nats-server's goroutines' race; that two are is the rule
    assert sorted(answers) == [b"", b""] + [throttled] * 4, answers
    srv.wait_log(r"\[WRN\] Rejected 4 connections due to TLS rate limiting")


def test_min_version(any_server, tmp_path, pki):
    """`min_version: "1.3"`: a client that stops at TLS 1.2 does not get in; one with 1.3 does."""
    srv = start(any_server, tmp_path, tls_block(pki, 'min_version: "1.3"'))
    old = client_ctx(pki)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        tls_raw(srv.port, old)
    s, _ = tls_raw(srv.port, client_ctx(pki))
    assert s.version() == "TLSv1.3"
    s.close()
