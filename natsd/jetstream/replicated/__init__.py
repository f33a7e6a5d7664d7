"""JetStream's replicated layer: streams and consumers kept by Raft groups on a cluster.

- meta.py          the meta group (`_meta_`): stream and consumer assignments, the API
                   requests only its leader answers, placement decisions
- peerselect.py    nats-server's placement rules (clusters, tags, room, HA assets)
- remap.py         changing a stream's servers: moves, scale up and down, peer removal
- placement.py     which server answers a request for a stream (one-replica streams claim
                   their subjects)
- streams.py       a replicated stream: one Raft group, every store operation an entry,
                   a PubAck once a quorum has it
- snapshots.py     a stream group's snapshot and how a replica matches its copy to one
- catchup.py       copying messages between replicas (`$JSC.CATCHUP`)
- forward.py       publishes and acks that reach a leader while it hands over
- scale.py         between one replica and several
- consumers.py     replicated consumers riding in the stream's group
- consumergroup.py a consumer's own Raft group (`C-R<n>F-<id>`)
- listing.py       STREAM.NAMES/LIST and account info gathered from every server
- clusterinfo.py   a group's ClusterInfo and the stepdown the groups share
- auditwatch.py    API audits of requests another server answered

Raft itself is natsd/raft/.
"""
