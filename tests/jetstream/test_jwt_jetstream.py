"""JetStream in operator mode, natsd against nats-server: account JWTs that enable JetStream
with limits (untiered, an R1 tier, R1 and R3 tiers, only an R3 tier), one that does not, the same JetStream API requests
from nats-py clients and the same answers (account info limits, a stream past the stream
limit, an account without JetStream), and the streams found again after a restart."""
import asyncio
import json

import nats

from tests.support.jwtmint import Mint, creds

LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
          "conn": -1, "leaf": -1}
JS = {"mem_storage": -1, "disk_storage": 1 << 30, "streams": 2, "consumer": -1, "max_ack_pending": 0}


def build(tmp_path, store):
    m = Mint(seed=71)
    op, _ = m.operator("OP")
    keys = {n: m.key("account") for n in ("SYS", "JS", "TIER", "NOJS", "T13", "T3")}
    limits = {"JS": dict(LIMITS, **JS), "TIER": dict(LIMITS, tiered_limits={"R1": dict(JS, streams=1)}),
              "SYS": LIMITS, "NOJS": LIMITS,
              # tiers for three replicas too: on one server only R1 streams can exist
              "T13": dict(LIMITS, tiered_limits={"R1": dict(JS, streams=2), "R3": dict(JS, streams=5)}),
              "T3": dict(LIMITS, tiered_limits={"R3": JS})}
    jwts = {n: m.token(op, k.public, "account", {"limits": limits[n], "default_permissions": {"pub": {}, "sub": {}}},
                       name=n) for n, k in keys.items()}
    op_jwt = m.token(op, op.public, "operator", {"system_account": keys["SYS"].public}, name="OP")
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\njetstream { store_dir: '%s' }\n"
                    % (op_jwt, "".join("  %s: %s\n" % (keys[n].public, j) for n, j in jwts.items()), store))
    paths = {}
    for n, k in keys.items():
        u, tok = m.user(k, n.lower())
        paths[n] = tmp_path / (n + ".creds")
        paths[n].write_text(creds(tok, u))
    return str(conf), {n: str(p) for n, p in paths.items()}


def _strip(body):
    """An API answer without what differs between servers by nature."""
    body = json.loads(body)
    for key in ("created", "ts", "domain"):
        body.pop(key, None)
    if isinstance(body.get("state"), dict):
        body["state"] = {k: v for k, v in body["state"].items() if not k.endswith("_ts")}
    if isinstance(body.get("config"), dict):
        body["config"].pop("metadata", None)
    return body


async def scenario(url, paths):
    out = {}
    for name in ("JS", "TIER", "NOJS", "T13", "T3"):
        nc = await nats.connect(url, user_credentials=paths[name])

        async def api(subject, payload=b""):
            try:
                return _strip((await nc.request(subject, payload, timeout=3)).data)
            except Exception as e:
                return type(e).__name__
        info = await api("$JS.API.INFO")
        if isinstance(info, dict):
            info = {k: info.get(k) for k in ("type", "limits", "streams", "consumers", "error", "tiers")}
        out[name + " info"] = info
        for stream in ("S1", "S2", "S3"):
            cfg = json.dumps({"name": name + stream, "subjects": ["%s.%s.>" % (name.lower(), stream)],
                              "storage": "file"}).encode()
            r = await api("$JS.API.STREAM.CREATE.%s%s" % (name, stream), cfg)
            out["%s create %s" % (name, stream)] = r.get("error") if isinstance(r, dict) else r
        cfg = json.dumps({"name": name + "R3", "subjects": [name.lower() + ".r3"], "num_replicas": 3}).encode()
        r = await api("$JS.API.STREAM.CREATE.%sR3" % name, cfg)
        out[name + " create R3"] = r.get("error") if isinstance(r, dict) else r
        info = await api("$JS.API.INFO")
        out[name + " tiers after"] = info.get("tiers") if isinstance(info, dict) else info
        await nc.close()
    return out


async def after_restart(url, paths):
    nc = await nats.connect(url, user_credentials=paths["JS"])
    names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=3)).data)
    await nc.close()
    return sorted(names.get("streams") or [])


def test_jwt_jetstream_matches_nats_server(natsd, reference, tmp_path):
    results = []
    for label, start in (("ref", reference), ("natsd", natsd)):
        store = tmp_path / ("store-" + label)
        conf, paths = build(tmp_path / label if (tmp_path / label).mkdir() is None else tmp_path, store)
        srv = start("-c", conf)
        out = asyncio.run(scenario(srv.url, paths))
        srv.stop()
        srv = start("-c", conf)
        out["streams after restart"] = asyncio.run(after_restart(srv.url, paths))
        srv.stop()
        results.append(out)
    theirs, ours = results
    assert ours == theirs
    assert theirs["JS create S1"] is None and theirs["JS create S3"]["err_code"] == 10027
    assert theirs["NOJS create S1"]["err_code"] == 10039
    assert theirs["streams after restart"] == ["JSS1", "JSS2"]
    assert sorted(theirs["T13 tiers after"]) == ["R1", "R3"] and theirs["T13 tiers after"]["R1"]["streams"] == 2
    assert theirs["T13 create R3"]["err_code"] == 10074 and theirs["T3 create R3"]["err_code"] == 10074
    assert theirs["T3 create S1"]["err_code"] == 10120
