"""The command line fails as nats-server fails: same stderr/stdout text, same exit code.

Tools that launch the server parse its stderr.  Every scenario runs natsd and the reference
nats-server side by side: invalid config files (syntax, unknown fields, bad values, includes,
warnings), a config file that cannot be read, bad flags, a JetStream store directory that is
a regular file, and ports already in use (fatal `[FTL]` log lines, compared without the
`[pid] date time` prefix).
"""
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
if not os.path.exists(NATS_SERVER):
    NATS_SERVER = shutil.which("nats-server")
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="reference nats-server not found")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NATSD = [sys.executable, "-m", "natsd"]
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
LOG_PREFIX = re.compile(r"^\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+ ", re.M)


def run(cmd, *args, cwd, timeout=30):
    return subprocess.run([*cmd, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def both(*args, cwd):
    return run([NATS_SERVER], *args, cwd=cwd), run(NATSD, *args, cwd=cwd)


def same(want, got):
    assert (got.returncode, got.stderr, got.stdout) == (want.returncode, want.stderr, want.stdout)


def same_errors(want, got):
    """As same(), but nats-server lists several config errors in Go's (random) map order."""
    def lines(r):
        text = r.stderr.removeprefix("nats-server: ")
        return r.stderr[:len(r.stderr) - len(text)], sorted(text.split("\n")), r.stdout, r.returncode
    assert lines(got) == lines(want)


# -- invalid config files ------------------------------------------------------------------
SYNTAX = {
    "eof_in_map": "port: 4999\nfoo {\n",
    "eof_after_map_value": "m {\n a: 1",
    "eof_in_array": "a = [1, 2\n",
    "array_no_comma": "a = [1 2\n",
    "array_next_line": "a = [1, 2\nb: 3",
    "array_double_comma": "a: [1,,2]\n",
    "integer_before_bracket": "port: -1\nx: [1, 5]\n",
    "array_end_in_map": "a {\n ]\n}\n",
    "map_bad_terminator": "a { b: 1 ]\n",
    "top_level_junk": "port 4222 4333\n",
    "value_then_junk": "a { b: 1 } c\n",
    "float_no_digit": "x: 1.\n",
    "float_leading_dot": "a: .5\n",
    "minus_no_digit": "a: -x\n",
    "datetime_short": "a: 2021-01-01\n",
    "datetime_eof": "a: 2021-01-01T00:00",
    "key_separator_top": ":a 1\n",
    "key_separator_map": "a {\n :b 1\n}\n",
    "unterminated_dq": 'a: "abc\n',
    "unterminated_sq": "a: 'abc\n",
    "unterminated_dq_key": 'a {\n "b\n',
    "unterminated_sq_key": "a {\n 'b\n",
    "bad_escape": 'a: "\\q"\n',
    "bad_hex_escape": 'a: "\\x4"\n',
    "value_missing": "a:\n",
    "key_only_at_eof": "key_only",
    "include_no_file": "include\n",
    "include_array": "include [x]\n",
    "block_eof": "a: (\n",
    "int_out_of_range": "port: 99999999999999999999\n",
    "variable_missing": "a: 1\nb: $NATSD_TEST_NO_SUCH_VAR\n",
    "variable_cycle": "a = $b\nb = $a\n",
}
INVALID = {
    "unknown_fields": "port: -1\nbogus: 1\nm {\n  zz: 2\n}\n",
    "unknown_nested": 'leafnodes { remotes: [{url: "nats://a:1", bogus: 1}] }\n',
    "wrong_type_first_line": 'port: "abc"\n',
    "wrong_type": 'port: -1\ndebug: 5\nhost: ["x"]\n',
    "wrong_type_nested": "authorization {\n  users: [ {user: a, password: 1} ]\n}\n",
    "bad_duration": 'port: -1\nping_interval: "5x"\n',
    "missing_duration_unit": 'port: -1\nwrite_deadline: "1.5"\n',
    "bad_size": 'port: -1\njetstream { max_mem: "12Q" }\n',
    "spaces_in_name": 'port: -1\nserver_name: "a b"\n',
    "user_and_token": "port: -1\nauthorization { user: a, password: b, token: t }\n",
    "warning_only": "port: -1\nping_interval: 5\n",
    "msg_trace_bad_dest": 'port: -1\naccounts { A { msg_trace: {dest: "a.*"} } }\n',
    # one error per map: nats-server stops at a map's first, in Go's random order
    "msg_trace_bad_values": 'port: -1\naccounts {\n  A { msg_trace: {dest: 5} }\n  E { msg_trace: {sampling: 200} }\n'
                            '  B { trace_dest: {sampling: "x%"} }\n  F { msg_trace: {bogus: 1} }\n'
                            '  C { msg_trace: ["x"] }\n  D { msg_trace: {sampling: true} }\n}\n',
    "warning_only_msg_trace_sampling": 'port: -1\naccounts { A { msg_trace: {sampling: "50%"} } }\n',
    # values natsd once took without a word
    "duration_of_a_bool": "port: -1\nping_interval: true\n",
    # (one per block: a panic ends nats-server's reading of the block, in Go's random order)
    "mqtt_duration": 'port: -1\nmqtt { port: -1, ack_wait: "x" }\n',
    "mqtt_duration_of_a_bool": "port: -1\nmqtt { port: -1, js_api_timeout: true }\n",
    "websocket_bool": 'port: -1\nwebsocket { port: -1, no_tls: true, compression: "x" }\n',
    "routes_not_a_list": 'port: -1\ncluster { port: -1, routes: "nats://a:1" }\n',
    "leaf_url_not_a_string": "port: -1\nleafnodes { remotes: [ { url: true } ] }\n",
    "unknown_connection_types": 'port: -1\nauthorization { users: [ { user: a, password: b, '
                                'allowed_connection_types: ["BOGUS", "standard", "x"] } ] }\n',
    "websocket_origins_not_strings": "port: -1\nwebsocket { port: -1, no_tls: true, allowed_origins: 5 }\n",
    "websocket_cookie_not_a_string": "port: -1\nwebsocket { port: -1, no_tls: true, jwt_cookie: 5 }\n",
    "mqtt_max_ack_pending_out_of_range": "port: -1\nmqtt { port: -1, max_ack_pending: 70000 }\n",
    "mqtt_replicas_not_a_number": 'port: -1\nmqtt { port: -1, stream_replicas: "x" }\n',
    "leaf_ws_compression_not_a_bool": 'port: -1\nleafnodes { remotes: [ { url: "nats://a:1", ws_compression: "x" } ] }\n',
    "compression_of_a_number": "port: -1\nleafnodes { port: -1, compression: 5 }\n",
    "compression_bad_threshold": 'port: -1\ncluster { port: -1, compression: { mode: s2_auto, rtt_thresholds: ["x"] } }\n',
    "compression_unknown_field": "port: -1\nleafnodes { port: -1, compression: { bogus: 1 } }\n",
    "latency_sampling_out_of_range": 'port: -1\naccounts { A { exports: [ { service: "a", latency: { sampling: 500 } } ] } }\n',
    "mapping_to_a_number": "port: -1\nmappings { a: 5 }\n",
    "system_account_not_a_string": "port: -1\nsystem_account: 5\n",
    "server_tags_not_strings": "port: -1\nserver_tags: 5\n",
}


@pytest.mark.parametrize("name", sorted(SYNTAX) + sorted(INVALID))
def test_invalid_config(name, tmp_path):
    (tmp_path / f"{name}.conf").write_text({**SYNTAX, **INVALID}[name])
    for args in (["-t", "-c", f"{name}.conf"], ["-c", f"{name}.conf", "-p", "-1"]):
        if name.startswith("warning_only") and "-t" not in args:
            continue                        # a warning alone only fails -t
        want, got = both(*args, cwd=tmp_path)
        assert want.returncode == 1, want.stderr
        same_errors(want, got)


def test_errors_in_included_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "main.conf").write_text('port: -1\ninclude "sub/a.conf"\n')
    (tmp_path / "sub" / "a.conf").write_text("include ./b.conf\n")
    (tmp_path / "sub" / "b.conf").write_text('x: "abc\n')
    (tmp_path / "missing.conf").write_text('include "sub/nope.conf"\n')
    (tmp_path / "dir.conf").write_text("include sub\n")
    (tmp_path / "unknown.conf").write_text("port: -1\ninclude ./sub/c.conf\nzap: 2\n")
    (tmp_path / "sub" / "c.conf").write_text("accounts {\n  A: { bad_key: 1 }\n}\n")
    for conf in ("main.conf", "missing.conf", "dir.conf", "unknown.conf"):
        want, got = both("-t", "-c", conf, cwd=tmp_path)
        assert want.returncode == 1, want.stderr
        same_errors(want, got)


def test_check_config_valid_goes_to_stderr(tmp_path):
    (tmp_path / "ok.conf").write_text("port: -1\nmax_payload: 1MB\n")
    want, got = both("-t", "-c", "ok.conf", cwd=tmp_path)
    assert want.returncode == 0 and want.stderr.startswith("nats-server: configuration file ok.conf is valid")
    same(want, got)


def first_stderr_line(cmd, *args, cwd):
    p = subprocess.Popen([*cmd, *args], cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        return p.stderr.readline()
    finally:
        p.kill()
        p.wait(timeout=30)
        p.stderr.close()


def test_warnings_printed_before_start(tmp_path):
    """A config with only warnings runs; nats-server prints them first, without a prefix."""
    (tmp_path / "w.conf").write_text("port: -1\nping_interval: 5\n")
    want = first_stderr_line([NATS_SERVER], "-c", "w.conf", "-a", "127.0.0.1", cwd=tmp_path)
    assert want == 'w.conf:2:1: invalid use of field "ping_interval": ping_interval should be converted to a duration\n'
    assert first_stderr_line(NATSD, "-c", "w.conf", "-a", "127.0.0.1", cwd=tmp_path) == want


# -- config files that cannot be read ------------------------------------------------------
@pytest.mark.parametrize("args", [["-c", "nope.conf"], ["-t", "-c", "nope.conf"], ["-c", "adir"],
                                  ["-t", "-c", "adir"]])
def test_unreadable_config(args, tmp_path):
    (tmp_path / "adir").mkdir()
    want, got = both(*args, cwd=tmp_path)
    assert want.returncode == 1 and want.stderr.startswith("nats-server: "), want.stderr
    same(want, got)


# -- bad flags -----------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["--bogus"], ["-p", "abc"], ["-p"], ["-D=maybe"], ["---x"],
                                  ["-p", "99999999999999999999"]])
