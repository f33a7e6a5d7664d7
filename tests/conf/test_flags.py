"""Tests for natsd.conf.flags: Go flag syntax, aliases, config + flag precedence, errors."""
import os
import re
import shutil
import subprocess

import pytest

from natsd.conf import ConfigError
from natsd.conf.flags import HELP_TEXT, FlagError, parse_command_line

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.mark.parametrize("argv", [["-p", "4333"], ["-p=4333"], ["--port", "4333"], ["--port=4333"]])
def test_go_flag_syntax(argv):
    assert parse_command_line(argv).opts.port == 4333


def test_defaults_without_flags():
    cl = parse_command_line([])
    assert cl.opts.port == 4222 and cl.opts.logtime and not cl.check_config and cl.refusals == []


@pytest.mark.parametrize("argv,attrs", [
    (["-D"], {"debug": True, "trace": False}),
    (["-V"], {"trace": True, "debug": False}),
    (["-DV"], {"debug": True, "trace": True, "trace_verbose": False}),
    (["-VV"], {"trace": True, "trace_verbose": True, "debug": False}),
    (["-DVV"], {"debug": True, "trace": True, "trace_verbose": True}),
    (["-T=false"], {"logtime": False}),
    (["--logtime=0"], {"logtime": False}),
    (["--logtime_utc"], {"logtime_utc": True}),
    (["-a", "127.0.0.1"], {"host": "127.0.0.1"}), (["--net", "::1"], {"host": "::1"}),
    (["-n", "x"], {"server_name": "x"}), (["--server_name=y"], {"server_name": "y"}),
    (["-m", "8222"], {"http_port": 8222}), (["-ms", "8443"], {"https_port": 8443}),
    (["--user", "u", "--pass", "p"], {"username": "u", "password": "p"}),
    (["--auth", "tok"], {"authorization": "tok"}),
    (["-l", "/tmp/l"], {"log_file": "/tmp/l"}), (["--log_size_limit", "100"], {"log_size_limit": 100}),
    (["-P", "/tmp/pid"], {"pid_file": "/tmp/pid"}), (["--ports_file_dir", "/tmp"], {"ports_file_dir": "/tmp"}),
    (["-s"], {"syslog": True}), (["-r", "udp://h:514"], {"remote_syslog": "udp://h:514"}),
    (["--client_advertise", "h:1"], {"client_advertise": "h:1"}),
    (["--max_traced_msg_len", "10"], {"max_traced_msg_len": 10}),
    (["-p", "-1"], {"port": -1}),
])
def test_flags_set_options(argv, attrs):
    o = parse_command_line(argv).opts
    for k, v in attrs.items():
        assert getattr(o, k) == v, k


def test_jetstream_flags():
    o = parse_command_line(["-js", "-sd", "/data"]).opts
    assert o.jetstream.enabled and o.jetstream.store_dir == "/data"
    o = parse_command_line(["--jetstream", "--store_dir=/d2"]).opts
    assert o.jetstream.enabled and o.jetstream.store_dir == "/d2"


