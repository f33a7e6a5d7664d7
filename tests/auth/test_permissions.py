"""natsd.auth.permissions.Permissions: nats-server publish/subscribe/queue/deny semantics."""

from types import SimpleNamespace

from natsd.auth.permissions import CACHE_MAX, Permissions

from .conftest import perms_cfg, subject_perm


def P(pub_allow=(), pub_deny=(), sub_allow=(), sub_deny=(), response=None):
    return Permissions.from_config(perms_cfg(
        publish=subject_perm(pub_allow, pub_deny), subscribe=subject_perm(sub_allow, sub_deny),
        response=response))


def test_from_config_none_when_everything_allowed():
    assert Permissions.from_config(None) is None
    assert Permissions.from_config(perms_cfg()) is None
    assert P() is None


def test_publish_allow_and_deny():
    p = P(pub_allow=["foo.>", "bar"], pub_deny=["foo.secret"])
    assert p.can_publish("foo.x") and p.can_publish("foo.x.y") and p.can_publish("bar")
    assert not p.can_publish("foo.secret")
    assert not p.can_publish("baz") and not p.can_publish("foo")
    # Cached answers stay right.
    assert not p.can_publish("foo.secret") and p.can_publish("foo.x")


def test_publish_deny_only():
    p = P(pub_deny=["$SYS.>", "x.* q"])  # queue qualifier on publish: subject part kept
    assert p.can_publish("anything")
    assert not p.can_publish("$SYS.REQ.X")
    assert not p.can_publish("x.y")


def test_subscribe_allow_uses_sublist_semantics():
    p = P(sub_allow=["foo.>", "bar.*"])
    assert p.can_subscribe("foo.a") and p.can_subscribe("foo.*") and p.can_subscribe("foo.>")
    assert not p.can_subscribe(">") and not p.can_subscribe("*.a") and not p.can_subscribe("foo")
    # nats-server quirk (verified): allow bar.* admits SUB bar.>
    assert p.can_subscribe("bar.>")


def test_subscribe_deny_and_delivery_filter():
    p = P(sub_allow=["foo.>"], sub_deny=["foo.secret"])
    assert not p.can_subscribe("foo.secret")
    assert p.can_subscribe("foo.*")          # broader than the deny: allowed...
    assert p.needs_delivery_filter("foo.*")
    assert p.delivery_denied("foo.secret")   # ...but that subject is not delivered
    assert not p.delivery_denied("foo.public")
    assert not p.needs_delivery_filter("foo.public")
    assert not p.needs_delivery_filter("bar.*")
    p2 = P(sub_deny=["foo.*"])
    assert not p2.can_subscribe("foo.bar") and not p2.can_subscribe("foo.*")
    assert not p2.can_subscribe("foo.>")    # sublist quirk again: deny foo.* matches foo.>
    assert p2.can_subscribe(">") and p2.delivery_denied("foo.x")


def test_queue_permissions():
    # allow = ["foo"]            -> plain or any queue
    p = P(sub_allow=["foo"])
    assert p.can_subscribe("foo") and p.can_subscribe("foo", "any")
    # allow = ["foo v1"]         -> only queue v1, no plain subs
    p = P(sub_allow=["foo v1"])
    assert not p.can_subscribe("foo") and p.can_subscribe("foo", "v1")
    assert not p.can_subscribe("foo", "v2")
    # allow = ["foo", "foo v1"]  -> plain foo, but only queue v1
    p = P(sub_allow=["foo", "foo v1"])
    assert p.can_subscribe("foo") and p.can_subscribe("foo", "v1") and not p.can_subscribe("foo", "v2")
    # wildcard queue names
    p = P(sub_allow=["q.* v1.*", "q.* grp"])
    assert p.can_subscribe("q.x", "v1.a") and p.can_subscribe("q.x", "grp")
    assert not p.can_subscribe("q.x", "v1") and not p.can_subscribe("q.x", "other")
    assert not p.can_subscribe("q.x")


def test_queue_deny():
    p = P(sub_deny=["foo bad.>"])
    assert p.can_subscribe("foo") and p.can_subscribe("foo", "good")
    assert not p.can_subscribe("foo", "bad.x")
    assert p.needs_delivery_filter("foo", "bad.x") and p.needs_delivery_filter("foo", "good")
    assert p.delivery_denied("foo", "bad.one") and not p.delivery_denied("foo", "good")
    assert not p.delivery_denied("foo")


def test_invalid_entries_are_skipped():
    p = P(pub_allow=["foo..bar", "ok"], sub_allow=["a b c", "ok"])
    assert p.can_publish("ok") and not p.can_publish("foo..bar")
    assert p.can_subscribe("ok") and not p.can_subscribe("a")
    # An allow list with only invalid entries still allows nothing.
    p = P(sub_allow=["bad..subject"])
    assert not p.can_subscribe("x")


def test_response_permission_turns_off_blanket_publish():
    resp = SimpleNamespace(max_msgs=0, expires=0)
    p = Permissions.from_config(perms_cfg(response=resp))
    assert p is not None and not p.can_publish("anything")
    assert p.response.max_msgs == 1 and p.response.expires == 120.0
    resp = SimpleNamespace(max_msgs=5, expires=1.5)
    p = Permissions.from_config(perms_cfg(publish=subject_perm(["x"]), response=resp))
    assert p.can_publish("x") and not p.can_publish("y") and p.response is resp


def test_caches_are_bounded():
    p = P(pub_allow=["a.>"], sub_allow=["a.>"], sub_deny=["a.x"])
    for i in range(CACHE_MAX * 2 + 10):
        assert p.can_publish(f"a.{i}")
        assert p.can_subscribe(f"a.{i}.z")
        p.delivery_denied(f"a.{i}")
    assert len(p._pub_cache) <= CACHE_MAX
    assert len(p._sub_cache) <= CACHE_MAX
    assert len(p._deliver_cache) <= CACHE_MAX
