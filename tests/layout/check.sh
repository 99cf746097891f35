#!/bin/sh
# check.sh - the architecture as the build and the tree must keep it: the
# library exports only the public API, every symbol under a version node
# (WSTORE_0, then WSTORE_1, ...), has a soname; every quoted include names an existing file
# relative to the file that includes it, inside what its layer may include
# (a backend naming a core header bare, "manifest.h", fails here and does
# not build: the backends are compiled with include/ as their only include
# path); headers have no include cycle, modules no call cycle, the CLI
# does not link libfuse3, and every executable exports Py_IsInitialized.
# What is written once has no second copy: the front ends' exit statuses,
# "wstore: " printer, usage errors and embedding shim (src/common), the C
# tests' CHECK macros (tests/lib/check.h), the shell tests' wait_for
# (tests/lib/tap.sh), the e2e prologue (tests/lib/suite.sh), the fake
# Hub's start (tests/lib/fakehub.sh).  A source file over 1,000 lines is
# named in a warning (not a failure), and the warnings are counted.
#   sh tests/layout/check.sh [BUILD_DIR]
set -u
BUILD=${1:-${BUILD:-build}}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TAP_SUITE=layout
. "$ROOT/tests/lib/tap.sh"
cd "$ROOT"
LIB="$BUILD/libwstore.so"

# exported symbols with their version ("name@@WSTORE_0", or a later node
# "WSTORE_1" ...), less the nodes' own absolute symbols
vsyms=$(nm -D --defined-only "$LIB" | awk '$3 !~ /^WSTORE_[0-9]+$/ {print $3}' | sort)
syms=$(printf '%s\n' "$vsyms" | sed 's/@.*//')
unversioned=$(printf '%s\n' "$vsyms" | grep -v '@@WSTORE_[0-9][0-9]*$' || true)
if [ -z "$unversioned" ]; then tap_ok "every exported symbol has a version node (WSTORE_0 or later)"
else tap_not_ok "every exported symbol has a version node (WSTORE_0 or later)" "$unversioned"; fi
# the functions include/wstore/ declares; the short forms of the sized
# calls (WSTORE__SIZED) are inline functions of the header, not exports
decl=$(cat include/wstore/*.h include/wstore/sys/*.h |
	grep -v '^[[:space:]]*/\?\*' |
	sed '/WSTORE__SIZED(/s/wstore_[a-z0-9_]*(//g' |
	grep -o '\bwstore_[a-z0-9_]*(' | tr -d '(' | sort -u)
mapped=$(sed -n 's/^ *\(wstore_[a-z0-9_]*\);$/\1/p' src/lib/libwstore.map | sort)
if [ "$mapped" = "$decl" ]; then tap_ok "libwstore.map lists exactly the functions include/wstore/ declares"
else tap_not_ok "libwstore.map lists exactly the functions include/wstore/ declares" \
	"$(printf '%s\n' "$mapped" >"${TMPDIR:-/tmp}/layout-m.$$"; printf '%s\n' "$decl" |
		diff "${TMPDIR:-/tmp}/layout-m.$$" - | grep '^[<>]'; rm -f "${TMPDIR:-/tmp}/layout-m.$$")"; fi
