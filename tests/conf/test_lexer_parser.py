"""Tests for natsd.conf.lexer / parser: every construct of the config language, positions, digest."""
import datetime as dt
import os

import pytest

from natsd.conf.lexer import LexError, lex
from natsd.conf.parser import config_digest, parse_file, parse_string


def p(text):
    return {k: v.plain() for k, v in parse_string(text, "t.conf").items()}


def err(text):
    with pytest.raises(LexError) as ei:
        parse_string(text, "t.conf")
    return str(ei.value)


@pytest.mark.parametrize("text", ["a: 1", "a = 1", "a 1", "a:1", "a=1", "a\t1", "a: 1;", "a: 1,"])
def test_key_separators(text):
    assert p(text) == {"a": 1}


def test_maps_with_and_without_separator_and_terminators():
    assert p("m { a: 1 }\nn: { b: 2 }\no = {c: 3; d: 4, e: 5}\n") == {
        "m": {"a": 1}, "n": {"b": 2}, "o": {"c": 3, "d": 4, "e": 5}}


def test_arrays_newlines_commas_trailing_comma_nested_maps_and_comments():
    text = """a: [
      1, 2   # a comment
      // another
      "x"
      {user: admin, password: admin},
    ]
    b: [{u: 1}, {u: 2},]
    c: []
    """
    assert p(text) == {"a": [1, 2, "x", {"user": "admin", "password": "admin"}],
                       "b": [{"u": 1}, {"u": 2}], "c": []}


def test_an_integer_right_before_a_closing_bracket_is_a_string_as_in_go():
    """Go's lexer ends an unsigned integer only at a blank, a newline, `,` `;` `}`: `[5]`
    holds the string "5]" and never closes (nats-server's parse error); a negative number,
    a float or a size suffix end at the `]`."""
    assert "close the array" in err("x: [5]\n")          # (nats-server's text: test_cli_errors.py)
    assert "close the array" in err('x: ["a",5]\n')
    assert p("x: [5 ]\ny: [-5]\nz: [1.5]\nw: [5MB]\nv: [1, 2 ]") == {
        "x": [5], "y": [-5], "z": [1.5], "w": ["5MB"], "v": [1, 2]}


def test_comments_everywhere():
    text = "# top\n// slash\na: 1 # after\nm { # open\n  b: 2 // after\n}\n"
    assert p(text) == {"a": 1, "m": {"b": 2}}


def test_quoted_strings_and_escapes():
    assert p(r'a: "x\ty\n\"q\" \\ \x41"') == {"a": 'x\ty\n"q" \\ A'}
    assert p(r"a: 'raw \n $x'") == {"a": r"raw \n $x"}
    assert p('"quoted key": 1\n\'single\': 2') == {"quoted key": 1, "single": 2}


def test_bare_strings_keep_urls_subjects_and_paths():
    r = p("s: deliver.acc.hub.import_mirror.>\nu: nats-leaf://acc:acc@0.0.0.0:7422\n"
          "w: foo.*.bar\npath: /var/store/dir\nip: 127.0.0.1:4222\nh: host-name\n")
    assert r == {"s": "deliver.acc.hub.import_mirror.>", "u": "nats-leaf://acc:acc@0.0.0.0:7422",
                 "w": "foo.*.bar", "path": "/var/store/dir", "ip": "127.0.0.1:4222", "h": "host-name"}


def test_numbers_floats_and_negative():
    assert p("a: 10\nb: -5\nc: 1.5\nd: -0.25\n") == {"a": 10, "b": -5, "c": 1.5, "d": -0.25}


@pytest.mark.parametrize("text,value", [
    ("1k", 1000), ("1K", 1000), ("2m", 2_000_000), ("1g", 10**9), ("1G", 10**9), ("1t", 10**12),
    ("1kb", 1024), ("1ki", 1024), ("1KiB", 1024), ("256mib", 256 * 2**20), ("2MB", 2 * 2**20),
    ("1gb", 2**30), ("1Gi", 2**30), ("1tib", 2**40), ("1TB", 2**40),
])
def test_unquoted_size_suffixes(text, value):
    assert p(f"a: {text}") == {"a": value}


def test_quoted_sizes_and_durations_stay_strings():
    assert p('a: "256M"\nb: 10s\nc: 1h30m\nd: 500ms\ne: "2m"\n') == {
        "a": "256M", "b": "10s", "c": "1h30m", "d": "500ms", "e": "2m"}


def test_percentages_are_strings():
    assert p("w: 98%") == {"w": "98%"}


@pytest.mark.parametrize("word,value", [("true", True), ("FALSE", False), ("yes", True), ("No", False),
                                        ("on", True), ("OFF", False)])
def test_booleans(word, value):
    assert p(f"a: {word}") == {"a": value}


def test_enabled_is_a_string():
    assert p("jetstream: enabled") == {"jetstream": "enabled"}


def test_datetime():
    assert p("d: 2016-05-04T18:53:41Z") == {"d": dt.datetime(2016, 5, 4, 18, 53, 41, tzinfo=dt.timezone.utc)}
    assert "ISO8601" in err("d: 2016-05-04X")


def test_variables_block_scoped_and_shadowed():
    text = "port_v = 4222\nport: $port_v\nm {\n  x = 1\n  inner { y: $x, z: $port_v }\n  x2: $x\n}\n"
    r = p(text)
    assert r["port"] == 4222 and r["m"]["inner"] == {"y": 1, "z": 4222} and r["m"]["x2"] == 1


