#!/bin/sh
# make bench: see bench/bench.py (file store) and bench/redis.sh if present.
set -eu
BUILD=${1:-build}
python3 "$(dirname "$0")/bench.py" "$BUILD"
if [ -f "$(dirname "$0")/redis.sh" ]; then sh "$(dirname "$0")/redis.sh" "$BUILD"; fi
