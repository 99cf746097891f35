#!/bin/sh
# run.sh - the backend conformance suite (conformance.c) against every
# backend: mem (also as a write-once and as an empty-for-missing store),
# the embedded file store, the fault wrapper (plain, and declaring
# write-once and empty-for-missing), the Mooncake contract stand-in (NOT
# Mooncake), a Redis server and a Redis Cluster.
#   sh tests/conformance/run.sh [BUILD_DIR] [URL...]
# With URLs, runs only those (any --store URL; settings from WSTORE_<KEY>
# variables, e.g. WSTORE_MASTER_SERVER_ADDR for a real Mooncake), so the
# suite can be pointed at another store.  Redis servers come from
# $WSTORE_TEST_REDIS_URL / $WSTORE_TEST_CLUSTER_URL (tests/run.sh starts
# them), else are started here.  Prints "conformance: N passed, N failed,
# N skipped" (a callback a backend does not offer skips its checks).
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$BUILD" && pwd)
BIN=$BUILD/backend-conformance
[ -x "$BIN" ] || { echo "run.sh: $BIN not built (run make)" >&2; exit 2; }
. "$HERE/../lib/redis.sh"
. "$HERE/../lib/mooncake.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/wstore-conformance-XXXXXX")
trap 'redis_stop_all >/dev/null 2>&1; mooncake_stop_all >/dev/null 2>&1; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
pass=0
fail=0
skip=0

# conform [VAR=VALUE...] -- URL...: one run of the program; adds its counts
conform() {
	_env=""
	while [ "$1" != "--" ]; do _env="$_env $1"; shift; done
	shift
	# shellcheck disable=SC2086
	env $_env "$BIN" "$@" > "$T/out" 2>&1
	_rc=$?
	grep -v '^conformance:' "$T/out"
	_line=$(grep -E '^conformance: [0-9]+ passed, [0-9]+ failed' "$T/out")
	if [ -z "$_line" ]; then
		echo "FAIL $*: no summary (exit $_rc)"
		fail=$((fail + 1))
		return
	fi
	_p=$(echo "$_line" | sed -E 's/^conformance: ([0-9]+) passed.*/\1/')
	_f=$(echo "$_line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
	_s=$(echo "$_line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
	pass=$((pass + _p))
	fail=$((fail + _f))
	skip=$((skip + ${_s:-0}))
	[ "$_rc" = 0 ] || [ "$_f" != 0 ] || fail=$((fail + 1))
}

if [ $# -gt 0 ]; then
	conform -- "$@"
else
	conform -- mem mem+writeonce mem+emptymissing "file://$T/file"
	conform WSTORE_FAULTS= -- "fault+file://$T/fault"
	conform WSTORE_FAULTS=writeonce,emptymissing -- "fault+file://$T/weak"
	if [ -f "$BUILD/libmooncake_store.so" ] && mooncake_fake_master; then
		mkdir -p "$T/mooncake"
		conform WSTORE_MOONCAKE_LIBRARY="$BUILD/libmooncake_store.so" \
			WSTORE_MASTER_SERVER_ADDR="$MOONCAKE_TEST_FAKE_MASTER" \
			MOONCAKE_STANDIN_DIR="$T/mooncake" \
			MOONCAKE_STANDIN_LEASE_MS=300 -- mooncake
	else
		echo "FAIL mooncake stand-in not built"
		fail=$((fail + 1))
	fi
	if [ ! -x "$BUILD/redis-backend-tests" ]; then
		echo "SKIP redis, redis-cluster: not built (meson setup -Dredis=disabled)"
		skip=$((skip + 2))
	else
		[ -n "${WSTORE_TEST_REDIS_URL:-}" ] ||
			redis_start_standalone "$T/redis" ||
			{ echo "FAIL cannot start redis-server"; fail=$((fail + 1)); }
		[ -n "${WSTORE_TEST_CLUSTER_URL:-}" ] ||
			redis_start_cluster "$T/cluster" ||
			{ echo "FAIL cannot start a redis cluster"; fail=$((fail + 1)); }
		[ -n "${WSTORE_TEST_REDIS_URL:-}" ] &&
			conform -- "$WSTORE_TEST_REDIS_URL"
		[ -n "${WSTORE_TEST_CLUSTER_URL:-}" ] &&
			conform -- "$WSTORE_TEST_CLUSTER_URL"
	fi
fi
echo "conformance: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
