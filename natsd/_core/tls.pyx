# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: libraries = ssl crypto
"""TLS for connections on natsd's own loop: OpenSSL driven through memory BIOs.

The loop reads ciphertext from the socket and `feed`s it to a TlsSession, which decrypts into
plaintext for the parser (`read_plain`); what a connection queues is encrypted in one
`write_plain` per flush and the ciphertext is sent from `take_out`. No thread per connection,
no Python per message: OpenSSL is called once per socket read and once per flush.

TlsContext wraps an SSL_CTX built from natsd's TLS options (natsd/net/tls.py decides what they
mean; this module only applies them). Plaintext connections never touch this module.
"""
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING

cdef extern from "openssl/ssl.h" nogil:
    ctypedef struct SSL_METHOD
    ctypedef struct X509
    ctypedef struct X509_STORE_CTX
    ctypedef struct SSL_CIPHER
    ctypedef struct BIO_METHOD
    const SSL_METHOD* TLS_server_method()
    const SSL_METHOD* TLS_client_method()
    SSL_CTX* SSL_CTX_new(const SSL_METHOD* meth)
    void SSL_CTX_free(SSL_CTX* ctx)
    int SSL_CTX_use_certificate_chain_file(SSL_CTX* ctx, const char* file)
    int SSL_CTX_use_PrivateKey_file(SSL_CTX* ctx, const char* file, int type)
    int SSL_CTX_check_private_key(const SSL_CTX* ctx)
    int SSL_CTX_load_verify_locations(SSL_CTX* ctx, const char* CAfile, const char* CApath)
    int SSL_CTX_set_default_verify_paths(SSL_CTX* ctx)
    void SSL_CTX_set_verify(SSL_CTX* ctx, int mode, void* callback)
    long SSL_CTX_set_min_proto_version(SSL_CTX* ctx, int version)
    long SSL_CTX_set_max_proto_version(SSL_CTX* ctx, int version)
    int SSL_CTX_set_cipher_list(SSL_CTX* ctx, const char* s)
    int SSL_CTX_set_ciphersuites(SSL_CTX* ctx, const char* s)
    long SSL_CTX_set1_groups_list(SSL_CTX* ctx, const char* s)
    unsigned long SSL_CTX_set_options(SSL_CTX* ctx, unsigned long op)
    long SSL_CTX_set_mode(SSL_CTX* ctx, long mode)
    long SSL_CTX_set_session_cache_mode(SSL_CTX* ctx, long mode)
    SSL* SSL_new(SSL_CTX* ctx)
    void SSL_free(SSL* ssl)
    void SSL_set_bio(SSL* ssl, BIO* rbio, BIO* wbio)
    void SSL_set_accept_state(SSL* ssl)
    void SSL_set_connect_state(SSL* ssl)
    int SSL_do_handshake(SSL* ssl)
    int SSL_read(SSL* ssl, void* buf, int num)
    int SSL_write(SSL* ssl, const void* buf, int num)
    int SSL_get_error(const SSL* ssl, int ret)
    int SSL_pending(const SSL* ssl)
    long SSL_get_verify_result(const SSL* ssl)
    X509* SSL_get1_peer_certificate(const SSL* ssl)
    long SSL_set_tlsext_host_name(SSL* ssl, const char* name)
    int SSL_set1_host(SSL* ssl, const char* hostname)
    ctypedef struct X509_VERIFY_PARAM
    X509_VERIFY_PARAM* SSL_get0_param(SSL* ssl)
    void SSL_set_verify(SSL* ssl, int mode, void* callback)
    const char* SSL_get_version(const SSL* ssl)
    const SSL_CIPHER* SSL_get_current_cipher(const SSL* ssl)
    const char* SSL_CIPHER_standard_name(const SSL_CIPHER* c)
    int SSL_shutdown(SSL* ssl)
    int SSL_FILETYPE_PEM
    int SSL_VERIFY_NONE
    int SSL_VERIFY_PEER
    int SSL_VERIFY_FAIL_IF_NO_PEER_CERT
    int SSL_ERROR_NONE
    int SSL_ERROR_WANT_READ
    int SSL_ERROR_WANT_WRITE
    int SSL_ERROR_ZERO_RETURN
    int SSL_ERROR_SYSCALL
    int SSL_ERROR_SSL
    int TLS1_VERSION
    int TLS1_1_VERSION
    int TLS1_2_VERSION
    int TLS1_3_VERSION
    unsigned long SSL_OP_NO_COMPRESSION
    unsigned long SSL_OP_NO_RENEGOTIATION
    unsigned long SSL_OP_CIPHER_SERVER_PREFERENCE
    long SSL_MODE_RELEASE_BUFFERS
    long SSL_MODE_NO_AUTO_CHAIN
    long SSL_SESS_CACHE_SERVER
    ctypedef int (*servername_cb_t)(SSL* ssl, int* al, void* arg) noexcept
    long SSL_CTX_set_tlsext_servername_callback(SSL_CTX* ctx, servername_cb_t cb)
    long SSL_CTX_set_tlsext_servername_arg(SSL_CTX* ctx, void* arg)
    const char* SSL_get_servername(const SSL* ssl, int kind)
    SSL_CTX* SSL_set_SSL_CTX(SSL* ssl, SSL_CTX* ctx)
    int TLSEXT_NAMETYPE_host_name
    int SSL_TLSEXT_ERR_OK

