"""The Cython core: what every message touches, and nothing of any subsystem.

- loop, conn (+ sendring.h), syncer  the epoll loop, timers and thread hand-off; each
                    connection's buffers, flushing (many connections' sends in one io_uring
                    submission) and back-pressure; group-commit fdatasyncs on GIL-free threads
- parser, router, sublist  the protocol dialects (client, route, leaf), delivery and remote
                    framing, the subject trie with its match cache
- tls, codec, ws, s2 (+ s2block.h)  OpenSSL over memory BIOs; the codec slot of a connection
                    and its WebSocket and S2 codecs
- log, logindex, logfmt, logsnap, logrecover, logopen (+ nlog.h)  the segmented log under
                    file streams and the Raft WAL: records and blocks, the in-memory index, the
                    on-disk format, index snapshots, recovery, opening and closing
- fmt.pxd           integer formatting shared by the framers

Subsystems register what they need of it at start (reserved replies, one-off subjects,
delivery replies: natsd/server.py, natsd/jetstream/engine/corehooks.py); the core imports
nothing of natsd outside natsd/_core.
"""
