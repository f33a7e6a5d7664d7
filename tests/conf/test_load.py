"""Tests for natsd.conf.load: tree -> Options, units, validation, all-errors reporting, seeds."""
import os
import shutil
import subprocess

import pytest

from natsd.conf import ConfigError, load_file, load_string, parse_duration, parse_size
from natsd.options import NkeyUser, Options
from tests.support.jwtmint import Mint

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def errors(text, name="bad.conf"):
    with pytest.raises(ConfigError) as ei:
        load_string(text, name)
    return ei.value.errors


# -- units ---------------------------------------------------------------------
@pytest.mark.parametrize("s,secs", [("2m", 120), ("10s", 10), ("1h30m", 5400), ("500ms", 0.5), ("0", 0),
                                    ("1.5s", 1.5), ("-2s", -2), ("1m30s", 90), ("100us", 1e-4), (5, 5)])
def test_parse_duration(s, secs):
    assert parse_duration(s) == pytest.approx(secs)


@pytest.mark.parametrize("s", ["", "5x", "abc", "1h 2m", "s"])
def test_parse_duration_rejects(s):
    with pytest.raises(ValueError):
        parse_duration(s)


def test_parse_size_quoted_uses_1024():
    assert parse_size("256M") == 256 * 2**20
    assert parse_size("1K") == 1024 and parse_size("2G") == 2 * 2**30 and parse_size("1T") == 2**40
    assert parse_size(1000) == 1000 and parse_size("") == 0
    with pytest.raises(ValueError):
        parse_size("10X")


def test_jetstream_quoted_vs_unquoted_sizes():
    o = load_string('jetstream { max_mem: "256M", max_file: 1G }')
    assert o.jetstream.max_memory == 256 * 2**20      # quoted: 1024 powers
    assert o.jetstream.max_store == 10**9              # unquoted G: 1000 powers
    o = load_string("jetstream { max_memory_store: 1GiB, max_file_store: 2048 }")
    assert o.jetstream.max_memory == 2**30 and o.jetstream.max_store == 2048


def test_durations_and_integer_seconds_warning():
    o = load_string('ping_interval: "30s"\nwrite_deadline: "2s"\nlame_duck_duration: "45s"\n'
                    'lame_duck_grace_period: "5s"\nauthorization { user: a, password: b, timeout: "3s" }')
    assert (o.ping_interval, o.write_deadline, o.lame_duck_duration, o.lame_duck_grace_period,
            o.auth_timeout) == (30, 2, 45, 5, 3)
    o = load_string("ping_interval: 5\n", "p.conf")
    assert o.ping_interval == 5
    assert o.warnings == ['p.conf:1:0: invalid use of field "ping_interval": '
                          "ping_interval should be converted to a duration"]
    assert load_string("authorization { timeout: 1.5 }").auth_timeout == 1.5


def test_defaults():
    o = load_string("")
    d = Options()
    assert o.port == d.port == 4222 and o.host == "0.0.0.0" and o.max_payload == 1048576
    assert o.jetstream.enabled is False and o.jetstream.sync_interval == 120.0
    assert o.leafnode.port == 0 and o.leafnode.reconnect_delay == 1.0 and o.max_connections == 65536


def test_top_level_values_and_aliases():
    o = load_string("""
        listen: 127.0.0.1:4333
        server_name: srv
        http: 8222
        https_port: 8443
        max_payload: 2MB
        max_pending: 100
        max_control_line: 1024
        max_conn: 100
        max_subs: 7
        logfile: /tmp/x.log
        log_size_limit: 1kb
        pid_file: /tmp/p
        debug: true
        trace_verbose: true
        logtime: false
        no_header_support: yes
        no_sublist_cache: on
        server_tags: ["a:1", b]
        server_metadata: { region: eu }
        client_advertise: "example.com:4222"
        system: SYS
        accounts { SYS {} }
        sync_other: 1
        operator: "%s"
    """.replace("        sync_other: 1\n", "") % Mint(seed=2).operator()[1])
    assert (o.host, o.port, o.server_name, o.http_port, o.https_port) == ("127.0.0.1", 4333, "srv", 8222, 8443)
    assert o.max_payload == 2 * 2**20 and o.max_control_line == 1024 and o.max_connections == 100
    assert o.max_subscriptions == 7 and o.log_file == "/tmp/x.log" and o.log_size_limit == 1024
    assert o.debug and o.trace and o.trace_verbose and not o.logtime and o.no_header_support
    assert o.disable_sublist_cache and o.server_tags == ["a:1", "b"] and o.server_metadata == {"region": "eu"}
    assert o.system_account == "SYS" and o.extra["operator"].startswith("eyJ")


