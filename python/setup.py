"""Build the ferrox Python package: setuptools, plus a build step that
compiles libferrox.so with CMake from the repository this folder sits in
(python/..; FERROX_SOURCE_DIR overrides) and puts it, with include/ferrox.h,
inside the package, so an installed ferrox needs no source tree.

    pip install ./python                       # from the repository root
    pip install --no-build-isolation ./python  # offline: the setuptools installed

Environment: FERROX_CMAKE_ARGS (extra configure arguments, e.g.
"-DFX_NATIVE=OFF" for a wheel that runs on any x86-64), FERROX_BUILD_JOBS
(default: the CPU count); CMake itself honours CMAKE_C_COMPILER_LAUNCHER
(e.g. ccache). The wheel is tagged py3-none-<platform>: ctypes, no
extension module, so any Python 3 on that platform loads it.
"""
import os
import re
import shlex
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1: the wheel package's
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def source_root():
    root = os.path.abspath(os.environ.get("FERROX_SOURCE_DIR") or os.path.dirname(HERE))
    for f in ("CMakeLists.txt", os.path.join("include", "ferrox.h")):
        if not os.path.isfile(os.path.join(root, f)):
            raise SystemExit("ferrox: no %s in %s: build from a ferrox checkout (pip install ./python) "
                             "or set FERROX_SOURCE_DIR" % (f, root))
    return root


def version():
    """CMakeLists.txt's project(ferrox VERSION x.y.z)."""
    try:
        with open(os.path.join(source_root(), "CMakeLists.txt")) as f:
            m = re.search(r"project\(\s*ferrox\s+VERSION\s+([0-9.]+)", f.read())
        return m.group(1) if m else "0.0.0"
    except SystemExit:
        return "0.0.0"


class BuildPyWithLib(build_py):
    """build_py, then libferrox.so (CMake target ferrox_shared, Release)
    and ferrox.h into the built package."""

    def run(self):
        super().run()
        root = source_root()
        bdir = os.path.join(os.path.abspath(self.get_finalized_command("build").build_temp), "cmake")
        cache = os.path.join(bdir, "CMakeCache.txt")
        if os.path.isfile(cache):  # a cache of another source folder makes CMake refuse
            with open(cache) as f:
                if ("CMAKE_HOME_DIRECTORY:INTERNAL=%s\n" % root) not in f.read():
                    shutil.rmtree(bdir)
        jobs = os.environ.get("FERROX_BUILD_JOBS") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "-S", root, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release"] +
                              shlex.split(os.environ.get("FERROX_CMAKE_ARGS", "")))
        subprocess.check_call(["cmake", "--build", bdir, "--target", "ferrox_shared", "-j", jobs])
        so = os.path.realpath(os.path.join(bdir, "libferrox.so"))
        dst = os.path.join(self.build_lib, "ferrox")
        os.makedirs(os.path.join(dst, "include"), exist_ok=True)
        shutil.copyfile(so, os.path.join(dst, "libferrox.so"))
        os.chmod(os.path.join(dst, "libferrox.so"), 0o755)
        shutil.copyfile(os.path.join(root, "include", "ferrox.h"), os.path.join(dst, "include", "ferrox.h"))

    def get_outputs(self, include_bytecode=1):
        dst = os.path.join(self.build_lib, "ferrox")
        return super().get_outputs(include_bytecode) + [os.path.join(dst, "libferrox.so"),
                                                        os.path.join(dst, "include", "ferrox.h")]


class BinaryDistribution(Distribution):
    """A native library inside: installed as platform-specific (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """Tagged for the platform, but for any Python 3 (ctypes, no ABI)."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(version=version(), distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPyWithLib, "bdist_wheel": PlatformWheel})
