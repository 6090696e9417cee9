#!/usr/bin/env python3
"""The Python package (python/) as a user gets it, end to end.

    python3 tests/test_python_package.py FERROX_BIN

Copies the repository (no build folders, models or .git) to a temporary
folder, builds a wheel from the copy (pip wheel --no-build-isolation: the
setuptools installed, no network; setup.py compiles libferrox.so with
CMake and bundles it), installs it into a fresh virtual environment
(--system-site-packages --without-pip: the interpreter's pip, setuptools
and pytest), moves the copy away, then runs the
copy's python/tests with the environment's interpreter from another
folder: ferrox must import and work with the source it was built from gone
(python/tests/test_installed.py checks where ferrox and libferrox.so came
from). FERROX_BIN is the CLI the tests compare against. Exit 77 (skip)
without venv, pip, setuptools or pytest, unless FX_REQUIRE_MODELS=1.
Prints each stage's seconds; pytest prints the counts.
"""
import glob
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"


def skip(why):
    print("python_package: %s" % why)
    sys.exit(1 if REQUIRE else 77)


def ignore(folder, names):
    """What a fresh clone would not have, and the package's own builds."""
    drop = {n for n in names if n in ("__pycache__", ".git") or n.endswith(".egg-info")}
    if os.path.samefile(folder, ROOT):
        drop |= {n for n in names if n.startswith("build") or n == "models"}
    if os.path.samefile(folder, os.path.join(ROOT, "python")):
        drop |= {"build"} & set(names)
    return drop


def step(what, cmd, **kw):
    t = time.time()
    r = subprocess.run(cmd, **kw)
    print("python_package: %s: %.1f s" % (what, time.time() - t), flush=True)
    if r.returncode:
        print("python_package: %s failed (exit %d): %s" % (what, r.returncode, " ".join(cmd)))
        sys.exit(1)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    cli = os.path.abspath(sys.argv[1])
    # found, not imported: importing setuptools here would only clash with
    # distutils, and the environment sees them through site anyway
    for mod in ("venv", "pip", "setuptools", "pytest"):
        if importlib.util.find_spec(mod) is None:
            skip("no %s module for %s (scripts/install-deps.sh installs it)" % (mod, sys.executable))
    models = os.path.abspath(os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models")))
    tmp = tempfile.mkdtemp(prefix="ferrox-python-")
    try:
        src, moved, venv = (os.path.join(tmp, d) for d in ("src", "src-moved", "venv"))
        t = time.time()
        shutil.copytree(ROOT, src, symlinks=True, ignore=ignore)
        print("python_package: copy the repository: %.1f s" % (time.time() - t))
        # without its own pip and setuptools (ensurepip's are old: setuptools
        # 65 cannot write wheels alone): the interpreter's, seen through
        # --system-site-packages
        step("venv", [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv])
        py = os.path.join(venv, "bin", "python")
        # the user's site-packages (pip --user: pytest, setuptools) after the
        # environment's own, as a venv does not read it by itself
        user = site.getusersitepackages()
        if os.path.isdir(user):
            sp = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip()
            with open(os.path.join(sp, "zz-outer-user-site.pth"), "w") as f:
                f.write(user + "\n")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FERROX_LIBRARY")}
        step("build the wheel (compiles libferrox)",
             [py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
              os.path.join(tmp, "wheels"), os.path.join(src, "python")], env=env)
        wheels = glob.glob(os.path.join(tmp, "wheels", "ferrox-*.whl"))
        if len(wheels) != 1:
            print("python_package: expected one wheel, got %s" % wheels)
            return 1
        step("install the wheel", [py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheels[0]], env=env)
        os.rename(src, moved)
        elsewhere = os.path.join(tmp, "elsewhere")
        os.mkdir(elsewhere)
        env.update(FX_MODELS_DIR=models, FERROX_CLI=cli, FERROX_EXPECT_INSTALLED=venv, FERROX_SOURCE_GONE=src)
        t = time.time()
        r = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(moved, "python", "tests")],
                           cwd=elsewhere, env=env)
        print("python_package: pytest: %.1f s" % (time.time() - t))
        return r.returncode
    finally:
        if os.environ.get("FX_KEEP_TMP") == "1":
            print("python_package: kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
