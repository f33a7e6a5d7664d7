"""Route permissions (`cluster { permissions { import, export } }`): a server asks its routes
only for the interest its `import` allows and takes only the route interest its `export`
allows, so messages cross the route in those subjects alone. The restricted server natsd or
nats-server, its peer either."""
import pytest

from tests.support.cluster import start_member, wait_interest, wait_mesh
from tests.support.rawclient import RawClient, parse_msgs
from tests.support.servers import nats_server_cmd
from tests.support.waiting import poll

PERMS = 'permissions { import: { allow: ["in.>"] }, export: { allow: ["out.>"], deny: ["out.secret"] } }'


@pytest.mark.parametrize("a_kind, b_kind", [("natsd", "natsd"), ("natsd", "nats-server"), ("nats-server", "natsd")])
def test_route_permissions(tmp_path, a_kind, b_kind):
    if nats_server_cmd() is None and "nats-server" in (a_kind, b_kind):
        pytest.skip("nats-server is not installed")
    a = start_member(a_kind, tmp_path / "a", "A", cluster_extra=PERMS)
    b = start_member(b_kind, tmp_path / "b", "B", routes=[a.route_url])
    try:
        wait_mesh([a, b])
        with RawClient(a.proc.port).connect() as ca, RawClient(b.proc.port).connect() as cb:
            ca.send(b"SUB in.x 1\r\nSUB blocked.x 2\r\n")
            cb.send(b"SUB out.y 1\r\nSUB out.secret 2\r\nSUB other.y 3\r\n")
            ca.sync(), cb.sync()
            wait_interest([b], "in.x")                       # A imports in.>: told B
            assert poll(lambda: "out.y" in a.route_subjects(), timeout=10)
            marker = "out.marker"
            cb.send(b"SUB %s 9\r\n" % marker.encode())
            cb.sync()
            assert poll(lambda: marker in a.route_subjects(), timeout=10)
            # what each side holds of the other's interest
            assert "blocked.x" not in b.route_subjects()
            assert not {"out.secret", "other.y"} & a.route_subjects()
            # messages follow the interest (B publishes first, then A)
            cb.send(b"PUB in.x 1\r\n1\r\nPUB blocked.x 1\r\n2\r\n")
            assert cb.sync() == b""
            got_a = ca.read_until(b"MSG in.x 1 1\r\n1\r\n", timeout=10)
            assert [(m[0], m[3]) for m in parse_msgs(got_a)] == [(b"in.x", b"1")]
            ca.send(b"PUB out.y 1\r\n3\r\nPUB out.secret 1\r\n4\r\nPUB other.y 1\r\n5\r\nPUB out.marker 1\r\n6\r\n")
            got_b = cb.read_until(b"MSG out.marker 9 1\r\n6\r\n", timeout=10)
            assert [(m[0], m[3]) for m in parse_msgs(got_b)] == [(b"out.y", b"3"), (b"out.marker", b"6")]
            assert ca.sync() == b""                         # blocked.x never came
    finally:
        a.proc.kill()
        b.proc.kill()
