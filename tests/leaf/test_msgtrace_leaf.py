"""Message tracing across a leaf link: the hub traces its egress to the leaf as hop 1 and the
leaf sends its own event for that hop, in every pairing of natsd and nats-server, as between
two nats-servers (times, ids and server info masked)."""
import pytest

from tests.core.test_msgtrace import _client, _events_of, _hdr, _hpub, _messages
from tests.support.waiting import poll

PAIRS = [("nats-server", "nats-server"), ("natsd", "natsd"), ("natsd", "nats-server"),
         ("nats-server", "natsd")]


@pytest.mark.parametrize("hub_kind,leaf_kind", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_a_trace_across_a_leaf_link(starters, tmp_path, hub_kind, leaf_kind):
    hub_conf = tmp_path / "hub.conf"
    hub_conf.write_text("server_name: H\nleafnodes { listen: 127.0.0.1:-1 }\n")
    hub = starters[hub_kind]("-c", str(hub_conf))
    port = int(hub.wait_log(r"Listening for leafnode connections on \S+:(\d+)").group(1))
    leaf_conf = tmp_path / "leaf.conf"
    leaf_conf.write_text('server_name: L\nleafnodes { remotes [{url: "nats://127.0.0.1:%d"}] }\n' % port)
    leaf = starters[leaf_kind]("-c", str(leaf_conf))
    with _client(leaf.port, "subber") as sub, _client(hub.port, "pubber") as pub:
        sub.send(b"SUB foo 1\r\n")
        sub.sync()
        pub.send(b"SUB tr 1\r\n")

        def linked_both_ways():
            pub.send(b"PUB foo 0\r\n\r\n")
            sub.send(b"PUB tr 0\r\n\r\n")
            return bool(_messages(sub.sync(timeout=1))) and bool(_messages(pub.sync(timeout=1)))
        assert poll(linked_both_ways, timeout=10)
        sub.sync()
        _hpub(pub, b"foo", _hdr(("Nats-Trace-Dest", "tr")))
        events = sorted(_events_of(pub, 2), key=lambda e: e["events"][0]["kind"])
        # (the probes of the link, empty and without headers, may still be arriving)
        delivered = [m[1] for m in _messages(sub.sync()) if m[1]]
    hop1 = _hdr(("Nats-Trace-Dest", "tr"), ("Nats-Trace-Hop", "1"))
    assert events == [
        {"request": {"header": {"Nats-Trace-Dest": ["tr"]}, "msgsize": len(_hdr(("Nats-Trace-Dest", "tr"))) + 5},
         "hops": 1,
         "events": [{"type": "in", "kind": 0, "name": "pubber", "acc": "$G", "subj": "foo"},
                    {"type": "eg", "kind": 4, "name": "L", "hop": "1"}]},
        {"request": {"header": {"Nats-Trace-Dest": ["tr"], "Nats-Trace-Hop": ["1"]}, "msgsize": len(hop1) + 5},
         "events": [{"type": "in", "kind": 4, "name": "H", "acc": "$G", "subj": "foo"},
                    {"type": "eg", "kind": 0, "name": "subber", "sub": "foo"}]}]
    assert delivered == [hop1]