def test_jetstream_forms():
    assert load_string("jetstream: enabled").jetstream.enabled
    assert not load_string("jetstream: disabled").jetstream.enabled
    assert load_string("jetstream: true").jetstream.enabled
    o = load_string('jetstream { store_dir: "/d", domain: hub, sync_interval: always, strict: false,'
                    ' unique_tag: " AZ ", max_buffered_msgs: 5, max_buffered_size: "1M", limits { max_ha_assets: 3 } }')
    js = o.jetstream
    assert js.enabled and js.store_dir == "/d" and js.domain == "hub" and js.sync_interval == "always"
    assert js.sync_always and js.strict is False and js.unique_tag == "az" and js.max_buffered_msgs == 5
    assert js.max_buffered_size == 2**20 and js.limits == {"max_ha_assets": 3}
    assert load_string('jetstream { sync_interval: "10s", enabled: false }').jetstream.sync_interval == 10
    assert load_string('store_dir: "/x"\njetstream: enabled').jetstream.store_dir == "/x"


def test_authorization_users_permissions():
    o = load_string("""
    authorization {
      default_permissions { publish: "foo.>" }
      users: [
        {user: a, password: pa, permissions: {publish: {allow: ["x", "y"], deny: "z"}, subscribe: ["s.*", "q grp"],
                                              allow_responses: {max: 5, expires: "1m"}}}
        {user: b, password: pb}
        {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4, allowed_connection_types: ["STANDARD"]}
      ]
    }""")
    a, b = o.users
    assert a.permissions.publish.allow == ["x", "y"] and a.permissions.publish.deny == ["z"]
    assert a.permissions.subscribe.allow == ["s.*", "q grp"]
    assert a.permissions.response.max_msgs == 5 and a.permissions.response.expires == 60
    assert b.permissions.publish.allow == ["foo.>"]          # default_permissions applied
    assert isinstance(o.nkeys[0], NkeyUser) and o.nkeys[0].allowed_connection_types == ["STANDARD"]
    o = load_string("authorization { users: [{user: a, password: b, permissions: {allow_responses: true}}] }")
    assert o.users[0].permissions.response.max_msgs == 1 and o.users[0].permissions.response.expires == 120
    o = load_string("authorization { token: s3cr3t, timeout: 5 }")
    assert o.authorization == "s3cr3t" and o.auth_timeout == 5


def test_mappings_weighted_and_simple():
    o = load_string("""mappings {
      "foo": "bar"
      weighted: [ {destination: a, weight: 98%}, {destination: b, weight: "2%"} ]
      single: {dest: c, weight: 100}
    }""", "m.conf")
    assert o.mappings["foo"][0].subject == "bar" and o.mappings["foo"][0].weight == 100
    assert [(d.subject, d.weight) for d in o.mappings["weighted"]] == [("a", 98), ("b", 2)]
    assert o.mappings["single"][0].subject == "c"
    assert o.mappings_pos["foo"] == ("m.conf", 2, 7)
    assert errors('mappings { x: [ {destination: a, weight: 70}, {destination: b, weight: 40} ] }') == [
        'bad.conf:1:11: Error adding mapping for "x" : total weight needs to be <= 100']


