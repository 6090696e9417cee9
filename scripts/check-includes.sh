#!/usr/bin/env bash
# The include graph points one way (docs: ../shared/DESIGN.md, "What goes
# where"): each src/ subsystem may include only itself and the layers below
# it, and tools/ only the public header and its own. Prints every violation; exit 1 if any.
#   core < chat < quant < kernels < io < tokenizer < grammar < sample < kv < model < engine
# (chat, the template interpreter, needs only core)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
order="core chat quant kernels io tokenizer grammar sample kv model engine"
rank() { local i=0; for d in $order; do [ "$d" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
bad=0
for f in $(find src -name '*.[ch]' -not -path 'src/server/*' | sort); do
	dir=$(echo "$f" | cut -d/ -f2)
	me=$(rank "$dir")
	while IFS= read -r inc; do
		tgt=${inc%%/*}
		[ "$inc" = "ferrox.h" ] && continue
		r=$(rank "$tgt")
		if [ "$r" -lt 0 ] || [ "$r" -gt "$me" ]; then
			echo "$f includes \"$inc\": $dir may not depend on $tgt"
			bad=1
		fi
	done < <(grep -oE '^#include "[^"]+"' "$f" | sed 's/#include "//; s/"$//')
done
# src/server sees only the public header (and its own server/ headers), as tools do.
for f in $(find src/server -name '*.[ch]' 2>/dev/null | sort); do
	if grep -E '^#include "' "$f" | grep -vqE '"(ferrox\.h|server/[a-z_]+\.h)"'; then
		echo "$f includes an internal header: the server sees only ferrox.h"
		bad=1
	fi
done
# tools/ sees the public header, the tools' own headers (cli.h, kld.h) and
# the generated build_info.h.
for f in $(find tools -name '*.[ch]' | sort); do
	while IFS= read -r inc; do
		# build_info.h: --version's defines, generated into the build tree
		# (cmake/build-info.cmake)
		case "$inc" in */*) ;; ferrox.h | build_info.h) continue ;; *) [ -f "tools/$inc" ] && continue ;; esac
		echo "$f includes \"$inc\": tools see only ferrox.h and tools/*.h"
		bad=1
	done < <(grep -oE '^#include "[^"]+"' "$f" | sed 's/#include "//; s/"$//')
done
[ $bad = 0 ] && echo "include graph: ok"
exit $bad
