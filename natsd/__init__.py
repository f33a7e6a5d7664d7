"""natsd: a NATS server (client, leaf node and JetStream protocols of nats-server); its
version, the protocol levels it speaks, and nats-server's rule for comparing versions."""
import re

VERSION = "2.15.1"          # the nats-server release whose behaviour natsd follows
NATSD_VERSION = "0.1.0"
PROTO = 1                   # the client protocol (INFO to clients, /varz)
SERVER_PROTO = 3            # routes and leaf nodes: nats-server's MsgTraceProto (message tracing)


def version_at_least(version, minimum):
    """nats-server's versionAtLeast: is `version` (major.minor.patch, a `v` and a -suffix
    allowed) at least `minimum`? A version that does not parse is not."""
    def parts(v):
        m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", v or "")
        return tuple(int(x) for x in m.groups()) if m else None
    have, want = parts(version), parts(minimum)
    return have is not None and want is not None and have >= want
