"""Shared fixtures of the ferrox package tests.

Environment: FX_MODELS_DIR (default: the repository's models/), with
SmolLM2-135M-Instruct.Q4_1.gguf and gemma-3-270m-q4_k_m.gguf (scripts/
get-model.sh); FERROX_CLI, the `ferrox` binary the outputs are compared
with (default: build/bin/ferrox of the repository). A missing model or
binary skips the tests that need it, unless FX_REQUIRE_MODELS=1 (CI),
where it fails them.
"""
import os
import subprocess

import pytest

import ferrox

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
CLI = os.environ.get("FERROX_CLI", os.path.join(ROOT, "build", "bin", "ferrox"))
FILES = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}


def missing(what):
    if REQUIRE:
        pytest.fail("%s (FX_REQUIRE_MODELS=1)" % what)
    pytest.skip(what)


def model_path(name):
    p = os.path.join(MODELS, FILES[name])
    if not os.path.isfile(p):
        missing("no model %s" % p)
    return p


@pytest.fixture(scope="session")
def cli():
    if not os.access(CLI, os.X_OK):
        missing("no ferrox binary at %s (FERROX_CLI)" % CLI)

    def run(*args, stdin=None):
        r = subprocess.run([CLI, *args], input=stdin, capture_output=True, timeout=600)
        assert r.returncode == 0, "ferrox %s: %s" % (" ".join(args), r.stderr.decode("utf-8", "replace"))
        return r.stdout.decode("utf-8")
    return run


_loaded = {}


def _model(name):
    if name not in _loaded:
        _loaded[name] = ferrox.Model(model_path(name))
    return _loaded[name]


@pytest.fixture(scope="session")
def smollm2():
    return _model("smollm2")


@pytest.fixture(scope="session")
def gemma3():
    return _model("gemma3")


@pytest.fixture(scope="session", params=sorted(FILES))
def model(request):
    """Each default model in turn (its name: model.name)."""
    m = _model(request.param)
    m.name = request.param
    return m
