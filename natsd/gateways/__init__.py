"""Gateways: clusters joined into a super-cluster, on nats-server's gateway wire.

Every server of a cluster keeps one outbound connection to a server of every other cluster
(configured in `gateway { gateways }`, or learned: the first INFO of an inbound connection,
gossip from the remote and from our routes), and accepts inbound connections from theirs.
Messages only travel on outbound connections (RMSG/HMSG, one hop); interest only travels on
inbound ones (RS+/RS-, interest-only mode from the start, as nats-server 2.9+ does it). A
reply whose subscriber the other cluster may not know yet leaves as `_GR_.<cluster
hash>.<server hash>.<reply>` and comes back to the server that sent the request.

- gateways.py: the subsystem: listener, solicited connections and their retries, the
  registry of outbound and inbound connections, implicit gateways, /gatewayz and /varz.
- link.py: the handler of gateway connections: CONNECT, INFO (and its commands), RS+/RS-,
  errors as nats-server words them.
- interest.py: what this cluster's interest looks like to the other clusters: the tallies
  per account, RS+/RS- on inbound connections, the all-subscriptions switch.
- replies.py: `_GR_.` routed replies: the hashes, which replies leave mapped, the mapping a
  receiver's answer takes back, and routed replies arriving on links.
"""
