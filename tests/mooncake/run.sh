#!/bin/sh
# run.sh - contract tests of the Mooncake backend against the stand-in
# library (tests/mooncake/standin.c; NOT Mooncake).  Usage:
#   sh tests/mooncake/run.sh [BUILD_DIR] [TEST_NAME_SUBSTRING]
# Prints "mooncake: N passed, N failed, N skipped"; exits non-zero on any
# failure.
#
# The CLI can use the same stand-in, shared between processes through a
# directory:
#   WSTORE_MOONCAKE_LIBRARY=$BUILD/libmooncake_store.so \
#   MOONCAKE_STANDIN_DIR=/tmp/mc MOONCAKE_STANDIN_LEASE_MS=500 \
#       $BUILD/wstore --store mooncake ...
set -eu
BUILD=${1:-build}
[ -x "$BUILD/mooncake-backend-tests" ] || {
	echo "run.sh: '$BUILD/mooncake-backend-tests' not built (run make)" >&2
	exit 2
}
[ -f "$BUILD/libmooncake_store.so" ] || {
	echo "run.sh: '$BUILD/libmooncake_store.so' not built (run make)" >&2
	exit 2
}
unset MOONCAKE_STANDIN_DIR MOONCAKE_STANDIN_FAIL_SETUP \
	MOONCAKE_STANDIN_NO_SEGMENT WSTORE_MOONCAKE_LEASE_WAIT_MS \
	WSTORE_MOONCAKE_LOCAL_BUFFER_SIZE 2>/dev/null || true
shift 2>/dev/null || true
exec "$BUILD/mooncake-backend-tests" "$BUILD" "$@"
