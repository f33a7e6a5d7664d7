"""natsd/jetstream/replicated/peerselect.py and remap.py: which servers a replicated stream gets when it is
created, when one is removed, when its replica count or its placement changes (the meta
leader's choice, the same on every server). The texts are nats-server's selectPeerError ones."""
import pytest

from natsd.jetstream.engine import errors as E
from natsd.jetstream.replicated.peerselect import Pool, Rules, Server, select
from natsd.jetstream.replicated.remap import move, remove_peer, rescale

KEY = ("ACC", "ORDERS")


def pool(*servers, me="a", **rules):
    return Pool([s if isinstance(s, Server) else Server(s) for s in servers], me, Rules("C1", **rules))


def refusal(fn, *args):
    with pytest.raises(E.ApiError) as e:
        fn(*args)
    d = e.value.to_dict()
    return d["err_code"], d["description"]


def test_the_meta_leader_first_then_a_rotation_by_stream():
    p = pool("a", "b", "c", "d", "e")
    assert p.select(KEY, 3, None)[0] == "a"
    firsts = {pool("a", "b", "c", me="x").select(("ACC", "S%d" % i), 1, None)[0] for i in range(30)}
    assert firsts == {"a", "b", "c"}
    # fewer HA assets come first
    busy = pool(Server("a", ha_assets=2), Server("b", ha_assets=1), Server("c"))
    assert busy.select(KEY, 3, None) == ["c", "b", "a"]


def test_more_room_then_fewer_streams_come_first_within_equal_ha_assets():
    """nats-server's order: HA assets (replicated streams only), then room in the stream's
    storage (no limit is the most, untold the least), then streams held."""
    gb = 1 << 30
    p = Pool([Server("a", room={"file": gb, "memory": 4 * gb}), Server("b", room={"file": 2 * gb, "memory": gb}),
              Server("c", room={"file": -1, "memory": 0}), Server("d", room=None)], "a", Rules("C1"))
    assert p.select(KEY, 4, None) == ["c", "b", "a", "d"]
    assert Pool(p.servers, "a", Rules("C1"), ("memory", -1)).select(KEY, 4, None) == ["a", "b", "c", "d"]
    # HA assets outrank room for a replicated stream, not for a one-replica one
    p.servers[2].ha_assets = 1
    assert p.select(KEY, 3, None) == ["b", "a", "d"]
    assert p.select(KEY, 1, None) == ["c"]
    # equal room: fewer streams first
    even = Pool([Server(x, room={"file": gb}, streams=n) for x, n in (("a", 3), ("b", 1), ("c", 2))], "a", Rules("C1"))
    assert even.select(KEY, 3, None) == ["b", "c", "a"]


def test_tags_cluster_and_exclusions():
    p = pool(Server("a", frozenset({"ssd", "az:1"})), Server("b", frozenset({"az:2"})),
             Server("c", frozenset({"ssd", "az:3"})), Server("d", frozenset({"!jetstream", "ssd"})))
    assert sorted(p.select(KEY, 2, {"tags": ["SSD"]})) == ["a", "c"]
    assert p.select(KEY, 1, {"tags": ["!ssd"]}) == ["b"]
    assert refusal(p.select, KEY, 3, {"tags": ["ssd"]}) == (
        10005, "no suitable peers for placement, exclude tag set, tags not matched ['ssd']")
    assert refusal(p.select, KEY, 2, {"tags": ["!az:1", "!az:3"]}) == (
        10005, "no suitable peers for placement, exclude tag set, tags excluded ['az:1', 'az:3']")
    assert refusal(p.select, KEY, 1, {"cluster": "C2"}) == (10005, "no suitable peers for placement")
    assert p.select(KEY, 1, {"cluster": "C1", "tags": ["az:2"]}) == ["b"]


