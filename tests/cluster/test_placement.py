"""Placement of replicated streams on a running cluster (natsd/jetstream/replicated/peerselect.py, the meta
group, ReplicatedStream._reconcile): `placement.tags` and `jetstream.unique_tag` choose the
servers, a placement no server meets is refused with nats-server's text, a placement update
moves the stream (every acknowledged message goes along, the servers left have no copy), and
`STREAM.CANCEL_MOVE` takes an unfinished move back; among the servers that may hold a stream,
fewer HA assets and more room come first. Replies are compared with nats-server's."""
import asyncio
import json
import os
import signal

import nats
import pytest

from tests.cluster.test_replicated_streams import api, check_acked, converged, leader_of, publish_window
from tests.cluster.test_stream_peers import hosts
from tests.support.cluster import clusters_of_each_kind, js_cluster
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")

TAGS = {"A": ["az:1", "ssd"], "B": ["az:2", "ssd", "fast"], "C": ["az:3", "fast"]}


def tagged(name):
    return "server_tags: [%s]" % ", ".join('"%s"' % t for t in TAGS[name])


def servers_of(info):
    c = info.get("cluster") or {}
    return {c.get("leader")} | {r["name"] for r in c.get("replicas") or []}


def cfg(name, tags, replicas=2, **more):
    return dict({"name": name, "subjects": ["%s.>" % name.lower()], "num_replicas": replicas,
                 "placement": {"tags": tags}}, **more)


async def ask(m, subject, body=b""):
    """A request the meta leader answers: retried while the cluster has none yet."""
    for _ in range(50):
        r = await api(m, subject, body)
        if r.get("error", {}).get("err_code") != 10008:
            return r
        await asyncio.sleep(0.2)
    raise AssertionError("no meta leader answered %s" % subject)


def first_create(m, c):
    """The first create of a test: retried until the meta leader has heard every server's
    STATSZ with its tags (until then a server counts as "miscellaneous issue", as on
    nats-server) and a meta leader answers."""
    def attempt():
        try:
            r = asyncio.run(api(m, "$JS.API.STREAM.CREATE.%s" % c["name"], json.dumps(c).encode(), timeout=2))
        except nats.errors.TimeoutError:
            return None
        return None if r.get("error", {}).get("err_code") in (10005, 10008) else r
    r = poll(attempt, timeout=20, interval=0.2)
    assert r and "error" not in r, r
    return r


@need_ref
def test_placement_by_tags_and_its_errors_match_nats_server(tmp_path):
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path, extra=tagged, js="unique_tag: az:"):
        first_create(members[2], cfg("SSD", ["ssd"]))
        # at once through C, which holds no copy: answered by the new leader (natsd: the
        # request waits for the leader's claim to reach C)
        r = asyncio.run(api(members[2], "$JS.API.STREAM.INFO.SSD"))
        assert r.get("config", {}).get("name") == "SSD", r
        out = []
        leader_of(members, "SSD")
        assert servers_of(asyncio.run(api(members[0], "$JS.API.STREAM.INFO.SSD"))) == {"A", "B"}
        for name, c in (("NOPE", cfg("NOPE", ["ssd"], 3)),           # two servers have ssd
                        ("HDD", cfg("HDD", ["hdd"], 2)),             # nobody has hdd
                        ("NOTSSD", cfg("NOTSSD", ["!ssd"], 2)),      # only C lacks ssd
                        ("ONE", cfg("ONE", ["hdd"], 1)),             # one replica: the same rules
                        ("ELSEWHERE", dict(cfg("ELSEWHERE", [], 2), placement={"cluster": "C9"}))):
            r = asyncio.run(ask(members[1], "$JS.API.STREAM.CREATE.%s" % name, json.dumps(c).encode()))
            out.append(r)
        # a move and a scale at once; a cancel with nothing to cancel
        both = dict(cfg("SSD", ["fast"], 3))
        out.append(asyncio.run(ask(members[0], "$JS.API.STREAM.UPDATE.SSD", json.dumps(both).encode())))
        out.append(asyncio.run(ask(members[0], "$JS.API.STREAM.CANCEL_MOVE.SSD")))
        seen[kind] = out
    assert seen["natsd"] == seen["nats-server"]
    assert [r["error"]["err_code"] for r in seen["natsd"]] == [10005] * 5 + [10123, 10129]
    assert seen["natsd"][0]["error"]["description"] == "no suitable peers for placement, tags not matched ['ssd']"


