"""Monitoring answers for the comparisons with nats-server: every reply to a $SYS request
(every_answer), and a natsd answer set against nats-server's by keys and JSON value types.

`differences(ref, mine)` lists, as dotted paths ("[]" stands for a list item):
  - "missing: p"  keys nats-server returns that natsd does not (lists of objects: the union of
    the items' keys on each side is compared),
  - "type: p ..." values present on both sides whose JSON types differ (string, number, bool,
    list, object, null); lists compare their first items when both are non-empty (lists of
    objects: the union of the items' keys, each with the last item's value).
`allow` is a set of paths to leave out (each caller documents why).
The HTTP answers of a monitoring port are read with tests/support/servers.py (http_get,
http_json, get_json).
"""
import asyncio
import json


async def every_answer(nc, subject, body, wait=0.5, most=None):
    """Every reply to a $SYS request (body: a JSON value, None for none) that arrives within
    `wait` seconds, decoded; sooner once `most` replies (as many as there are servers) came."""
    import nats
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, b"" if body is None else json.dumps(body).encode(), reply=inbox)
    await nc.flush()
    got = []
    deadline = asyncio.get_running_loop().time() + wait
    while most is None or len(got) < most:
        left = deadline - asyncio.get_running_loop().time()
        try:
            got.append(json.loads((await sub.next_msg(timeout=max(left, 0.05))).data))
        except nats.errors.TimeoutError:
            break
    await sub.unsubscribe()
    return got


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _merged(items):
    out = {}
    for x in items:
        out.update(x)
    return out


def differences(ref, mine, allow=(), path=""):
    out = []
    if path in allow:
        return out
    tr, tm = json_type(ref), json_type(mine)
    if tr != tm:
        return ["type: %s nats-server %s %.80r, natsd %s %.80r" % (path or ".", tr, ref, tm, mine)]
    if tr == "object":
        for k, v in ref.items():
            p = "%s.%s" % (path, k) if path else k
            if p in allow:
                continue
            if k not in mine:
                out.append("missing: " + p)
            else:
                out.extend(differences(v, mine[k], allow, p))
    elif tr == "list" and ref and mine:
        if all(isinstance(x, dict) for x in ref + mine):
            out.extend(differences(_merged(ref), _merged(mine), allow, path + "[]"))
        else:
            out.extend(differences(ref[0], mine[0], allow, path + "[]"))
    return out


def assert_same_shape(ref, mine, allow=(), what=""):
    diffs = differences(ref, mine, allow)
    assert not diffs, "%s: natsd differs from nats-server:\n  %s" % (what, "\n  ".join(diffs))



def union(answers):
    """One shape from several servers' answers to the same question (a cluster's members, or
    every reply to a $SYS ping): objects merged key by key, the items of every list of objects
    folded into one, other values the first non-empty one. Which member leads what differs
    from run to run; the union does not."""
    out = None
    for x in answers:
        out = fold(out, x)
    return out if out is not None else {}


def fold(a, b):
    """Two answers' shapes as one (see union)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = fold(out.get(k), v)
        return out
    objects = lambda x: isinstance(x, list) and x and all(isinstance(i, dict) for i in x)  # noqa: E731
    if objects(a) or objects(b):
        items = (a if objects(a) else []) + (b if objects(b) else [])
        folded = None
        for i in items:
            folded = fold(folded, i)
        return [folded]
    return a if a not in (None, [], {}) else b
