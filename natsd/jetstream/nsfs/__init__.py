"""nats-server's file store, read and written: the room that lets natsd start on a store
directory nats-server left, hand one back, and exchange stream backups with it.

- `codec`    the byte formats: message block records, block compression headers, the
             sequence sets of `index.db`, a consumer's `o.dat`, `meta.inf`/`meta.sum`
- `reader`   a nats-server stream directory (or an unpacked backup) as a `StreamImage`
- `writer`   a stream (natsd's) written as a nats-server stream directory
- `convert`  the start-up conversion of an account's nats-server streams, resumable
- `archive`  `$JS.API.STREAM.SNAPSHOT` archives in nats-server's form (S2 stream of a tar)
- `__main__` `python -m natsd.jetstream.nsfs export`: a natsd store directory as nats-server's

Nothing here reaches into a running stream's insides: it reads through the `StreamStore`
interface and creates streams through the account, as a restore does.
"""
