"""Bad account configs: imports from missing accounts, unexported subjects, private exports,
import cycles, duplicate service imports, wildcard renames that drop wildcards.

Each case runs `python -m natsd -c bad.conf` and `python -m natsd -t -c bad.conf` (exit code 1,
`file:line:col: message`) and checks that the reference nats-server rejects (or accepts) the
same file.  natsd positions point at the offending import (nats-server reports `file:1:0`,
the accounts block, for most of these), so only the message part is compared with it.
Overlapping exports and self-imports are *accepted* by nats-server, and by natsd.
"""
import re
import subprocess
import sys

import pytest

from natsd.conf.load import load_file
from natsd.accounts.mappings import MappingTable
from tests.support.servers import ROOT, nats_server_cmd

POS = re.compile(r"bad\.conf:(\d+):(\d+): (.*)")

CASES = {
    "missing_account": ("""accounts {
  A: { users: [{user: a, password: a}]
       imports: [ {stream: {account: NOPE, subject: foo}} ] }
}
""", (3, 19), '"NOPE" account not defined for stream import'),
    "missing_service_account": ("""accounts {
  A: { users: [{user: a, password: a}]
       imports: [ {service: {account: NOPE, subject: foo}} ] }
}
""", (3, 19), '"NOPE" account not defined for service import'),
    "subject_not_exported": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {stream: foo} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {stream: {account: A, subject: bar}} ] }
}
""", (4, 19), 'Error adding stream import "bar": stream import not authorized'),
    "service_not_exported_as_service": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {stream: foo} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {service: {account: A, subject: foo}} ] }
}
""", (4, 19), 'Error adding service import "foo": service import not authorized'),
    "private_export": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {stream: foo, accounts: [C]} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {stream: {account: A, subject: foo}} ] }
  C: { users: [{user: c, password: c}] }
}
""", (4, 19), 'Error adding stream import "foo": stream import not authorized'),
    "export_to_unknown_account": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {stream: foo, accounts: [ZZ]} ] }
}
""", (2, 66), '"ZZ" account not defined for stream export'),
    "service_cycle": ("""accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {service: foo} ]
       imports: [ {service: {account: B, subject: foo}} ] }
  B: { users: [{user: b, password: b}]
       exports: [ {service: foo} ]
       imports: [ {service: {account: A, subject: foo}} ] }
}
""", (7, 19), 'Error adding service import "foo": import forms a cycle'),
    "service_cycle_renamed": ("""accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {service: "a.>"} ]
       imports: [ {service: {account: B, subject: "b.>"}, to: "a.>"} ] }
  B: { users: [{user: b, password: b}]
       exports: [ {service: "b.>"} ]
       imports: [ {service: {account: A, subject: "a.>"}, to: "b.>"} ] }
}
""", (7, 19), 'Error adding service import "a.>": import forms a cycle'),
    "stream_cycle": ("""accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {stream: "foo"} ]
       imports: [ {stream: {account: B, subject: foo}} ] }
  B: { users: [{user: b, password: b}]
       exports: [ {stream: "foo"} ]
       imports: [ {stream: {account: A, subject: foo}} ] }
}
""", (7, 19), 'Error adding stream import "foo": import forms a cycle'),
    "duplicate_service_import": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {service: "foo"}, {service: "bar"} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {service: {account: A, subject: foo}, to: x}
                  {service: {account: A, subject: bar}, to: x} ] }
}
""", (5, 19), 'Duplicate service import subject "x", previously used in import for account "A", '
              'subject "foo"'),
    "service_to_drops_wildcard": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {service: "foo.*"} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {service: {account: A, subject: "foo.*"}, to: "bar"} ] }
}
""", (4, 19), 'Error adding service import "foo.*": failed to create mapping transform for service '
              'import subject from "bar" to "foo.*": invalid mapping destination: not using all of '
              'the token wildcard(s) in bar'),
    "stream_to_drops_wildcard": ("""accounts {
  A: { users: [{user: a, password: a}], exports: [ {stream: "foo.*"} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {stream: {account: A, subject: "foo.*"}, to: "bar"} ] }
}
""", (4, 19), 'Error adding stream import "foo.*": failed to create mapping transform for stream '
              'import subject from "foo.*" to "bar": invalid mapping destination: not using all of '
              'the token wildcard(s) in bar'),
}

