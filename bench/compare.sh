#!/usr/bin/env bash
# ferrox beside llama.cpp on the same GGUF files and threads, in one run:
# prompt processing (pp) and generation (tg) tokens/s through `ferrox bench`
# and llama-bench (same method: random ids, empty cache, warm-up, -r reps),
# interleaved round by round so both engines see the same machine state;
# then each engine's mean over the rounds and the ratio ferrox / llama.cpp.
#
#   bench/compare.sh [-t 2] [-p 512] [-n 128] [-r 3] [--rounds 2] [--batched | --batched-only]
#                    [--models gemma3-270m,smollm2-135m,tinyllama-q4_k_m,tinyllama-q8_0]
#                    (also qwen35-shape-q8_0, granite4h-shape-q8_0: ~1B hybrid shapes,
#                    scripts/make-hybrid-speed-models.py)
#                    [--against REV]
#
# llama.cpp: found or built by bench/llama.sh ($LLAMA_BIN, PATH, ../oracle,
# else built from the llama-cpp-python sdist there, outside the repo).
# --batched adds ferrox batched-bench vs llama-batched-bench (npp 128,
# ntg 128, npl 1 and 8), run --rounds times each, interleaved: the median
# S_TG at 1 and 8 sequences, their ratio, each round's own ratio, and
# ferrox over llama.cpp at 8 sequences. --batched-only: just that part.
# --against REV: the peer is ferrox itself as of git revision REV (built
# in a temporary worktree, Release), by the same method: a refactor's
# before / after on the same machine in one interleaved run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=2 np=512 ng=128 reps=3 rounds=2 batched=0 single=1 against=
models=gemma3-270m,smollm2-135m,tinyllama-q4_k_m,tinyllama-q8_0
while [ $# -gt 0 ]; do
	case "$1" in
	-t) threads=$2; shift 2 ;;
	-p) np=$2; shift 2 ;;
	-n) ng=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--batched) batched=1; shift ;;
	--batched-only) batched=1 single=0; shift ;;
	--models) models=$2; shift 2 ;;
	--against) against=$2; shift 2 ;;
	-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "--rounds: a count of at least 1" >&2; exit 2; }

ferrox="$root/build/bin/ferrox"
[ -x "$ferrox" ] || { echo "build ferrox first (README)" >&2; exit 1; }
tmp=$(mktemp -d)
if [ -n "$against" ]; then
	rev=$(git -C "$root" rev-parse --short "$against") || exit 2
	trap 'git -C "$root" worktree remove --force "$tmp/rev" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
	git -C "$root" worktree add --detach "$tmp/rev" "$rev" >/dev/null 2>&1
	cmake -S "$tmp/rev" -B "$tmp/rev/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$tmp/rev/build" -j"$threads" --target ferrox-cli >/dev/null
	peer="ferrox $rev"
	peer_bench() { "$tmp/rev/build/bin/ferrox" bench -m "$1" -p "$np" -n "$ng" -r "$reps" -t "$threads" -o json; }
	peer_batched() { "$tmp/rev/build/bin/ferrox" batched-bench -m "$1" -npp 128 -ntg 128 -npl 1,8 -t "$threads"; }
else
	trap 'rm -rf "$tmp"' EXIT
	. "$root/bench/llama.sh"
	peer="llama.cpp ($(basename "$(dirname "$llama_bin")"))"
	peer_bench() { "$llama_bin/llama-bench" -m "$1" -p "$np" -n "$ng" -r "$reps" -t "$threads" -o json; }
	peer_batched() {
		"$llama_bin/llama-batched-bench" -m "$1" -npp 128 -ntg 128 -npl 1,8 -t "$threads" \
			-tb "$threads" -c 2560 -b 2048 -ub 512
	}
fi

model_path() {
	case "$1" in
	tinyllama-*) local t=${1#tinyllama-}
		local f="$root/models/tinyllama-shape-$t.gguf"
		[ -f "$f" ] || python3 "$root/scripts/make-speed-models.py" >&2
		echo "$f" ;;
	qwen35-shape-*|granite4h-shape-*) local f="$root/models/$1.gguf"
		[ -f "$f" ] || python3 "$root/scripts/make-hybrid-speed-models.py" >&2
		echo "$f" ;;
	*) "$root/scripts/get-model.sh" "$1" | tail -n1 ;;
	esac
}

