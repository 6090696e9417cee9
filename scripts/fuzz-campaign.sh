#!/usr/bin/env bash
# One libFuzzer campaign to the bar of docs/RELIABILITY.md: 10 million
# executions or CPU_SECONDS of the fuzzer's own CPU time (default 3600),
# whichever comes first. CPU time, not wall time, because these machines are
# shared: the fuzzer runs at nice 19 and its utime + stime are read from
# /proc/PID/stat; at the limit it gets SIGINT, so libFuzzer prints its final
# stats. Same build, flags and corpora as scripts/fuzz.sh.
#   scripts/fuzz-campaign.sh TARGET [CPU_SECONDS]
# Prints one line: target, executions, exec/s, cov/ft, corpus, CPU-s, exit
# status (the per-input timeout, 120 s or $FUZZ_TIMEOUT, is wall time, and a nice-19 fuzzer on
# a busy machine is slow); the full log is build-fuzz/campaign-TARGET.log and a finding is
# build-fuzz/crash-TARGET-*.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 1 ] || { echo "usage: $0 TARGET [CPU_SECONDS]" >&2; exit 2; }
t=$1 limit=${2:-3600}
[ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz-campaign: no target '$t'" >&2; exit 2; }
cc=${FUZZ_CC:-clang}
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "fuzz_$t" >/dev/null
mkdir -p "build-fuzz/corpus/$t"
seeds=("tests/fuzz/corpus/$t")
[ "$t" = chat ] && [ -d ../shared/templates ] && seeds+=(../shared/templates)
log=build-fuzz/campaign-$t.log
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	nice -n 19 "build-fuzz/bin/fuzz_$t" -runs=10000000 -print_final_stats=1 -timeout="${FUZZ_TIMEOUT:-120}" \
	-rss_limit_mb=4096 -artifact_prefix="build-fuzz/crash-$t-" \
	"build-fuzz/corpus/$t" "${seeds[@]}" >"$log" 2>&1 &
pid=$!
hz=$(getconf CLK_TCK)
cpu=0
while kill -0 "$pid" 2>/dev/null; do
	# Fields 14 and 15 of /proc/PID/stat (after the ")" of the command name).
	if stat=$(cat "/proc/$pid/stat" 2>/dev/null); then
		read -r ut st < <(echo "${stat##*) }" | awk '{ print $12, $13 }')
		cpu=$(((ut + st) / hz))
		if [ "$cpu" -ge "$limit" ]; then
			kill -INT "$pid" 2>/dev/null || true
			break
		fi
	fi
	sleep 5
done
set +e
wait "$pid"
rc=$?
set -e
# SIGINT from us is the expected end of a time-bound campaign.
[ "$cpu" -ge "$limit" ] && [ "$rc" -ne 0 ] && ! ls build-fuzz/crash-"$t"-* >/dev/null 2>&1 && rc=0
status=$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)
execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{ print $2 }' || true)
rate=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{ print $2 }' || true)
echo "campaign $t: executions ${execs:-?}, exec/s ${rate:-?}, CPU ${cpu} s, exit $rc; last: $status"
exit $rc