out=$(grep -n 'wstore_backend_fault\|fault_new' include/wstore/*.h include/wstore/sys/*.h || true)
if [ -z "$out" ] && ! printf '%s\n' "$syms" | grep -q '_fault_'; then
	tap_ok "the fault-injecting backend of the tests is neither declared nor exported"
else tap_not_ok "the fault-injecting backend of the tests is neither declared nor exported" "$out"; fi
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

# includes: quoted ones must name an existing file relative to the
# including file (never one found through an include path), inside the
# allowed folder or src/common (the header-only helpers every part
# shares); angle ones naming wstore/ must exist in include/wstore
bad_includes() { # DIR ALLOWED_DIR
	for f in $(find "$1" -name '*.[ch]'); do
		d=$(dirname "$f")
		grep -o '^#include "[^"]*"' "$f" | sed 's/^#include "//; s/"$//' |
		while read -r inc; do
			p=$(realpath -m "$d/$inc")
			case "$inc" in wstore/*) [ -f "include/$inc" ] && continue ;; esac
			if [ ! -f "$p" ]; then
				echo "$f: \"$inc\" is no file beside it (found only through an include path)"
				continue
			fi
			case "$p" in "$ROOT/$2"/*|"$ROOT/src/common"/*) ;; *) echo "$f: \"$inc\"" ;; esac
		done
		grep -o '^#include <wstore/[^>]*>' "$f" | sed 's/^#include <//; s/>$//' |
		while read -r inc; do
			[ -f "include/$inc" ] || echo "$f: <$inc> is not in include/"
		done
	done
}
for spec in src/lib:src/lib src/lib/backends:src/lib/backends src/cli:src/cli \
	src/mount:src/mount src/serve:src/serve; do
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

# rooms: a source file over 1,000 lines is named (a warning, not a
# failure), and the warnings counted
big=$(find src include tests bench python -name '*.[ch]' -o -name '*.py' -o -name '*.sh' |
	sort | while read -r f; do
		n=$(wc -l < "$f")
		[ "$n" -gt 1000 ] && echo "$f: $n lines"
	done)
nbig=$(printf '%s' "$big" | grep -c .)
if [ "$nbig" -gt 0 ]; then
	printf '%s\n' "$big" | sed 's/^/# warning: over 1,000 lines: /'
fi
echo "# source files over 1,000 lines: $nbig"

# what is written once: a second copy fails (code lines only: comments
# may name them)
code_lines() { grep -v '^[^:]*:[0-9]*:[[:space:]]*\(/\*\|\*\|//\|#[[:space:]]\)' || true; }
FRONT="src/cli src/mount src/serve src/common"
once() { # NAME OUTPUT
	if [ -z "$2" ]; then tap_ok "$1"
	else tap_not_ok "$1" "$2"; fi
}
once "the front ends' exit statuses are defined once (src/common/frontend.h)" \
	"$(grep -rnE '#[[:space:]]*define[[:space:]]+EXIT_(OK|ERR|USAGE|VERIFY)\b|\bEXIT_(OK|ERR|USAGE|VERIFY)[[:space:]]*=' \
		$FRONT | grep -v '^src/common/frontend\.h:')"
# the "wstore: <msg>" line and usage errors: frontend.h's wfront_err and
# wfront_usage_error, no printer of a front end's own (a daemon's log
# lines, "wstore mount: ..." and "wstore serve: ...", are not it)
once "the front ends print 'wstore: <msg>' and usage errors through src/common/frontend.h" \
	"$(grep -rnE 'vfprintf\(stderr|"wstore: |[a-z_]*usage_err[a-z_]*\([^)]*\)[[:space:]]*$|[a-z_]*bad_option\([^)]*\)[[:space:]]*$' \
		$FRONT | grep -v '^src/common/frontend\.h:' | code_lines)"
once "the embedding shim (Py_IsInitialized) is defined once (src/common/embed.c)" \
	"$(grep -rnE '\bPy_IsInitialized[[:space:]]*\(void\)[[:space:]]*$|\bPy_IsInitialized[[:space:]]*\(void\)[[:space:]]*\{' \
		src bench tests | grep -v '^src/common/embed\.c:' | code_lines)"
once "the C test programs assert with tests/lib/check.h's CHECK macros alone" \
	"$(grep -rnE '#[[:space:]]*define[[:space:]]+(CHECK|EXPECT|ASSERT|REQUIRE)[A-Z_]*\b' \
		tests bench --include='*.[ch]' | grep -v '^tests/lib/check\.h:')"
once "the shell tests wait with tests/lib/tap.sh's wait_for alone" \
	"$(grep -rnE '^[[:space:]]*wait_for[[:space:]]*\(\)' tests bench scripts 2>/dev/null |
		grep -v '^tests/lib/tap\.sh:')"
# the e2e prologue: tests/lib/suite.sh, never a script's own
out=$(for f in tests/e2e/*.sh; do
	grep -q '^\. "$(dirname "$0")/../lib/suite\.sh"$' "$f" ||
		echo "$f: does not source tests/lib/suite.sh"
	grep -nE '^[[:space:]]*(suite_env |trap [^ ]+ EXIT|\. "?\$HERE/lib/tap\.sh)' "$f" |
		sed "s|^|$f:|"
done)
once "every e2e script opens with tests/lib/suite.sh (no prologue of its own)" "$out"
once "the fake Hub is started by tests/lib/fakehub.sh alone" \
	"$(grep -rn 'fakehub\.py"\? ' tests/e2e tests/fleet bench 2>/dev/null | code_lines)"
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


# each executable owns its signals: it exports Py_IsInitialized
# (src/common/embed.c, listed in meson.build for each), or Mooncake's
# client takes SIGINT/SIGTERM/SIGHUP for itself
for exe in wstore wstore-mount wstore-serve; do
	if [ ! -x "$BUILD/$exe" ]; then
		tap_skip "$exe exports Py_IsInitialized" "$exe not built"
		continue
	fi
	check_grep "$exe exports Py_IsInitialized" ' T Py_IsInitialized$' \
		"$(nm -D --defined-only "$BUILD/$exe")"
done

tap_done
