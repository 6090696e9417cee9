# Finding (or building) llama.cpp for the bench scripts; sourced, needs
# $root (the repo) and $threads. Sets $llama_bin and puts it on
# LD_LIBRARY_PATH.
#
# llama.cpp: $LLAMA_BIN (a directory with llama-bench), else llama-bench on
# PATH, else $ORACLE/llama-build-amx/bin, $ORACLE/llama-build-noamx/bin or
# $ORACLE/llama-build/bin (ORACLE defaults to ../oracle beside the repo), else
# it is built there from the llama-cpp-python sdist (PyPI; 10-20 min on 2
# cores; once more where the first build's AMX kernels die, see below).
# Nothing of llama.cpp lands in this repo.

oracle=${ORACLE:-$(cd "$root/.." && pwd)/oracle}
# build_llama DIR [C flags [C compiler C++ compiler]]: llama.cpp from the
# llama-cpp-python sdist.
build_llama() {
	echo "building llama.cpp from the llama-cpp-python sdist in $1 (10-20 min)" >&2
	src=$(ORACLE=$oracle "$root/scripts/get-llama-sdist.sh" | tail -n1)
	CC=${3:-${CC:-cc}} CXX=${4:-${CXX:-c++}} cmake -S "$src" -B "$1" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
		-DCMAKE_C_FLAGS="${2:-}" -DCMAKE_CXX_FLAGS="${2:-}" \
		-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >&2
	cmake --build "$1" -j "$(nproc)" \
		--target llama-bench llama-batched-bench llama-perplexity llama-server >&2
}
find_llama() {
	if [ -n "${LLAMA_BIN:-}" ] && [ -x "$LLAMA_BIN/llama-bench" ]; then echo "$LLAMA_BIN"; return; fi
	if command -v llama-bench >/dev/null; then dirname "$(command -v llama-bench)"; return; fi
	# A native build whose AMX kernels died on this machine (below) was
	# rebuilt here: with them working (clang), else without them.
	if [ -x "$oracle/llama-build-amx/bin/llama-bench" ]; then echo "$oracle/llama-build-amx/bin"; return; fi
	if [ -x "$oracle/llama-build-noamx/bin/llama-bench" ]; then echo "$oracle/llama-build-noamx/bin"; return; fi
	[ -x "$oracle/llama-build/bin/llama-bench" ] || build_llama "$oracle/llama-build"
	echo "$oracle/llama-build/bin"
}
llama_bin=$(find_llama)
# On a CPU with AMX, llama.cpp's native GCC build uses its AMX kernels,
# which die with SIGILL (a KVM Xeon, 2026-12-01: tilezero in ggml-cpu/amx's
# tinygemm_kernel_amx). The cause is GCC 12's _tile_loadconfig: its asm
# names only the first 8 bytes of the configuration as input, so the
# stores that fill the rest (ggml_tile_config_init) may be dropped, and the
# tiles are never configured (ferrox's dot_amx.c met the same). A short
# llama-bench run finds out; then llama.cpp is built once more with clang
# in llama-build-amx, passing the macros its AMX code tests (clang 14
# defines __AMXINT8__ / __AMXTILE__ where GCC has __AMX_INT8__ /
# __AMX_TILE__), and if that fails too, with AMX off (its AVX-512/VNNI
# kernels stay) in llama-build-noamx.
smoke=$("$root/scripts/get-model.sh" smollm2-135m | tail -n1)
llama_runs() {
	LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$1/llama-bench" -m "$smoke" -p 8 -n 2 -r 1 -t "$threads" >/dev/null 2>&1
}
if ! llama_runs "$llama_bin"; then
	if grep -qw amx_tile /proc/cpuinfo 2>/dev/null && [ "$llama_bin" = "$oracle/llama-build/bin" ]; then
		llama_bin=
		if command -v clang >/dev/null && command -v clang++ >/dev/null; then
			echo "llama-bench failed on this CPU, which reports AMX: rebuilding llama.cpp with clang" >&2
			build_llama "$oracle/llama-build-amx" "-D__AMX_INT8__=1 -D__AMX_TILE__=1" clang clang++ &&
				llama_runs "$oracle/llama-build-amx/bin" && llama_bin=$oracle/llama-build-amx/bin
		fi
		if [ -z "$llama_bin" ]; then
			echo "rebuilding llama.cpp without AMX" >&2
			build_llama "$oracle/llama-build-noamx" "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
			llama_bin=$oracle/llama-build-noamx/bin
		fi
	else
		echo "llama-bench ($llama_bin) fails on $smoke" >&2
		exit 1
	fi
fi
export LD_LIBRARY_PATH="$llama_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
