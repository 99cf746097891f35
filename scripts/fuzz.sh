#!/bin/sh
# fuzz.sh - build every libFuzzer target tests/fuzz/fuzz_*.c with clang
# (-fsanitize=fuzzer,address,undefined) against the library sources and
# run each for FUZZ_SECONDS (default 30) from its seed corpus
# tests/fuzz/corpus/<name>/ (plus tests/data/<name>s/{good,bad}/ where
# such parser test data exists).  New corpus entries go to a scratch
# directory, never into the tree.  Prints executions per target and exits
# non-zero if any target crashed; the crashing input is kept and named.
#   FUZZ_SECONDS=N FUZZ_OUT=DIR FUZZ_TARGETS="manifest size" sh scripts/fuzz.sh
# FUZZ_BUILD_ONLY=1 builds the targets and runs none (CI builds them while
# the tests run, and runs them later on a machine that is not busy).
# Needs clang and the libFuzzer runtime (Debian: clang, libclang-rt-14-dev).
set -u
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-30}
OUT=${FUZZ_OUT:-build-fuzz}
CC=${FUZZ_CC:-clang}
mkdir -p "$OUT/obj" "$OUT/corpus" "$OUT/crashes"
OUT=$(cd "$OUT" && pwd)

command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (apt-get install clang libclang-rt-14-dev)"; exit 1; }
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-g -O1 -std=c11 -Werror -Wall -Wno-gnu-variable-sized-type-not-at-end -D_GNU_SOURCE -DWSTORE_HAVE_REDIS -Wno-missing-field-initializers -Iinclude -Isrc/lib $(pkg-config --cflags jansson libcrypto libssl hiredis libcurl 2>/dev/null)"
LIBS="$(pkg-config --libs jansson libcrypto libssl hiredis libcurl 2>/dev/null || echo -ljansson -lcrypto -lssl -lhiredis -lcurl) -lpthread -ldl"

# the library, instrumented once (the same sources meson builds)
# each once (backends/table.c is listed twice: the installed library's
# table and the tests', which the fuzz build is, -DWSTORE_TEST_BACKENDS)
LIBSRC=$(grep -o "'src/lib/[^']*\.c'" meson.build | tr -d "'" | awk '!seen[$0]++')
objs=""
for src in $LIBSRC; do
	obj="$OUT/obj/$(echo "${src#src/lib/}" | tr / _ | sed 's/\.c$//').o"
	if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find src/lib include -name '*.h' -newer "$obj" | head -1)" ]; then
		$CC $CFLAGS -DWSTORE__BUILDING -DWSTORE_TEST_BACKENDS $SAN -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || exit 1
	fi
	objs="$objs $obj"
done

status=0
summary=""
for t in tests/fuzz/fuzz_*.c; do
	name=$(basename "$t" .c)
	short=${name#fuzz_}
	case " ${FUZZ_TARGETS:-$short} " in *" $short "*) ;; *) continue ;; esac
	bin="$OUT/$name"
	# a target may name sources outside the library it also needs
	extra=$(sed -n 's|^/\* fuzz-sources: \(.*\) \*/$|\1|p' "$t")
	# built again when it or a source it is built from is newer
	# shellcheck disable=SC2086
	if [ ! -f "$bin" ] || [ -n "$(find "$t" $extra $objs -newer "$bin" | head -1)" ]; then
		$CC $CFLAGS $SAN -fsanitize=fuzzer "$t" $extra $objs $LIBS -o "$bin" || { status=1; summary="$summary
$short: does not build"; continue; }
	fi
	if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then
		summary="$summary
$short: built"
		continue
	fi
	seeds=""
	for d in "tests/fuzz/corpus/$short" "tests/data/${short}s/good" "tests/data/${short}s/bad" \
		"tests/data/$short/good" "tests/data/$short/bad"; do
		[ -d "$d" ] && seeds="$seeds $d"
	done
	mkdir -p "$OUT/corpus/$short"
	log="$OUT/$short.log"
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$SECS" -print_final_stats=1 -timeout=10 \
		-rss_limit_mb=2048 -artifact_prefix="$OUT/crashes/$short-" \
		"$OUT/corpus/$short" $seeds > "$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ $rc = 0 ]; then
		line="$short: ${execs:-?} executions in ${SECS}s, no crash"
	else
		status=1
		art=$(ls -t "$OUT/crashes/$short-"* 2>/dev/null | head -1)
		line="$short: CRASH after ${execs:-?} executions (exit $rc), input $art, log $log"
		grep -E "ERROR:|runtime error|SUMMARY|deadly signal" "$log" | head -5
	fi
	echo "$line"
	summary="$summary
$line"
done
echo
echo "fuzz summary:$summary"
exit $status
