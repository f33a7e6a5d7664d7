"""`/subsz?subs=1` on a fresh server lists the server's own subscriptions as nats-server does
(issue 49.7): the system client's services (cid 1), each account's client for what it
imports from the system account (the system account's own first, the global account's
last) and JetStream's API import; `total` counts them, and the first client connection gets
the cid after them (5 on a default server, as on nats-server).

nats-server numbers the internal clients of configured accounts in Go map order (it varies
from run to run), so the comparison names each cid by its account. What natsd does not
subscribe yet is listed exactly in NOT_YET (each is a service natsd lacks, not a listing
gap): a new service must take its subject off the list.
"""
import asyncio
import collections
import os

import nats
import pytest

from tests.support.servers import http_json, nats_server_cmd, natsd_cmd, start_server

CONF = """accounts {
  A: { users: [{user: a, password: a}] }
  B: { users: [{user: b, password: b}] }
}
"""
# the $SYS services of nats-server 2.15 that natsd does not run (yet): none left
NOT_YET = set()



def _generic(subject, server_id):
    """A subject with the server's id and its name hash put as placeholders."""
    subject = subject.replace(server_id, "<id>")
    tokens = subject.split(".")
    if subject.startswith("$SYS._INBOX.") and len(tokens) == 4:
        tokens[2] = "<hash>"
    if subject.startswith("$SYS.LATENCY.M2."):
        tokens[3] = "<hash>"
    return ".".join(tokens)


def _listing(cmd, args, tmp_path, user=None):
    """-> (total, num_subscriptions, {(account, subject) with the cid named by its owner},
    the first client's cid)."""
    server = start_server(cmd, "-m", "-1", *args, cwd=str(tmp_path))
    try:
        z = http_json(server.http_port, "/subsz?subs=1")
        subs = z.get("subscriptions_list", [])
        owner = {}
        for s in subs:      # a cid is the system client when it holds $SYS services, else its account's
            owner.setdefault(s["cid"], set()).add(s["account"])
        system_cid = collections.Counter(s["cid"] for s in subs if s["account"] == "$SYS").most_common(1)[0][0]

        def role(cid):
            return "system client" if cid == system_cid else "client of %s" % "/".join(sorted(owner[cid]))
        listed = collections.Counter((s["account"], _generic(s["subject"], z["server_id"]), role(s["cid"]))
                                     for s in subs)

        async def first_cid():
            kw = {"user": user, "password": user} if user else {}
            nc = await nats.connect(server.url, **kw)
            cid = nc._client_id
            await nc.close()
            return cid
        return z["total"], z["num_subscriptions"], listed, asyncio.run(first_cid())
    finally:
        server.kill()


@pytest.mark.skipif(nats_server_cmd() is None, reason="no nats-server")
@pytest.mark.parametrize("setup", ["default", "jetstream", "accounts"])
def test_internal_subscriptions_are_listed_as_on_nats_server(setup, tmp_path):
    args, user = [], None
    if setup == "jetstream":
        args = ["-js", "-sd", str(tmp_path / "store")]
    elif setup == "accounts":
        path = tmp_path / "accounts.conf"
        path.write_text(CONF)
        args, user = ["-c", str(path)], "a"
    os.makedirs(tmp_path / "natsd", exist_ok=True)
    os.makedirs(tmp_path / "ref", exist_ok=True)
    total, count, ours, first = _listing(natsd_cmd(), [a.replace("store", "natsd/store") for a in args],
                                         tmp_path / "natsd", user)
    ref_total, ref_count, theirs, ref_first = _listing(
        nats_server_cmd(), [a.replace("store", "ref/store") for a in args], tmp_path / "ref", user)
    assert first == ref_first
    assert total == sum(ours.values()) == count
    assert ref_total == sum(theirs.values()) == ref_count
    lacking = theirs - ours
    assert {subject for _, subject, _ in lacking} == NOT_YET, lacking
    assert not ours - theirs, "natsd lists what nats-server does not: %r" % (ours - theirs)
