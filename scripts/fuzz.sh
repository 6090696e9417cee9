#!/usr/bin/env bash
# libFuzzer campaigns (clang, ASan + UBSan) over ferrox's input parsers.
#   scripts/fuzz.sh                  list the targets
#   scripts/fuzz.sh TARGET SECONDS   run one: seed corpus tests/fuzz/corpus/TARGET
#                                    (committed) plus, for chat, the templates in
#                                    ../shared/templates (read in place); new
#                                    inputs go to build-fuzz/corpus/TARGET, a
#                                    finding to build-fuzz/crash-TARGET-*
#   scripts/fuzz.sh all SECONDS      every target for SECONDS each (CI: a few)
# Extra libFuzzer flags: FUZZ_FLAGS (e.g. "-runs=10000000 -jobs=2").
# Prints each run's last status line (executions, coverage, exec/s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
targets=$(ls tests/fuzz/fuzz_*.c | sed 's|tests/fuzz/fuzz_||; s|\.c$||' | tr '\n' ' ')
if [ $# -lt 2 ]; then
	echo "targets: $targets"
	echo "usage: $0 TARGET|all SECONDS"
	exit $([ $# = 0 ] && echo 0 || echo 2)
fi
which=$1 secs=$2
cc=${FUZZ_CC:-clang}
command -v "$cc" >/dev/null || { echo "fuzz: $cc not found (apt-get install clang)" >&2; exit 1; }
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFX_FUZZ=ON >/dev/null
[ "$which" = all ] && list=$targets || list=$which
for t in $list; do
	case " $targets " in *" $t "*) ;; *) echo "fuzz: no target '$t' (targets: $targets)" >&2; exit 2 ;; esac
	cmake --build build-fuzz -j"$(nproc)" --target "fuzz_$t" >/dev/null
	mkdir -p "build-fuzz/corpus/$t"
	seeds=("tests/fuzz/corpus/$t")
	[ "$t" = chat ] && [ -d ../shared/templates ] && seeds+=(../shared/templates)
	log=build-fuzz/fuzz-$t.log
	set +e
	# shellcheck disable=SC2086
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
		"build-fuzz/bin/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
		-artifact_prefix="build-fuzz/crash-$t-" ${FUZZ_FLAGS:-} \
		"build-fuzz/corpus/$t" "${seeds[@]}" >"$log" 2>&1
	rc=$?
	set -e
	status=$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)
	echo "fuzz $t: exit $rc, $status"
	if [ $rc -ne 0 ]; then
		tail -n 40 "$log" >&2
		exit 1
	fi
done
