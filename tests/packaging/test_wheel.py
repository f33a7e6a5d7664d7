"""The wheel is what users install: build it, install it into a fresh venv, run JetStream from it.

An editable install (what `make build` and the rest of the suite use) imports natsd straight from
the source tree, so a package missing from the wheel (natsd.jetstream once was) or an extension
setup.py forgot goes unnoticed there. This test:

1. copies the project's files (tracked and untracked-but-not-ignored, as a fresh clone plus the
   work in progress would have them; no build/, *.so, *.c) to tmp_path, so nothing stale from an
   earlier in-place build can slip into the wheel;
2. builds the wheel with the project venv's pip, setuptools and Cython (`--no-build-isolation`:
   no build environment is downloaded), and checks its file list against the source tree: every
   package, module, .pyx (as a compiled extension), .pxd and .h;
3. creates a fresh venv, installs natsd from that wheel file only; its dependencies come from the
   index (pip's cache is reused) as the wheel's Requires-Dist lists them, which checks those too;
4. imports every natsd module in that venv (from its site-packages, not the source tree);
5. starts `natsd -js` from the venv's console script and does a JetStream round trip with nats-py:
   create a stream, publish (PubAck seq 1), read the message back.

It takes ~40 s (mostly compiling the extensions, unoptimised: setup.py's NATSD_BUILD_OPT). NATSD_SKIP_WHEEL=1 skips it for quick local runs;
`make test` (and CI) runs it.
"""
import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

from tests.support.servers import ROOT, start_server

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.environ.get("NATSD_SKIP_WHEEL") == "1", reason="NATSD_SKIP_WHEEL=1"),
]

PACKAGE_ROOTS = ("natsd", "bench")             # pyproject: packages.find include natsd*, bench*
SKIP_DIRS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis",
             ".benchmarks", "data"}
SKIP_SUFFIXES = (".so", ".c", ".pyc", ".whl")


def run(argv, timeout, **kw):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    took = time.monotonic() - t0
    if p.returncode != 0:
        pytest.fail("%s failed (exit %d, %.1fs):\n%s\n%s"
                    % (" ".join(map(str, argv)), p.returncode, took, p.stdout[-4000:], p.stderr[-4000:]))
    return p, took


def project_files():
    """Paths (relative to ROOT) a fresh clone would have, plus untracked files not ignored."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):          # not a git checkout: walk the tree
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return [f for f in files if not f.endswith(SKIP_SUFFIXES) and os.path.isfile(os.path.join(ROOT, f))]


def copy_project(dst):
    for f in project_files():
        os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(dst, f))


def expected_wheel_files(src):
    """What the wheel must hold, derived from the source tree: every package's .py files, every
    .pyx compiled (EXT_SUFFIX), every .pyx/.pxd/.h as package data."""
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    want = set()
    for top in PACKAGE_ROOTS:
        for d, dirs, names in os.walk(os.path.join(src, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            if "__init__.py" not in names:          # not a package (namespaces = false)
                dirs[:] = []
                continue
            rel = os.path.relpath(d, src).replace(os.sep, "/")
            for n in names:
                if n.endswith((".py", ".pyx", ".pxd", ".h")):
                    want.add("%s/%s" % (rel, n))
                if n.endswith(".pyx"):
                    want.add("%s/%s%s" % (rel, n[:-4], ext))
    return want


async def jetstream_round_trip(url):
    import nats
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(timeout=10)
        info = await js.add_stream(name="WHEEL", subjects=["wheel.>"])
        assert info.config.name == "WHEEL"
        ack = await js.publish("wheel.check", b"from the wheel")
        assert (ack.stream, ack.seq) == ("WHEEL", 1)
        msg = await js.get_msg("WHEEL", 1)
        assert (msg.subject, msg.data) == ("wheel.check", b"from the wheel")
        assert (await js.stream_info("WHEEL")).state.messages == 1
    finally:
        await nc.close()


def test_wheel_installs_and_runs_jetstream(tmp_path):
    timings = {}
    src, whl_dir, venv = tmp_path / "src", tmp_path / "wheel", tmp_path / "venv"
    copy_project(src)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["NATSD_BUILD_OPT"] = "-O0"      # the same extensions, compiled in a fraction of the time

    # -- 1. build with the project venv's build tools, from the clean copy
    _, timings["wheel"] = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "-w", str(whl_dir), str(src)], timeout=600, cwd=str(src), env=env)
    wheels = list(whl_dir.glob("natsd-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "natsd/jetstream/__init__.py" in names and "natsd/jetstream/engine/jetstream.py" in names, \
        "the wheel has no natsd.jetstream: %s" % sorted(n for n in names if n.startswith("natsd/"))
    missing = expected_wheel_files(str(src)) - names
    assert not missing, "in the source tree but not in the wheel: %s" % sorted(missing)
    stray = [n for n in names if n.startswith("tests/") or n.endswith(".c")]
    assert not stray, "should not be in the wheel: %s" % stray

    # -- 2. a fresh venv; natsd from the wheel file only, its dependencies from the index
    _, timings["venv"] = run([sys.executable, "-m", "venv", str(venv)], timeout=300, env=env)
    vpy = venv / "bin" / "python"
    _, timings["install"] = run([str(vpy), "-m", "pip", "install", "--prefer-binary", str(wheel)],
                                timeout=600, cwd=str(tmp_path), env=env)

    # -- 3. every natsd module imports from the venv's site-packages (not from the source tree)
    site = run([str(vpy), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               timeout=60, cwd=str(tmp_path), env=env)[0].stdout.strip()
    probe = (
        "import importlib, pkgutil, natsd, sys\n"
        "bad = []\n"
        "mods = [m.name for m in pkgutil.walk_packages(natsd.__path__, 'natsd.')\n"
        "        if not m.name.endswith('__main__')]\n"
        "for name in ['natsd'] + mods:\n"
        "    try:\n"
        "        f = importlib.import_module(name).__file__\n"
        "        if not f.startswith(sys.argv[1]): bad.append('%s from %s' % (name, f))\n"
        "    except Exception as e:\n"
        "        bad.append('%s: %r' % (name, e))\n"
        "print(len(mods)); print('\\n'.join(bad))\n")
    out = run([str(vpy), "-I", "-c", probe, site], timeout=120, cwd=str(tmp_path), env=env)[0].stdout
    count, _, bad = out.partition("\n")
    assert not bad.strip(), "natsd modules that do not import from the installed wheel:\n" + bad
    assert int(count) > 0, out

    # -- 4. the console script runs a JetStream-enabled server
    natsd_bin = venv / "bin" / "natsd"
    assert natsd_bin.exists(), "the wheel installed no natsd console script"
    t0 = time.monotonic()
    server = start_server([str(natsd_bin)], "-js", "-sd", str(tmp_path / "js"),
                          cwd=str(tmp_path), env=env)
    try:
        server.wait_log(r"Starting JetStream", timeout=5)
        asyncio.run(jetstream_round_trip(server.url))
        assert not [l for l in server.lines if "[FTL]" in l or "[ERR]" in l], server.log
    finally:
        rc = server.stop()
    timings["server"] = time.monotonic() - t0
    assert rc == 0, "natsd from the wheel exited with %s:\n%s" % (rc, server.log)
    assert (tmp_path / "js" / "jetstream").is_dir()
    print("wheel %s (%.0f KiB); %s" % (wheel.name, wheel.stat().st_size / 1024,
                                       ", ".join("%s %.1fs" % kv for kv in timings.items())))
