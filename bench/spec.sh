#!/usr/bin/env bash
# Speculative decoding (ngram-simple: drafts looked up in the sequence's own
# text) against plain decoding, ferrox beside llama.cpp on the same GGUF
# files, prompts, threads and settings, in one run: single-stream generation
# tokens/s, greedy, fixed -n.
#
#   bench/spec.sh [-t 2] [-n 128] [--rounds 5] [--models smollm2-135m,gemma3-270m]
#                 [--prompts edit,code,story] [--size-n 3] [--size-m 16] [--draft-max 16]
#                 [--raw FILE.json]
#   (the full run: bench/spec.sh; a quick check: bench/spec.sh --rounds 2 -n 64)
#
# Prompts (bench/spec.py): edit, a ~300-token passage and an instruction to
# repeat it with small edits (chat template written out; the answer copies,
# lookup helps); code, a Python file whose next function repeats the
# earlier ones (raw continuation; lookup helps partly); story, a free story
# (a raw opening line; lookup has little to copy, unless the model loops).
# Four configurations per model and prompt, --rounds interleaved rounds (the
# order rotated by one each round), after one warm-up request per server:
#   ferrox plain   build/bin/ferrox run -m M -p P -n N --temp 0 --repeat-penalty 1 -t T
#   ferrox spec    the same + --spec-type ngram-simple --spec-ngram-simple-size-n SN
#                  --spec-ngram-simple-size-m SM --spec-draft-n-max DM
#   llama.cpp      llama-server -m M -c 4096 -np 1 -t T -tb T [the same four spec flags]
#                  (two servers per model, plain and spec: speculation is a server
#                  setting), POST /completion {n_predict N, temperature 0,
#                  repeat_penalty 1, cache_prompt false}
# ferrox's generation tokens/s is its stderr figure (load and prompt left
# out), llama.cpp's timings.predicted_per_second; drafts and acceptances
# from ferrox's "draft D, accepted A" and llama.cpp's timings.draft_n /
# draft_n_accepted. Neither stops early at -n unless the model ends (ferrox
# has no --ignore-eos; llama.cpp is not asked to ignore it either); the
# generated-token counts are in the table and early stops in the notes.
# Note: llama.cpp's ngram-simple drafts up to size-m tokens and ignores
# --spec-draft-n-max (a draft-model setting there); ferrox caps at both, so
# keep --size-m = --draft-max for the same drafts on both.
#
# Output: a Markdown table, one row per model and prompt:
# | model | prompt | prompt tok | gen tok fx / lc | ferrox plain t/s | ferrox spec t/s
# | fx accepted / drafted | fx spec / plain | llama.cpp plain t/s | llama.cpp spec t/s
# | lc accepted / drafted | lc spec / plain | fx spec / lc spec | fx spec text = plain
# | lc spec text = plain |
# gen tok: tokens generated, ferrox plain,spec / llama.cpp plain,spec (each
# the set over the rounds, a/b when they differ); t/s: the median over the
# rounds; ferrox spec / plain etc.: ratios of those medians; accepted /
# drafted: first round (notes
# below the table when rounds differ); "text = plain": every spec run's text
# equals every plain run's (ferrox must: speculation is lossless; llama.cpp's
# need not: its batched verification rows can flip a near tie, as Gemma 3
# story did in the trial runs of 2026-12-05); then
# notes: early stops, prompt token counts that differ between the engines,
# where ferrox's plain text first differs from llama.cpp's.
# Per-run progress on stderr; --raw FILE keeps every run (texts included).
#
# llama.cpp: found or built by bench/llama.sh ($LLAMA_BIN, PATH, ../oracle);
# models by scripts/get-model.sh ($FX_MODELS_DIR, default models/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=2 models=smollm2-135m,gemma3-270m
pass=()
while [ $# -gt 0 ]; do
	case "$1" in
	-t) threads=$2; shift 2 ;;
	--models) models=$2; shift 2 ;;
	-n|--rounds|--prompts|--size-n|--size-m|--draft-max|--raw) pass+=("$1" "$2"); shift 2 ;;
	-h|--help) sed -n '2,/^set -e/{/^set -e/d;p}' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done

ferrox="$root/build/bin/ferrox"
[ -x "$ferrox" ] || { echo "build ferrox first (README)" >&2; exit 1; }
. "$root/bench/llama.sh"
[ -x "$llama_bin/llama-server" ] || { echo "no llama-server in $llama_bin" >&2; exit 1; }
margs=()
IFS=, read -ra list <<<"$models"
for name in "${list[@]}"; do
	margs+=(--model "$name=$("$root/scripts/get-model.sh" "$name" | tail -n1)")
done
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
python3 "$root/bench/spec.py" --ferrox "$ferrox" --llama-server "$llama_bin/llama-server" \
	-t "$threads" --logdir "$logdir" "${margs[@]}" "${pass[@]}"
