# Delivery of one message to a match result: MSG/HMSG framing straight into outbound buffers.
from natsd._core.conn cimport Connection
from natsd._core.sublist cimport Subscription, SublistResult, Sublist

cdef int write_msg(Connection c, Connection pub, bytes sid, const char* subj, Py_ssize_t slen,
                   const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                   Py_ssize_t tlen) except -1
cdef int frame_remote(Connection c, bytes acc, bytes origin, const char* subj, Py_ssize_t slen,
                      const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                      const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1
cdef int route(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
               const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
               Py_ssize_t tlen) except -1
cdef int deliver(Subscription sub, Connection pub, const char* subj, Py_ssize_t slen,
                 const char* dsubj, Py_ssize_t dlen, const char* reply, Py_ssize_t rlen,
                 const char* msg, Py_ssize_t hlen, Py_ssize_t tlen) except -1
cdef int route_queues(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
                      const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                      Py_ssize_t tlen, list only_queues, bint no_plain) except -1
cdef int route_from_link(Connection pub, SublistResult res, const char* subj, Py_ssize_t slen,
                         const char* reply, Py_ssize_t rlen, const char* msg, Py_ssize_t hlen,
                         Py_ssize_t tlen, list only_queues, bytes origin) except -1
cdef int run_internal() except -1
cdef int trace_with(object trace) except -1
