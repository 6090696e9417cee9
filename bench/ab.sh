#!/usr/bin/env bash
# Paired A/B of two commits' decode step time on one model (bench/ab.c):
# each commit is built in a temporary worktree as a position-independent
# libferrox linked whole into a .so; bench/ab alternates their decode steps
# in one process, once in each load order, and the two B/A medians are
# combined as sqrt((B/A)_1 / (A/B)_2), which cancels an advantage of either
# load order (seen at one sequence: a few percent).
#
#   bench/ab.sh REV_A REV_B [-m MODEL] [-s N_SEQ] [-r ROUNDS] [-n NTG] [-t THREADS]
#
# Defaults: models/SmolLM2-135M-Instruct.Q4_1.gguf, 8 sequences, 3 rounds of
# 128 decode steps after a 128-token prompt per sequence, 2 threads. The
# two revisions must share include/ferrox.h (bench/ab.c calls both). Prints both runs
# and "B/A step time <x>" (below 1: B is faster). REV may be any git
# revision; WORKTREE reuses the working tree as is (uncommitted changes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
rev_a=$1 rev_b=$2; shift 2
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf seqs=8 rounds=3 ntg=128 threads=2
while [ $# -gt 0 ]; do
	case "$1" in
	-m) model=$2; shift 2 ;;
	-s) seqs=$2; shift 2 ;;
	-r) rounds=$2; shift 2 ;;
	-n) ntg=$2; shift 2 ;;
	-t) threads=$2; shift 2 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[ -f "$model" ] || { echo "no model $model (scripts/get-model.sh)" >&2; exit 1; }
# The public header of a revision (WORKTREE: the working tree's).
header() {
	if [ "$1" = WORKTREE ]; then cat "$root/include/ferrox.h"; else git -C "$root" show "$1:include/ferrox.h"; fi
}
for r in "$rev_a" "$rev_b"; do
	header "$r" | cmp -s - "$root/include/ferrox.h" ||
		{ echo "include/ferrox.h of $r differs from the working tree's: bench/ab.c cannot call both" >&2; exit 1; }
done
libs=$(pkg-config --libs libcjson libpcre2-8 libutf8proc)
work=$(mktemp -d)
cleanup() {
	for d in "$work"/tree-*; do
		[ -d "$d" ] && git -C "$root" worktree remove --force "$d" >/dev/null 2>&1 || true
	done
	git -C "$root" worktree prune >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# build REV NAME: $work/NAME.so
build() {
	local src=$root
	if [ "$1" != WORKTREE ]; then
		src=$work/tree-$2
		git -C "$root" worktree add --detach "$src" "$1" >/dev/null
	fi
	cmake -S "$src" -B "$work/build-$2" -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_POSITION_INDEPENDENT_CODE=ON >/dev/null
	cmake --build "$work/build-$2" -j"$(nproc)" --target ferrox_static >/dev/null
	# -Bsymbolic: calls inside the library bind locally, as in the static
	# build, not through the PLT.
	cc -shared -Wl,-Bsymbolic -o "$work/$2.so" -Wl,--whole-archive "$work/build-$2/libferrox.a" \
		-Wl,--no-whole-archive $libs -lm -lpthread
}
build "$rev_a" a
build "$rev_b" b
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -I"$root/include" \
	"$root/bench/ab.c" -ldl -o "$work/ab"
one=$("$work/ab" "$work/a.so" "$work/b.so" "$model" "$seqs" "$rounds" "$ntg" "$threads")
two=$("$work/ab" "$work/b.so" "$work/a.so" "$model" "$seqs" "$rounds" "$ntg" "$threads")
echo "A=$rev_a B=$rev_b: $one"
echo "A=$rev_b B=$rev_a: $two"
python3 - "$one" "$two" <<'EOF'
import math, re, sys
r1, r2 = (float(re.search(r"B/A median ([0-9.]+)", s).group(1)) for s in sys.argv[1:3])
print(f"B/A step time {math.sqrt(r1 / r2):.4f} (medians; below 1: B is faster)")
EOF
