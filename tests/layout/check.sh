#!/bin/sh
# check.sh - the architecture as the build and the tree must keep it: the
# library exports only the public API, has a soname, backends and front
# ends include only what their layer may, headers have no include cycle,
# modules no call cycle, and the CLI does not link libfuse3.
#   sh tests/layout/check.sh [BUILD_DIR]
set -u
BUILD=${1:-${BUILD:-build}}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TAP_SUITE=layout
. "$ROOT/tests/lib/tap.sh"
cd "$ROOT"
LIB="$BUILD/libwstore.so"

syms=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sort)
decl=$(cat include/wstore/*.h include/wstore/sys/*.h |
	grep -o '\bwstore_[a-z0-9_]*(' | tr -d '(' | sort -u)
check_grep "libwstore.so exports something" '^wstore_open$' "$syms"
other=$(printf '%s\n' "$syms" | grep -v '^wstore_[a-z]' || true)
if [ -z "$other" ]; then tap_ok "libwstore.so exports only wstore_ symbols"
else tap_not_ok "libwstore.so exports only wstore_ symbols" "$other"; fi
extra=$(printf '%s\n' "$syms" | grep '^wstore_' | grep -vxF "$decl" || true)
if [ -z "$extra" ]; then tap_ok "every exported symbol is declared in include/wstore/"
else tap_not_ok "every exported symbol is declared in include/wstore/" "$extra"; fi
missing=$(printf '%s\n' "$decl" | grep -vxF "$syms" || true)
if [ -z "$missing" ]; then tap_ok "every public function is exported"
else tap_not_ok "every public function is exported" "$missing"; fi
check_grep "libwstore.so has soname libwstore.so.0" 'SONAME.*\[libwstore\.so\.0\]' \
	"$(readelf -d "$LIB")"

# includes: quoted ones must resolve inside the allowed folder (or
# src/common, the header-only helpers every part shares); angle ones
# naming wstore/ come from include/wstore
bad_includes() { # DIR ALLOWED_DIR
	for f in $(find "$1" -name '*.[ch]'); do
		d=$(dirname "$f")
		grep -o '^#include "[^"]*"' "$f" | sed 's/^#include "//; s/"$//' |
		while read -r inc; do
			p=$(realpath -m "$d/$inc")
			case "$p" in "$ROOT/$2"/*|"$ROOT/src/common"/*) ;; *) echo "$f: \"$inc\"" ;; esac
		done
	done
}
for spec in src/lib/backends:src/lib/backends src/cli:src/cli src/mount:src/mount \
	src/serve:src/serve; do
	dir=${spec%%:*}; allowed=${spec#*:}
	out=$(bad_includes "$dir" "$allowed")
	if [ -z "$out" ]; then tap_ok "$dir includes only include/wstore/ and $allowed"
	else tap_not_ok "$dir includes only include/wstore/ and $allowed" "$out"; fi
done
out=$(grep -rn '#include <wstore/sys/backend.h>\|wstore_store_backend' src/cli src/mount src/serve || true)
if [ -z "$out" ]; then tap_ok "the CLI, the mount and the server never see the backend interface"
else tap_not_ok "the CLI, the mount and the server never see the backend interface" "$out"; fi

out=$(python3 "$HERE/include_cycles.py" src/lib include 2>&1)
if [ -z "$out" ]; then tap_ok "no include cycle among the library's headers"
else tap_not_ok "no include cycle among the library's headers" "$out"; fi

out=$(python3 "$HERE/call_cycles.py" "$BUILD/libwstore_internal.a" 2>&1)
if [ -z "$out" ]; then tap_ok "no call cycle between the library's modules"
else tap_not_ok "no call cycle between the library's modules" "$out"; fi

check_grep "every core header opens with a comment naming itself" '^ok$' \
	"$(for h in src/lib/*.h src/lib/backends/*.h src/lib/backends/redis/*.h; do
		head -2 "$h" | grep -q "$(basename "$h") - " || echo "$h"
	done | grep . || echo ok)"

# the core opens backends through backends/table.c, never by name: a
# constructor or kind named outside src/lib/backends/ means adding a
# backend would edit the core again
out=$(grep -n 'wstore__kind_[a-z]\|wstore__backend_[a-z]*_open\|wstore_backend_[a-z]*_\(new\|open\)' \
	src/lib/*.c src/lib/*.h || true)
if [ -z "$out" ]; then tap_ok "the core names no backend (backends/table.c does)"
else tap_not_ok "the core names no backend (backends/table.c does)" "$out"; fi

needed=$(readelf -d "$BUILD/wstore" | grep NEEDED)
if printf '%s\n' "$needed" | grep -q fuse; then
	tap_not_ok "the wstore CLI does not link libfuse3" "$needed"
else
	tap_ok "the wstore CLI does not link libfuse3"
fi

tap_done
