"""Leaf node interest isolation, natsd against nats-server: a leaf connection that is
isolated is not told of other leaf nodes' interest ("east-west"), only of its hub's own
clients' (and the cluster's). Three ways to ask for it: the hub's `leafnodes {
isolate_leafnode_interest }` (every leaf connection), a spoke's remote `request_isolation`
(the hub isolates that one), and a remote's own `isolate_leafnode_interest` (the spoke does
not pass its own leaf nodes' interest up). The same messages arrive on both servers."""
import time

import pytest

from tests.support.rawclient import RawClient, parse_msgs
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

pytestmark = pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")

LEAF_PORT = r"Listening for leafnode connections on [^ ]*:(\d+)"


def hub(start, tmp_path, name, extra=""):
    conf = tmp_path / (name + ".conf")
    conf.write_text("server_name: %s\nleafnodes {\n  port: -1\n  %s\n}\n" % (name, extra))
    srv = start("-c", str(conf), "-p", "-1")
    return srv, int(srv.wait_log(LEAF_PORT).group(1))


def spoke(start, tmp_path, name, port, remote_extra="", listen=False):
    conf = tmp_path / (name + ".conf")
    conf.write_text('server_name: %s\nleafnodes {\n  %s\n  remotes: [ { url: "nats-leaf://127.0.0.1:%d"\n  %s } ]\n}\n'
                    % (name, "port: -1" if listen else "", port, remote_extra))
    srv = start("-c", str(conf), "-p", "-1")
    srv.wait_log("Leafnode connection created", timeout=10)
    return srv


def client(srv, subject=None):
    c = RawClient(srv.port).connect()
    if subject:
        c.send(b"SUB %s 1\r\n" % subject)
        c.sync()
    return c


def reached(sub, publisher, subject, tries=40):
    """Publish until the subscriber gets one (the interest must travel): True, or False when
    nothing came in `tries` rounds."""
    for _ in range(tries):
        publisher.send(b"PUB %s 2\r\nok\r\n" % subject)
        publisher.sync()
        if parse_msgs(sub.read_available(quiet=0.05, timeout=0.1)):
            return True
    return False


def silent(sub, publisher, subject):
    """Published after the control went through (so any interest had time to arrive): does
    nothing come?"""
    time.sleep(0.3)
    publisher.send(b"PUB %s 2\r\nno\r\n" % subject)
    publisher.sync()
    return parse_msgs(sub.read_available(quiet=0.5, timeout=1)) == []


def hub_isolates_all(start, tmp_path):
    h, port = hub(start, tmp_path, "H", "isolate_leafnode_interest: true")
    l1 = spoke(start, tmp_path, "L1", port)
    l2 = spoke(start, tmp_path, "L2", port)
    sub = client(l1, b"ew.x")
    control = reached(sub, client(h), b"ew.x")             # the hub's own client: told
    return control, silent(sub, client(l2), b"ew.x")       # another leaf: not told


def spoke_requests(start, tmp_path):
    h, port = hub(start, tmp_path, "H")
    l1 = spoke(start, tmp_path, "L1", port)
    l2 = spoke(start, tmp_path, "L2", port, "request_isolation: true")
    sub1 = client(l1, b"ew.x")
    sub2 = client(l2, b"ew.y")
    control = reached(sub1, client(h), b"ew.x") and reached(sub2, client(l1), b"ew.y")
    return control, silent(sub1, client(l2), b"ew.x")      # L2 asked not to be told of L1's


def spoke_isolates_its_own(start, tmp_path):
    h, port = hub(start, tmp_path, "H")
    l2 = spoke(start, tmp_path, "L2", port, "isolate_leafnode_interest: true", listen=True)
    l2_port = int(l2.wait_log(LEAF_PORT).group(1))
    l3 = spoke(start, tmp_path, "L3", l2_port)
    deep = client(l3, b"deep.x")
    local = client(l2, b"deep.y")
    publisher = client(h)
    control = reached(local, publisher, b"deep.y") and reached(deep, client(l2), b"deep.x")
    return control, silent(deep, publisher, b"deep.x")     # L2 keeps L3's interest from H


@pytest.mark.parametrize("scenario", [hub_isolates_all, spoke_requests, spoke_isolates_its_own],
                         ids=["hub", "request_isolation", "remote"])
def test_isolated_leaf_connections_hear_no_other_leafs_interest(natsd, reference, tmp_path, scenario):
    for d in ("ref", "natsd"):
        (tmp_path / d).mkdir()
    theirs = scenario(reference, tmp_path / "ref")
    ours = scenario(natsd, tmp_path / "natsd")
    assert ours == theirs == (True, True)