def test_go_flag_errors(args, tmp_path):
    """Go's flag package: the error on stderr, the usage on stdout, exit 0."""
    want, got = both(*args, cwd=tmp_path)
    assert (got.returncode, got.stderr) == (want.returncode, want.stderr) == (0, want.stderr)
    assert want.stdout.startswith("\nUsage: nats-server [options]\n")
    assert got.stdout.startswith("\nUsage: natsd [options]\n") and got.stdout.endswith("\n\n")


@pytest.mark.parametrize("args", [["extra"], ["-t"], ["--signal", "foo=123"], ["-p", "-1", "--cluster", "bad"],
                                  ["-p", "-1", "--routes", "nats://127.0.0.1:6222"],
                                  ["-sl", "reload=/nonexistent/x.pid"], ["--signal=stop=abc"]])
def test_other_command_line_errors(args, tmp_path):
    want, got = both(*args, cwd=tmp_path)
    assert want.returncode == 1 and want.stderr.startswith("nats-server: "), want.stderr
    same(want, got)


# -- start-up failures: fatal log lines ----------------------------------------------------
def fatal(r):
    lines = [LOG_PREFIX.sub("", line) for line in r.stderr.splitlines()]
    return r.returncode, [line for line in lines if line.startswith("[FTL]")], lines[-1]