def test_flags_override_config_file(tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text('port: 1111\nserver_name: from_conf\ndebug: true\njetstream { store_dir: "/c" }\nhttp_port: 8000\n')
    cl = parse_command_line(["-c", str(conf), "-p", "2222", "-n", "from_flag", "-D=false", "-sd", "/f"])
    o = cl.opts
    assert (o.port, o.server_name, o.debug, o.jetstream.store_dir) == (2222, "from_flag", False, "/f")
    assert o.http_port == 8000                      # not given on the command line: config wins
    assert o.jetstream.enabled and o.config_file == str(conf)
    # flag order does not matter relative to -c
    assert parse_command_line(["-p", "3333", "--config", str(conf)]).opts.port == 3333


def test_check_config(tmp_path):
    conf = tmp_path / "ok.conf"
    conf.write_text("port: 1\n")
    assert parse_command_line(["-t", "-c", str(conf)]).check_config
    with pytest.raises(FlagError, match=r"must specify \[-c, --config\]"):
        parse_command_line(["-t"])
    warn = tmp_path / "warn.conf"
    warn.write_text("ping_interval: 5\n")
    assert parse_command_line(["-c", str(warn)]).opts.ping_interval == 5   # warning only at runtime
    with pytest.raises(ConfigError, match="should be converted to a duration"):
        parse_command_line(["-t", "-c", str(warn)])


def test_config_errors_all_reported(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("a: 1\nb: 2\n")
    with pytest.raises(ConfigError) as ei:
        parse_command_line(["-c", str(conf)])
    assert ei.value.errors == [f'{conf}:1:0: unknown field "a"', f'{conf}:2:1: unknown field "b"']


def test_seed_configs_via_command_line():
    cl = parse_command_line(["-c", os.path.join(FIX, "seed000", "leaf.conf"), "-DV"])
    assert cl.opts.server_name == "leaf-server" and len(cl.opts.leafnode.remotes) == 2 and cl.opts.trace


@pytest.mark.parametrize("argv,msg", [
    (["--bogus"], "flag provided but not defined: -bogus"),
    (["-p", "abc"], 'invalid value "abc" for flag -p: parse error'),
    (["-p"], "flag needs an argument: -p"),
    (["-D=maybe"], 'invalid boolean value "maybe" for -D: parse error'),
    (["extra"], 'unrecognized command: "extra"'),
    (["--signal", "foo"], 'unknown signal "foo"'),
    (["--routes", "nats://h:1"], "solicited routes require cluster capabilities"),
])
def test_flag_errors(argv, msg):
    with pytest.raises(FlagError, match=re.escape(msg)):
        parse_command_line(argv)


def test_help_version_and_signal():
    assert parse_command_line(["-h"]).show_help and parse_command_line(["--help"]).show_help
    assert parse_command_line(["-v"]).show_version and parse_command_line(["version"]).show_version
    assert parse_command_line(["--help_tls"]).show_tls_help
    assert parse_command_line(["-sl", "reload=/var/run/x.pid"]).signal == "reload=/var/run/x.pid"
    assert parse_command_line(["--signal", "ldm"]).signal == "ldm"


def test_stop_at_first_non_flag_and_double_dash():
    with pytest.raises(FlagError, match="unrecognized command"):
        parse_command_line(["-p", "1", "foo", "-D"])
    assert parse_command_line(["-D", "--"]).opts.debug


def test_flags_are_parsed_and_unsupported_ones_refused(tmp_path):
    pem = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    for name in ("c.pem", "k.pem", "ca.pem"):
        (tmp_path / name).write_text(pem)
    c, k, ca = (str(tmp_path / n) for n in ("c.pem", "k.pem", "ca.pem"))
    cl = parse_command_line(["--cluster", "nats://0.0.0.0:6222", "--routes", "nats://a:1,nats://b:2",
                             "--cluster_name", "c1", "--tls", "--tlscert", c, "-tlskey", k,
                             "--tlsverify", "--tlscacert", ca, "--no_advertise", "--connect_retries", "3",
                             "-ms", "8443", "--profile", "6060"])
    o = cl.opts
    assert (o.cluster.host, o.cluster.port, o.cluster.name) == ("0.0.0.0", 6222, "c1")
    assert o.cluster.routes == ["nats://a:1", "nats://b:2"] and o.cluster.no_advertise
    assert o.tls and o.tls_verify and (o.tls_cert, o.tls_key, o.tls_ca_cert) == (c, k, ca)
    # clustering and profiling run: nothing refused
    assert cl.refusals == []
    assert parse_command_line(["--cluster_name", "c1", "--no_advertise", "--connect_retries", "3"]).refusals == []
    assert parse_command_line(["--tls=false", "--tlscert", c]).refusals == []   # -tls=false: TLS off


def _flag_names(text):
    return set(re.findall(r"(?<![\w-])(-{1,2}[A-Za-z_]+)", text))


def test_help_text_lists_the_same_flags_as_nats_server():
    sections = [l for l in HELP_TEXT.splitlines() if l.endswith("Options:")]
    assert sections == ["Server Options:", "Logging Options:", "JetStream Options:", "Authorization Options:",
                        "TLS Options:", "Cluster Options:", "Profiling Options:", "Common Options:"]
    if shutil.which("nats-server"):
        ref = subprocess.run(["nats-server", "-h"], capture_output=True, text=True, timeout=20)
        assert _flag_names(HELP_TEXT) == _flag_names(ref.stdout + ref.stderr)
