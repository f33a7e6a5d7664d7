"""`default_sentinel`: in operator mode a CONNECT without a user JWT logs in with the
configured bearer user JWT (its account, its permissions), on natsd and nats-server alike;
a client with its own JWT is not affected; the start-up checks refuse a sentinel that is not a
bearer token, does not decode, or has no operator, with nats-server's words."""
import base64
import json
import re

import pytest

from natsd.conf import load_string
from natsd.conf.unsupported import start_error
from tests.support.jwtmint import Mint
from tests.support.rawclient import RawClient


def _setup(tmp_path):
    m = Mint(seed=23)
    op, op_jwt = m.operator("OP")
    guest, guest_jwt = m.account(op, "GUEST")
    team, team_jwt = m.account(op, "TEAM")
    _, sentinel = m.user(guest, "sentinel", bearer_token=True, pub={"allow": ["public.>"]},
                         sub={"allow": ["public.>", "_INBOX.>"]})
    member, member_jwt = m.user(team, "member")
    conf = tmp_path / "op.conf"
    conf.write_text(f"""
operator: {op_jwt}
resolver: MEMORY
resolver_preload: {{
  {guest.public}: {guest_jwt}
  {team.public}: {team_jwt}
}}
default_sentinel: {sentinel}
""")
    return str(conf), member, member_jwt, m, guest


def _anonymous_session(port):
    """A CONNECT with no credentials, then a subscription and a publish inside and outside
    the sentinel's permissions: what the server answered."""
    with RawClient(port) as c:
        c.send(b'CONNECT {"verbose":false}\r\n')
        c.send(b"SUB public.x 1\r\nSUB team.x 2\r\nPUB public.x 2\r\nhi\r\nPUB team.x 2\r\nho\r\n")
        return c.sync()


def test_a_connect_without_a_jwt_is_the_sentinel(any_server, tmp_path):
    conf, member, member_jwt, _, _ = _setup(tmp_path)
    srv = any_server("-c", conf)
    anon = _anonymous_session(srv.port)
    # the sentinel's permissions: public.> only
    assert anon == (b"-ERR 'Permissions Violation for Subscription to \"team.x\"'\r\n"
                    b"MSG public.x 1 2\r\nhi\r\n"
                    b"-ERR 'Permissions Violation for Publish to \"team.x\"'\r\n")
    # a user with its own JWT (signed nonce) is itself
    with RawClient(srv.port) as c:
        sig = member.kp.sign(c.info["nonce"].encode())
        c.send(b"CONNECT " + json.dumps({"verbose": False, "jwt": member_jwt,
                                         "sig": base64.urlsafe_b64encode(sig).rstrip(b"=").decode()}).encode()
               + b"\r\nSUB team.x 2\r\nPUB team.x 2\r\nho\r\n")
        assert c.sync() == b"MSG team.x 2 2\r\nho\r\n"


def test_the_sentinels_account_is_the_one_connz_reports(any_server, tmp_path):
    conf, _, _, _, guest = _setup(tmp_path)
    srv = any_server("-c", conf, "-m", "-1")
    from tests.support.servers import http_json
    with RawClient(srv.port) as c:
        c.send(b'CONNECT {"verbose":false,"name":"anon"}\r\n')
        c.sync()
        conns = http_json(srv.http_port, "/connz?auth=1")["connections"]
        anon = next(x for x in conns if x.get("name") == "anon")
        assert anon["account"] == guest.public


@pytest.mark.parametrize("case, error", [
    ("no_operator", "default sentinel requires operators and accounts"),
    ("garbage", "default sentinel JWT not valid"),
    ("not_bearer", "default sentinel must be a bearer token"),
])
def test_start_refuses_a_bad_sentinel(any_server, tmp_path, case, error):
    conf, _, _, m, guest = _setup(tmp_path)
    text = open(conf).read()
    if case == "no_operator":
        text = "default_sentinel: " + re.search(r"default_sentinel: (\S+)", text).group(1) + "\n"
    elif case == "garbage":
        text = re.sub(r"default_sentinel: \S+", "default_sentinel: not.a.jwt", text)
    else:
        _, plain = m.user(guest, "plain")
        text = re.sub(r"default_sentinel: \S+", "default_sentinel: " + plain, text)
    open(conf, "w").write(text)
    srv = any_server("-c", conf, wait=False)
    assert srv.proc.wait(15) == 1
    assert srv.log.strip().endswith(error)
    assert start_error(load_string(text)) == error