def test_store_dir_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("")
    (tmp_path / "sd.conf").write_text('port: -1\njetstream { store_dir: "afile" }\n')
    for args in (["-js", "-sd", "afile", "-p", "-1", "-a", "127.0.0.1"], ["-c", "sd.conf", "-a", "127.0.0.1"]):
        want, got = both(*args, cwd=tmp_path)
        assert fatal(want) == (1, ["[FTL] Can't start JetStream: storage directory is not a directory"],
                               "[FTL] Can't start JetStream: storage directory is not a directory")
        assert fatal(got) == fatal(want)
        for r in (want, got):     # as nats-server: "Took ..." is logged before the fatal error
            tail = LOG_PREFIX.sub("", r.stderr).splitlines()[-2:]
            assert tail[0].startswith("[INF] Took ") and tail[0].endswith(" to start JetStream"), tail


@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_client_port_in_use(tmp_path, busy_port):
    want, got = both("-p", str(busy_port), cwd=tmp_path)
    assert fatal(want) == (1, [f'[FTL] Error listening on port: 0.0.0.0:{busy_port}, "listen tcp 0.0.0.0:{busy_port}: '
                               'bind: address already in use"'], fatal(want)[2])
    assert fatal(got) == fatal(want)


def test_monitor_port_in_use(tmp_path, busy_port):
    want, got = both("-p", "-1", "-m", str(busy_port), cwd=tmp_path)
    assert fatal(want)[0] == 1 and fatal(want)[1] == [
        f"[FTL] Can't start monitoring: can't listen to the monitor port: listen tcp 0.0.0.0:{busy_port}: "
        "bind: address already in use"]
    assert fatal(got) == fatal(want)


def test_leafnode_port_in_use(tmp_path, busy_port):
    (tmp_path / "leaf.conf").write_text(f"port: -1\nleafnodes {{ port: {busy_port} }}\n")
    want, got = both("-c", "leaf.conf", cwd=tmp_path)
    assert fatal(want)[0] == 1 and fatal(want)[1] == [
        f"[FTL] Error listening on leafnode port: {busy_port} - listen tcp 0.0.0.0:{busy_port}: "
        "bind: address already in use"]
    assert fatal(got) == fatal(want)
