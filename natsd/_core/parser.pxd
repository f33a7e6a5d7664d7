# The client protocol parser: bytes in, operations dispatched, no copies of payloads.
from natsd._core.conn cimport Connection

cdef Py_ssize_t parse(Connection c, char* buf, Py_ssize_t n) except -1