def test_account_details():
    o = load_string("""accounts {
      A: {
        users: [{user: u1, password: p}]
        jetstream: { max_mem: "1G", max_streams: 10 }
        limits: { max_connections: 5, max_payload: 1kb }
        mappings: { "in": "out" }
        exports: [
          {service: "svc.*.>", response_type: chunked, response_threshold: "5s", accounts: [B],
           latency: {subject: lat, sampling: "50%"}, account_token_position: 2}
          {stream: "pub.>"}
        ]
      }
      B: {
        imports: [
          {service: {account: A, subject: "svc.B.x"}, to: "local.x", share: true}
          {stream: {account: A, subject: "pub.>"}, prefix: pre}
        ]
      }
    }""")
    a, b = o.accounts["A"], o.accounts["B"]
    assert a.users[0].account == "A" and o.users[0] is a.users[0]
    assert a.jetstream and a.jetstream_limits == {"max_mem": 2**30, "max_streams": 10}
    assert a.limits.max_connections == 5 and a.limits.max_payload == 1024 and a.limits.max_subscriptions == -1
    svc, st = a.exports
    assert (svc.kind, svc.subject, svc.response_type, svc.response_threshold, svc.accounts) == (
        "service", "svc.*.>", "Chunked", 5, ["B"])
    assert svc.latency.subject == "lat" and svc.latency.sampling == 50 and svc.account_token_position == 2
    assert (st.kind, st.accounts, st.response_type) == ("stream", None, "Singleton")
    i1, i2 = b.imports
    assert (i1.kind, i1.account, i1.subject, i1.to, i1.share) == ("service", "A", "svc.B.x", "local.x", True)
    assert (i2.kind, i2.prefix) == ("stream", "pre")
    assert a.pos == ("<string>", 2, 7)
    assert o.unsupported == []              # latency is tracked (refused only with routes or leafs)


# -- seeds ---------------------------------------------------------------------
def _seed(d, f):
    return load_file(os.path.join(FIX, d, f))


@pytest.mark.parametrize("d", ["seed000", "seed001", "seed002_fixed", "seed000_cross", "seed002_cross_fixed"])
def test_seed_hub(d):
    o = _seed(d, "hub.conf")
    assert (o.port, o.server_name) == (4222, "hub-server")
    assert o.jetstream.enabled and o.jetstream.store_dir == "./store_server" and o.jetstream.domain == "hub"
    assert o.leafnode.port == 7422 and o.leafnode.remotes == []
    assert o.system_account == "SYS"
    assert list(o.accounts)[:2] == ["SYS", "ACC"]
    assert [(u.username, u.password, u.account) for u in o.accounts["SYS"].users] == [("admin", "admin", "SYS")]
    assert o.accounts["ACC"].jetstream and not o.accounts["SYS"].jetstream
    assert o.config_digest.startswith("sha256:")


@pytest.mark.parametrize("d,scheme", [("seed000", "nats-leaf"), ("seed001", "nats"), ("seed002_fixed", "nats-leaf")])
def test_seed_leaf(d, scheme):
    o = _seed(d, "leaf.conf")
    assert (o.port, o.server_name, o.jetstream.domain, o.jetstream.store_dir) == (
        4111, "leaf-server", "leaf", "./store_leaf")
    assert o.leafnode.port == 0
    assert [(r.urls, r.account) for r in o.leafnode.remotes] == [
        ([f"{scheme}://admin:admin@0.0.0.0:7422"], "SYS"), ([f"{scheme}://acc:acc@0.0.0.0:7422"], "ACC")]
    assert o.leafnode.remotes[0].pos[:2] == (os.path.join(FIX, d, "leaf.conf"), 9)


def test_seed_digests_match_nats_server():
    # printed by nats-server v2.15.1 `-t` for these fixtures
    assert _seed("seed000", "hub.conf").config_digest == \
        "sha256:dceeddedf5d1f8de2ae2bc26bb8a1a87cd2244ec853b5b682fa2553db40e7a16"
    assert _seed("seed000", "leaf.conf").config_digest == \
        "sha256:bdcfc67629ca10ae01010223fd1f77f88c73657be889383f4fd7e10aa08e520a"


