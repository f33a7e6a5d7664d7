"""TLS settings as nats-server reads them, turned into OpenSSL contexts (natsd/_core/tls.pyx).

Owns `TlsSettings` (one `tls {}` block, or the --tls* flags: certificates, trust, verification,
identity mapping, pinned certificates, handshake-first and its fallback delay, timeout, cipher
suites and curves with Go's names translated to OpenSSL's), the certificate identity a
connection presents (`peer_identities`, in the order nats-server tries them for
verify_and_map) and the pinned-certificate check. Contexts are rebuilt on a config reload;
connections keep the session they have.
"""
import importlib
import logging

from natsd._core.tls import TlsContext, TlsError
from natsd.gofmt import parse_go_duration

log = logging.getLogger("natsd")

DEFAULT_TIMEOUT = 2.0                   # nats-server TLS_TIMEOUT
DEFAULT_AUTH_TIMEOUT = 2.0              # nats-server AUTH_TIMEOUT, on a port without TLS
DEFAULT_FALLBACK_DELAY = 0.05           # DEFAULT_TLS_HANDSHAKE_FIRST_FALLBACK_DELAY

# Go's cipher suite names (crypto/tls) -> OpenSSL's. TLS 1.3 suites are not configurable in
# Go; nats-server accepts their names and they change nothing.
_GO_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
# The names nats-server's `cipher_suites` knows (its cipherMap): crypto/tls CipherSuites()
# and InsecureCipherSuites(); an insecure one needs `allow_insecure_cipher_suites`
GO_SECURE_CIPHERS = _TLS13_SUITES | {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}
GO_INSECURE_CIPHERS = {
    "TLS_RSA_WITH_RC4_128_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA", "TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"}
