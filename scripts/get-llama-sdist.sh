#!/usr/bin/env bash
# Fetch and unpack llama.cpp's source as vendored in the llama-cpp-python
# sdist (PyPI), cached outside the repo in $ORACLE/sdist (ORACLE defaults
# to ../oracle beside the repo). Prints the llama.cpp directory as its last
# line. Used by bench/llama.sh (builds llama.cpp from it) and by
# scripts/test.sh (tests/test_vocab_corpus.c reads its models/ggml-vocab-*
# files). Nothing of llama.cpp lands in this repo. Safe to re-run: a
# present archive or tree is reused.
#
# pip prepares an sdist's metadata before saving it, which means building
# llama-cpp-python's build backend (scikit-build-core) in an isolated
# environment: 29 s on this machine with a warm pip cache. Where that backend
# is importable already, --no-build-isolation skips that step.
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