@pytest.mark.parametrize("d,fc", [("seed000_cross", True), ("seed002_cross_fixed", False)])
def test_seed_cross_account(d, fc):
    o = _seed(d, "hub.conf")
    assert list(o.accounts) == ["SYS", "ACC", "IMPORT_MIRROR", "IMPORT_CLIENT"]
    ex = [(e.kind, e.subject, e.response_type) for e in o.accounts["ACC"].exports]
    assert ex[0] == ("service", "$JS.hub.API.CONSUMER.CREATE.*", "Stream")
    assert ex[1] == ("stream", "deliver.acc.hub.>", "Singleton")
    assert ex[3] == ("service", "$JS.ACK.aggregate-test-leaf.dur.>", "Singleton")
    assert (("service", "$JS.FC.aggregate-test-leaf.dur.>", "Singleton") in ex) == fc
    im = [(i.kind, i.account, i.subject, i.to) for i in o.accounts["IMPORT_MIRROR"].imports]
    assert im[0] == ("service", "ACC", "$JS.hub.API.CONSUMER.CREATE.*", "JS.acc@hub.API.CONSUMER.CREATE.*")
    assert im[-1] == ("stream", "ACC", "deliver.acc.hub.import_mirror.>", "")
    ic = [(i.kind, i.subject, i.to) for i in o.accounts["IMPORT_CLIENT"].imports]
    assert ic[0] == ("service", "$JS.hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur",
                     "JS.acc@hub.API.CONSUMER.MSG.NEXT.aggregate-test-leaf.dur")
    assert {u.username: u.account for u in o.users} == {
        "admin": "SYS", "acc": "ACC", "import_mirror": "IMPORT_MIRROR", "import_client": "IMPORT_CLIENT"}


def test_seed002_verbatim_obfuscated_urls_are_rejected():
    with pytest.raises(ConfigError) as ei:
        _seed("seed002", "leaf.conf")
    assert len(ei.value.errors) == 2 and all("error parsing leafnode url" in e for e in ei.value.errors)
    assert ei.value.errors[0].endswith(':10:1: error parsing leafnode url "nats-leaf://admin:[email\xa0protected]:7422"')


# -- validation ----------------------------------------------------------------
def test_unknown_fields_everywhere_all_reported():
    errs = errors("port: 1\nfoo: 1\njetstream { bogus: 1 }\nleafnodes {\n  zzz: 1\n  remotes: [{url: "
                  '"nats://h:1", what: 2}]\n}\naccounts { A: { x: 1, users: [{user: a, password: b, y: 2}] } }\n')
    assert errs == ['bad.conf:2:1: unknown field "foo"',
                    'bad.conf:3:13: unknown field "bogus"',
                    'bad.conf:5:3: unknown field "zzz"',
                    'bad.conf:6:33: unknown field "what"',
                    'bad.conf:8:17: unknown field "x"',
                    'bad.conf:8:54: unknown field "y"']


def test_key_used_only_as_variable_is_not_unknown():
    o = load_string("my_port = 4333\nport: $my_port\nm_user = bob\naccounts { A { users: [{user: $m_user, password: x}] } }")
    assert o.port == 4333 and o.users[0].username == "bob"
    assert errors("unused_thing = 1\n") == ['bad.conf:1:0: unknown field "unused_thing"']


def test_type_errors():
    # nats-server type-asserts values and reports the Go panic, at the key (column 0-based
    # on the first line of a file, 1-based after it, as nats-server counts)
    assert errors('port: "abc"') == ["bad.conf:1:0: interface conversion: interface {} is string, not int64"]
    assert errors("debug: 5") == ["bad.conf:1:0: interface conversion: interface {} is int64, not bool"]
    assert errors("a: 1\nm { x: 1 }\nhost: [1 ]") == [
        'bad.conf:1:0: unknown field "a"', 'bad.conf:2:1: unknown field "m"',
        "bad.conf:3:1: interface conversion: interface {} is []interface {}, not string"]


def test_import_from_unknown_account_and_unauthorized():
    errs = errors("accounts {\n  A: {\n    imports: [\n      {stream: {account: NOPE, subject: x}}\n"
                  "      {service: {account: A, subject: foo}}\n    ]\n  }\n}\n")
    assert errs == ['bad.conf:4:7: "NOPE" account not defined for stream import',
                    'bad.conf:5:7: Error adding service import "foo": service import not authorized']


