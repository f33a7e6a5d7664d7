"""OCSP peer verification (a TLS block's `ocsp_peer`), as nats-server's ocsp_peer.go does it.

A client's certificate is checked against its CA's OCSP responders (the certificate's
Authority Information Access URLs, asked with HTTP GET `<url>/<base64 request>`) before its
CONNECT is authenticated: a response signed by the issuer (or by a responder certificate the
issuer signed for OCSP signing), current within `allowed_clockskew`, saying `good` lets it
in; `revoked`, `unknown` (unless `unknown_is_good`), a bad or stale response, or no answer
within `ca_timeout` (unless `allow_when_ca_unreachable`) closes it, as nats-server fails the
TLS handshake (`warn_only` logs and lets it in). A certificate without responder URLs, or one
the server's CA file issued directly as a self-signed root, needs no check. Answers are kept
until their NextUpdate (`cache_ttl_when_next_update_unset` when they have none); the fetch
runs off the loop (natsd/auth/offloop.py), the connection unread meanwhile.

Only the client certificate itself is checked (its issuer is looked up in the CA file);
intermediate certificates of a longer chain are not (nats-server checks every link).
"""
from __future__ import annotations

import base64
import hashlib
import logging
import time
import urllib.parse
import urllib.request

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID

from natsd.auth.offloop import OffLoop

log = logging.getLogger("natsd")

DEFAULTS = {"verify": False, "ca_timeout": 2.0, "allowed_clockskew": 30.0, "warn_only": False,
            "unknown_is_good": False, "allow_when_ca_unreachable": False,
            "cache_ttl_when_next_update_unset": 3600.0}
_BOOLS = ("verify", "warn_only", "unknown_is_good", "allow_when_ca_unreachable")
_SECONDS = ("ca_timeout", "allowed_clockskew", "cache_ttl_when_next_update_unset")


class OcspConfigError(ValueError):
    pass


def parse(value) -> dict:
    """`ocsp_peer: true|false` or its map -> the settings (nats-server's parseOCSPPeer)."""
    from natsd.gofmt import parse_go_duration
    out = dict(DEFAULTS)
    if isinstance(value, bool):
        out["verify"] = value
        return out
    if not isinstance(value, dict):
        raise OcspConfigError("expected map to define OCSP peer options, got [%s]" % type(value).__name__)
    for k, v in value.items():
        lk = k.lower()
        if lk in _BOOLS:
            if not isinstance(v, bool):
                raise OcspConfigError('error parsing tls peer config, unknown field ["%s"]' % k)
            out[lk] = v
        elif lk in _SECONDS:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[lk] = float(v)
            elif isinstance(v, str):
                try:
                    out[lk] = parse_go_duration(v) / 1e9
                except ValueError as e:
                    raise OcspConfigError("error parsing tls peer config, conversion error: %s" % e) from None
            else:
                raise OcspConfigError("error parsing tls peer config, conversion error: unexpected type")
        else:
            raise OcspConfigError('error parsing tls peer config, unknown field ["%s"]' % k)
    return out


def _responders(cert):
    try:
        aia = cert.extensions.get_extension_for_class(x509.AuthorityInformationAccess).value
    except x509.ExtensionNotFound:
        return []
    return [d.access_location.value for d in aia
            if d.access_method == AuthorityInformationAccessOID.OCSP
            and urllib.parse.urlsplit(d.access_location.value).scheme in ("http", "https")]


def _verify_signature(signer, resp):
    pub = signer.public_key()
    algo = resp.signature_hash_algorithm
    if isinstance(pub, ec.EllipticCurvePublicKey):
        pub.verify(resp.signature, resp.tbs_response_bytes, ec.ECDSA(algo))
    elif isinstance(pub, rsa.RSAPublicKey):
        pub.verify(resp.signature, resp.tbs_response_bytes, padding.PKCS1v15(), algo)
    else:
        pub.verify(resp.signature, resp.tbs_response_bytes)


def _signed_by(resp, issuer) -> str | None:
    """None when the issuer signed `resp`, or a responder certificate it delegated OCSP
    signing to; else why not."""
    try:
        _verify_signature(issuer, resp)
        return None
    except (InvalidSignature, ValueError, TypeError):
        pass
    for cert in resp.certificates:
        try:
            _verify_signature(issuer, _AsResponse(cert))
            eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            if ExtendedKeyUsageOID.OCSP_SIGNING not in eku:
                return "responder certificate not authorized for OCSP signing"
            _verify_signature(cert, resp)
            return None
        except (InvalidSignature, ValueError, TypeError, x509.ExtensionNotFound):
            continue
    return "response not signed by the issuer or its delegate"


class _AsResponse:
    """A certificate presented with the attribute names _verify_signature reads."""

    def __init__(self, cert):
        self.signature = cert.signature
        self.tbs_response_bytes = cert.tbs_certificate_bytes
        self.signature_hash_algorithm = cert.signature_hash_algorithm


class Verdict:
    """One certificate's OCSP status, kept until `until`."""

    def __init__(self, status, until, reason=""):
        self.status = status            # "good", "revoked", "unknown", or "" (no usable answer)
        self.until = until
        self.reason = reason