echo "# ferrox vs $peer, $threads threads, pp$np / tg$ng, $rounds rounds x $reps reps, $(date -u +%F)"
IFS=, read -ra list <<<"$models"
[ "$single" = 1 ] && echo && echo "| model | test | ferrox t/s | $peer t/s | ratio | ferrox roofline share |" &&
	echo "| --- | --- | ---: | ---: | ---: | ---: |"
for name in "${list[@]}"; do
	[ "$single" = 1 ] || break
	m=$(model_path "$name")
	for r in $(seq "$rounds"); do
		"$ferrox" bench -m "$m" -p "$np" -n "$ng" -r "$reps" -t "$threads" -o json >"$tmp/fx.$r.json"
		peer_bench "$m" 2>/dev/null >"$tmp/lc.$r.json"
	done
	python3 - "$tmp" "$rounds" "$name" <<'PY'
import json, sys
d, rounds, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fx = [json.load(open(f"{d}/fx.{r}.json")) for r in range(1, rounds + 1)]
lc = [json.load(open(f"{d}/lc.{r}.json")) for r in range(1, rounds + 1)]
def lc_tps(runs, pp):
    if isinstance(runs[0], dict):  # a ferrox peer (--against)
        return sum(r["pp_tps" if pp else "tg_tps"] for r in runs) / len(runs)
    v = [t["avg_ts"] for run in runs for t in run if (t["n_prompt"] > 0) == pp]
    return sum(v) / len(v)
for test, key, pp in (("pp", "pp_tps", True), ("tg", "tg_tps", False)):
    f = sum(x[key] for x in fx) / len(fx)
    l = lc_tps(lc, pp)
    n = fx[0]["n_prompt"] if pp else fx[0]["n_gen"]
    share = "" if pp else "%.0f%%" % (100 * sum(x["tg_roofline_share"] for x in fx) / len(fx))
    print(f"| {name} | {test}{n} | {f:.2f} | {l:.2f} | {f / l:.2f}x | {share} |")
PY
done
if [ "$batched" = 1 ]; then
	echo
	echo "| model | engine | S_TG B=1 | S_TG B=8 | B=8 / B=1 | per round | ferrox / peer at B=8 |"
	echo "| --- | --- | ---: | ---: | ---: | --- | ---: |"
	for name in "${list[@]}"; do
		m=$(model_path "$name")
		for r in $(seq "$rounds"); do
			"$ferrox" batched-bench -m "$m" -npp 128 -ntg 128 -npl 1,8 -t "$threads" \
				>"$tmp/fxb.$r" 2>/dev/null
			peer_batched "$m" 2>/dev/null >"$tmp/lcb.$r"
		done
		python3 - "$name" "$rounds" "$tmp" "$peer" <<'PY'
import statistics, sys
name, rounds, tmp, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def s_tg(path):
    out = {}
    for line in open(path):
        f = [x.strip() for x in line.split("|")]
        if len(f) > 9 and f[3] in ("1", "8"):
            out[int(f[3])] = float(f[8])
    return out
res = {}
for e in ("fxb", "lcb"):
    runs = [s_tg(f"{tmp}/{e}.{r}") for r in range(1, rounds + 1)]
    if any(set(r) != {1, 8} for r in runs):
        sys.exit(f"{name}: a {'ferrox' if e == 'fxb' else peer} batched-bench run "
                 f"gave no B=1 or B=8 row (see {tmp}/{e}.*)")
    res[e] = runs
b8 = {}
for e, label in (("fxb", "ferrox"), ("lcb", peer)):
    runs = res[e]
    m1 = statistics.median(r[1] for r in runs)
    m8 = statistics.median(r[8] for r in runs)
    b8[e] = m8
    per = " ".join("%.2fx" % (r[8] / r[1]) for r in runs)
    vs = "%.2fx" % (b8["fxb"] / m8) if e == "lcb" else ""
    print(f"| {name} | {label} | {m1:.2f} | {m8:.2f} | {m8 / m1:.2f}x | {per} | {vs} |")
PY
	done
fi