def test_private_export_and_missing_export_account():
    errs = errors("accounts {\n A: { exports: [{stream: \"s.>\", accounts: [C, Z]}] }\n"
                  " B: { imports: [{stream: {account: A, subject: s.x}}] }\n C: {}\n}")
    assert errs == ['bad.conf:2:33: "Z" account not defined for stream export',
                    'bad.conf:3:17: Error adding stream import "s.x": stream import not authorized']


def test_duplicate_users_across_accounts_and_authorization():
    errs = errors("accounts {\n A: { users: [{user: u, password: a}] }\n B: { users: [{user: u, password: b}] }\n}\n"
                  "authorization { users: [{user: u, password: c}] }\n")
    assert errs == ['bad.conf:3:15: Duplicate user "u" detected', 'bad.conf:5:25: Duplicate user "u" detected']


def test_remote_with_unknown_account():
    errs = errors("leafnodes {\n  remotes: [\n    {url: \"nats://h:7422\", account: NOPE}\n  ]\n}\n")
    assert errs == ['bad.conf:3:28: leafnode remote account "NOPE" is not defined in "accounts"']


def test_misc_validation_messages():
    assert errors("server_name: \"a b\"") == ["bad.conf:1:0: server name cannot contain spaces"]
    assert errors('lame_duck_duration: "10s"') == [
        "bad.conf:1:0: invalid lame_duck_duration of 10s, minimum is 30 seconds"]
    assert errors('ping_interval: "5x"') == [
        'bad.conf:1:0: error parsing ping_interval: time: unknown unit "x" in duration "5x"']
    assert errors('ping_interval: "5"') == [
        'bad.conf:1:0: error parsing ping_interval: time: missing unit in duration "5"']
    assert errors("accounts { $G: {} }") == ['bad.conf:1:11: "$G" is a Reserved Account']
    assert errors("accounts { A: { exports: [{service: x, response_type: weird}] } }") == [
        'bad.conf:1:39: Unknown response type: "weird"']
    assert errors('jetstream { max_mem: "10X" }') == [
        "bad.conf:1:12: max_mem_store sizes defined as strings must end in K, M, G, T"]
    assert errors("authorization { user: a, password: b, token: t }") == [
        "bad.conf:1:0: Cannot have a user/pass and token"]
    assert errors("no_auth_user: ghost") == [
        'bad.conf:1:0: no_auth_user: "ghost" not present as user or nkey in authorization block or '
        "account configuration"]


def test_errors_from_included_file_carry_its_name(tmp_path):
    (tmp_path / "acc.conf").write_text("accounts {\n  A: { bad_key: 1 }\n}\n")
    (tmp_path / "main.conf").write_text("port: 1\ninclude ./acc.conf\nzap: 2\n")
    with pytest.raises(ConfigError) as ei:
        load_file(str(tmp_path / "main.conf"))
    assert ei.value.errors == [f'{tmp_path}/acc.conf:2:8: unknown field "bad_key"',
                               f'{tmp_path}/main.conf:3:1: unknown field "zap"']
    assert str(ei.value) == "\n".join(ei.value.errors)


def test_parse_error_is_a_config_error():
    # nats-server's words and line for a syntax error (no file, no column)
    assert errors("a = [1 2\n") == [
        'Parse error on line 1: \'Expected an array value terminator "," or an array terminator "]", '
        "but got '2' instead.'"]
    with pytest.raises(ConfigError) as ei:
        load_string("a = [1 2\n", "bad.conf")
    assert ei.value.plain and ei.value.report() == ei.value.errors[0]


def test_missing_file():
    with pytest.raises(ConfigError) as ei:
        load_file("/nonexistent/x.conf")
    assert ei.value.errors == ["open /nonexistent/x.conf: no such file or directory"] and ei.value.plain