# Accepted by nats-server 2.15.1 (checked with -t), so natsd must accept them too.
ACCEPTED = {
    "overlapping_exports": """accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {service: "foo.>"}, {service: "foo.bar"}, {stream: "foo.>"} ] }
}
""",
    "duplicate_export": """accounts {
  A: { users: [{user: a, password: a}], exports: [ {service: "foo.bar"}, {service: "foo.bar"} ] }
}
""",
    "same_local_subject_different_exporters": """accounts {
  A: { users: [{user: a, password: a}], exports: [ {service: "foo"} ] }
  C: { users: [{user: c, password: c}], exports: [ {service: "foo"} ] }
  B: { users: [{user: b, password: b}]
       imports: [ {service: {account: A, subject: foo}, to: x}
                  {service: {account: C, subject: foo}, to: y} ] }
}
""",
    "chain_without_cycle": """accounts {
  A: { users: [{user: a, password: a}], exports: [ {service: "a"} ] }
  B: { users: [{user: b, password: b}], exports: [ {service: "b"} ]
       imports: [ {service: {account: A, subject: a}, to: b} ] }
  C: { users: [{user: c, password: c}]
       imports: [ {service: {account: B, subject: b}} ] }
}
""",
    "self_import_renamed": """accounts {
  A: { users: [{user: a, password: a}]
       exports: [ {service: "foo"} ]
       imports: [ {service: {account: A, subject: foo}, to: bar} ] }
}
""",
}


def run_natsd(*args):
    return subprocess.run([sys.executable, "-m", "natsd", *args], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)


def reference_check(path):
    cmd = nats_server_cmd()
    if cmd is None:
        return None
    return subprocess.run(cmd + ["-t", "-c", str(path)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_account_config(tmp_path, name):
    text, (line, col), message = CASES[name]
    path = tmp_path / "bad.conf"
    path.write_text(text)
    for args in (["-t", "-c", str(path)], ["-c", str(path), "-p", "-1"]):
        res = run_natsd(*args)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        out = res.stdout + res.stderr
        found = [m.groups() for m in POS.finditer(out)]
        # natsd may append detail after nats-server's text (e.g. "(account "A" has no ...)")
        assert any((l, c) == (str(line), str(col)) and m.startswith(message)
                   for l, c, m in found), out
    ref = reference_check(path)
    if ref is not None:
        assert ref.returncode != 0, ref.stdout + ref.stderr
        # nats-server walks accounts in Go map order, so in a two-account cycle it may name
        # either import: compare the message without the quoted subject
        assert _unquoted(message) in _unquoted(ref.stdout + ref.stderr)


def _unquoted(text):
    return re.sub(r'"[^"]*"', '""', text)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_like_nats_server(tmp_path, name):
    path = tmp_path / "ok.conf"
    path.write_text(ACCEPTED[name])
    res = run_natsd("-t", "-c", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    ref = reference_check(path)
    if ref is not None:
        assert ref.returncode == 0, ref.stdout + ref.stderr


SEED_WS = ("server_name: \"hub\"\ncluster: { name: \"hub\" }\nmappings: {\n"
           "    orders.flush  orders.central.flush \n\torders.* orders.central.{{wildcard(1)}}\n}\n")
SEED_WS_STRAY = "server_name: \"hub\"\ncluster: { name: \"hub\" }\nmappings: {\n\torders.> orders.central.>}\n}\n"


def test_seed_003_whitespace_mapping_forms_load(tmp_path):
    """Both seed-003 whitespace mapping examples load (nats-server accepts them too)."""
    a = tmp_path / "a.conf"
    a.write_text(SEED_WS)
    table = MappingTable.from_options(load_file(str(a)).mappings)
    assert table.map("orders.x") == "orders.central.x"
    assert table.map("orders.flush") == "orders.central.flush"
    b = tmp_path / "b.conf"
    b.write_text(SEED_WS_STRAY)      # `>}` closes the block; the last `}` ends the file
    table = MappingTable.from_options(load_file(str(b)).mappings)
    assert table.map("orders.x.y") == "orders.central.x.y"
    for p in (a, b):
        assert run_natsd("-t", "-c", str(p)).returncode == 0
        ref = reference_check(p)
        if ref is not None:
            assert ref.returncode == 0, ref.stdout + ref.stderr


def test_stray_brace_only_ignored_at_end(tmp_path):
    p = tmp_path / "bad.conf"
    p.write_text("mappings: {\n\torders.> orders.central.>}\n}\nport: 4333\n")
    res = run_natsd("-t", "-c", str(p))
    assert res.returncode == 1
    assert "bad.conf:3:1:" in res.stdout + res.stderr
    ref = reference_check(p)
    if ref is not None:
        assert ref.returncode != 0
