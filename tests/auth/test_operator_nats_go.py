"""Operator mode through nats.go (tools/goclient), natsd against nats-server: the tokens of
test_operator_mode's world, the same steps run by the Go client against both servers, the same
reports: valid, expired, revoked, wrongly signed, out-of-window and out-of-CIDR users, bearer
tokens, permission violations (the user's own and the account's defaults), user limits and a
user cut off when its JWT expires."""

from tests.auth.test_operator_mode import build

CASES = [
    ("valid", "carol", ["echo:any"]),
    ("own permissions", "alice", ["echo:a.x", "pub:b.x", "echo:a.y"]),
    ("expired", "old", []),
    ("revoked", "revoked", []),
    ("wrong seed", "wrongseed", []),
    ("unknown account", "stranger", []),
    ("out of CIDR", "cidr_bad", []),
    ("inside CIDR", "cidr_ok", ["echo:c.x"]),
    ("out of time window", "times_bad", []),
    ("inside time window", "times_ok", ["echo:t.x"]),
    ("account signing key", "signed", ["echo:s.x"]),
    ("account default permissions", "defaults", ["pub:secret.x", "echo:open.x"]),
    ("scoped signing key", "scoped", ["echo:ACC2.scoped.x", "pub:other.x"]),
    ("user limits", "limited", ["sub:one", "sub:two"]),
]


def run_all(goclient, url, users, tokens, soon):
    out = {name: goclient(url, *steps, creds=users[user]) for name, user, steps in CASES}
    out["bearer"] = goclient(url, "echo:b.x", jwt=tokens["bearer"])
    out["bearer refused"] = goclient(url, jwt=tokens["bearer refused"])
    out["expires while connected"] = goclient(url, "closed:10", creds=soon())
    return out


def test_operator_mode_through_nats_go(natsd, reference, goclient, tmp_path):
    conf, users, (soon, _), tokens = build(tmp_path)
    theirs = run_all(goclient, reference("-c", conf).url, users, tokens, soon)
    ours = run_all(goclient, natsd("-c", conf).url, users, tokens, soon)
    for name in theirs:
        assert ours[name] == theirs[name], name
    refused = {"ok": False, "step": "connect", "error": "nats: Authorization Violation"}
    for name in ("expired", "revoked", "wrong seed", "unknown account", "out of CIDR",
                 "out of time window"):
        assert theirs[name] == [refused], name
    assert theirs["valid"][1]["got"] and theirs["bearer"][1]["got"]
    assert theirs["bearer refused"] == [refused]
    assert theirs["own permissions"][2]["errors"] == ['nats: Permissions Violation for Publish to "b.x"']
    assert theirs["own permissions"][3]["got"]          # the violation did not close it
    assert theirs["account default permissions"][1]["errors"] == [
        'nats: Permissions Violation for Publish to "secret.x"']
    assert theirs["user limits"][2]["last"] == "nats: maximum subscriptions exceeded"
    assert theirs["expires while connected"][1]["closed"] is True