@need_ref
def test_a_new_server_needs_room_for_max_bytes_as_on_nats_server(tmp_path):
    """A server whose storage limit, less what it uses or has reserved, is below a stream's
    max_bytes is passed over; when too few servers are left the create is refused with
    nats-server's "insufficient storage". Asked through A: through C, the small server,
    both refuse it as beyond the account's limits (10047)."""
    small = lambda name: "max_file_store: 1MB" if name == "C" else ""
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path, js=small):
        a = members[0]
        first_create(a, {"name": "BIG", "subjects": ["big"], "num_replicas": 2, "max_bytes": 2 << 20})
        leader_of(members, "BIG")
        out = [servers_of(asyncio.run(api(a, "$JS.API.STREAM.INFO.BIG")))]
        huge = {"name": "HUGE", "subjects": ["huge"], "num_replicas": 3, "max_bytes": 2 << 20}
        out.append(asyncio.run(ask(a, "$JS.API.STREAM.CREATE.HUGE", json.dumps(huge).encode())))
        fits = {"name": "FITS", "subjects": ["fits"], "num_replicas": 3, "max_bytes": 512 << 10}
        r = asyncio.run(ask(a, "$JS.API.STREAM.CREATE.FITS", json.dumps(fits).encode()))
        out.append((r.get("error"), servers_of(r)))
        # C has 512 KiB left now: its reservation counts once its STATSZ tells it (a create
        # before that is placed, and reserves there too)
        tries = iter(range(100))

        def another():
            n = "AGAIN%d" % next(tries)
            c = {"name": n, "subjects": [n.lower()], "num_replicas": 3, "max_bytes": 768 << 10}
            return asyncio.run(ask(a, "$JS.API.STREAM.CREATE." + n, json.dumps(c).encode())).get("error")
        out.append(poll(another, timeout=20, interval=0.5))
        seen[kind] = out
    assert seen["natsd"] == seen["nats-server"]
    no_room = {"code": 400, "err_code": 10005, "description": "no suitable peers for placement, insufficient storage"}
    assert seen["natsd"][0] == {"A", "B"}
    assert seen["natsd"][1]["error"] == no_room
    assert seen["natsd"][2] == (None, {"A", "B", "C"})
    assert seen["natsd"][3] == no_room


@need_ref
def test_servers_with_more_room_and_fewer_ha_assets_come_first_as_on_nats_server(tmp_path):
    """With storage limits of 1 GB, 2 GB and 64 MB, four R2 streams in a row: fewer HA assets
    first, then more room (nats-server's order): {A, B}, {B, C}, {A, C}, {A, B}."""
    limit = {"A": "1GB", "B": "2GB", "C": "64MB"}
    room = lambda name: "max_file_store: %s" % limit[name]
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path, js=room):
        out = []
        for i in range(4):
            c = {"name": "S%d" % i, "subjects": ["s%d" % i], "num_replicas": 2}
            r = first_create(members[i % 3], c)
            out.append(servers_of(r))
        seen[kind] = out
    assert seen["natsd"] == seen["nats-server"]
    assert seen["natsd"] == [{"A", "B"}, {"B", "C"}, {"A", "C"}, {"A", "B"}]


