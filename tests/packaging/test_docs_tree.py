"""The docs name the tree as it is.

docs/architecture.md's module table is where a developer finds a module, so it must name
every one, and nothing the docs name may be gone. The rules:

- every `.py`, `.pyx`, `.pxd` and `.h` file under natsd/ (an `__init__.py` aside) is named
  by its whole path (`natsd/_core/log.pyx`, never `log.pyx` alone) in a table row of
  docs/architecture.md, that is on a line that starts with `|`;
- every package (a folder under natsd/ with an `__init__.py`, natsd/ itself included) is
  named by its whole path with the trailing slash (`natsd/auth/jwt/`) in such a row: a
  package's `__init__.py` is counted as its folder;
- every `natsd/...` path written in README.md or in docs/*.md exists (a path with `*` must
  match something), and so does every relative Markdown link of those pages.
"""
import glob
import os
import re


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
SOURCE = (".py", ".pyx", ".pxd", ".h")
PATH = re.compile(r"natsd/[A-Za-z0-9_./*-]*")
LINK = re.compile(r"\]\(([^)\s]+)\)")

def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _tree():
    """(source files, package folders) under natsd/, as paths relative to ROOT with `/`."""
    files, packages = [], []
    for dirpath, dirnames, names in os.walk(os.path.join(ROOT, "natsd")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        rel = os.path.relpath(dirpath, ROOT).replace(os.sep, "/")
        if "__init__.py" in names:
            packages.append(rel + "/")
        files += [rel + "/" + n for n in sorted(names) if n.endswith(SOURCE) and n != "__init__.py"]
    return files, packages


def _paths(text):
    """The natsd/... paths written in a text, trailing sentence dots taken off."""
    return {m.rstrip(".") or "natsd/" for m in PATH.findall(text)}


def _table_paths():
    rows = [line for line in _read(ARCHITECTURE).splitlines() if line.lstrip().startswith("|")]
    return _paths("\n".join(rows))


def _exists(path):
    full = os.path.join(ROOT, path)
    if "*" in path:
        return bool(glob.glob(full))
    return os.path.exists(full)


def test_every_module_is_in_the_module_table():
    named = _table_paths()
    files, _ = _tree()
    missing = [f for f in files if f not in named]
    assert not missing, ("docs/architecture.md's module table does not name these by their whole "
                         "path (add a row, or the path to the row of its group):\n  "
                         + "\n  ".join(missing))


def test_every_package_is_named_as_its_folder():
    named = _table_paths()
    _, packages = _tree()
    missing = [p for p in packages if p not in named]
    assert not missing, ("docs/architecture.md names no table row for these packages "
                         "(`natsd/<room>/`, trailing slash):\n  " + "\n  ".join(missing))


def test_every_natsd_path_in_the_docs_exists():
    gone = []
    for page in PAGES:
        for path in sorted(_paths(_read(page))):
            if not _exists(path):
                gone.append("%s: %s" % (os.path.relpath(page, ROOT), path))
    assert not gone, "the docs name paths that do not exist:\n  " + "\n  ".join(gone)


def test_relative_links_of_the_docs_resolve():
    broken = []
    for page in PAGES:
        for target in LINK.findall(_read(page)):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not os.path.exists(os.path.join(os.path.dirname(page), path)):
                broken.append("%s: %s" % (os.path.relpath(page, ROOT), target))
    assert not broken, "links to nowhere:\n  " + "\n  ".join(broken)
