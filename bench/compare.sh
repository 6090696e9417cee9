#!/usr/bin/env bash
# ferrox beside llama.cpp and ik_llama.cpp on the same GGUF files and
# threads, in one run: prompt processing (pp) and generation (tg) tokens/s
# through `ferrox bench` and each peer's llama-bench (same method: random
# ids, empty cache, warm-up, -r reps), interleaved round by round so every
# engine sees the same machine state; then each engine's mean over the
# rounds and the ratios ferrox / peer. The last column is ferrox's share
# of its roofline: tg against memory bandwidth, pp against the integer
# dot-product peak (ferrox bench measures both).
#
#   bench/compare.sh [-t 2] [-p 512] [-n 128] [-r 3] [--rounds 2] [--batched | --batched-only]
#                    [--models gemma3-270m,smollm2-135m,tinyllama-q4_k_m,tinyllama-q8_0]
#                    (also qwen35-shape-q8_0, granite4h-shape-q8_0: ~1B hybrid shapes,
#                    scripts/make-hybrid-speed-models.py)
#                    [--peers llama,ik] [--kernels SET] [--against REV]
#
# llama.cpp: found or built by bench/llama.sh ($LLAMA_BIN, PATH, ../oracle,
# else built from the llama-cpp-python sdist there, outside the repo).
# ik_llama.cpp: bench/ik_llama.sh ($IK_LLAMA_BIN, ../oracle/ik-build/bin, else
# built there from the ik-llama-cpp-python sdist), run with its best CPU
# flags, -rtr 1 -fa 1 (batched: -fa off, its flash attention failing
# there). --peers picks which (default both).
# --batched adds ferrox batched-bench vs each peer's llama-batched-bench
# (npp 128, ntg 128, npl 1 and 8), run --rounds times each, interleaved:
# the median S_TG at 1 and 8 sequences, their ratio, each round's own
# ratio, ferrox over the peer at 8 sequences, and ferrox's 8-sequence
# generation as a share of the integer dot-product peak.
# --kernels SET: ferrox runs that kernel set (avx2, avxvnni, avx512, amx:
# ferrox bench --kernels), e.g. the AVX2 set on a CPU that has AVX-512,
# as a CPU without it would run; the peers run as built.
# --against REV: the peer is ferrox itself as of git revision REV (built
# in a temporary worktree, Release), by the same method: a refactor's
# before / after on the same machine in one interleaved run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=2 np=512 ng=128 reps=3 rounds=2 batched=0 single=1 against= peers=llama,ik kernels=
models=gemma3-270m,smollm2-135m,tinyllama-q4_k_m,tinyllama-q8_0
while [ $# -gt 0 ]; do
	case "$1" in
	-t|-p|-n|-r|--rounds|--models|--peers|--kernels|--against)
		[ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; } ;;
	esac
	case "$1" in
	-t) threads=$2; shift 2 ;;
	-p) np=$2; shift 2 ;;
	-n) ng=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--batched) batched=1; shift ;;
	--batched-only) batched=1 single=0; shift ;;
	--models) models=$2; shift 2 ;;
	--peers) peers=$2; shift 2 ;;
	--kernels) kernels=$2; shift 2 ;;
	--against) against=$2; shift 2 ;;
	-h|--help) sed -n '2,33p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "--rounds: a count of at least 1" >&2; exit 2; }
[ -n "$peers" ] || { echo "--peers: llama and/or ik" >&2; exit 2; }

ferrox="$root/build/bin/ferrox"
[ -x "$ferrox" ] || { echo "build ferrox first (README)" >&2; exit 1; }
kflag=()
[ -n "$kernels" ] && kflag=(--kernels "$kernels")
# an unknown set is an error now, not after the peers' set-up
[ -z "$kernels" ] || "$ferrox" bench "${kflag[@]}" -h >/dev/null || exit 2
# Other work on the machine skews every ratio (2 vCPUs): say so up front.
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
awk -v l="$load" 'BEGIN { exit !(l > 0.5) }' &&
	echo "warning: load average $load before the run: other work on this machine will skew the figures" >&2
