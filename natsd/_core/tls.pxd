# TLS over OpenSSL memory BIOs: a context per configuration, a session per connection.

cdef extern from "openssl/ssl.h" nogil:
    ctypedef struct SSL_CTX
    ctypedef struct SSL
    ctypedef struct BIO


cdef class TlsContext:
    cdef SSL_CTX* ctx
    cdef readonly bint server
    cdef public object verify_hook      # unused by C; Python keeps per-context settings here
    cdef list sni                       # [(names, TlsContext)]: the certificate per server name


cdef class TlsSession:
    cdef SSL* ssl
    cdef BIO* rbio                      # bytes from the network, for OpenSSL to decrypt
    cdef BIO* wbio                      # bytes OpenSSL produced, for the network
    cdef readonly TlsContext context
    cdef readonly bint established      # handshake finished
    cdef readonly bint failed
    cdef public object error            # the reason of a failure (str)

    cdef int feed(self, const char* p, Py_ssize_t n) except -1
    cdef int _fail(self, int err) except -2
    cdef int handshake(self) except -2
    cdef Py_ssize_t read_plain(self, char* buf, Py_ssize_t cap) except -2
    cdef int write_plain(self, const char* p, Py_ssize_t n) except -2
    cdef Py_ssize_t pending_out(self)
    cdef Py_ssize_t take_out(self, char* buf, Py_ssize_t cap)
