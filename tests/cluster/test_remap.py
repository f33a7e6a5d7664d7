"""natsd/jetstream/remap.py: which servers a replicated stream gets when one is removed or its
replica count changes (the meta leader's choice, the same on every server)."""
import pytest

from natsd.jetstream import errors as E
from natsd.jetstream.remap import remove_peer, rescale, spares

KEY = ("ACC", "ORDERS")


def code(fn, *args):
    with pytest.raises(E.ApiError) as e:
        fn(*args)
    return e.value.to_dict()["err_code"]


def test_spares_are_non_members_in_a_rotation_by_stream():
    assert sorted(spares(KEY, ["a", "b"], ["a", "b", "c", "d", "e"])) == ["c", "d", "e"]
    assert spares(KEY, ["a"], ["a", "b", "c"]) == spares(KEY, ["a"], ["c", "b", "a"])
    assert spares(KEY, ["a", "b"], ["a", "b"]) == []
    # another stream may start elsewhere in the rotation, always with the same members
    firsts = {spares((KEY[0], "S%d" % i), [], ["a", "b", "c"])[0] for i in range(30)}
    assert firsts == {"a", "b", "c"}


def test_remove_peer_replaces_in_place():
    new = remove_peer(KEY, ["a", "b", "c"], "b", ["a", "b", "c", "d"])
    assert new == ["a", "d", "c"]
    assert code(remove_peer, KEY, ["a", "b", "c"], "x", ["a", "b", "c", "d"]) == 10040
    assert code(remove_peer, KEY, ["a", "b", "c"], "b", ["a", "b", "c"]) == 10075


def test_rescale_up_adds_spares_and_down_keeps_the_leader():
    up = rescale(KEY, ["a", "b", "c"], 5, ["a", "b", "c", "d", "e"], "a")
    assert up[:3] == ["a", "b", "c"] and sorted(up[3:]) == ["d", "e"]
    assert rescale(KEY, ["a", "b", "c"], 3, ["a", "b", "c", "d"], "a") == ["a", "b", "c"]
    assert rescale(KEY, ["a", "b", "c", "d", "e"], 3, [], "d") == ["d", "a", "b"]
    assert rescale(KEY, ["a", "b", "c"], 2, [], None) == ["a", "b"]
    assert code(rescale, KEY, ["a", "b", "c"], 5, ["a", "b", "c", "d"], "a") == 10005
