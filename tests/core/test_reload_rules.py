"""What a reload may change, natsd against nats-server: the same config before and after a
SIGHUP on both; where nats-server refuses ("config reload not supported for <Field>: old=..,
new=.."), natsd refuses with the same line; where both reload, both say so; where nats-server
reloads what natsd cannot apply to a running server yet, natsd refuses in its own words
instead of reporting success. A refused reload changes nothing (the old users still log in)."""
import re
import signal

import pytest

from tests.support.rawclient import RawClient

# name -> (before, after, nats-server's answer: None = reloaded)
CASES = {
    "max_subscriptions": ("max_subscriptions: 5", "max_subscriptions: 6",
                          "config reload not supported for MaxSubs: old=5, new=6"),
    "log_size_limit": ("log_size_limit: 100", "log_size_limit: 200",
                       "config reload not supported for LogSizeLimit: old=100, new=200"),
    "lame_duck_duration": ('lame_duck_duration: "40s"', 'lame_duck_duration: "50s"',
                           "config reload not supported for LameDuckDuration: old=40s, new=50s"),
    "max_pending": ("max_pending: 100MB", "max_pending: 200MB",
                    "config reload not supported for MaxPending: old=104857600, new=209715200"),
    "write_timeout": ("write_timeout: close", "write_timeout: retry",
                      "config reload not supported for WriteTimeout: old=close, new=retry"),
    "max_sub_tokens": ("max_sub_tokens: 5", "max_sub_tokens: 6",
                       "config reload not supported for MaxSubTokens: old=5, new=6"),
    "sublist_cache": ("", "disable_sublist_cache: true",
                      "config reload not supported for NoSublistCache: old=false, new=true"),
    "http_port": ("", "http_port: 8222", "config reload not supported for HTTPPort: old=0, new=8222"),
    # the command line (-a 127.0.0.1 here) wins over the file, on a reload too
    "host_under_a_flag": ("host: 127.0.0.1", "host: 0.0.0.0", None),
    "server_name": ("server_name: a", "server_name: b", "config reload not supported for ServerName: old=a, new=b"),
    "js_domain": ('jetstream { store_dir: "{d}/js", domain: a }', 'jetstream { store_dir: "{d}/js", domain: b }',
                  "config reload not supported for JetStreamDomain: old=a, new=b"),
    "js_store_dir": ('jetstream { store_dir: "{d}/js" }', 'jetstream { store_dir: "{d}/js2" }',
                     "config reload not supported for jetstream storage directory"),
    "system_account": ("accounts { S {} }\nsystem_account: S", "accounts { S {}, T {} }\nsystem_account: T",
                       "config reload not supported for SystemAccount: old=S, new=T"),
    "leaf_no_advertise": ("leafnodes { port: -1 }", "leafnodes { port: -1, no_advertise: true }",
                          'config reload not supported for LeafNode: field "NoAdvertise": old=false, new=true'),
    "http_base_path": ('http_base_path: "/a"', 'http_base_path: "/b"',
                       "config reload not supported for HTTPBasePath: old=/a, new=/b"),
    "default_js_domain": ("accounts { A {}, B {} }\ndefault_js_domain: { B: y, A: x }",
                          "accounts { A {}, B {} }\ndefault_js_domain: { A: x, B: z }",
                          "config reload not supported for JsAccDefaultDomain: old=map[A:x B:y], new=map[A:x B:z]"),
    "write_deadline": ('write_deadline: "3s"', 'write_deadline: "4s"', None),
    "ping_max": ("ping_max: 3", "ping_max: 4", None),
    "debug": ("", "debug: true", None),
    "max_payload": ("max_payload: 1000", "max_payload: 2000", None),
}
# nats-server reloads these; natsd cannot apply them to a running server yet and says so
NATSD_REFUSES = {
    "cluster_name": ("cluster { name: a, port: -1 }", "cluster { name: b, port: -1 }"),
    "js_max_mem": ('jetstream { store_dir: "{d}/js", max_mem: 1G }', 'jetstream { store_dir: "{d}/js", max_mem: 2G }'),
    "account_mapping": ("accounts { A { mappings { a: b } } }", "accounts { A { mappings { a: c } } }"),
}

RESULT = re.compile(r"\[(?:ERR|INF)\] (Failed to reload server configuration: .*|Reloaded server configuration)"
                    r"( \(sha256:[0-9a-f]{64}\))?$")


def _reload(srv, conf, after):
    conf.write_text("port: -1\n" + after + "\n")
    srv.signal(signal.SIGHUP)
    return srv.wait_log(RESULT.pattern).group(1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reload_refuses_what_nats_server_refuses(any_server, tmp_path, name):
    before, after, refused = (x.replace("{d}", str(tmp_path)) if x else x for x in CASES[name])
    conf = tmp_path / "r.conf"
    conf.write_text("port: -1\n" + before + "\n")
    srv = any_server("-c", str(conf))
    got = _reload(srv, conf, after)
    if refused is None:
        assert got == "Reloaded server configuration"
    else:
        assert got == "Failed to reload server configuration: " + refused


@pytest.mark.parametrize("name", sorted(NATSD_REFUSES))
def test_natsd_says_what_it_cannot_reload_yet(natsd, tmp_path, name):
    before, after = (x.replace("{d}", str(tmp_path)) for x in NATSD_REFUSES[name])
    conf = tmp_path / "r.conf"
    conf.write_text("port: -1\n" + before + "\n")
    srv = natsd("-c", str(conf))
    assert _reload(srv, conf, after).startswith(
        "Failed to reload server configuration: config reload not supported by natsd yet for ")


def test_a_refused_reload_changes_nothing(any_server, tmp_path):
    """The new file drops a user and changes max_subscriptions: refused, the user stays."""
    conf = tmp_path / "r.conf"
    users = "authorization { users: [ {user: a, password: a}, {user: b, password: b} ] }\n"
    conf.write_text("port: -1\nmax_subscriptions: 5\n" + users)
    srv = any_server("-c", str(conf))
    got = _reload(srv, conf, "max_subscriptions: 6\nauthorization { users: [ {user: a, password: a} ] }")
    assert got.startswith("Failed to reload server configuration: config reload not supported for MaxSubs")
    with RawClient(srv.port) as c:
        c.send(b'CONNECT {"verbose":false,"user":"b","pass":"b"}\r\n')
        assert c.sync() == b""