def test_variable_from_nested_map_not_visible_outside():
    assert "can not be found" in err("m { x = 1 }\ny: $x\n")


def test_variable_positions_and_usage_flag():
    tree = parse_string("v = 5\na: $v\n", "t.conf")
    assert tree["v"].used_variable and (tree["a"].line, tree["a"].col) == (2, 4)


def test_env_variable_is_parsed(monkeypatch):
    monkeypatch.setenv("NATSD_TEST_PORT", "4333")
    monkeypatch.setenv("NATSD_TEST_NAME", "srv-a")
    assert p("port: $NATSD_TEST_PORT\nn: $NATSD_TEST_NAME") == {"port": 4333, "n": "srv-a"}


def test_file_variable_beats_env(monkeypatch):
    monkeypatch.setenv("X", "env")
    assert p("X = file\na: $X") == {"X": "file", "a": "file"}


def test_bcrypt_is_literal():
    h = "$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy"
    assert p(f"password: {h}") == {"password": h}


def test_missing_variable_position():
    assert err("a: 1\nb: $nope\n") == 't.conf:2:4: variable reference for "$nope" can not be found'


def test_include_relative_nested_and_in_map(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.conf").write_text("deep: true\n")
    (tmp_path / "sub" / "a.conf").write_text("x: 1\ninclude ./inner.conf\n")
    (tmp_path / "m.conf").write_text("q: 2\n")
    (tmp_path / "main.conf").write_text("include sub/a.conf\nm {\n  include 'm.conf'\n}\nafter: 3\n")
    r = {k: v.plain() for k, v in parse_file(str(tmp_path / "main.conf")).items()}
    assert r == {"x": 1, "deep": True, "m": {"q": 2}, "after": 3}
    assert parse_file(str(tmp_path / "main.conf"))["deep"].file == str(tmp_path / "sub" / "inner.conf")


def test_include_missing_file_position(tmp_path):
    (tmp_path / "main.conf").write_text("a: 1\ninclude ./nope.conf\n")
    with pytest.raises(LexError) as ei:
        parse_file(str(tmp_path / "main.conf"))
    assert ei.value.line == 2 and ei.value.col == 9 and "nope.conf" in ei.value.msg


def test_include_cycle_is_an_error(tmp_path):
    (tmp_path / "a.conf").write_text("include ./a.conf\n")
    with pytest.raises(LexError, match="too deep"):
        parse_file(str(tmp_path / "a.conf"))


def test_whole_file_wrapped_in_braces():
    assert p("{\n a: 1\n b: 2\n}\n") == {"a": 1, "b": 2}


def test_later_keys_override():
    assert p("a: 1\na: 2") == {"a": 2}


def test_value_positions_are_one_based():
    tree = parse_string("port: 4222\nm {\n  k: 'v'\n}\n", "t.conf")
    assert (tree["port"].key_line, tree["port"].key_col, tree["port"].line, tree["port"].col) == (1, 1, 1, 7)
    k = tree["m"].value["k"]
    assert (k.key_line, k.key_col, k.line, k.col) == (3, 3, 3, 6)


@pytest.mark.parametrize("text,expected", [
    ("a = [1 2\n", 't.conf:1:8: expected an array value terminator "," or "]", got "2"'),
    # "b:" is a bare string (colons are allowed in values), so the error is at "3"
    ("a = [1, 2\nb: 3", 't.conf:2:4: expected an array value terminator "," or "]", got "3"'),
    ("path: ./dir", "t.conf:1:7: floats must start with a digit"),
    ("a: [,]", 't.conf:1:5: unexpected array value terminator ",", expected a value'),
    ('a: "open', "t.conf:1:4: unterminated double-quoted string"),
    ("a: 'open", "t.conf:1:4: unterminated single-quoted string"),
    ("m {\n a: 1\n", 't.conf:3:1: unexpected end of file, expected "}" to close the map'),
    ("a: 1 b\n", 't.conf:1:6: expected a top-level value to end with a newline, ";", "," or comment, got "b"'),
    ("a:\n", 't.conf:1:3: expected a value for key "a", got "\\n"'),
    ("key_only", 't.conf:1:9: expected a value for key "key_only", got end of file'),
    ('a: "\\q"', 't.conf:1:5: invalid escape "q"; allowed: \\xXX, \\t, \\n, \\r, \\", \\\\'),
    ("a: .5", "t.conf:1:4: floats must start with a digit"),
    ("a: 1kbx2", None),
    ("}", 't.conf:1:1: unexpected "}" with no map to close'),
])
def test_syntax_errors_have_exact_positions(text, expected):
    if expected is None:   # "1kbx2" is a bare string, as in nats-server
        assert p(text) == {"a": "1kbx2"}
    else:
        assert err(text) == expected


def test_lex_tokens():
    kinds = [t.kind for t in lex("a: [1, x]\n")]
    assert kinds == ["key", "[", "integer", "string", "]", "eof"]


def test_config_digest_matches_nats_server():
    # Values printed by `nats-server -t` (v2.15.1) for these exact texts.
    assert config_digest(parse_string("port: 4222\n")) == \
        "sha256:797533ebd0dfba7d34a0f9337ecf147e442871f48ddfd07ed751575a5737267e"
    here = os.path.dirname(__file__)
    tree = parse_file(os.path.join(here, "fixtures", "seed000", "hub.conf"))
    assert config_digest(tree) == "sha256:dceeddedf5d1f8de2ae2bc26bb8a1a87cd2244ec853b5b682fa2553db40e7a16"