# -- differential against the real nats-server ----------------------------------
DIFF_CASES = {
    "good_ports": "port: 4333\nhttp: 8222\nserver_name: a\n",
    "good_vars": "p = 4333\nport: $p\n",
    "good_accounts": "accounts { A: { exports: [{service: \"a.>\"}] }\n B: { imports: [{service: {account: A, subject: a.b}, to: x.b}] } }\n",
    "good_js": 'jetstream { store_dir: "/tmp/x", max_mem: "1G", max_file: 10G, domain: d }\n',
    "good_mappings": "mappings { a: [{destination: b, weight: 50%}, {destination: c, weight: 50%}] }\n",
    "bad_unknown": "port: 1\nfoo: 2\n",
    "bad_nested_unknown": "leafnodes { remotes: [{url: \"nats://a:1\", bogus: 1}] }\n",
    "bad_import_account": "accounts { A: { imports: [{stream: {account: B, subject: x}}] } }\n",
    "bad_dup_user": "accounts { A: { users: [{user: a, password: a}] }, B: { users: [{user: a, password: b}] } }\n",
    "bad_syntax": "a = [1 2\n",
    "bad_type": "port: \"x\"\n",
    "bad_duration": 'ping_interval: "3 parsecs"\n',
    "bad_sizes": 'jetstream { max_mem: "12Q" }\n',
    "bad_int_ping": "ping_interval: 5\n",
    "good_write_policies": 'write_timeout: retry\ncluster { port: 1, write_timeout: close, write_deadline: "2s" }\n'
                           'leafnodes { write_timeout: default, write_deadline: "3s" }\n',
    "bad_write_policy_case": "write_timeout: Close\n",
    "bad_write_policy_leaf": "leafnodes { write_timeout: later }\n",
    "good_sub_tokens": "max_sub_tokens: 255\n",
    "bad_sub_tokens": "max_sub_tokens: 256\n",
    "good_log_rotation": 'logfile: "/tmp/x.log"\nlog_size_limit: 1MB\nlogfile_max_num: 3\n',
}


@pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server not on PATH")
@pytest.mark.parametrize("name", sorted(DIFF_CASES) + ["seed000/hub.conf", "seed000_cross/leaf.conf",
                                                        "seed001/leaf.conf", "seed002/leaf.conf",
                                                        "seed002_cross/hub.conf", "seed002_cross_fixed/hub.conf"])
def test_differential_valid_invalid_agrees_with_nats_server(name, tmp_path):
    if name in DIFF_CASES:
        path = tmp_path / f"{name}.conf"
        path.write_text(DIFF_CASES[name])
        path = str(path)
    else:
        path = os.path.join(FIX, name)
    ref = subprocess.run(["nats-server", "-t", "-c", path], capture_output=True, timeout=20)
    try:
        o = load_file(path)
        ours = not o.warnings       # -t fails on warnings as well
    except ConfigError:
        ours = False
    assert ours == (ref.returncode == 0), ref.stderr.decode() + ref.stdout.decode()


def test_write_policies_are_read_per_link():
    from natsd.conf import load_string
    o = load_string(DIFF_CASES["good_write_policies"])
    assert (o.write_timeout, o.cluster.write_timeout, o.cluster.write_deadline) == ("retry", "close", 2.0)
    assert (o.leafnode.write_timeout, o.leafnode.write_deadline) == ("default", 3.0)
    with pytest.raises(ConfigError) as ei:
        load_string(DIFF_CASES["bad_write_policy_case"], "w.conf")
    assert ei.value.errors == ["w.conf:1:0: write_timeout must be 'default', 'close' or 'retry'"]


def test_sync_interval_marks_lazy_mode_even_at_the_default_value():
    """`sync_interval: "2m"` equals the default but is still the user asking for lazy sync."""
    from natsd.conf import load_string
    lazy = load_string('jetstream { sync_interval: "2m" }\n').jetstream
    assert lazy.sync_interval == 120.0 and lazy.sync_interval_set and not lazy.sync_always
    default = load_string("jetstream {}\n").jetstream
    assert not default.sync_interval_set
    always = load_string("jetstream { sync_interval: always }\n").jetstream
    assert always.sync_always
