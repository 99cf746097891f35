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
. "$HERE/../lib/pyenv.sh"
pyenv_for "$BUILD/libwstore.so"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" "$HERE/test_binding.py"