cdef extern from "openssl/bio.h" nogil:
    const BIO_METHOD* BIO_s_mem()
    BIO* BIO_new(const BIO_METHOD* t)
    int BIO_write(BIO* b, const void* data, int dlen)
    int BIO_read(BIO* b, void* data, int dlen)
    size_t BIO_ctrl_pending(BIO* b)
    long BIO_set_mem_eof_return(BIO* b, int v)

cdef extern from "openssl/x509_vfy.h" nogil:
    int X509_VERIFY_PARAM_set1_ip_asc(X509_VERIFY_PARAM* param, const char* ipasc)

cdef extern from "openssl/x509.h" nogil:
    int i2d_X509(X509* x, unsigned char** out)
    void X509_free(X509* x)
    const char* X509_verify_cert_error_string(long n)
    int X509_V_OK

cdef extern from *:
    """
    #include <openssl/ssl.h>
    /* the certificates the peer sent after its own (a server's view of a client's chain) */
    static int natsd_peer_chain_len(const SSL* s) {
        STACK_OF(X509)* c = SSL_get_peer_cert_chain(s);
        return c == NULL ? 0 : sk_X509_num(c);
    }
    static X509* natsd_peer_chain_at(const SSL* s, int i) {
        return sk_X509_value(SSL_get_peer_cert_chain(s), i);
    }
    /* the chain the peer's certificate was verified by, its own first (none: not verified) */
    static int natsd_verified_len(const SSL* s) {
        STACK_OF(X509)* c = SSL_get0_verified_chain(s);
        return c == NULL || SSL_get_verify_result(s) != X509_V_OK ? 0 : sk_X509_num(c);
    }
    static X509* natsd_verified_at(const SSL* s, int i) {
        return sk_X509_value(SSL_get0_verified_chain(s), i);
    }
    """
    int natsd_peer_chain_len(const SSL* s)
    X509* natsd_peer_chain_at(const SSL* s, int i)
    int natsd_verified_len(const SSL* s)
    X509* natsd_verified_at(const SSL* s, int i)

cdef extern from "openssl/err.h" nogil:
    unsigned long ERR_get_error()
    unsigned long ERR_peek_last_error()
    void ERR_error_string_n(unsigned long e, char* buf, size_t len)
    const char* ERR_reason_error_string(unsigned long e)
    void ERR_clear_error()

DEF CHUNK = 1 << 30                     # ints for OpenSSL: feed/encrypt in pieces below 2 GB

VERSIONS = {"1.0": TLS1_VERSION, "1.1": TLS1_1_VERSION, "1.2": TLS1_2_VERSION, "1.3": TLS1_3_VERSION}


def _is_ip(str host):
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class TlsError(Exception):
    """A TLS configuration or handshake problem, with OpenSSL's reason."""


