#!/usr/bin/env bash
# ferrox's perplexity beside llama-perplexity's on the same GGUF and text,
# with the paired standard error that says whether they differ at all.
#
#   bench/ppl_compare.sh [-t 2] [-c 512] [--models gemma3-270m,smollm2-135m]
#                        [-f TEXT | --licenses]
#
# Per model: llama-perplexity with its default settings scores the text and
# saves its log-probabilities (--kl-divergence-base, in a temporary folder:
# 25 MB per chunk for SmolLM2, 134 MB for Gemma 3). Then ferrox (f16 cache,
# the default, and f32), and llama-perplexity's other settings (-fa off,
# -fa off with f32 cache) score the same tokens and compare with it
# (--kl-divergence). Printed per configuration: its perplexity, that over
# llama.cpp's default minus 1, the standard error of that difference taken
# over the same tokens (the uncertainty of the KL run's ln(PPL(Q)/PPL(base)),
# which subtracts the two runs' covariance and treats tokens as
# independent), the same from the chunks' means (ferrox's rows only:
# chunks are independent, a chunk's tokens are not), the mean KL
# divergence from llama.cpp's default and how often the top token agrees.
# -f TEXT: default Debian's GPL-3 (base-files). --licenses: all of
# /usr/share/common-licenses (its plain files, symlinks skipped, by name)
# in one text, ~7x longer, for a smaller standard error.
# llama.cpp: found or built by bench/llama.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=2 ctx=512 text=/usr/share/common-licenses/GPL-3 licenses=0
models=gemma3-270m,smollm2-135m
while [ $# -gt 0 ]; do
	case "$1" in
	-t) threads=$2; shift 2 ;;
	-c) ctx=$2; shift 2 ;;
	-f) text=$2; shift 2 ;;
	--licenses) licenses=1; shift ;;
	--models) models=$2; shift 2 ;;
	-h|--help) sed -n '2,23p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
. "$root/bench/llama.sh"
ferrox="$root/build/bin/ferrox"
[ -x "$ferrox" ] || { echo "build ferrox first (README)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$licenses" = 1 ]; then
	text=$tmp/licenses.txt
	for f in /usr/share/common-licenses/*; do
		[ -L "$f" ] || [ ! -f "$f" ] || cat "$f"
	done >"$text"
fi
[ -r "$text" ] || { echo "cannot read $text" >&2; exit 1; }
echo "# perplexity, ferrox vs llama.cpp ($(basename "$(dirname "$llama_bin")")), -c $ctx, $threads threads, $(date -u +%F)"
echo "# text: $([ "$licenses" = 1 ] && echo "/usr/share/common-licenses/* (plain files)" || echo "$text"), $(wc -c <"$text") bytes, sha256 $(sha256sum "$text" | cut -c1-16)"
lp="$llama_bin/llama-perplexity"
IFS=, read -ra list <<<"$models"
for name in "${list[@]}"; do
	m=$("$root/scripts/get-model.sh" "$name" | tail -n1)
	base=$tmp/base.bin
	"$lp" -m "$m" -f "$text" -c "$ctx" -t "$threads" --kl-divergence-base "$base" >"$tmp/def.txt" 2>&1 ||
		{ tail "$tmp/def.txt" >&2; exit 1; }
	ref=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/def.txt")
	echo
	echo "## $(basename "$m")"
	echo
	echo "| configuration | PPL | vs llama.cpp default | paired SE | SE over chunks | mean KL | same top |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	echo "| llama.cpp default (flash attention) | $ref | | | | | |"
	while IFS='|' read -r label cmd; do
		# shellcheck disable=SC2086 # cmd is a word list
		$cmd --kl-divergence-base "$base" --kl-divergence -t "$threads" >"$tmp/q.txt" 2>&1 ||
			{ tail "$tmp/q.txt" >&2; exit 1; }
		awk -v label="$label" -v ref="$ref" -F: '
			/^Mean PPL\(Q\) /               { split($2, a, " "); ppl = a[1] }
			/^Mean ln\(PPL\(Q\)\/PPL\(base/ { split($2, a, " "); se = a[3] }
			/SE from the .* chunks/         { split($2, a, " "); cse = a[1] }
			/^Mean    KLD/                  { split($2, a, " "); kl = a[1] }
			/^Same top p/                   { split($2, a, " "); top = a[1] }
			END { printf "| %s | %.4f | %+.3f%% | %.3f%% | %s | %.2e | %.2f%% |\n",
			             label, ppl, 100 * (ppl / ref - 1), 100 * se,
			             cse == "" ? "" : sprintf("%.3f%%", 100 * cse), kl, top }' "$tmp/q.txt"
	done <<EOF
ferrox (f16 cache)|$ferrox perplexity -m $m
ferrox, f32 cache|$ferrox perplexity -m $m -ctk f32 -ctv f32
llama.cpp -fa off|$lp -m $m -c $ctx -fa off
llama.cpp -fa off, f32 cache|$lp -m $m -c $ctx -fa off -ctk f32 -ctv f32
EOF
	rm -f "$base"
done
