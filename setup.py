"""Build natsd's Cython extensions (natsd/_core). Everything else is in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

CORE = ["sublist", "conn", "router", "parser", "loop", "log", "logsnap", "jsdeliver"]

extensions = [
    Extension(f"natsd._core.{name}", [f"natsd/_core/{name}.pyx"], include_dirs=["natsd/_core"],
              extra_compile_args=["-O2", "-Wno-unused-function", "-Wno-unreachable-code"])
    for name in CORE
]

setup(ext_modules=cythonize(
    extensions,
    language_level=3,
    compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
))