cdef str ssl_reason():
    """The most useful OpenSSL error of the queue, which is then cleared."""
    cdef unsigned long e = ERR_get_error()
    cdef unsigned long last = e
    cdef char buf[256]
    while e != 0:
        last = e
        e = ERR_get_error()
    if last == 0:
        return ""
    cdef const char* r = ERR_reason_error_string(last)
    if r != NULL:
        return (<bytes>r).decode("utf-8", "replace")
    ERR_error_string_n(last, buf, sizeof(buf))
    return (<bytes>buf).decode("utf-8", "replace")


cdef class TlsContext:
    """An SSL_CTX: certificates, trust, verification and protocol limits of one TLS config."""

    def __cinit__(self, bint server):
        self.server = server
        self.ctx = SSL_CTX_new(TLS_server_method() if server else TLS_client_method())
        if self.ctx == NULL:
            raise TlsError("cannot create a TLS context: %s" % ssl_reason())
        SSL_CTX_set_options(self.ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION)
        # the certificates sent are those of the cert file, as Go sends them: OpenSSL would
        # otherwise complete the chain from the trusted CAs and send those too
        SSL_CTX_set_mode(self.ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN)
        SSL_CTX_set_min_proto_version(self.ctx, TLS1_2_VERSION)    # nats-server's default

    def __dealloc__(self):
        if self.ctx != NULL:
            SSL_CTX_free(self.ctx)

    def load_cert_chain(self, str cert_file, str key_file):
        ERR_clear_error()
        if SSL_CTX_use_certificate_chain_file(self.ctx, cert_file.encode()) != 1:
            raise TlsError(ssl_reason() or "cannot load certificate %s" % cert_file)
        if SSL_CTX_use_PrivateKey_file(self.ctx, key_file.encode(), SSL_FILETYPE_PEM) != 1:
            raise TlsError(ssl_reason() or "cannot load key %s" % key_file)
        if SSL_CTX_check_private_key(self.ctx) != 1:
            raise TlsError("private key does not match public key")

    def load_verify_locations(self, str ca_file=None):
        """Trust the CAs in ca_file, or the system's when None."""
        ERR_clear_error()
        if ca_file is None:
            ok = SSL_CTX_set_default_verify_paths(self.ctx)
        else:
            ok = SSL_CTX_load_verify_locations(self.ctx, ca_file.encode(), NULL)
        if ok != 1:
            raise TlsError(ssl_reason() or "cannot load CA file %s" % ca_file)

    def set_verify(self, bint peer, bint require):
        """Ask the peer for a certificate (peer) and refuse it when it has none (require)."""
        cdef int mode = SSL_VERIFY_NONE
        if peer:
            mode = SSL_VERIFY_PEER
            if require:
                mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        SSL_CTX_set_verify(self.ctx, mode, NULL)

    def set_versions(self, str min_version, str max_version=None):
        SSL_CTX_set_min_proto_version(self.ctx, VERSIONS[min_version])
        if max_version:
            SSL_CTX_set_max_proto_version(self.ctx, VERSIONS[max_version])

    def set_ciphers(self, str tls12, str tls13):
        """OpenSSL cipher lists: for TLS 1.2 (cipher names) and TLS 1.3 (suites)."""
        ERR_clear_error()
        if tls12 and SSL_CTX_set_cipher_list(self.ctx, tls12.encode()) != 1:
            raise TlsError(ssl_reason() or "no usable cipher suite")
        if tls13 and SSL_CTX_set_ciphersuites(self.ctx, tls13.encode()) != 1:
            raise TlsError(ssl_reason() or "no usable TLS 1.3 cipher suite")
        SSL_CTX_set_options(self.ctx, SSL_OP_CIPHER_SERVER_PREFERENCE)

    def add_certificate_for(self, names, TlsContext other):
        """Serve `other`'s certificate to clients asking (SNI) for one of `names` (DNS names,
        `*.` wildcards for one label); the context's own certificate stays the default."""
        if self.sni is None:
            self.sni = []
            SSL_CTX_set_tlsext_servername_callback(self.ctx, _select_certificate)
            SSL_CTX_set_tlsext_servername_arg(self.ctx, <void*>self)
        self.sni.append(([n.lower() for n in names], other))

    def set_groups(self, str groups):
        ERR_clear_error()
        if SSL_CTX_set1_groups_list(self.ctx, groups.encode()) != 1:
            raise TlsError(ssl_reason() or "no usable curve")

    def session(self, str server_name=None, bint check_host=False):
        """A new TlsSession on this context. The client side names the server it expects: a
        host name goes out as SNI and, with check_host, must match the certificate; an IP
        address must be in the certificate's IP SANs."""
        s = TlsSession(self)
        if not self.server and server_name:
            name = server_name.encode()
            if _is_ip(server_name):
                if check_host:
                    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s.ssl), name)
            else:
                SSL_set_tlsext_host_name(s.ssl, name)
                if check_host:
                    SSL_set1_host(s.ssl, name)
        return s