def test_update_moves_the_stream_and_cancel_takes_it_back(tmp_path):
    with js_cluster("natsd", tmp_path, extra=tagged, js="limits { max_ha_assets: 2 }") as members:
        by = {m.name: m for m in members}
        first_create(by["C"], cfg("R3", ["ssd"], subjects=["r3.>"]))
        leader_of(members)
        acked = asyncio.run(publish_window(by["C"].url, 300, b"before"))

        # ssd (A, B) -> fast (B, C): B stays, C comes, A goes with every message on the new pair
        r = asyncio.run(api(by["C"], "$JS.API.STREAM.UPDATE.R3", json.dumps(cfg("R3", ["fast"], subjects=["r3.>"])).encode()))
        assert r["type"] == "io.nats.jetstream.api.v1.stream_update_response" and "error" not in r, r
        assert r["config"]["placement"] == {"tags": ["fast"]}
        acked.update(asyncio.run(publish_window(by["A"].url, 200, b"during")))
        assert poll(lambda: hosts(members) == ["B", "C"], timeout=30), hosts(members)
        assert poll(lambda: servers_of(asyncio.run(api(by["A"], "$JS.API.STREAM.INFO.R3"))) == {"B", "C"}, timeout=20)
        state = converged([by["B"], by["C"]], max(acked))
        check_acked(leader_of([by["B"], by["C"]]), acked, state)
        # the move is over: nothing to cancel
        r = asyncio.run(api(by["A"], "$JS.API.STREAM.CANCEL_MOVE.R3"))
        assert r["error"]["err_code"] == 10129, r

        # a move that cannot finish is taken back: A, the one server it needs, is frozen
        # (its routes stay up, so it counts as online, but it never catches up)
        os.kill(by["A"].proc.proc.pid, signal.SIGSTOP)
        try:
            to_ssd = json.dumps(cfg("R3", ["ssd"], subjects=["r3.>"])).encode()
            r = update_through(by["B"], to_ssd)              # A may have been the meta leader
            assert r.get("config", {}).get("placement") == {"tags": ["ssd"]} or \
                r.get("error", {}).get("err_code") == 10124, r
            again = asyncio.run(api(by["B"], "$JS.API.STREAM.UPDATE.R3", json.dumps(cfg("R3", ["fast"], subjects=["r3.>"])).encode()))
            assert again["error"]["err_code"] == 10124, again            # stream move already in progress
            r = asyncio.run(api(by["C"], "$JS.API.STREAM.CANCEL_MOVE.R3"))
            assert r["type"] == "io.nats.jetstream.api.v1.stream_cancel_move_response", r    # as nats-server
            assert r["config"]["placement"] == {"tags": ["fast"]}, r
            assert poll(lambda: servers_of(asyncio.run(api(by["B"], "$JS.API.STREAM.INFO.R3"))) == {"B", "C"}, timeout=20)
        finally:
            os.kill(by["A"].proc.proc.pid, signal.SIGCONT)
        assert poll(lambda: hosts(members) == ["B", "C"], timeout=30), hosts(members)
        assert converged([by["B"], by["C"]], max(acked))["messages"] == len(acked)

        # max_ha_assets: 2 (the meta group counts as one): B and C take one more stream, then
        # only A is left for another
        r = asyncio.run(ask(by["A"], "$JS.API.STREAM.CREATE.X", json.dumps(cfg("X", ["fast"])).encode()))
        assert "error" not in r, r
        r = asyncio.run(ask(by["A"], "$JS.API.STREAM.CREATE.Y", json.dumps(cfg("Y", [])).encode()))
        assert r["error"] == {"code": 400, "err_code": 10005,
                              "description": "no suitable peers for placement, miscellaneous issue"}, r


def update_through(m, body):
    """An update retried while its first attempt goes unanswered (forwarded to a frozen meta
    leader until the others elect a new one)."""
    for _ in range(10):
        try:
            return asyncio.run(api(m, "$JS.API.STREAM.UPDATE.R3", body, timeout=3))
        except nats.errors.TimeoutError:
            continue
    raise AssertionError("the update was never answered")
