"""`tls { cipher_suites, allow_insecure_cipher_suites }` as nats-server 2.15.1 takes them: the
names of Go's crypto/tls (its secure and its insecure suites; anything else is an unrecognized
cipher), an insecure suite only with `allow_insecure_cipher_suites: true`, an empty list
refused; the same texts and positions from `-t` on both. With the option, a TLS 1.2 client
offering only the allowed insecure suite connects to both servers, and one offering only a
suite left out of the list is refused by both. The suites OpenSSL no longer implements (3DES,
RC4) are refused by natsd with file:line:col rather than started without them, and so are
the post-quantum groups where OpenSSL lacks them; the values parseTLS checks are checked alike."""
import re
import socket
import ssl
import subprocess

import pytest

from tests.support.certs import CA
from tests.support.servers import ServerProcess, nats_server_cmd, natsd_cmd

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("ciphers")
    ca = CA(str(d / "ca"))
    cert, key = ca.server_cert("localhost")
    return {"dir": d, "cert": cert, "key": key, "ca": ca.ca_file}


def _conf(pki, name, ciphers, allow=None):
    listed = ", ".join('"%s"' % c for c in ciphers)
    extra = "" if allow is None else ", allow_insecure_cipher_suites: %s" % ("true" if allow else "false")
    path = pki["dir"] / ("%s.conf" % name)
    path.write_text('port: -1\ntls { cert_file: "%s", key_file: "%s", cipher_suites: [%s]%s }\n'
                    % (pki["cert"], pki["key"], listed, extra))
    return path


def _check(kind, path):
    cmd = list(natsd_cmd() if kind == "natsd" else nats_server_cmd())
    r = subprocess.run(cmd + ["-t", "-c", str(path)], capture_output=True, text=True, timeout=20)
    return r.returncode, r.stderr.replace("natsd:", "nats-server:").split(" (sha256:")[0].strip()


CHECKS = {
    "secure": (["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"], None),
    "insecure without the option": (["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA",
                                     "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"], None),
    "insecure with the option false": (["TLS_RSA_WITH_AES_256_GCM_SHA384"], False),
    "insecure allowed": (["TLS_RSA_WITH_AES_128_CBC_SHA"], True),
    "an old alias": (["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"], None),
    "unknown": (["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "NOT_A_CIPHER"], True),
    "empty": ([], None),
}


@pytest.mark.parametrize("case", list(CHECKS))
def test_cipher_suite_checks_as_nats_server(pki, case):
    ciphers, allow = CHECKS[case]
    path = _conf(pki, case.replace(" ", "_"), ciphers, allow)
    ours, ref = _check("natsd", path), _check("nats-server", path)
    assert ours == ref, (ours, ref)
    assert (ref[0] == 0) == (case in ("secure", "insecure allowed")), ref


def test_3des_and_rc4_are_refused_where_openssl_lacks_them(pki):
    path = _conf(pki, "des", ["TLS_RSA_WITH_3DES_EDE_CBC_SHA"], True)
    assert _check("nats-server", path)[0] == 0
    code, err = _check("natsd", path)
    assert code == 1 and re.fullmatch(r"natsd: \S+des\.conf:2:\d+: the insecure cipher suites OpenSSL no longer "
                                      r"implements \(3DES, RC4\) is not supported by natsd yet",
                                      err.replace("nats-server:", "natsd:")), err


def _handshake(port, ca, openssl_cipher):
    """A TLS 1.2 client offering one suite: the suite agreed, or None when refused."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(openssl_cipher)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.recv(4096)                                  # the INFO, before TLS
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.cipher()[0]
        except (ssl.SSLError, ConnectionResetError):
            return None


def test_an_allowed_insecure_suite_is_the_only_one_offered(pki):
    # (the test CA's keys are ECDSA: an ECDSA suite)
    path = _conf(pki, "allowed", ["TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"], True)
    got = {}
    for kind in ("natsd", "nats-server"):
        srv = ServerProcess(list(natsd_cmd() if kind == "natsd" else nats_server_cmd())
                            + ["-c", str(path), "-p", "-1", "-a", "127.0.0.1"])
        srv.wait_ready()
        try:
            got[kind] = (_handshake(srv.port, pki["ca"], "ECDHE-ECDSA-AES128-SHA256"),
                         _handshake(srv.port, pki["ca"], "ECDHE-ECDSA-AES128-GCM-SHA256"))
        finally:
            srv.kill()
    assert got["natsd"] == got["nats-server"] == ("ECDHE-ECDSA-AES128-SHA256", None), got


VALUES = ['curve_preferences: ["NOPE"]', "curve_preferences: []", 'curve_preferences: ["CurveP384", "X25519"]',
          'min_version: "1.0"', 'min_version: "1.4"', "min_version: 1.3", 'min_version: "TLS1.2"', 'min_version: "1.3"',
          'timeout: "x"', "timeout: true", 'timeout: "1s"', "timeout: 2.5",
          'pinned_certs: ["zz"]', 'pinned_certs: "x"', 'pinned_certs: ["%s"]' % ("AB" * 32),
          'connection_rate_limit: "x"', "connection_rate_limit: 5",
          'handshake_first: "maybe"', "handshake_first: 5", 'handshake_first: "300ms"', 'first: "auto"']


@pytest.mark.parametrize("value", VALUES)
def test_tls_values_checked_as_nats_server(pki, value):
    """The values of a `tls {}` block nats-server's parseTLS checks: the same answer to -t."""
    path = pki["dir"] / "values.conf"
    path.write_text('port: -1\ntls { cert_file: "%s", key_file: "%s", %s }\n' % (pki["cert"], pki["key"], value))
    assert _check("natsd", path) == _check("nats-server", path)


def test_post_quantum_groups_are_refused_where_openssl_lacks_them(pki):
    from natsd.net.tls import openssl_has_mlkem
    if openssl_has_mlkem():
        pytest.skip("this OpenSSL has the ML-KEM groups")
    path = pki["dir"] / "pq.conf"
    path.write_text('port: -1\ntls {\n  cert_file: "%s"\n  key_file: "%s"\n  curve_preferences: ["X25519MLKEM768"]\n}\n'
                    % (pki["cert"], pki["key"]))
    assert _check("nats-server", path)[0] == 0
    code, err = _check("natsd", path)
    assert code == 1 and err.endswith("pq.conf:5:3: post-quantum TLS groups with this OpenSSL (before 3.5) "
                                      "is not supported by natsd yet"), err
