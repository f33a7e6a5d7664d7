"""JetStream's single-server engine.

- jetstream.py    the JetStream object of a server: enabling, store directory, limits, domain,
                  per-account state (JsAccount), recovery at start, group commit of PubAcks
- accountpurge.py the system account's `$JS.API.ACCOUNT.PURGE.<account>`
- api.py          `$JS.API.>` dispatch, the account and stream handlers, DIRECT.GET
- api_consumer.py the consumer half of the API
- streamconfig.py, consumerconfig.py  configurations decoded, defaulted and checked as
                  nats-server does; gojson.py Go's encoding/json where its behaviour shows;
                  errors.py nats-server's error catalogue; apilevel.py the API level
- stream.py       a stream: ingest (dedup, expectations, limits, rollups, TTLs), retention,
                  purge, expiry, republish; streamops.py the operations the API applies to one
- store.py        the store contract (StreamStore) and MemoryStore/FileStore on natsd/_core/log
- counters.py, batch.py, fastbatch.py, schedules.py, headers.py  the 2.11-2.15 ingest rules
- sourcing.py     mirrors and sources
- consumer.py     a consumer (ackstate.py acks and redelivery, delivery.py push delivery,
                  pull.py pull requests, persist.py its state on disk)
- pending.pyx, fastdeliver.pyx, fastack.pyx  JetStream's own Cython: pending acks in compact
                  pages, first deliveries framed from the log, runs of plain acks
- snapshot.py     STREAM.SNAPSHOT and STREAM.RESTORE
- jscrypt.py      encryption at rest; advisories.py every JetStream advisory
"""