fx_bench() { "$ferrox" bench -m "$1" -p "$np" -n "$ng" -r "$reps" -t "$threads" "${kflag[@]}" -o json; }
fx_batched() { "$ferrox" batched-bench -m "$1" -npp 128 -ntg 128 -npl 1,8 -t "$threads" "${kflag[@]}"; }
tmp=$(mktemp -d)
# The peers: names, and peer_bench / peer_batched K MODEL running peer K.
names=()
if [ -n "$against" ]; then
	rev=$(git -C "$root" rev-parse --short "$against") || exit 2
	trap 'git -C "$root" worktree remove --force "$tmp/rev" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
	git -C "$root" worktree add --detach "$tmp/rev" "$rev" >/dev/null 2>&1
	cmake -S "$tmp/rev" -B "$tmp/rev/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$tmp/rev/build" -j"$threads" --target ferrox-cli >/dev/null
	names=("ferrox $rev")
	# (--kernels applies to REV too: a REV older than the flag fails)
	peer_bench() { "$tmp/rev/build/bin/ferrox" bench -m "$2" -p "$np" -n "$ng" -r "$reps" -t "$threads" "${kflag[@]}" -o json; }
	peer_batched() { "$tmp/rev/build/bin/ferrox" batched-bench -m "$2" -npp 128 -ntg 128 -npl 1,8 -t "$threads" "${kflag[@]}"; }
else
	trap 'rm -rf "$tmp"' EXIT
	bins=() flags=() bflags=()
	IFS=, read -ra plist <<<"$peers"
	for p in "${plist[@]}"; do
		case "$p" in
		llama) . "$root/bench/llama.sh"
			names+=("llama.cpp"); bins+=("$llama_bin"); flags+=(""); bflags+=("") ;;
		ik) . "$root/bench/ik_llama.sh"
			# batched-bench: its flash attention asserts (S > 0,
			# iqk_fa_templates.h) at 8 sequences in ik-llama-cpp-python
			# 0.1.5, so there it runs without
			names+=("ik_llama.cpp"); bins+=("$ik_bin"); flags+=("-rtr 1 -fa 1"); bflags+=("-rtr -fa off") ;;
		*) echo "--peers: llama and/or ik, got '$p'" >&2; exit 2 ;;
		esac
	done
	# shellcheck disable=SC2086 # the flags are words
	# run in $tmp: ik_llama.cpp's batched-bench writes llama.log where it runs
	peer_bench() { (cd "$tmp" && "${bins[$1]}/llama-bench" -m "$2" -p "$np" -n "$ng" -r "$reps" -t "$threads" ${flags[$1]} -o json); }
	# shellcheck disable=SC2086
	peer_batched() {
		(cd "$tmp" && "${bins[$1]}/llama-batched-bench" -m "$2" -npp 128 -ntg 128 -npl 1,8 -t "$threads" \
			-tb "$threads" -c 2560 -b 2048 -ub 512 ${bflags[$1]})
	}
