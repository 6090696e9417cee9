# Finding (or building) llama.cpp for the bench scripts; sourced, needs
# $root (the repo) and $threads. Sets $llama_bin and puts it on
# LD_LIBRARY_PATH.
#
# llama.cpp: $LLAMA_BIN (a directory with llama-bench), else llama-bench on
# PATH, else $ORACLE/llama-build-noamx/bin, else $ORACLE/llama-build/bin
# (ORACLE defaults to ../oracle beside the repo), else it is built there from the llama-cpp-python sdist (PyPI;
# 10-20 min on 2 cores; a second build without AMX where the first one's
# AMX kernels die, see below). Nothing of llama.cpp lands in this repo.

oracle=${ORACLE:-$(cd "$root/.." && pwd)/oracle}
# build_llama DIR [C flags]: llama.cpp from the llama-cpp-python sdist.
build_llama() {
	echo "building llama.cpp from the llama-cpp-python sdist in $1 (10-20 min)" >&2
	src=$(ORACLE=$oracle "$root/scripts/get-llama-sdist.sh" | tail -n1)
	cmake -S "$src" -B "$1" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
		-DCMAKE_C_FLAGS="${2:-}" -DCMAKE_CXX_FLAGS="${2:-}" \
		-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >&2
	cmake --build "$1" -j "$(nproc)" \
		--target llama-bench llama-batched-bench llama-perplexity llama-server >&2
}
find_llama() {
	if [ -n "${LLAMA_BIN:-}" ] && [ -x "$LLAMA_BIN/llama-bench" ]; then echo "$LLAMA_BIN"; return; fi
	if command -v llama-bench >/dev/null; then dirname "$(command -v llama-bench)"; return; fi
	# A native build whose AMX kernels died on this machine (below) was
	# rebuilt without them here: use that one.
	if [ -x "$oracle/llama-build-noamx/bin/llama-bench" ]; then echo "$oracle/llama-build-noamx/bin"; return; fi
	[ -x "$oracle/llama-build/bin/llama-bench" ] || build_llama "$oracle/llama-build"
	echo "$oracle/llama-build/bin"
}
llama_bin=$(find_llama)
# On a VM that reports AMX, llama.cpp's native build uses its AMX kernels,
# which have died with SIGILL there (a KVM Xeon, 2026-12-01: tilezero in
# ggml-cpu/amx's tinygemm_kernel_amx, while a plain AMX test program ran).
# A short llama-bench run finds out; then llama.cpp is built once more with
# AMX off (its AVX-512/VNNI kernels stay) in llama-build-noamx.
smoke=$("$root/scripts/get-model.sh" smollm2-135m | tail -n1)
if ! LD_LIBRARY_PATH="$llama_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$llama_bin/llama-bench" -m "$smoke" -p 8 -n 2 -r 1 -t "$threads" >/dev/null 2>&1; then
	if grep -qw amx_tile /proc/cpuinfo 2>/dev/null && [ "$llama_bin" = "$oracle/llama-build/bin" ]; then
		echo "llama-bench failed on this CPU, which reports AMX: rebuilding llama.cpp without AMX" >&2
		build_llama "$oracle/llama-build-noamx" "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
		llama_bin=$oracle/llama-build-noamx/bin
	else
		echo "llama-bench ($llama_bin) fails on $smoke" >&2
		exit 1
	fi
fi
export LD_LIBRARY_PATH="$llama_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
