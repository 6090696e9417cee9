#!/usr/bin/env bash
# The public libraries export exactly ferrox.h's API: every global symbol
# defined in libferrox.so (dynamic table) and in libferrox.a is an fx_
# name the header declares FX_API (each offender is listed), every FX_API
# function is defined in both (but for the names given after the header,
# which live in another library), and the .so carries a SONAME.
# Usage: check-symbols.sh LIBFERROX.SO LIBFERROX.A FERROX.H [NOT_IN_LIB...]
set -euo pipefail
so=$1 ar=$2 header=$3
shift 3
not_in_lib=" $* "
fail=0

# What the linker adds to a shared object, not ours (the __sancov section
# bounds: the fuzz build's coverage counters).
toolchain='^(_init|_fini|__bss_start|_edata|_end|__end__|_DYNAMIC|_GLOBAL_OFFSET_TABLE_|__(start|stop)___sancov_[a-z]+)$'

defined() { # nm options, file: the defined global names, one per line
	nm "$@" | awk 'NF == 3 && $2 != "U" && $2 != "w" && $2 != "v" { print $3 }' |
		grep -Ev "$toolchain" | sort -u
}

api=$(grep -Eo '^FX_API [^(]*\bfx_[A-Za-z0-9_]+\(' "$header" |
	grep -Eo 'fx_[A-Za-z0-9_]+\($' | tr -d '(' | sort -u)
if [ -z "$api" ]; then
	echo "check-symbols: no FX_API declarations found in $header"
	exit 1
fi

check() { # label, names
	local label=$1 names=$2 n_bad=0 s
	for s in $names; do
		case $s in
		fx_*)
			grep -qx "$s" <<<"$api" && continue
			echo "$label: exports $s, which ferrox.h does not declare FX_API" ;;
		*) echo "$label: exports $s (not fx_: hide it or make it static)" ;;
		esac
		n_bad=$((n_bad + 1))
	done
	for s in $api; do
		case $not_in_lib in *" $s "*) continue ;; esac
		if ! grep -qx "$s" <<<"$names"; then
			echo "$label: does not export $s (declared FX_API in ferrox.h)"
			n_bad=$((n_bad + 1))
		fi
	done
	echo "$label: $(wc -w <<<"$names") global symbols, $n_bad problems"
	[ "$n_bad" -eq 0 ] || fail=1
}

check "$so" "$(defined -D --defined-only "$so")"
check "$ar" "$(defined -g --defined-only "$ar")"

soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ -z "$soname" ]; then
	echo "$so: no SONAME"
	fail=1
else
	echo "$so: SONAME $soname"
fi
exit "$fail"
