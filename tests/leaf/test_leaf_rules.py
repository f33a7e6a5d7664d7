"""Leaf node rules beyond plain flow: deny_imports/deny_exports on a remote, loop detection with
the `$LDS.` subscription (two natsd servers soliciting each other)."""
import asyncio

import nats

from tests.support.leafnodes import carries
from tests.support.servers import ENV, http_json
from tests.support.waiting import poll, until
from tools.serverproc import free_port


def test_deny_imports_and_exports(tmp_path, natsd):
    leaf_port = free_port()
    (tmp_path / "hub.conf").write_text("leafnodes { port: %d }\n" % leaf_port)
    (tmp_path / "leaf.conf").write_text(
        'leafnodes { remotes: [ { url: "nats://127.0.0.1:%d", deny_imports: ["secret.in.>"], '
        'deny_exports: ["secret.out.>"] } ] }\n' % leaf_port)
    hub = natsd("-c", "hub.conf", "-m", str(free_port()), cwd=str(tmp_path), env=ENV)
    leaf = natsd("-c", "leaf.conf", "-m", str(free_port()), cwd=str(tmp_path), env=ENV)
    assert poll(lambda: http_json(hub.http_port, "/varz")["leafnodes"] == 1, 10)

    async def main():
        h = await nats.connect(hub.url)
        lf = await nats.connect(leaf.url)
        on_hub, on_leaf = [], []

        async def hub_cb(m):
            on_hub.append(m.subject)

        async def leaf_cb(m):
            on_leaf.append(m.subject)
        await h.subscribe("secret.>", cb=hub_cb)
        await h.subscribe("open.>", cb=hub_cb)
        await lf.subscribe("secret.>", cb=leaf_cb)
        await lf.subscribe("open.>", cb=leaf_cb)
        # the interest that crosses has crossed (secret.> both ways: only part of it is denied)
        assert await until(lambda: all(carries(srv, s) for srv in (hub, leaf) for s in ("secret.>", "open.>")), 10)
        for s in ("secret.in.a", "secret.out.a", "open.a"):
            await h.publish(s, b"from hub")
            await lf.publish(s, b"from leaf")
        await h.flush()
        await lf.flush()
        await until(lambda: len(on_leaf) >= 5 and len(on_hub) >= 5, 5)
        await asyncio.sleep(0.3)                    # and nothing denied after them
        # the leaf does not import secret.in.> and does not export secret.out.>
        assert sorted(on_leaf) == ["open.a", "open.a", "secret.in.a", "secret.out.a", "secret.out.a"]
        assert sorted(on_hub) == ["open.a", "open.a", "secret.in.a", "secret.in.a", "secret.out.a"]
        await h.close()
        await lf.close()
    asyncio.run(main())


def test_loop_detected(tmp_path, natsd):
    pa, pb = free_port(), free_port()
    (tmp_path / "a.conf").write_text(
        'server_name: A\nleafnodes { port: %d, remotes: [ { url: "nats://127.0.0.1:%d" } ] }\n' % (pa, pb))
    (tmp_path / "b.conf").write_text(
        'server_name: B\nleafnodes { port: %d, remotes: [ { url: "nats://127.0.0.1:%d" } ] }\n' % (pb, pa))
    a = natsd("-c", "a.conf", cwd=str(tmp_path), env=ENV)
    b = natsd("-c", "b.conf", cwd=str(tmp_path), env=ENV)
    m = None
    for srv in (a, b, a, b):
        try:
            m = srv.wait_log(r'Loop detected for leafnode account="\$G". Delaying attempt to reconnect for 30s', 3)
            break
        except AssertionError:
            continue
    assert m is not None


def test_account_max_leafnodes(tmp_path, natsd, reference):
    """`limits { max_leafnodes: 1 }`: a second leaf into the account is refused with
    nats-server's error, and the first one keeps working. Both hubs behave the same."""
    for hub_kind in ("natsd", "nats-server"):
        leaf_port = free_port()
        d = tmp_path / hub_kind
        d.mkdir()
        (d / "hub.conf").write_text(
            "leafnodes { port: %d }\n"
            "accounts { A: { users: [{user: a, password: a}], limits: { max_leafnodes: 1 } } }\n"
            % leaf_port)
        (d / "leaf.conf").write_text(
            'leafnodes { remotes: [ { url: "nats://a:a@127.0.0.1:%d" } ] }\n' % leaf_port)
        start = natsd if hub_kind == "natsd" else reference
        hub = start("-c", "hub.conf", "-m", str(free_port()), cwd=str(d), env=ENV)
        first = natsd("-c", "leaf.conf", cwd=str(d), env=ENV)
        assert poll(lambda: http_json(hub.http_port, "/varz")["leafnodes"] == 1, 10)
        second = natsd("-c", "leaf.conf", cwd=str(d), env=ENV)
        second.wait_log(r"maximum account active connections exceeded", timeout=10)
        assert http_json(hub.http_port, "/varz")["leafnodes"] == 1
        assert first.proc.poll() is None and second.proc.poll() is None
