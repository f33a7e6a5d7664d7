"""The house's rules, read from the code's own imports (Python and Cython, at module level and
inside functions):

- no import circle anywhere in natsd;
- natsd/_core imports nothing of natsd outside natsd/_core (the core knows no subsystem);
- nothing under natsd/_core names a JetStream subject outside a comment (JetStream registers
  what it needs of the core at start: natsd/jetstream/engine/corehooks.py);
- JetStream's engine knows its replicated layer only through what it declares
  (natsd/jetstream/engine/clustering.py): nothing in jetstream/engine imports jetstream/replicated.
"""
import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "natsd")
CYTHON_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n#]+)"
                           r"|c?import[ \t]+([\w.]+))", re.M)


def _modules():
    """{dotted name: [file paths]} for every .py/.pyx/.pxd under natsd/."""
    found = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith((".py", ".pyx", ".pxd")):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(os.path.splitext(path)[0], ROOT).replace(os.sep, ".")
                if name.endswith(".__init__"):
                    name = name[:-len(".__init__")]
                found.setdefault(name, []).append(path)
    return found


MODULES = _modules()


def _resolve(name):
    """The module a dotted import names (a name imported from a module is the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _absolute(module, path, target, level):
    if not level:
        return target
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package + ("." + target if target else "")


def _imports_of(module, path):
    """The natsd modules one file imports."""
    out = set()
    src = open(path, encoding="utf-8").read()
    if path.endswith(".py"):
        pairs = []
        for node in ast.walk(ast.parse(src, path)):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node.module or "", node.level)
                pairs += [(base, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                pairs += [(a.name, None) for a in node.names]
    else:
        pairs = []
        for frm, names, plain in CYTHON_IMPORT.findall(src):
            if frm:
                pairs += [(frm, n) for n in re.split(r"[\s,()]+", names) if n and n != "as"]
            else:
                pairs.append((plain, None))
    for base, name in pairs:
        if not base.startswith("natsd"):
            continue
        target = base + "." + name if name and base + "." + name in MODULES else base
        resolved = _resolve(target)
        if resolved and resolved != module:
            out.add(resolved)
    return out


def _graph():
    return {m: set().union(*(_imports_of(m, p) for p in paths)) for m, paths in MODULES.items()}


GRAPH = _graph()


def _circles(graph):
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_the_graph_is_read():
    # the reading works: known arrows are there (a broken reader would pass every rule)
    assert "natsd._core.conn" in GRAPH["natsd.server"] or "natsd._core.loop" in GRAPH["natsd.server"]
    assert "natsd._core.log" in GRAPH["natsd._core.logrecover"]            # a Cython cimport
    assert "natsd.jetstream.engine.pending" in GRAPH["natsd.jetstream.engine.fastack"]


def test_circles_are_found():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    assert _circles(GRAPH) == []


def test_the_core_imports_nothing_outside_the_core():
    leaks = {m: sorted(t for t in targets if not t.startswith("natsd._core"))
             for m, targets in GRAPH.items() if m.startswith("natsd._core")}
    assert {m: t for m, t in leaks.items() if t} == {}


def _code_lines(path):
    """The lines of a core file with comments taken out (# for Cython, // and /* */ for C)."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".h"):
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        return [(n, line.split("//")[0]) for n, line in enumerate(text.splitlines(), 1)]
    return [(n, line.split("#")[0]) for n, line in enumerate(text.splitlines(), 1)]


def test_the_core_names_no_jetstream_subject():
    core = os.path.join(PKG, "_core")
    named = []
    for f in sorted(os.listdir(core)):
        if f.endswith((".pyx", ".pxd", ".h")):
            for n, code in _code_lines(os.path.join(core, f)):
                if re.search(r"JS\.|\$JSC|\$KV\.|\$OBJ\.", code, re.I):
                    named.append("%s:%d: %s" % (f, n, code.strip()))
    assert named == []


def test_the_engine_imports_nothing_of_the_replicated_layer():
    leaks = {m: sorted(t for t in targets if t.startswith("natsd.jetstream.replicated"))
             for m, targets in GRAPH.items() if m.startswith("natsd.jetstream.engine")}
    assert {m: t for m, t in leaks.items() if t} == {}


@pytest.mark.parametrize("package", sorted(m for m, paths in MODULES.items()
                                            if paths[0].endswith("__init__.py")))
def test_every_package_opens_with_what_it_owns(package):
    path = MODULES[package][0]
    doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()))
    assert doc and len(doc.split()) >= 8, "%s: say what this room owns" % path