# insecure suites OpenSSL 3 no longer implements by default (3DES, RC4): refused at start
NO_OPENSSL_CIPHERS = {c for c in GO_INSECURE_CIPHERS if "RC4" in c or "3DES" in c}
# nats-server's default TLS 1.2 suites (crypto/tls CipherSuites(), secure ones), in Go's order
_DEFAULT_TLS12 = ":".join([
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA"])
# TLS 1.3 suites in the order crypto/tls prefers them on a CPU with AES instructions (the
# suite nats-server picks: TLS_AES_128_GCM_SHA256)
_DEFAULT_TLS13 = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
_GO_CURVES = {"X25519": "X25519", "CurveP256": "P-256", "CurveP384": "P-384",
              "CurveP521": "P-521", "X25519MLKEM768": "X25519MLKEM768",
              "SecP256r1MLKEM768": "SecP256r1MLKEM768", "SecP384r1MLKEM1024": "SecP384r1MLKEM1024"}
# the hybrid post-quantum groups, which OpenSSL implements from 3.5 on
MLKEM_CURVES = {"X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"}


def openssl_has_mlkem() -> bool:
    import ssl
    return ssl.OPENSSL_VERSION_INFO[:2] >= (3, 5)


class TlsSettings:
    """One TLS configuration (see the module docstring)."""

    def __init__(self, cfg=None, server=True):
        cfg = {k.lower(): v for k, v in (cfg or {}).items()}
        self.server = server
        self.cert_file = cfg.get("cert_file") or ""
        self.key_file = cfg.get("key_file") or ""
        self.ca_file = cfg.get("ca_file") or ""
        self.certs = [(c.get("cert_file") or "", c.get("key_file") or "")
                      for c in (cfg.get("certs") or cfg.get("certificates") or []) if isinstance(c, dict)]
        self.insecure = bool(cfg.get("insecure"))
        self.verify_and_map = bool(cfg.get("verify_and_map"))
        self.verify_known_urls = bool(cfg.get("verify_cert_and_check_known_urls"))
        self.verify = bool(cfg.get("verify")) or self.verify_and_map or self.verify_known_urls
        self.timeout = _seconds(cfg.get("timeout"), DEFAULT_TIMEOUT)
        self.min_version = str(cfg.get("min_version") or "1.2")
        self.ciphers = list(cfg.get("cipher_suites") or [])
        self.curves = list(cfg.get("curve_preferences") or [])
        self.pinned = {str(p).lower() for p in (cfg.get("pinned_certs") or [])}
        self.handshake_first, self.fallback_delay = _handshake_first(
            cfg.get("handshake_first", cfg.get("first", cfg.get("immediate"))))
        self.server_name = cfg.get("server_name") or ""
        peer = cfg.get("ocsp_peer")
        self.ocsp_peer = None           # ocsp_peer's settings when it verifies (net/ocsppeer.py)
        if peer is not None:
            from natsd.net.ocsppeer import parse
            settings = parse(peer)
            self.ocsp_peer = settings if settings["verify"] else None
        rate = cfg.get("connection_rate_limit")
        self.rate_limit = rate if isinstance(rate, int) and not isinstance(rate, bool) and rate > 0 else 0
        self.not_after = False          # cert_not_after's memo (False: not read yet)
        _load_x509()

    @classmethod
    def from_flags(cls, opts):
        """--tls --tlscert --tlskey --tlscacert --tlsverify."""
        return cls({"cert_file": opts.tls_cert, "key_file": opts.tls_key,
                    "ca_file": opts.tls_ca_cert, "verify": opts.tls_verify})

    def context(self):
        """A fresh OpenSSL context for these settings (raises TlsError)."""
        ctx = TlsContext(self.server)
        cert_file, key_file = self.cert_file, self.key_file
        if not cert_file and self.certs:
            cert_file, key_file = self.certs[0]
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file)
        if self.server and self.certs:
            # `certs: [...]`: each certificate for the names it carries (SNI)
            for cf, kf in self.certs:
                other = TlsContext(True)
                other.load_cert_chain(cf, kf)
                ctx.add_certificate_for(certificate_names(cf), other)
        if self.server:
            if self.ca_file:
                ctx.load_verify_locations(self.ca_file)
            ctx.set_verify(self.verify, self.verify)
        else:
            ctx.load_verify_locations(self.ca_file or None)
            ctx.set_verify(not self.insecure, True)
        ctx.set_versions(self.min_version)
        ciphers = [_GO_CIPHERS[c] for c in self.ciphers if c in _GO_CIPHERS]
        ctx.set_ciphers(":".join(ciphers) if ciphers else _DEFAULT_TLS12, _DEFAULT_TLS13)
        curves = [_GO_CURVES[c] for c in self.curves if c in _GO_CURVES]
        if curves:
            ctx.set_groups(":".join(curves))
        return ctx


# OpenSSL's reasons for the usual handshake failures, in the words of Go's crypto/tls (what
# nats-server logs after "TLS handshake error: ")
_GO_TLS_ERRORS = {
    "unable to get local issuer certificate":
        "tls: failed to verify certificate: x509: certificate signed by unknown authority",
    "self-signed certificate":
        "tls: failed to verify certificate: x509: certificate signed by unknown authority",
    "self signed certificate":
        "tls: failed to verify certificate: x509: certificate signed by unknown authority",
    "self-signed certificate in certificate chain":
        "tls: failed to verify certificate: x509: certificate signed by unknown authority",
    "certificate has expired":
        "tls: failed to verify certificate: x509: certificate has expired or is not yet valid",
    "certificate is not yet valid":
        "tls: failed to verify certificate: x509: certificate has expired or is not yet valid",
    "hostname mismatch": "tls: failed to verify certificate: x509: certificate is not valid for this host",
    "IP address mismatch": "tls: failed to verify certificate: x509: certificate is not valid for this IP",
    "tlsv1 alert unknown ca": "remote error: tls: unknown certificate authority",
    "sslv3 alert bad certificate": "remote error: tls: bad certificate",
    "sslv3 alert certificate expired": "remote error: tls: expired certificate",
    "tlsv13 alert certificate required": "remote error: tls: certificate required",
    "peer did not return a certificate": "tls: client didn't provide a certificate",
    "wrong version number": "tls: first record does not look like a TLS handshake",
    "http request": "tls: first record does not look like a TLS handshake",
    "connection closed by peer": "EOF",
}


def _load_x509():
    """Peers' certificates are read with `cryptography`, whose first import takes some 30 ms:
    it is done when a `tls {}` block is read, not on the loop when a first certificate arrives
    (that stalled every connection, and made the first leaf link's round trip look long
    enough for s2_auto to compress on loopback)."""
    for module in ("cryptography.x509", "cryptography.hazmat.primitives.serialization"):
        importlib.import_module(module)


def default_auth_timeout(tls_timeout):
    """nats-server's getDefaultAuthTimeout: a port with TLS (`tls_timeout`, seconds) gives a
    connection its handshake time and one second more to authenticate; without (None), 2 s."""
    return DEFAULT_AUTH_TIMEOUT if tls_timeout is None else tls_timeout + 1.0


def cert_not_after(settings):
    """/varz `tls_cert_not_after`: when the first certificate of a `tls {}` block (TlsSettings,
    or None) expires, as Go's time JSON; None without one or when it cannot be read. Read
    once per block, as the certificate was loaded (a reload makes new settings)."""
    if settings is None:
        return None
    if settings.not_after is False:
        settings.not_after = _read_not_after(settings.cert_file or (settings.certs[0][0] if settings.certs else ""))
    return settings.not_after


def _read_not_after(cert_file):
    if not cert_file:
        return None
    from cryptography import x509
    try:
        with open(cert_file, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError):
        return None
    return cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def peer_cert_details(chain):
    """/connz `tls_peer_certs` (with `auth`): the certificates the peer sent (DER, its own
    first), each with its subject, SHA-256 of its SubjectPublicKeyInfo and of itself."""
    import hashlib
    from cryptography import x509
    out = []
    for der in chain:
        cert = x509.load_der_x509_certificate(der)
        out.append({"subject": cert.subject.rfc4514_string(), "spki_sha256": spki_sha256(der),
                    "cert_sha256": hashlib.sha256(der).hexdigest()})
    return out


def go_tls_error(reason):
    """An OpenSSL handshake failure in Go's words where the two name the same thing."""
    return _GO_TLS_ERRORS.get(reason, reason or "protocol error")


def _seconds(v, default):
    if v is None:
        return default
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return parse_go_duration(str(v).strip()) / 1e9


def _handshake_first(v):
    """(handshake first?, fallback delay in seconds: 0 for none)."""
    if v is None or v is False:
        return False, 0.0
    if v is True:
        return True, 0.0
    s = str(v).lower()
    if s in ("true", "on"):
        return True, 0.0
    if s in ("false", "off"):
        return False, 0.0
    if s in ("auto", "auto_fallback"):
        return True, DEFAULT_FALLBACK_DELAY
    return True, parse_go_duration(str(v).strip()) / 1e9


def certificate_names(cert_file):
    """The DNS names of a certificate (its SANs, else its common name)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    with open(cert_file, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName) \
            .value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if not names:
        names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return names


def spki_sha256(der_cert):
    """Hex SHA-256 of a certificate's DER SubjectPublicKeyInfo (what pinned_certs lists)."""
    import hashlib
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    cert = x509.load_der_x509_certificate(der_cert)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()


def cert_identity(der_cert):
    """What a client certificate offers verify_and_map (natsd.auth.authenticator Authenticator._cert_user):
    (its names in nats-server's order -- e-mail SANs, DNS SANs, URI SANs, the subject as an
    RFC 2253 string -- and the subject as (TYPE, value) pairs in RFC 2253 order)."""
    from cryptography import x509
    cert = x509.load_der_x509_certificate(der_cert)
    names = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = None
    if san is not None:
        names += san.get_values_for_type(x509.RFC822Name)
        names += san.get_values_for_type(x509.DNSName)
        names += [str(u) for u in san.get_values_for_type(x509.UniformResourceIdentifier)]
    subject = cert.subject.rfc4514_string()
    if subject:
        names.append(subject)
    pairs = [(a.rfc4514_attribute_name.upper(), str(a.value))
             for rdn in reversed(cert.subject.rdns) for a in rdn]
    return names, pairs


class ServerTls:
    """TLS on an accepting port (clients, leaf nodes): the context new connections get, and the
    nats-server order of events for each connection (handshake first or after INFO, the
    fallback delay, plaintext allowed or not, the handshake timeout, pinned certificates)."""

    def __init__(self, settings, allow_non_tls=False):
        self.settings = settings
        self.allow_non_tls = allow_non_tls
        self.ctx = settings.context()

    def reload(self, settings, allow_non_tls=False):
        """New certificates/settings for new connections; established ones keep theirs."""
        ctx = settings.context()
        self.settings, self.ctx, self.allow_non_tls = settings, ctx, allow_non_tls

    def info_fields(self, first=False):
        """INFO's tls_required / tls_verify / tls_available."""
        out = {}
        required = first or not self.allow_non_tls
        if required:
            out["tls_required"] = True
        if self.settings.verify:
            out["tls_verify"] = True
        if not required:
            out["tls_available"] = True
        return out

    def begin(self, c):
        """A new connection: give it a session. Returns True when the INFO goes out now (in
        plaintext, before TLS), False when it waits for the handshake (handshake first)."""
        c.tls = self.ctx.session()
        c.tls_sniff = True                  # the first byte tells TLS from plaintext
        return not self.settings.handshake_first

    def without_client_certs(self):
        """The same certificates, asking clients for none (the HTTPS monitor, as nats-server)."""
        import copy
        settings = copy.copy(self.settings)
        settings.verify = settings.verify_and_map = False
        settings.handshake_first, settings.pinned = False, set()
        return ServerTls(settings)

    def check_peer(self, c):
        """After the handshake: None, or why this peer is refused (pinned certificates)."""
        return pinning_refusal(c, self.settings.pinned)


def pinning_refusal(c, pinned):
    """After c's TLS handshake: "certificate not pinned" when `pinned` (pinned_certs' SPKI
    hashes) lists some and not its peer's, else None."""
    if not pinned:
        return None
    der = c.tls.peer_certificate()
    if der is None or spki_sha256(der) not in pinned:
        return "certificate not pinned"
    return None


__all__ = ["TlsSettings", "TlsError", "ServerTls", "spki_sha256", "cert_identity", "pinning_refusal"]


class RateCounter:
    """nats-server's rateCounter (tls `connection_rate_limit`): at most `limit` TLS clients
    accepted in each one-second window; the rejected ones are counted for a warning."""

    def __init__(self, limit, clock):
        self.limit = limit
        self.clock = clock
        self.count = 0
        self.end = 0.0
        self.blocked = 0

    def allow(self):
        now = self.clock()
        if now > self.end:
            self.count = 0
            self.end = now + 1.0
        else:
            self.count += 1
        allowed = self.count < self.limit
        if not allowed:
            self.blocked += 1
        return allowed

    def take_blocked(self):
        n, self.blocked = self.blocked, 0
        return n
