"""A leaf node remote's `dial_timeout` (and the leafnodes block's, which a remote's own
overrides), natsd against nats-server: the remote's hub answers no SYN (a listener that never
accepts, its backlog full), so the first attempt ends at the dial timeout with nats-server's
error line; the time from the server's start to that line is the timeout (1 s when none is
set, nats-server's DEFAULT_ROUTE_DIAL)."""
import re
import socket
from datetime import datetime

import pytest

from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

STAMP = re.compile(r"^\[\d+\] (\S+ \S+) ")


def blackhole():
    """(listener, fillers, port): connects to the port hang, unanswered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    return listener, fillers, port


def _when(line):
    return datetime.strptime(STAMP.match(line).group(1), "%Y/%m/%d %H:%M:%S.%f")


def first_failure(start, tmp_path, label, block, remote):
    """-> (the error line without its time and pid, seconds from start to it)."""
    listener, fillers, port = blackhole()
    conf = tmp_path / (label + ".conf")
    conf.write_text('leafnodes {\n  %s\n  remotes: [ { url: "nats-leaf://127.0.0.1:%d"\n  %s } ]\n}\n'
                    % ('dial_timeout: "%s"' % block if block else "", port,
                       'dial_timeout: "%s"' % remote if remote else ""))
    srv = start("-c", str(conf), "-p", "-1")
    try:
        hit = poll(lambda: next((x for x in list(srv.lines) if "Error trying to connect as leafnode" in x), None),
                   10, 0.05)
        assert hit, srv.log
        started = next(x for x in srv.lines if "Starting nats-server" in x)
        took = (_when(hit) - _when(started)).total_seconds()
        return hit.split("[ERR] ", 1)[1].replace(str(port), "PORT"), took
    finally:
        srv.kill()
        for s in fillers + [listener]:
            s.close()


@pytest.mark.parametrize("block, remote, wanted", [("2s", None, 2.0), ("4s", "2s", 2.0), (None, None, 1.0)],
                         ids=["block", "remote-over-block", "default"])
def test_a_remote_gives_up_at_its_dial_timeout_as_nats_server(natsd, reference, tmp_path, block, remote, wanted):
    theirs = first_failure(reference, tmp_path, "ref", block, remote)
    ours = first_failure(natsd, tmp_path, "natsd", block, remote)
    assert ours[0] == theirs[0] == ('Error trying to connect as leafnode to remote server "127.0.0.1:PORT" '
                                    '(attempt 1): dial tcp 127.0.0.1:PORT: i/o timeout')
    for took in (ours[1], theirs[1]):
        assert wanted - 0.1 < took < wanted + 1.4, (ours, theirs)
