"""natsd: a NATS server (client, leaf node and JetStream protocols of nats-server)."""

VERSION = "2.15.1"          # the nats-server release whose behaviour natsd follows
NATSD_VERSION = "0.1.0"
PROTO = 1                   # the client protocol (INFO to clients, /varz)
SERVER_PROTO = 3            # routes and leaf nodes: nats-server's MsgTraceProto (message tracing)
