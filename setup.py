"""Build natsd's Cython extensions. Everything else is in pyproject.toml.

Every .pyx under natsd/ is an extension module named after its path (natsd/_core/log.pyx ->
natsd._core.log): adding a .pyx file is enough, there is no list here to forget to update.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
CORE_DIR = os.path.join("natsd", "_core")      # nlog.h and the shared .pxd files live here


def pyx_sources():
    """natsd/**/*.pyx, relative to the project root (setuptools wants relative paths)."""
    found = glob.glob(os.path.join(HERE, "natsd", "**", "*.pyx"), recursive=True)
    return sorted(os.path.relpath(p, HERE) for p in found)


# the optimisation level; tests/packaging/test_wheel.py builds with -O0, since it checks what
# the wheel holds and that it runs, and gcc -O2 over the generated C is most of its time
OPT = os.environ.get("NATSD_BUILD_OPT") or "-O2"


def extension(path):
    name = os.path.splitext(path)[0].replace(os.sep, ".")
    include = [CORE_DIR] + ([os.path.dirname(path)] if os.path.dirname(path) != CORE_DIR else [])
    return Extension(name, [path], include_dirs=include,
                     extra_compile_args=[OPT, "-Wno-unused-function", "-Wno-unreachable-code"])


extensions = [extension(p) for p in pyx_sources()]
if not extensions:
    raise SystemExit("setup.py: no natsd/**/*.pyx found (run it from the project root)")

# the extensions compile independently: one compiler per CPU unless NATSD_BUILD_JOBS says otherwise
JOBS = int(os.environ.get("NATSD_BUILD_JOBS") or os.cpu_count() or 1)

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        nthreads=JOBS if JOBS > 1 else 0,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
    options={"build_ext": {"parallel": JOBS}} if JOBS > 1 else {},
)
