#!/usr/bin/env bash
# ferrox batched-bench beside llama.cpp's llama-batched-bench on the same
# GGUF files and threads, in one run. llama.cpp is built from the
# llama-cpp-python sdist OUTSIDE this repo; point LLAMA_BIN at its bin/:
#   LLAMA_BIN=/path/to/llama-build/bin bench/batched.sh [-t 2] [npp] [ntg] [npl]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${THREADS:-2}
npp=${1:-128}
ntg=${2:-128}
npl=${3:-1,2,4,8,16}
: "${LLAMA_BIN:?set LLAMA_BIN to the directory holding llama-batched-bench}"
for name in smollm2-135m gemma3-270m; do
	model=$("$root/scripts/get-model.sh" "$name" | tail -n1)
	echo "## $name ($(basename "$model")), $threads threads, npp $npp, ntg $ntg"
	echo
	echo "ferrox:"
	echo
	"$root/build/bin/ferrox" batched-bench -m "$model" -npp "$npp" -ntg "$ntg" -npl "$npl" -t "$threads"
	echo
	echo "llama.cpp llama-batched-bench:"
	echo
	"$LLAMA_BIN/llama-batched-bench" -m "$model" -npp "$npp" -ntg "$ntg" -npl "$npl" \
		-t "$threads" -tb "$threads" -c $(( (npp + ntg) * 16 + 512 )) -b 2048 -ub 512 2>/dev/null |
		grep -E '^\|'
	echo
done
