"""Run by ctest's python_package (tests/test_python_package.py), which sets
FERROX_EXPECT_INSTALLED to the virtual environment the wheel went into and
FERROX_SOURCE_GONE to where the source copy it was built from was: ferrox
and the libferrox.so this process mapped come from inside the environment,
and that source folder is gone."""
import os

import pytest

import ferrox
from ferrox import _lib

VENV = os.environ.get("FERROX_EXPECT_INSTALLED")
pytestmark = pytest.mark.skipif(not VENV, reason="only for an installed package (ctest python_package)")


def inside(path, folder):
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


def test_package_and_library_come_from_the_install():
    pkg = os.path.dirname(os.path.abspath(ferrox.__file__))
    assert inside(pkg, VENV)
    assert "FERROX_LIBRARY" not in os.environ
    assert os.path.realpath(_lib.path) == os.path.realpath(os.path.join(pkg, "libferrox.so"))
    assert os.path.isfile(os.path.join(pkg, "include", "ferrox.h"))
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if "libferrox" in line}
    assert mapped and all(inside(p, VENV) for p in mapped), mapped
    gone = os.environ["FERROX_SOURCE_GONE"]
    assert not os.path.exists(gone)
    assert ferrox.__version__[0].isdigit()