def test_offline_unknown_and_no_servers():
    p = pool("a", Server("b", online=False), Server("c", known=False))
    assert refusal(p.select, KEY, 3, None) == (
        10005, "no suitable peers for placement, peer offline, miscellaneous issue")
    assert refusal(select, KEY, 1, None, [], "a", Rules("C1")) == (
        10005, "no suitable peers for placement, jetstream not enabled in cluster")


def test_unique_tag_and_max_ha_assets():
    p = pool(Server("a", frozenset({"az:1"})), Server("b", frozenset({"az:1"})),
             Server("c", frozenset({"az:2"})), Server("d"), unique_tag="az:")
    assert sorted(p.select(KEY, 2, None)) == ["a", "c"]
    assert refusal(p.select, KEY, 3, None) == (10005, "no suitable peers for placement, server tag not unique")
    # a placement that names the unique tag turns the rule off
    assert sorted(p.select(KEY, 2, {"tags": ["az:1"]})) == ["a", "b"]
    # existing members' values are taken
    assert p.select(KEY, 2, None, ["b"]) == ["b", "c"]
    assert refusal(p.select, KEY, 3, None, ["b", "c"]) == (10005, "no suitable peers for placement, server tag not unique")
    full = pool(Server("a", ha_assets=2), Server("b", ha_assets=1), "c", max_ha_assets=2)
    assert sorted(full.select(KEY, 2, None)) == ["b", "c"]
    assert refusal(full.select, KEY, 3, None) == (10005, "no suitable peers for placement, miscellaneous issue")


def test_remove_peer_replaces_in_place():
    p = pool("a", "b", "c", "d")
    assert remove_peer(KEY, ["a", "b", "c"], "b", p, None) == ["a", "d", "c"]
    assert refusal(remove_peer, KEY, ["a", "b", "c"], "x", p, None)[0] == 10040
    assert refusal(remove_peer, KEY, ["a", "b", "c"], "b", pool("a", "b", "c"), None)[0] == 10075
    # the replacement meets the stream's placement
    tagged = pool("a", "b", "c", "d", Server("e", frozenset({"ssd"})))
    assert refusal(remove_peer, KEY, ["a", "b"], "b", pool("a", "b", "c"), {"tags": ["ssd"]})[0] == 10075
    assert remove_peer(KEY, ["a", "b"], "b", tagged, {"tags": ["ssd"]}) == ["a", "e"]


def test_rescale_up_adds_servers_and_down_keeps_the_leader():
    up = rescale(KEY, ["a", "b", "c"], 5, pool("a", "b", "c", "d", "e"), None, "a")
    assert up[:3] == ["a", "b", "c"] and sorted(up[3:]) == ["d", "e"]
    assert rescale(KEY, ["a", "b", "c"], 3, pool("a", "b", "c", "d"), None, "a") == ["a", "b", "c"]
    assert rescale(KEY, ["a", "b", "c", "d", "e"], 3, pool(), None, "d") == ["d", "a", "b"]
    assert rescale(KEY, ["a", "b", "c"], 2, pool(), None, None) == ["a", "b"]
    assert refusal(rescale, KEY, ["a", "b", "c"], 5, pool("a", "b", "c", "d"), None, "a")[0] == 10005


def test_move_keeps_the_members_that_meet_the_placement():
    p = pool(Server("a", frozenset({"x"})), Server("b", frozenset({"x", "y"})),
             Server("c", frozenset({"y"})), Server("d", frozenset({"y"})))
    assert move(KEY, ["a", "b"], p, {"tags": ["y"]})[0] == "b"
    assert sorted(move(KEY, ["a", "b"], p, {"tags": ["y"]})) in (["b", "c"], ["b", "d"])
    assert sorted(move(KEY, ["a", "b", "c"], p, {"tags": ["y"]})) == ["b", "c", "d"]
    assert refusal(move, KEY, ["a", "b"], p, {"tags": ["z"]}) == (
        10005, "no suitable peers for placement, tags not matched ['z']")
