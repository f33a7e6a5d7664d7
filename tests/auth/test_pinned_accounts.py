"""`resolver_pinned_accounts`: in operator mode only users of the pinned accounts (and of the
system account) log in; the others are refused and counted in /varz `pinned_account_fails`.
A key that is not an account's is refused at start. natsd and nats-server alike."""
import base64
import json

import pytest

from tests.support.jwtmint import Mint
from tests.support.rawclient import RawClient
from tests.support.servers import http_json


def _setup(tmp_path, pinned):
    m = Mint(seed=31)
    op, op_jwt = m.operator("OP")
    a, a_jwt = m.account(op, "A")
    b, b_jwt = m.account(op, "B")
    users = {"a": m.user(a, "ua"), "b": m.user(b, "ub")}
    conf = tmp_path / "op.conf"
    conf.write_text(f"""operator: {op_jwt}
resolver: MEMORY
resolver_preload: {{
  {a.public}: {a_jwt}
  {b.public}: {b_jwt}
}}
resolver_pinned_accounts: {pinned(a.public)}
""")
    return str(conf), users


def _login(port, user):
    key, token = user
    with RawClient(port) as c:
        sig = base64.urlsafe_b64encode(key.kp.sign(c.info["nonce"].encode())).rstrip(b"=").decode()
        c.send(b"CONNECT " + json.dumps({"verbose": False, "jwt": token, "sig": sig}).encode() + b"\r\nPING\r\n")
        return c.read_line()


@pytest.mark.parametrize("form", ["array", "string"])
def test_only_pinned_accounts_log_in(any_server, tmp_path, form):
    conf, users = _setup(tmp_path, (lambda k: f'["{k}"]') if form == "array" else (lambda k: f'"{k}"'))
    srv = any_server("-c", conf, "-m", "-1")
    assert "pinned_account_fails" not in http_json(srv.http_port, "/varz")
    assert _login(srv.port, users["a"]) == b"PONG"
    assert _login(srv.port, users["b"]) == b"-ERR 'Authorization Violation'"
    assert http_json(srv.http_port, "/varz")["pinned_account_fails"] == 1


def test_a_pinned_key_that_is_not_an_account_is_refused_at_start(any_server, tmp_path):
    conf, _ = _setup(tmp_path, lambda k: '["NOTAKEY"]')
    srv = any_server("-c", conf, wait=False)
    assert srv.proc.wait(15) == 1
    assert srv.log.strip().endswith('pinned account key "NOTAKEY" is not a valid public account nkey')