class OcspFetch(OffLoop):
    """The responder asked off the loop; the verdict cached on the loop."""

    def __init__(self, checker, key, cert, issuer):
        super().__init__("OCSP response needed")
        self.checker, self.key, self.cert, self.issuer = checker, key, cert, issuer

    def work(self):
        return self.checker.fetch(self.cert, self.issuer)

    def settle(self, verdict):
        if verdict is None:                 # the fetch itself failed: asked again soon
            verdict = Verdict("", time.time() + 5.0, "OCSP check failed")
        self.checker.cache[self.key] = verdict


class OcspPeer:
    """The `ocsp_peer` check of one TLS block (clients of the client port)."""

    def __init__(self, settings, ca_file):
        self.settings = settings
        self.issuers = []
        if ca_file:
            with open(ca_file, "rb") as f:
                self.issuers = x509.load_pem_x509_certificates(f.read())
        self.cache: dict[str, Verdict] = {}

    def admit(self, c, workers, retry, prefix) -> bool:
        """Before a connection's CONNECT is authenticated: True when it may go on; False when
        it was closed (its certificate is not OCSP valid) or waits for the responder (then
        `retry()` runs again once the answer is in)."""
        st = c.state
        if st.ocsp_checked or c.tls is None:
            return True
        try:
            valid = self.check(c.tls.peer_certificate())
        except OffLoop as slow:
            workers.check(c, st.host, slow, retry)
            return False
        if not valid:
            # nats-server fails the TLS handshake (its VerifyConnection callback)
            log.error("%sTLS handshake error: %s not OCSP valid", prefix, "client")
            c.schedule_close("TLS Handshake Failure")
            return False
        st.ocsp_checked = True
        return True

    def check(self, der: bytes | None) -> bool:
        """May the peer with this certificate (DER) in? Raises OcspFetch when the responder
        must be asked first."""
        if not der:
            log.error("Peer certificate is nil, rejecting OCSP peer")
            return False
        cert = x509.load_der_x509_certificate(der)
        subject = cert.subject.rfc4514_string()
        if not _responders(cert):
            return True                             # no OCSP eligible link
        issuer = next((i for i in self.issuers if i.subject == cert.issuer), None)
        if issuer is None:
            return True                             # not a link natsd can check (see above)
        key = base64.b64encode(hashlib.sha256(der).digest()).decode()
        log.debug("Checking OCSP peer cache for [%s], key [%s]", subject, key)
        verdict = self.cache.get(key)
        if verdict is None or verdict.until < time.time():
            self.cache.pop(key, None)
            raise OcspFetch(self, key, cert, issuer)
        return self._decide(subject, verdict)

    def _decide(self, subject, verdict) -> bool:
        s = self.settings
        if verdict.status == "good" or verdict.status == "unknown" and s["unknown_is_good"]:
            log.debug("OCSP verify pass for [%s]", subject)
            return True
        if verdict.status == "":
            log.warning("Attempt to obtain OCSP response from CA responder for [%s] failed: %s",
                        subject, verdict.reason)
            if s["warn_only"]:
                log.warning("OCSP verify fail for [%s] but WarnOnly is true so allowing", subject)
                return True
            if s["allow_when_ca_unreachable"]:
                log.warning("Failed to obtain OCSP CA response for [%s] but AllowWhenCAUnreachable "
                            "set; no cached revocation so allowing", subject)
                return True
            return False
        log.warning("OCSP verify fail for [%s] with CA status [%s]", subject, verdict.status)
        if s["warn_only"]:
            log.warning("OCSP verify fail for [%s] but WarnOnly is true so allowing", subject)
            return True
        return False

    def fetch(self, cert, issuer) -> Verdict:
        """Ask the responders (in a worker thread) -> the verdict to cache."""
        s = self.settings
        now = time.time()
        req = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, hashes.SHA1()).build()
        enc = urllib.parse.quote_plus(base64.b64encode(req.public_bytes(serialization.Encoding.DER)).decode())
        raw, error = None, "no available OCSP servers"
        for url in _responders(cert):
            try:
                with urllib.request.urlopen("%s/%s" % (url.rstrip("/"), enc), timeout=s["ca_timeout"]) as r:
                    if r.status != 200:
                        raise OSError("bad OCSP responder http status: [%d]" % r.status)
                    raw = r.read()
                    break
            except Exception as e:          # network, HTTP, timeout: the next responder
                error = "exhausted OCSP responders: %s" % e
        retry = now + 5.0                   # an unusable answer is asked again soon
        if raw is None:
            return Verdict("", retry, error)
        try:
            resp = ocsp.load_der_ocsp_response(raw)
        except ValueError as e:
            return Verdict("", retry, "Failed OCSP response parse: %s" % e)
        if resp.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
            return Verdict("", retry, "Invalid OCSP response status: %s" % resp.response_status.name.lower())
        why = _signed_by(resp, issuer)
        if why:
            return Verdict("", retry, "Invalid OCSP response delegation: %s" % why)
        skew = s["allowed_clockskew"]
        this_update = resp.this_update_utc.timestamp()
        next_update = resp.next_update_utc.timestamp() if resp.next_update_utc else None
        if this_update > now + skew or (next_update is not None and next_update < now - skew):
            return Verdict("", retry, "OCSP response not in effectivity window")
        status = {ocsp.OCSPCertStatus.GOOD: "good", ocsp.OCSPCertStatus.REVOKED: "revoked"}.get(
            resp.certificate_status, "unknown")
        until = next_update if next_update is not None else now + s["cache_ttl_when_next_update_unset"]
        return Verdict(status, until)

