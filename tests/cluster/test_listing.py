"""Stream listings and account info on a cluster (natsd/jetstream/replicated/listing.py): `STREAM.NAMES`,
`STREAM.LIST` and `$JS.API.INFO` through any server cover every stream of the account,
one-replica streams created through other servers included, as a nats-server cluster answers;
create answers on a cluster carry the cluster block as nats-server's do."""
import asyncio
import json

import nats
import pytest

from tests.cluster.test_replicated_streams import api, create, leader_of
from tests.support.cluster import clusters_of_each_kind
from tests.support.waiting import poll

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")


def listing(m, what, body=b""):
    r = asyncio.run(api(m, "$JS.API.STREAM.%s" % what, body))
    if what == "LIST":
        r["streams"] = [(s["config"]["name"], s["state"]["messages"]) for s in r["streams"]]
    return r


def shape(r):
    """An API answer's keys, and its cluster block's (the servers' names differ: nats-server
    places a one-replica stream on any server, natsd on the one asked). Without leader_since:
    nats-server has any replica answer an equal create, a follower without it."""
    return sorted(r), sorted(set(r.get("cluster") or ()) - {"leader_since"})


async def fill(members):
    """Messages in every stream (a memory one too), and consumers on the replicated stream and
    on a one-replica one -> the create answers' shapes."""
    a, b, _ = members
    shapes = []
    r = await api(b, "$JS.API.STREAM.CREATE.MEM", json.dumps(
        {"name": "MEM", "subjects": ["mem"], "storage": "memory", "max_bytes": 4096}).encode())
    shapes.append(shape(r))
    r = await api(a, "$JS.API.STREAM.CREATE.R3", json.dumps(R3).encode())      # equal: no did_create
    shapes.append(shape(r))
    for m, subject in ((a, "r3.x"), (b, "mem"), (a, "ona.x")):
        nc = await nats.connect(m.url)
        for i in range(10):
            await nc.request(subject, b"x" * (50 + i))
        await nc.close()
    for stream, m in (("R3", a), ("MEM", b)):
        r = await api(m, "$JS.API.CONSUMER.CREATE.%s.d" % stream, json.dumps(
            {"stream_name": stream, "config": {"durable_name": "d", "ack_policy": "explicit"}}).encode())
        shapes.append(shape(r))
    return shapes


def account_totals(m):
    """`$JS.API.INFO` through `m`, without the API counters (natsd counts the requests each
    server handled, nats-server adds up what its usage updates told: not the same number)."""
    r = asyncio.run(api(m, "$JS.API.INFO"))
    r.pop("api")
    return r


R3 = {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3, "max_bytes": 100000}


@need_ref
def test_names_list_and_account_info_cover_the_cluster_as_nats_server(tmp_path):
    seen = {}
    for kind, members in clusters_of_each_kind(tmp_path):
        a, b, c = members
        asyncio.run(create(c, R3))
        leader_of(members)
        for m, name in ((a, "ONA"), (b, "ONB"), (b, "OTHER")):
            r = asyncio.run(create(m, {"name": name, "subjects": ["%s.>" % name.lower()]}))
            assert "error" not in r, r
        out = []
        for m in members:
            out.append(listing(m, "NAMES"))
            out.append(listing(m, "LIST"))
            out.append(listing(m, "NAMES", json.dumps({"subject": "ona.x"}).encode()))
            out.append(listing(m, "NAMES", json.dumps({"subject": "*.x", "offset": 1}).encode()))
        out.append(asyncio.run(fill(members)))
        # every copy's bytes (nats-server's record sizes: file 22 + subject + data + 8,
        # memory subject + data + 16); the replicas' reports may take a moment
        want = (3 * (10 * 34 + 545) + 10 * 35 + 545, 10 * 19 + 545)
        assert poll(lambda: all((t["storage"], t["memory"]) == want for t in map(account_totals, members)),
                    timeout=15), [account_totals(m) for m in members]
        out.append([account_totals(m) for m in members])
        if kind == "natsd":
            # api.total counts the account's requests on every server: five handled by B
            # alone (ONB lives there) show through A, as does the second INFO itself
            before = asyncio.run(api(a, "$JS.API.INFO"))["api"]["total"]
            for _ in range(5):
                assert asyncio.run(api(b, "$JS.API.STREAM.INFO.ONB"))["config"]["name"] == "ONB"
            assert asyncio.run(api(a, "$JS.API.INFO"))["api"]["total"] == before + 6
        seen[kind] = out
    for ours, theirs in zip(seen["natsd"], seen["nats-server"]):
        assert ours == theirs
    assert seen["natsd"][0]["streams"] == ["ONA", "ONB", "OTHER", "R3"]
    assert seen["natsd"][1]["streams"] == [("ONA", 0), ("ONB", 0), ("OTHER", 0), ("R3", 0)]
    info = seen["natsd"][-1][0]
    assert (info["streams"], info["consumers"], info["reserved_storage"], info["reserved_memory"]) == \
        (5, 2, 100000, 4096)