cdef int _select_certificate(SSL* ssl, int* al, void* arg) noexcept with gil:
    """OpenSSL's server name callback: the first certificate whose names match (Go's
    crypto/tls picks the same way), else the default one."""
    cdef TlsContext ctx = <TlsContext>arg
    cdef const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)
    if name == NULL:
        return SSL_TLSEXT_ERR_OK
    host = (<bytes>name).decode("ascii", "replace").lower().rstrip(".")
    for names, other in ctx.sni:
        for n in names:
            if n == host or (n.startswith("*.") and "." in host and host.split(".", 1)[1] == n[2:]):
                SSL_set_SSL_CTX(ssl, (<TlsContext>other).ctx)
                return SSL_TLSEXT_ERR_OK
    return SSL_TLSEXT_ERR_OK


cdef bytes _der(X509* x):
    cdef int n = i2d_X509(x, NULL)
    out = PyBytes_FromStringAndSize(NULL, n)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    i2d_X509(x, &p)
    return out


cdef class TlsSession:
    """One connection's TLS state: feed ciphertext in, read plaintext out; write plaintext in,
    take ciphertext out."""

    def __cinit__(self, TlsContext context):
        self.context = context
        self.ssl = SSL_new(context.ctx)
        if self.ssl == NULL:
            raise TlsError("cannot create a TLS session: %s" % ssl_reason())
        self.rbio = BIO_new(BIO_s_mem())
        self.wbio = BIO_new(BIO_s_mem())
        BIO_set_mem_eof_return(self.rbio, -1)      # empty means "want more", not EOF
        SSL_set_bio(self.ssl, self.rbio, self.wbio)   # the SSL owns both BIOs now
        if context.server:
            SSL_set_accept_state(self.ssl)
        else:
            SSL_set_connect_state(self.ssl)

    def __dealloc__(self):
        if self.ssl != NULL:
            SSL_free(self.ssl)

    cdef int feed(self, const char* p, Py_ssize_t n) except -1:
        """Ciphertext read from the socket."""
        cdef int k
        while n > 0:
            k = BIO_write(self.rbio, p, <int>(n if n < CHUNK else CHUNK))
            if k <= 0:
                raise MemoryError()
            p += k
            n -= k
        return 0

    cdef int _fail(self, int err) except -2:
        cdef long v
        self.failed = True
        reason = ssl_reason()
        if not self.established:
            v = SSL_get_verify_result(self.ssl)
            if v != X509_V_OK:
                reason = (<bytes>X509_verify_cert_error_string(v)).decode("utf-8", "replace")
        if not reason:
            reason = "connection closed by peer" if err == SSL_ERROR_ZERO_RETURN else "protocol error"
        self.error = reason
        return -1

    cdef int handshake(self) except -2:
        """Advance the handshake: 1 when it finished, 0 when it needs more bytes from the
        peer (its output, if any, is in the out buffer), -1 when it failed (see error)."""
        cdef int r, err
        if self.established:
            return 1
        if self.failed:
            return -1
        ERR_clear_error()
        r = SSL_do_handshake(self.ssl)
        if r == 1:
            self.established = True
            return 1
        err = SSL_get_error(self.ssl, r)
        if err == SSL_ERROR_WANT_READ or err == SSL_ERROR_WANT_WRITE:
            return 0
        return self._fail(err)

    cdef Py_ssize_t read_plain(self, char* buf, Py_ssize_t cap) except -2:
        """Plaintext decrypted from what was fed: bytes written to buf, 0 when nothing more is
        available yet, -1 when the session failed or the peer closed it."""
        cdef int r, err
        if self.failed:
            return -1
        ERR_clear_error()
        r = SSL_read(self.ssl, buf, <int>(cap if cap < CHUNK else CHUNK))
        if r > 0:
            return r
        err = SSL_get_error(self.ssl, r)
        if err == SSL_ERROR_WANT_READ or err == SSL_ERROR_WANT_WRITE:
            return 0
        self._fail(err)
        return -1

    cdef int write_plain(self, const char* p, Py_ssize_t n) except -2:
        """Encrypt n bytes of plaintext into the out buffer (memory BIOs never block); -1 when
        the session failed (see error)."""
        cdef int r
        while n > 0:
            ERR_clear_error()
            r = SSL_write(self.ssl, p, <int>(n if n < CHUNK else CHUNK))
            if r <= 0:
                self._fail(SSL_get_error(self.ssl, r))
                return -1
            p += r
            n -= r
        return 0

    cdef Py_ssize_t pending_out(self):
        return <Py_ssize_t>BIO_ctrl_pending(self.wbio)

    cdef Py_ssize_t take_out(self, char* buf, Py_ssize_t cap):
        """Move up to cap bytes of ciphertext to buf; returns how many."""
        cdef int r = BIO_read(self.wbio, buf, <int>(cap if cap < CHUNK else CHUNK))
        return r if r > 0 else 0

    # ---- Python side (control path: handshake results, monitoring) ----

    def start(self):
        """The client side speaks first: produce the ClientHello (sent at the next flush)."""
        return self.handshake()

    # Python-level access for code off the message path (the HTTPS monitor) and unit tests.

    def feed_bytes(self, bytes data):
        self.feed(PyBytes_AS_STRING(data), len(data))

    def do_handshake(self):
        return self.handshake()

    def read_bytes(self, Py_ssize_t cap=65536):
        """Decrypted bytes (b"" when none yet), None once the session failed or closed."""
        out = PyBytes_FromStringAndSize(NULL, cap)
        n = self.read_plain(PyBytes_AS_STRING(out), cap)
        if n < 0:
            return None
        return out[:n]

    def write_bytes(self, bytes data):
        self.write_plain(PyBytes_AS_STRING(data), len(data))

    def out_bytes(self):
        """Ciphertext to send."""
        cdef Py_ssize_t k = self.pending_out()
        out = PyBytes_FromStringAndSize(NULL, k)
        if k:
            self.take_out(PyBytes_AS_STRING(out), k)
        return out

    def peer_certificate(self):
        """The peer's certificate, DER encoded, or None."""
        cdef X509* x = SSL_get1_peer_certificate(self.ssl)
        if x == NULL:
            return None
        out = _der(x)
        X509_free(x)
        return out

    def peer_chain(self):
        """Every certificate the peer sent, DER encoded, its own first (Go's
        PeerCertificates): [] when it sent none."""
        first = self.peer_certificate()
        if first is None:
            return []
        out = [first]
        cdef int i, n = natsd_peer_chain_len(self.ssl)
        for i in range(n):
            der = _der(natsd_peer_chain_at(self.ssl, i))
            if der != first:            # a client's view of the chain starts with the peer's own
                out.append(der)
        return out

    def verified_chain(self):
        """The chain that verified the peer's certificate, DER encoded, from its own to the
        trusted root (Go's VerifiedChains[0]): [] when it was not verified."""
        cdef int i, n = natsd_verified_len(self.ssl)
        return [_der(natsd_verified_at(self.ssl, i)) for i in range(n)]

    def version(self):
        """"1.3", "1.2", ... (as /connz shows tls_version)."""
        v = (<bytes>SSL_get_version(self.ssl)).decode()
        return v.replace("TLSv", "")

    def cipher(self):
        cdef const SSL_CIPHER* c = SSL_get_current_cipher(self.ssl)
        if c == NULL:
            return ""
        cdef const char* name = SSL_CIPHER_standard_name(c)
        return (<bytes>name).decode() if name != NULL else ""

    def verify_error(self):
        cdef long v = SSL_get_verify_result(self.ssl)
        if v == X509_V_OK:
            return None
        return (<bytes>X509_verify_cert_error_string(v)).decode("utf-8", "replace")
