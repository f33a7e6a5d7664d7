"""`StreamImage`: one stream outside a running server — what the reader gets from nats-server's
files, what the writer and a snapshot are made from, and what a restore rebuilds a stream from."""


class StreamImage:
    """`config` is the stream config as API JSON, `created` and timestamps are ns;
    `records()` yields (seq, ts, subject, headers or None, data) of the live messages in
    sequence order; `consumers` are documents {name, created_ns, config (API JSON), state (natsd's
    consumer state.json form)}; `warnings` what reading it could not carry over. `last_ts` None:
    the last message's time (a version 2 backup does not carry it); `created` 0: unknown."""

    def __init__(self, config, created, first_seq, last_seq, last_ts, records, consumers,
                 warnings=(), path=None):
        self.config = config
        self.created = created
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.last_ts = last_ts
        self.records = records
        self.consumers = consumers
        self.warnings = list(warnings)
        self.path = path

    @property
    def name(self):
        return self.config["name"]


def image_of_store(store, config, created, consumers):
    """The StreamImage of a natsd stream's store (any StreamStore) as it is now; `config` is the
    stream config as API JSON, `consumers` documents as StreamImage describes them."""
    state = store.state()
    first, last = state["first_seq"], state["last_seq"]

    def records():
        for sm in store.messages_from(first or 1):
            if sm.seq > last:
                break
            yield sm.seq, sm.ts, sm.subject, sm.hdr, sm.msg
    return StreamImage(config, created, first, last, state["last_ts"], records, consumers)
