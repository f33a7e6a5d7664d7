"""nats-server's file store, read and written: the room that lets natsd start on a store
directory nats-server left, hand one back, and exchange stream backups with it.

- `codec`    the byte formats: message block records, block compression headers, the
             sequence sets of `index.db`, a consumer's `o.dat`, `meta.inf`/`meta.sum`
- `blockscan` a block's records parsed and checked in C
- `crypt`    nats-server's encryption at rest, for reading its encrypted stores
- `image`    `StreamImage`: one stream outside a server
- `reader`   a nats-server stream directory (or an unpacked backup) as a `StreamImage`
- `writer`   a stream (natsd's) written as a nats-server stream directory
- `convert`  the start-up conversion of an account's nats-server streams, resumable
- `archive`  nats-server's backups (version 2 written and read, version 1 read)

`natsd/jetstream/storetool.py` (`natsd-store export`) uses the writer for the way back.

Nothing here reaches into a running stream's insides: it reads through the `StreamStore`
interface and creates streams through the account, as a restore does.
"""
