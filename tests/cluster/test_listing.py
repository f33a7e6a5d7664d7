"""Stream listings on a cluster (natsd/jetstream/listing.py): `STREAM.NAMES` and `STREAM.LIST`
through any server name every stream of the account, one-replica streams created through
other servers included, as a nats-server cluster answers."""
import asyncio
import json

import pytest

from tests.cluster.clusterhelp import js_cluster
from tests.cluster.test_replicated_streams import api, create, leader_of

need_ref = pytest.mark.skipif(not __import__("shutil").which("nats-server"), reason="no nats-server")


def listing(m, what, body=b""):
    r = asyncio.run(api(m, "$JS.API.STREAM.%s" % what, body))
    if what == "LIST":
        r["streams"] = [(s["config"]["name"], s["state"]["messages"]) for s in r["streams"]]
    return r


@need_ref
def test_names_and_list_cover_the_cluster_as_nats_server(tmp_path):
    seen = {}
    for kind in ("nats-server", "natsd"):
        with js_cluster(kind, tmp_path / kind) as members:
            a, b, c = members
            asyncio.run(create(c, {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3}))
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
            seen[kind] = out
    assert seen["natsd"] == seen["nats-server"]
    assert seen["natsd"][0]["streams"] == ["ONA", "ONB", "OTHER", "R3"]
    assert seen["natsd"][1]["streams"] == [("ONA", 0), ("ONB", 0), ("OTHER", 0), ("R3", 0)]
