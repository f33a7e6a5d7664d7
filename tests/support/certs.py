"""Certificates made by the tests (never checked in): a CA, server certificates for localhost /
127.0.0.1 / ::1, client certificates with chosen subjects and SANs, and expired or
foreign-CA ones for the bad cases (CA, spki_pin); make_pki, the set the `pki` fixture
(tests/support/fixtures.py) makes once per run. Files are written to a directory the caller
owns."""
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID


def _name(cn, **attrs):
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    for oid, key in ((NameOID.ORGANIZATIONAL_UNIT_NAME, "ou"), (NameOID.ORGANIZATION_NAME, "o"),
                     (NameOID.COUNTRY_NAME, "c")):
        if key in attrs:
            parts.append(x509.NameAttribute(oid, attrs[key]))
    return x509.Name(parts)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class CA:
    def __init__(self, directory, name="natsd test CA"):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = _name(name)
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        safe = name.replace(" ", "_")
        self.ca_file = _write(os.path.join(directory, safe + "-ca.pem"),
                              self.cert.public_bytes(serialization.Encoding.PEM))

    def key_file(self):
        """The CA's private key in a file (an OCSP responder signs with it)."""
        return _write(os.path.join(self.dir, "ca-key.pem"), self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))

    def issue(self, label, cn, dns=(), ips=(), emails=(), uris=(), server=True, client=True,
              days=30, expired=False, ocsp_url=None, **name_attrs):
        """(cert_file, key_file) of a new leaf certificate (naming `ocsp_url` as its OCSP
        responder when given)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=days)
        if expired:
            start, end = now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)
        sans = ([x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
                + [x509.RFC822Name(e) for e in emails]
                + [x509.UniformResourceIdentifier(u) for u in uris])
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
                 ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        b = (x509.CertificateBuilder().subject_name(_name(cn, **name_attrs)).issuer_name(self.name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(start).not_valid_after(end)
             .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        if ocsp_url:
            b = b.add_extension(x509.AuthorityInformationAccess([x509.AccessDescription(
                AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(ocsp_url))]),
                critical=False)
        cert = b.sign(self.key, hashes.SHA256())
        cert_file = _write(os.path.join(self.dir, label + "-cert.pem"),
                           cert.public_bytes(serialization.Encoding.PEM))
        key_file = _write(os.path.join(self.dir, label + "-key.pem"), key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return cert_file, key_file

    def server_cert(self, label="server"):
        return self.issue(label, "localhost", dns=["localhost"], ips=["127.0.0.1", "::1"])


def spki_pin(cert_file):
    """pinned_certs' hex SHA-256 of the certificate's SubjectPublicKeyInfo."""
    import hashlib
    cert = x509.load_pem_x509_certificate(open(cert_file, "rb").read())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()


def make_pki(directory):
    """The TLS tests' certificates, made in `directory` -> {name: file or (cert, key)}: "ca"
    and its "server" certificate (localhost, 127.0.0.1, ::1); client certificates "leaf",
    "alice" (an email SAN), "svc" (a DNS SAN), "dn" (OU and O in its name), "nobody", "expired";
    "other_ca", a second CA, with its "stranger" client and "other_server" server; "dir", the
    directory (a test may make more CAs below it)."""
    ca = CA(directory)
    p = {"dir": directory, "ca": ca.ca_file, "server": ca.server_cert()}
    p["leaf"] = ca.issue("leaf", "leaf", server=False)
    p["alice"] = ca.issue("alice", "alice", emails=["alice@example.com"], server=False)
    p["svc"] = ca.issue("svc", "svc", dns=["svc.example.com"], server=False)
    p["dn"] = ca.issue("dn", "dnuser", ou="NATS.io", o="Example", server=False)
    p["nobody"] = ca.issue("nobody", "nobody", server=False)
    p["expired"] = ca.issue("expired", "old", emails=["alice@example.com"], server=False, expired=True)
    other = CA(os.path.join(directory, "other"), name="other CA")
    p["other_ca"] = other.ca_file
    p["stranger"] = other.issue("stranger", "stranger", emails=["alice@example.com"], server=False)
    p["other_server"] = other.server_cert("other-server")
    return p