fi
npeers=${#names[@]}

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

peer_list=$(IFS=,; echo "${names[*]}" | sed 's/,/, /g')
echo "# ferrox vs $peer_list, $threads threads, pp$np / tg$ng, $rounds rounds x $reps reps, $(date -u +%F)${kernels:+, ferrox kernels $kernels}"
IFS=, read -ra list <<<"$models"
if [ "$single" = 1 ]; then
	hdr="| model | test | ferrox t/s" sep="| --- | --- | ---:"
	for n in "${names[@]}"; do hdr+=" | $n t/s"; sep+=" | ---:"; done
	for n in "${names[@]}"; do hdr+=" | vs $n"; sep+=" | ---:"; done
	echo; echo "$hdr | ferrox roofline share |"; echo "$sep | ---: |"
fi
for name in "${list[@]}"; do
	[ "$single" = 1 ] || break
	m=$(model_path "$name")
	for r in $(seq "$rounds"); do
		fx_bench "$m" >"$tmp/fx.$r.json"
		for k in $(seq 0 $((npeers - 1))); do
			peer_bench "$k" "$m" 2>"$tmp/p$k.err" >"$tmp/p$k.$r.json" ||
				{ echo "${names[$k]} failed on $m:" >&2; tail -n 5 "$tmp/p$k.err" >&2; exit 1; }
		done
	done
	python3 - "$tmp" "$rounds" "$name" "$npeers" <<'PY'
import json, sys
d, rounds, name, npeers = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
fx = [json.load(open(f"{d}/fx.{r}.json")) for r in range(1, rounds + 1)]
peers = [[json.load(open(f"{d}/p{k}.{r}.json")) for r in range(1, rounds + 1)] for k in range(npeers)]
def peer_tps(runs, pp):
    if isinstance(runs[0], dict):  # a ferrox peer (--against)
        return sum(r["pp_tps" if pp else "tg_tps"] for r in runs) / len(runs)
    v = [t["avg_ts"] for run in runs for t in run if (t["n_prompt"] > 0) == pp]
    return sum(v) / len(v)
def mean(key):
    return sum(x[key] for x in fx) / len(fx)
for test, key, pp in (("pp", "pp_tps", True), ("tg", "tg_tps", False)):
    f = mean(key)
    ps = [peer_tps(p, pp) for p in peers]
    n = fx[0]["n_prompt"] if pp else fx[0]["n_gen"]
    share = (("%.0f%% of int8 peak" % (100 * mean("pp_compute_share"))) if pp
             else ("%.0f%% of bandwidth" % (100 * mean("tg_roofline_share"))))
    cells = [f"{f:.2f}"] + [f"{p:.2f}" for p in ps] + [f"{f / p:.2f}x" for p in ps]
    print(f"| {name} | {test}{n} | " + " | ".join(cells) + f" | {share} |")
PY
done
if [ "$batched" = 1 ]; then
	echo
	echo "| model | engine | S_TG B=1 | S_TG B=8 | B=8 / B=1 | per round | ferrox / engine at B=8 | B=8 share of int8 peak |"
	echo "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"
	for name in "${list[@]}"; do
		m=$(model_path "$name")
		for r in $(seq "$rounds"); do
			fx_batched "$m" >"$tmp/fxb.$r" 2>/dev/null
			for k in $(seq 0 $((npeers - 1))); do
				# (ik_llama.cpp prints its table on stderr)
				peer_batched "$k" "$m" >"$tmp/p${k}b.$r" 2>&1 ||
					{ echo "${names[$k]} batched failed on $m:" >&2; tail -n 5 "$tmp/p${k}b.$r" >&2; exit 1; }
			done
		done
		python3 - "$name" "$rounds" "$tmp" "${names[@]}" <<'PY'
import re, statistics, sys
name, rounds, tmp, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def s_tg(path):
    out = {}
    for line in open(path):
        f = [x.strip() for x in line.split("|")]
        if len(f) > 9 and f[3] in ("1", "8"):
            out[int(f[3])] = float(f[8])
    return out
def share8(path):  # ferrox's own line: "B=8: prefill .. generation X GMAC/s (Y%)"
    for line in open(path):
        m = re.match(r"B=8: .* generation [0-9.]+ GMAC/s \(([0-9]+)%\)", line)
        if m:
            return m.group(1) + "%"
    return ""
engines = [("fxb", "ferrox")] + [(f"p{k}b", n) for k, n in enumerate(names)]
res = {}
for e, label in engines:
    runs = [s_tg(f"{tmp}/{e}.{r}") for r in range(1, rounds + 1)]
    if any(set(r) != {1, 8} for r in runs):
        tail = "".join(open(f"{tmp}/{e}.{rounds}").readlines()[-5:])
        sys.exit(f"{name}: a {label} batched-bench run gave no B=1 or B=8 row; its last lines:\n{tail}")
    res[e] = runs
fx8 = statistics.median(r[8] for r in res["fxb"])
for e, label in engines:
    runs = res[e]
    m1 = statistics.median(r[1] for r in runs)
    m8 = statistics.median(r[8] for r in runs)
    per = " ".join("%.2fx" % (r[8] / r[1]) for r in runs)
    vs = "%.2fx" % (fx8 / m8) if e != "fxb" else ""
    sh = share8(f"{tmp}/fxb.{rounds}") if e == "fxb" else ""
    print(f"| {name} | {label} | {m1:.2f} | {m8:.2f} | {m8 / m1:.2f}x | {per} | {vs} | {sh} |")
PY
	done
fi
