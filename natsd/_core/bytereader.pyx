# cython: language_level=3
"""ByteReader: a cursor over a binary record (a memoryview: taking copies nothing), for the
decoders of natsd's own binary formats (the index snapshot's meta, natsd/_core/logsnap.pyx;
Raft's messages, natsd/raft/messages.py). Asking for more than is left raises the decoder's
own error.
"""


class ByteReader:
    def __init__(self, data, error, message):
        self.data = memoryview(data)
        self.pos = 0
        self.error = error              # raised as error(message) when the data ends too soon
        self.message = message

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise self.error(self.message)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, rec):
        return rec.unpack(self.take(rec.size))

    def number(self, rec):
        """One unsigned field of struct `rec` (a count or a length)."""
        return self.unpack(rec)[0]

    def blob(self, length):
        """The bytes after a length field of struct `length`."""
        return bytes(self.take(self.number(length)))
