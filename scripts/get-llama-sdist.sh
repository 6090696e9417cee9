#!/usr/bin/env bash
# Fetch and unpack llama.cpp's source as vendored in the llama-cpp-python
# sdist (PyPI), cached outside the repo in $ORACLE/sdist (ORACLE defaults
# to ../oracle beside the repo). Prints the llama.cpp directory as its last
# line. Used by bench/llama.sh (builds llama.cpp from it) and by
# scripts/test.sh (tests/test_vocab_corpus.c reads its models/ggml-vocab-*
# files). Nothing of llama.cpp lands in this repo. Safe to re-run: a
# present archive or tree is reused.
#
# pip prepares an sdist's metadata before saving it: it installs the build
# backend (scikit-build-core) in an isolated environment and asks it. The
# whole download measured 29 s with a warm pip cache and 50 s with
# --no-cache-dir (76.6 MB at ~5 MB/s is 15 s of it); with the backend
# installed beforehand and --no-build-isolation, 42 s with --no-cache-dir
# (on a busier machine). So the flag is used when the backend is importable,
# and nothing is installed for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
oracle=${ORACLE:-$(cd "$root/.." && pwd)/oracle}
sdist=$oracle/sdist
tree=$sdist/llama_cpp_python-$version/vendor/llama.cpp

mkdir -p "$sdist"
if [ ! -f "$sdist/llama_cpp_python-$version.tar.gz" ] && [ ! -d "$tree" ]; then
	echo "downloading llama-cpp-python==$version (sdist) into $sdist" >&2
	iso=()
	python3 -c "import scikit_build_core" >/dev/null 2>&1 && iso=(--no-build-isolation)
	python3 -m pip download --quiet --no-deps --no-binary :all: "${iso[@]}" -d "$sdist" \
		"llama-cpp-python==$version" >&2
fi
if [ ! -d "$tree" ]; then
	tar -xzf "$sdist/llama_cpp_python-$version.tar.gz" -C "$sdist"
fi
[ -f "$tree/src/llama-vocab.cpp" ] || { echo "no llama.cpp tree at $tree" >&2; exit 1; }
echo "$tree"
