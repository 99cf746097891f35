#!/bin/sh
# run.sh - the Python binding suite: runs test_binding.py with Debian's
# /usr/bin/python3 against BUILD's libwstore.so and wstore CLI.  torch and
# numpy are required (apt-get install python3-torch python3-numpy): without
# them the suite fails, it is never skipped.
#   sh tests/python/run.sh [BUILD_DIR]
set -u
BUILD=${1:-${BUILD:-build}}
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
if ! out=$("$PY" -c 'import torch, numpy' 2>&1); then
	echo "not ok - python: $PY cannot import torch and numpy" \
		"(apt-get install python3-torch python3-numpy)"
	printf '%s\n' "$out" | tail -3 | sed 's/^/#   /'
	echo "python: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
export BUILD
export WSTORE_LIBRARY="$BUILD/libwstore.so"
# a sanitizer build (make asan): its runtime must come first in python
asan=$(ldd "$WSTORE_LIBRARY" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
	export LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
	# the interpreter itself is not leak-clean; the library is checked by
	# the C suites
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" "$HERE/test_binding.py"
